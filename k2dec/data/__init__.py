"""lhotse glue: LibriSpeech-style text, manifests, fbank features, dataloaders (training; and
for decoding, :mod:`k2dec.data.decoding`: one utterance per supervision, a bad feature file
fails its cut), and folders of someone's own audio files (:mod:`k2dec.data.audio`).

The synthetic corpus maker is not decoding and lives with the trainers: :mod:`k2dec.train.synth`.
"""

from .audio import (
    AUDIO_EXTENSIONS,
    AudioDirCuts,
    AudioFailure,
    AudioFolder,
    compute_cut_features,
    cuts_from_audio_dir,
    find_audio_files,
    load_references,
    read_kaldi_text,
    scan_audio_dir,
)
from .audio_io import (
    AUDIO_READ_ERRORS,
    AudioLimits,
    cut_features,
    ffmpeg_available,
    load_feature_range,
    probe_recording,
    safe_name,
    shown_path,
    too_long,
    utterance_id,
)
from .decoding import (
    FEATURE_READ_ERRORS,
    DecodeBatch,
    DecodeDataset,
    loudest_frames,
    make_decode_loader,
    split_bad_cuts,
    utterance_cuts,
)
from .features import (
    NUM_MEL_BINS,
    FeatureConfig,
    compute_fbank,
    frame_energies,
    manifest_parts,
    silence_energy,
)
from .loader import SpecAugmentConfig, make_dataloader, make_sampler
from .manifests import (
    MANIFEST_PREFIX,
    corpus_parts,
    load_cuts,
    manifest_path,
    prepare_manifests,
)
from .text import has_digits, normalize_text, split_sentences

__all__ = [
    "split_bad_cuts",
    "AUDIO_EXTENSIONS",
    "AUDIO_READ_ERRORS",
    "AudioDirCuts",
    "AudioFailure",
    "AudioFolder",
    "AudioLimits",
    "DecodeBatch",
    "DecodeDataset",
    "FEATURE_READ_ERRORS",
    "FeatureConfig",
    "MANIFEST_PREFIX",
    "NUM_MEL_BINS",
    "SpecAugmentConfig",
    "compute_cut_features",
    "compute_fbank",
    "cut_features",
    "corpus_parts",
    "cuts_from_audio_dir",
    "ffmpeg_available",
    "load_feature_range",
    "find_audio_files",
    "frame_energies",
    "has_digits",
    "load_cuts",
    "load_references",
    "loudest_frames",
    "make_dataloader",
    "make_decode_loader",
    "make_sampler",
    "manifest_parts",
    "manifest_path",
    "normalize_text",
    "prepare_manifests",
    "probe_recording",
    "read_kaldi_text",
    "safe_name",
    "scan_audio_dir",
    "shown_path",
    "silence_energy",
    "split_sentences",
    "too_long",
    "utterance_cuts",
    "utterance_id",
]
