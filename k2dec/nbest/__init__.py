"""N-best lists from lattices, rescoring, oracle and multi-pass rescoring."""

from .multipass import (
    GaussianPredictor,
    LinearGaussianPredictor,
    MultiPassConfig,
    MultiPassResult,
    ParameterFreePredictor,
    PathScorer,
    full_rescore,
    matching_features,
    multi_pass_rescore,
)
from .nbest import DedupKey, IntersectStatus, Nbest, NbestTopK
from .rescore import (
    RescoreResult,
    best_paths_by_score,
    combine_scores,
    lm_path_scorer,
    neural_scores,
    ngram_lm_scores,
    rescore_with_attention_decoder,
    rescore_with_lm,
    rescore_with_ngram,
    scale_key,
)

__all__ = [
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
    "NbestTopK",
    "RescoreResult",
    "best_paths_by_score",
    "combine_scores",
    "lm_path_scorer",
    "neural_scores",
    "rescore_with_attention_decoder",
    "rescore_with_lm",
    "ngram_lm_scores",
    "rescore_with_ngram",
    "scale_key",
]
