"""Results: hypotheses to words, WER (kaldialign), icefall-format files, RTF, resumable JSONL,
CTM files and confidence metrics."""

from .confidence import (
    Calibration,
    ConfidenceMetrics,
    ReliabilityBin,
    confidence_metrics,
    fit_calibration,
    normalized_cross_entropy,
    plot_reliability,
    roc_auc,
    word_correctness,
)
from .ctm import CtmWord, frames_to_seconds, read_ctm, record_ctm_words, timed_words, write_ctm
from .files import save_results, write_error_stats, write_recogs, write_wer_summary
from .jsonl import ResultWriter, merge_results, read_results, wer_results
from .text import bpe_ids_to_words, token_ids_to_words, word_ids_to_words
from .timing import RtfTimer
from .wer import EPS, Result, WerStats, align_words, combine_error_runs, compute_wer

__all__ = [
    "Calibration",
    "ConfidenceMetrics",
    "CtmWord",
    "ReliabilityBin",
    "confidence_metrics",
    "fit_calibration",
    "frames_to_seconds",
    "normalized_cross_entropy",
    "plot_reliability",
    "read_ctm",
    "record_ctm_words",
    "roc_auc",
    "timed_words",
    "word_correctness",
    "write_ctm",
    "EPS",
    "Result",
    "ResultWriter",
    "RtfTimer",
    "WerStats",
    "align_words",
    "bpe_ids_to_words",
    "combine_error_runs",
    "compute_wer",
    "merge_results",
    "read_results",
    "save_results",
    "token_ids_to_words",
    "wer_results",
    "word_ids_to_words",
    "write_error_stats",
    "write_recogs",
    "write_wer_summary",
]
