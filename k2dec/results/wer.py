"""Word error rate from kaldialign alignments, with the per-word counts icefall reports."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import kaldialign

__all__ = ["EPS", "Result", "WerStats", "align_words", "combine_error_runs", "compute_wer"]

EPS = "*"
"""The empty side of an insertion or deletion in alignments (icefall's ``ERR``)."""

Result = tuple[str, Sequence[str], Sequence[str]]
"""One decoded utterance: ``(cut_id, ref_words, hyp_words)``."""


def _check_words(name: str, words: Sequence[str]) -> None:
    if isinstance(words, str):
        raise TypeError(f"{name} must be a sequence of words, got the string {words!r}")
    for w in words:
        if not isinstance(w, str):
            raise TypeError(f"{name} must hold str words, got {type(w).__name__}: {w!r}")
        if w == EPS:
            raise ValueError(f"{name} contains {EPS!r}, which alignments use for 'no word'")


def align_words(ref: Sequence[str], hyp: Sequence[str]) -> list[tuple[str, str]]:
    """Levenshtein alignment of two word sequences (kaldialign).

    Returns:
      ``(ref_word, hyp_word)`` pairs in order; an insertion has ``ref_word == EPS``, a deletion
      ``hyp_word == EPS``, a substitution two different words.

    Raises:
      TypeError: if ``ref`` or ``hyp`` is a string or holds non-strings.
      ValueError: if a word equals :data:`EPS`.
    """
    _check_words("ref", ref)
    _check_words("hyp", hyp)
    return [tuple(p) for p in kaldialign.align(list(ref), list(hyp), EPS)]


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
