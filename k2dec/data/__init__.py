"""lhotse glue: LibriSpeech-style text, manifests, fbank features, dataloaders, and folders of
someone's own audio files (:mod:`k2dec.data.audio`).

The synthetic corpus maker lives in :mod:`k2dec.data.synth` (imported on demand: it needs Debian's
speech synthesizers only when it runs).
"""

from .audio import (
    AUDIO_EXTENSIONS,
    AudioDirCuts,
    AudioFailure,
    cuts_from_audio_dir,
    find_audio_files,
    load_references,
    read_kaldi_text,
)
from .features import NUM_MEL_BINS, FeatureConfig, compute_fbank, manifest_parts
from .loader import SpecAugmentConfig, make_dataloader
from .manifests import (
    MANIFEST_PREFIX,
    corpus_parts,
    load_cuts,
    manifest_path,
    prepare_manifests,
)
from .text import has_digits, normalize_text, split_sentences

__all__ = [
    "AUDIO_EXTENSIONS",
    "AudioDirCuts",
    "AudioFailure",
    "FeatureConfig",
    "MANIFEST_PREFIX",
    "NUM_MEL_BINS",
    "SpecAugmentConfig",
    "compute_fbank",
    "corpus_parts",
    "cuts_from_audio_dir",
    "find_audio_files",
    "has_digits",
    "load_cuts",
    "load_references",
    "make_dataloader",
    "manifest_parts",
    "manifest_path",
    "normalize_text",
    "prepare_manifests",
    "read_kaldi_text",
    "split_sentences",
]
