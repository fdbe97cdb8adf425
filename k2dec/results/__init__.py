"""Results: hypotheses to words, WER (kaldialign), icefall-format files, RTF, resumable JSONL,
CTM files, confidence metrics, degenerate (looping) hypotheses, the locks that keep one job per
output, and the per-recording writers of timed words: subtitles (SRT/VTT), Praat TextGrids,
lhotse word alignments."""

from .alignments import (
    sorted_words,
    word_dicts,
    word_supervision,
    words_from_dicts,
    write_alignments,
)
from .confidence_eval import (
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
from .degeneracy import (
    Repeat,
    count_degenerate,
    find_repeat,
    is_degenerate,
)
from .files import save_results, write_error_stats, write_recogs, write_wer_summary
from .jsonl import ResultWriter, merge_results, read_results, wer_results, write_results
from .lock import (
    DISK_FULL_ERRNOS,
    DiskFullError,
    LockedError,
    UnusableDirError,
    disk_full_error,
    lock_out_dir,
)
from .subtitles import (
    SUBTITLE_FORMATS,
    SubtitleConfig,
    SubtitleLine,
    subtitle_lines,
    write_subtitles,
)
from .text import (
    SCORING_NORMALIZATION,
    bpe_ids_to_words,
    scoring_words,
    token_ids_to_words,
    word_ids_to_words,
)
from .textgrid import MIN_INTERVAL, write_textgrid
from .timing import RtfTimer
from .wer import (
    ALIGN_MAX_CELLS,
    EPS,
    Result,
    WerStats,
    align_words,
    combine_error_runs,
    compute_wer,
)

__all__ = [
    "ALIGN_MAX_CELLS",
    "SCORING_NORMALIZATION",
    "scoring_words",
    "DISK_FULL_ERRNOS",
    "EPS",
    "MIN_INTERVAL",
    "SUBTITLE_FORMATS",
    "Calibration",
    "ConfidenceMetrics",
    "CtmWord",
    "DiskFullError",
    "LockedError",
    "UnusableDirError",
    "ReliabilityBin",
    "Repeat",
    "Result",
    "ResultWriter",
    "RtfTimer",
    "SubtitleConfig",
    "SubtitleLine",
    "WerStats",
    "align_words",
    "bpe_ids_to_words",
    "combine_error_runs",
    "compute_wer",
    "confidence_metrics",
    "count_degenerate",
    "disk_full_error",
    "find_repeat",
    "fit_calibration",
    "frames_to_seconds",
    "is_degenerate",
    "lock_out_dir",
    "merge_results",
    "normalized_cross_entropy",
    "plot_reliability",
    "read_ctm",
    "read_results",
    "record_ctm_words",
    "roc_auc",
    "save_results",
    "sorted_words",
    "subtitle_lines",
    "timed_words",
    "token_ids_to_words",
    "wer_results",
    "word_correctness",
    "word_dicts",
    "word_ids_to_words",
    "word_supervision",
    "words_from_dicts",
    "write_alignments",
    "write_ctm",
    "write_error_stats",
    "write_recogs",
    "write_results",
    "write_subtitles",
    "write_textgrid",
    "write_wer_summary",
]
