"""Results: hypotheses to words, WER (kaldialign), icefall-format files, RTF, resumable JSONL,
and the locks that keep one job per output."""

from .files import save_results, write_error_stats, write_recogs, write_wer_summary
from .jsonl import ResultWriter, merge_results, read_results, wer_results, write_results
from .lock import DISK_FULL_ERRNOS, DiskFullError, LockedError, disk_full_error, lock_out_dir
from .text import bpe_ids_to_words, token_ids_to_words, word_ids_to_words
from .timing import RtfTimer
from .wer import EPS, Result, WerStats, align_words, combine_error_runs, compute_wer

__all__ = [
    "DISK_FULL_ERRNOS",
    "DiskFullError",
    "EPS",
    "LockedError",
    "Result",
    "ResultWriter",
    "RtfTimer",
    "WerStats",
    "align_words",
    "bpe_ids_to_words",
    "combine_error_runs",
    "compute_wer",
    "disk_full_error",
    "lock_out_dir",
    "merge_results",
    "read_results",
    "save_results",
    "token_ids_to_words",
    "wer_results",
    "word_ids_to_words",
    "write_error_stats",
    "write_recogs",
    "write_results",
    "write_wer_summary",
]
