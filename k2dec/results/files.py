"""icefall-format result files: ``recogs-*.txt``, ``errs-*.txt`` and ``wer-summary-*.txt``.

The formats match what icefall's decode scripts write, so the tools and habits built around them
keep working::

    recogs-<test_set>-<key>[-<suffix>].txt  per cut "<id>:\\tref=[...]" and "<id>:\\thyp=[...]"
    errs-<test_set>-<key>[-<suffix>].txt    %WER, per-utterance alignment, per-word error counts
    wer-summary-<test_set>[-<suffix>].txt   "settings\\tWER\\tfailed cuts", then one
                                            "<key>\\t<WER>\\t<N> of <M>" line per setting

Two departures from icefall, so that a summary never misleads: the settings keep the order
they are given in (a method's configured setting first; icefall sorts them by WER, which
picks a setting on the test set), and cuts that could not be decoded are counted beside the
WER (they are not in it) in the summary and in each ``errs`` file.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TextIO

from .paths import check_component, replace_file, replace_text
from .wer import Result, align_words, combine_error_runs, compute_wer

__all__ = [
    "save_results",
    "write_error_stats",
    "write_recogs",
    "write_wer_summary",
]

logger = logging.getLogger(__name__)


def _sorted(results: Sequence[Result]) -> list[tuple[str, list[str], list[str]]]:
    return sorted(((c, list(r), list(h)) for c, r, h in results), key=lambda x: x[0])


def write_recogs(path: str | Path, results: Sequence[Result]) -> None:
    """Write a ``recogs`` file: for each cut (sorted by id) a ``ref=`` and a ``hyp=`` line, the
    words printed as a Python list. The file is replaced, never written through a symlink
    (:func:`~k2dec.results.paths.replace_file`)."""
    def write(f: TextIO) -> None:
        for cut_id, ref, hyp in _sorted(results):
            f.write(f"{cut_id}:\tref={ref!r}\n")
            f.write(f"{cut_id}:\thyp={hyp!r}\n")

    replace_file(path, write)


def write_error_stats(f: TextIO, test_set: str, results: Sequence[Result],
                      failed: Sequence[str] = ()) -> float:
    """Write the ``errs`` report of ``results`` to the open text file ``f``.

    Sections, in icefall's order and wording: the ``%WER = x.xx`` line and error totals,
    ``PER-UTT DETAILS`` (each cut's alignment, runs of errors shown as ``(ref words->hyp words)``),
    ``SUBSTITUTIONS``, ``DELETIONS``, ``INSERTIONS`` (most frequent first) and ``PER-WORD STATS``
    (``word corr tot_errs count_in_ref count_in_hyp``, most errors first). With ``failed``
    (ids of cuts that could not be decoded, not in the WER) a line after the totals says how
    many and which.

    Returns:
      The WER in percent, rounded to two decimals (the number in the ``%WER`` line).

    Raises:
      ValueError: see :func:`k2dec.results.compute_wer`.
    """
    stats = compute_wer(results)
    wer = float(f"{stats.wer:.2f}")
    logger.info("[%s] %%WER %.2f%% [%d / %d, %d ins, %d del, %d sub]", test_set, stats.wer,
                stats.num_errors, stats.num_ref_words, stats.num_ins, stats.num_del, stats.num_sub)
    w = f.write
    w(f"%WER = {stats.wer:.2f}\n")
    w(f"Errors: {stats.num_ins} insertions, {stats.num_del} deletions, {stats.num_sub} "
      f"substitutions, over {stats.num_ref_words} reference words ({stats.num_corr} correct)\n")
    if failed:
        shown = ", ".join(failed[:20]) + (", ..." if len(failed) > 20 else "")
        w(f"Failed cuts, not in the WER: {len(failed)} of {len(failed) + len(results)} "
          f"({shown})\n")
    w("Search below for sections starting with PER-UTT DETAILS:, SUBSTITUTIONS:, DELETIONS:, "
      "INSERTIONS:, PER-WORD STATS:\n")
    w("\n")
    w("PER-UTT DETAILS: corr or (ref->hyp)  \n")
    for cut_id, ref, hyp in results:
        pieces = [r if r == h else f"({r}->{h})"
                  for r, h in combine_error_runs(align_words(ref, hyp))]
        w(f"{cut_id}:\t{' '.join(pieces)}\n")
    w("\n")
    w("SUBSTITUTIONS: count ref -> hyp\n")
    for (r, h), n in sorted(stats.subs.items(), key=lambda kv: (kv[1], kv[0]), reverse=True):
        w(f"{n}   {r} -> {h}\n")
    w("\n")
    w("DELETIONS: count ref\n")
    for r, n in sorted(stats.dels.items(), key=lambda kv: (kv[1], kv[0]), reverse=True):
        w(f"{n}   {r}\n")
    w("\n")
    w("INSERTIONS: count hyp\n")
    for h, n in sorted(stats.ins.items(), key=lambda kv: (kv[1], kv[0]), reverse=True):
        w(f"{n}   {h}\n")
    w("\n")
    w("PER-WORD STATS: word  corr tot_errs count_in_ref count_in_hyp\n")
    rows = sorted(stats.words.items(), key=lambda kv: (sum(kv[1][1:]), kv[0]), reverse=True)
    for word, (corr, ref_sub, hyp_sub, ins, dels) in rows:
        errs = ref_sub + hyp_sub + ins + dels
        w(f"{word}   {corr} {errs} {corr + ref_sub + dels} {corr + hyp_sub + ins}\n")
    return wer


def write_wer_summary(path: str | Path, wers: Mapping[str, float], num_failed: int = 0,
                      num_cuts: int | None = None, note: str | None = None) -> None:
    """Write a ``wer-summary`` file: ``settings\\tWER\\tfailed cuts``, then per setting, in the
    given order (never sorted by WER), ``key\\twer\\t<num_failed> of <num_cuts>``: the cuts
    that could not be decoded and are not in the WER (``num_cuts``: all cuts, failed ones
    included; ``None``: not known, only the count is written); ``note``, when given, is a
    last line starting with ``#`` (e.g. how the words were normalized before scoring)."""
    failed = f"{num_failed} of {num_cuts}" if num_cuts is not None else f"{num_failed}"
    lines = [f"{key}\t{wer}\t{failed}\n" for key, wer in wers.items()]
    lines += [f"# {note}\n"] if note else []
    replace_file(path, lambda f: f.writelines(["settings\tWER\tfailed cuts\n", *lines]))


def save_results(
    res_dir: str | Path,
    test_set: str,
    results: Mapping[str, Sequence[Result]],
    suffix: str = "",
    failed: Sequence[str] = (),
    num_cuts: int | None = None,
    note: str | None = None,
) -> dict[str, float]:
    """Write the recogs and errs files of each decoding setting and the test set's WER summary.

    Args:
      res_dir: output directory (created).
      test_set: the test set name, e.g. ``test-clean``.
      results: ``{key: [(cut_id, ref_words, hyp_words), ...]}``, one key per setting (e.g.
        ``"greedy_search"``, ``"lm_scale_0.6"``), in the order the summary lists them.
      suffix: appended to every file name as ``-<suffix>`` (e.g. ``epoch-30-avg-10``).
      failed: ids of the test set's cuts that could not be decoded: not in the WER, counted
        beside it in the summary and the errs files.
      num_cuts: the test set's cuts, for the summary's ``<failed> of <num_cuts>`` (default:
        the failed ones and those of the setting with the most results).
      note: a last ``#`` line of the summary (:func:`write_wer_summary`).

    Returns:
      ``{key: WER in percent}``, as in the summary file.

    Raises:
      ValueError: empty ``results``, a bad name, or a setting without reference words.
    """
    check_component(test_set, "test_set")
    if suffix:
        check_component(suffix, "suffix")
    if not results:
        raise ValueError("results is empty: no decoding settings to save")
    res_dir = Path(res_dir)
    res_dir.mkdir(parents=True, exist_ok=True)
    tail = f"-{suffix}" if suffix else ""
    wers = {}
    for key, res in results.items():
        check_component(key, "key")
        ordered = _sorted(res)
        write_recogs(res_dir / f"recogs-{test_set}-{key}{tail}.txt", ordered)
        errs = io.StringIO()
        wers[key] = write_error_stats(errs, f"{test_set}-{key}", ordered, sorted(failed))
        replace_text(res_dir / f"errs-{test_set}-{key}{tail}.txt", errs.getvalue())
    if num_cuts is None:
        num_cuts = len(failed) + max(len(r) for r in results.values())
    write_wer_summary(res_dir / f"wer-summary-{test_set}{tail}.txt", wers, len(failed),
                      num_cuts, note)
    return wers
