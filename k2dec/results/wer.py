"""Word error rate from kaldialign alignments, with the per-word counts icefall reports.

kaldialign's alignment keeps its whole ``(len(ref) + 1) x (len(hyp) + 1)`` table of int32
edit distances: a long recording scored against its whole reference (a 60-minute one has
about 12k words) would take 0.5 GB for it. A pair above :data:`ALIGN_MAX_CELLS` cells is
aligned by the same dynamic program with the same tie rules (:func:`align_words`), keeping
only every ``ceil(sqrt(len(ref)))``-th row of the table and recomputing one block of rows at
a time while tracing back: about ``2 * sqrt(len(ref)) * len(hyp)`` cells (those 12k words: a
19 MB peak instead of 502 MB), twice the time; the same alignment as kaldialign's.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import kaldialign
import numpy as np

__all__ = ["ALIGN_MAX_CELLS", "EPS", "Result", "WerStats", "align_words", "combine_error_runs",
           "compute_wer"]

EPS = "*"
"""The empty side of an insertion or deletion in alignments (icefall's ``ERR``)."""

Result = tuple[str, Sequence[str], Sequence[str]]
"""One decoded utterance: ``(cut_id, ref_words, hyp_words)``."""

ALIGN_MAX_CELLS = 2**22
"""The most table cells, ``(len(ref) + 1) * (len(hyp) + 1)``, of a pair :func:`align_words`
gives to kaldialign (4 bytes a cell: 16 MiB, about 2000 x 2000 words, some 10 minutes of
speech); a larger pair is aligned in blocks of rows (the module docstring)."""


def _check_words(name: str, words: Sequence[str]) -> None:
    if isinstance(words, str):
        raise TypeError(f"{name} must be a sequence of words, got the string {words!r}")
    for w in words:
        if not isinstance(w, str):
            raise TypeError(f"{name} must hold str words, got {type(w).__name__}: {w!r}")
        if w == EPS:
            raise ValueError(f"{name} contains {EPS!r}, which alignments use for 'no word'")


def align_words(ref: Sequence[str], hyp: Sequence[str], max_cells: int = ALIGN_MAX_CELLS
                ) -> list[tuple[str, str]]:
    """Levenshtein alignment of two word sequences (kaldialign's; above ``max_cells`` table
    cells the same alignment in blocks of rows, as the module docstring says).

    Returns:
      ``(ref_word, hyp_word)`` pairs in order; an insertion has ``ref_word == EPS``, a deletion
      ``hyp_word == EPS``, a substitution two different words.

    Raises:
      TypeError: if ``ref`` or ``hyp`` is a string or holds non-strings.
      ValueError: if a word equals :data:`EPS`, or ``max_cells`` is not an int >= 1.
    """
    _check_words("ref", ref)
    _check_words("hyp", hyp)
    if isinstance(max_cells, bool) or not isinstance(max_cells, int) or max_cells < 1:
        raise ValueError(f"max_cells must be an int >= 1, got {max_cells!r}")
    if (len(ref) + 1) * (len(hyp) + 1) <= max_cells:
        return [tuple(p) for p in kaldialign.align(list(ref), list(hyp), EPS)]
    ids: dict[str, int] = {}
    a = [ids.setdefault(w, len(ids)) for w in ref]
    b = [ids.setdefault(w, len(ids)) for w in hyp]
    return [(EPS if i < 0 else ref[i], EPS if j < 0 else hyp[j])
            for i, j in _blockwise_alignment(a, b)]


def _table_rows(a: list[int], b: np.ndarray, first: np.ndarray, start: int, stop: int
                ) -> np.ndarray:
    """Rows ``start`` to ``stop`` of the edit-distance table of ``a`` (ref ids) and ``b`` (hyp
    ids, int ``[N]``) from row ``start`` (``first``, int32 ``[N + 1]``): int32
    ``[stop - start + 1, N + 1]``. Cell ``[i][j]`` is the minimum of the deletion
    ``[i - 1][j] + 1``, the match or substitution ``[i - 1][j - 1] + (a[i - 1] != b[j - 1])``
    and the insertion ``[i][j - 1] + 1``: the first two elementwise, the insertion chain a
    cumulative minimum."""
    col = np.arange(b.size + 1, dtype=np.int32)
    out = np.empty((stop - start + 1, b.size + 1), dtype=np.int32)
    out[0] = first
    for i in range(start + 1, stop + 1):
        prev = out[i - start - 1]
        best = prev + 1
        np.minimum(best[1:], prev[:-1] + (b != a[i - 1]), out=best[1:])
        out[i - start] = np.minimum.accumulate(best - col) + col
    return out


def _blockwise_alignment(a: list[int], b: list[int]) -> list[tuple[int, int]]:
    """kaldialign's alignment of ids ``a`` (ref) and ``b`` (hyp) as ``(ref index, hyp index)``
    pairs (-1: no word), its table kept every ``ceil(sqrt(len(a)))`` rows: traced back from
    the last cell, a match or substitution when strictly cheaper than both others, else a
    deletion when strictly cheaper than the insertion, else the insertion."""
    step = max(1, math.isqrt(max(len(a) - 1, 0)) + 1)
    hyp = np.asarray(b, dtype=np.int64)
    starts = list(range(0, len(a), step))
    kept = {0: np.arange(len(b) + 1, dtype=np.int32)}
    for s in starts[1:]:  # forward: the first row of every block
        kept[s] = _table_rows(a, hyp, kept[s - step], s - step, s)[-1].copy()
    out: list[tuple[int, int]] = []
    m, n = len(a), len(b)
    for s in reversed(starts):  # backward: one block's rows at a time
        rows = _table_rows(a, hyp, kept.pop(s), s, min(s + step, len(a)))
        while m > s:
            if n == 0:
                m -= 1
                out.append((m, -1))
                continue
            up, left = rows[m - 1 - s], rows[m - s]
            sub = int(up[n - 1]) + (a[m - 1] != b[n - 1])
            dele, ins = int(up[n]) + 1, int(left[n - 1]) + 1
            if sub < min(dele, ins):
                m, n = m - 1, n - 1
                out.append((m, n))
            elif dele < ins:
                m -= 1
                out.append((m, -1))
            else:
                n -= 1
                out.append((-1, n))
        del rows
    out += [(-1, j) for j in range(n - 1, -1, -1)]
    return out[::-1]


def combine_error_runs(alignment: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """Merge each run of consecutive errors into one ``(ref words, hyp words)`` pair.

    Words of a run are joined by spaces; a side with no words is :data:`EPS`. Correct pairs are
    kept as they are. ``[(A,A), (B,X), (EPS,Y), (C,C)]`` becomes ``[(A,A), ("B","X Y"), (C,C)]``.
    """
    out: list[tuple[str, str]] = []
    run_ref: list[str] = []
    run_hyp: list[str] = []
    in_run = False

    def close_run() -> None:
        out.append((" ".join(run_ref) or EPS, " ".join(run_hyp) or EPS))
        run_ref.clear()
        run_hyp.clear()

    for r, h in alignment:
        if r == h:
            if in_run:
                close_run()
                in_run = False
            out.append((r, h))
        else:
            in_run = True
            if r != EPS:
                run_ref.append(r)
            if h != EPS:
                run_hyp.append(h)
    if in_run:
        close_run()
    return out


@dataclass
class WerStats:
    """Error counts over a set of utterances.

    Attributes:
      num_ref_words: reference words in total.
      num_corr, num_sub, num_ins, num_del: correct words and errors by kind.
      subs: ``(ref_word, hyp_word) -> count``.
      dels: ``ref_word -> count``; ``ins``: ``hyp_word -> count``.
      words: ``word -> [corr, ref_sub, hyp_sub, ins, del]``, where ``ref_sub`` counts the word
        substituted away in the reference and ``hyp_sub`` substituted in the hypothesis.
    """

    num_ref_words: int = 0
    num_corr: int = 0
    num_sub: int = 0
    num_ins: int = 0
    num_del: int = 0
    subs: Counter = field(default_factory=Counter)
    dels: Counter = field(default_factory=Counter)
    ins: Counter = field(default_factory=Counter)
    words: dict[str, list[int]] = field(default_factory=dict)

    @property
    def num_errors(self) -> int:
        return self.num_sub + self.num_ins + self.num_del

    @property
    def wer(self) -> float:
        """Word error rate in percent (``100 * errors / reference words``)."""
        return 100.0 * self.num_errors / self.num_ref_words

    def _word(self, w: str) -> list[int]:
        return self.words.setdefault(w, [0, 0, 0, 0, 0])

    def add(self, ref: Sequence[str], hyp: Sequence[str]) -> None:
        """Count one utterance's alignment."""
        self.num_ref_words += len(ref)
        for r, h in align_words(ref, hyp):
            if r == EPS:
                self.num_ins += 1
                self.ins[h] += 1
                self._word(h)[3] += 1
            elif h == EPS:
                self.num_del += 1
                self.dels[r] += 1
                self._word(r)[4] += 1
            elif r != h:
                self.num_sub += 1
                self.subs[(r, h)] += 1
                self._word(r)[1] += 1
                self._word(h)[2] += 1
            else:
                self.num_corr += 1
                self._word(r)[0] += 1


def compute_wer(results: Sequence[Result]) -> WerStats:
    """Error statistics of ``results``, a sequence of ``(cut_id, ref_words, hyp_words)``.

    Raises:
      ValueError: if ``results`` is empty or has no reference words (the WER is undefined), or
        a cut id repeats.
      TypeError: if words are not strings.
    """
    if len(results) == 0:
        raise ValueError("results is empty: the WER of no utterances is undefined")
    stats = WerStats()
    seen = set()
    for cut_id, ref, hyp in results:
        if cut_id in seen:
            raise ValueError(f"results has cut id {cut_id!r} twice")
        seen.add(cut_id)
        stats.add(ref, hyp)
    if stats.num_ref_words == 0:
        raise ValueError("results have no reference words: the WER is undefined")
    return stats
