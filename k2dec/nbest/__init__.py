"""N-best lists from lattices, rescoring, oracle and multi-pass rescoring."""

from .chunking import chunks
from .config import NbestConfig
from .intersect import IntersectStatus
from .keys import DedupKey
from .multipass import (
    GaussianPredictor,
    LinearGaussianPredictor,
    MultiPassConfig,
    MultiPassResult,
    ParameterFreePredictor,
    full_rescore,
    matching_features,
    multi_pass_rescore,
)
from .nbest import Nbest, NbestTopK, PathScorer, intersected
from .oracle import edit_distances
from .rescore import (
    ATTENTION_CHUNK_CELLS,
    NNLM_SCALES,
    SCALE_GRID,
    NbestRescoreResult,
    best_paths_by_score,
    combine_scores,
    lm_path_scorer,
    neural_scores,
    ngram_lm_scores,
    rescore_with_attention_decoder,
    rescore_with_lm,
    rescore_with_ngram,
    rescore_with_rnn_lm,
    rescore_with_transformer_lm,
    scale_key,
    word_sequence_scores,
)
from .sampling import sample_paths

__all__ = [
    "ATTENTION_CHUNK_CELLS",
    "NNLM_SCALES",
    "SCALE_GRID",
    "DedupKey",
    "GaussianPredictor",
    "LinearGaussianPredictor",
    "MultiPassConfig",
    "MultiPassResult",
    "ParameterFreePredictor",
    "PathScorer",
    "full_rescore",
    "matching_features",
    "multi_pass_rescore",
    "IntersectStatus",
    "Nbest",
    "NbestConfig",
    "NbestTopK",
    "NbestRescoreResult",
    "best_paths_by_score",
    "chunks",
    "combine_scores",
    "edit_distances",
    "intersected",
    "lm_path_scorer",
    "neural_scores",
    "rescore_with_attention_decoder",
    "rescore_with_lm",
    "rescore_with_rnn_lm",
    "rescore_with_transformer_lm",
    "ngram_lm_scores",
    "word_sequence_scores",
    "rescore_with_ngram",
    "sample_paths",
    "scale_key",
]
