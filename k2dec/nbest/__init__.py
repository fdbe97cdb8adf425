"""N-best lists from lattices, rescoring, oracle and multi-pass rescoring."""

from .config import NbestConfig
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
from .nbest import DedupKey, IntersectStatus, Nbest, NbestTopK, PathScorer
from .rescore import (
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
)
from .sampling import sample_paths

__all__ = [
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
    "combine_scores",
    "lm_path_scorer",
    "neural_scores",
    "rescore_with_attention_decoder",
    "rescore_with_lm",
    "rescore_with_rnn_lm",
    "rescore_with_transformer_lm",
    "ngram_lm_scores",
    "rescore_with_ngram",
    "sample_paths",
    "scale_key",
]
