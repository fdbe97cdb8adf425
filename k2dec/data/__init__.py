"""lhotse glue: LibriSpeech-style text, manifests, fbank features and dataloaders.

The synthetic corpus maker lives in :mod:`k2dec.data.synth` (imported on demand: it needs Debian's
speech synthesizers only when it runs).
"""

from .features import FeatureConfig, compute_fbank, manifest_parts
from .loader import SpecAugmentConfig, make_dataloader
from .manifests import MANIFEST_PREFIX, corpus_parts, manifest_path, prepare_manifests
from .text import has_digits, normalize_text, split_sentences

__all__ = [
    "FeatureConfig",
    "MANIFEST_PREFIX",
    "SpecAugmentConfig",
    "compute_fbank",
    "corpus_parts",
    "has_digits",
    "make_dataloader",
    "manifest_parts",
    "manifest_path",
    "normalize_text",
    "prepare_manifests",
    "split_sentences",
]
