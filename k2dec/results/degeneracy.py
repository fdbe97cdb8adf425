"""Degenerate hypotheses: a token, a word, or an n-gram of them repeated back to back.

A search that loops writes the same unit over and over ("ADDDDUALLY", "THEME THEME THEME ...",
"NUMUMUMUMUM"): a tandem repeat, ``n`` items (``1 <= n <= max_ngram``) followed by
``min_repeats - 1`` more copies of themselves with nothing in between. Speech can hold a unit said
three times ("no, no, no"); four copies of a token or of a short n-gram is what a loop writes
(``scripts/bench/aed_defaults.py`` counts such hypotheses, RESULTS.md "Attention beam search
defaults"). The check needs no reference.

It works on any sequence of comparable items: token ids (``Hypothesis.tokens``), words
(``text.split()``) or characters (``list(text)``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

#: a unit said this many times in a row is taken for a loop
MIN_REPEATS = 4
#: the longest n-gram (in items) looked for
MAX_NGRAM = 8


@dataclass(frozen=True)
class Repeat:
    """A tandem repeat: ``items[start:start + ngram * count]`` is ``count`` copies of
    ``items[start:start + ngram]``.

    Attributes:
      start: index of the repeat's first item.
      ngram: length of the repeated unit, in items.
      count: how many copies in a row (at least the ``min_repeats`` asked for).
    """

    start: int
    ngram: int
    count: int


def _check_args(items, min_repeats: int, max_ngram: int) -> list:
    if isinstance(items, str | bytes):
        raise TypeError(f"items must be a sequence of tokens or words, not a string "
                        f"({items!r:.40}); pass text.split() for words, list(text) for characters")
    for name, value, low in (("min_repeats", min_repeats, 2), ("max_ngram", max_ngram, 1)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
        if value < low:
            raise ValueError(f"{name} must be >= {low}, got {value}")
    return items.tolist() if hasattr(items, "tolist") else list(items)


def find_repeat(items: Sequence, min_repeats: int = MIN_REPEATS,
                max_ngram: int = MAX_NGRAM) -> Repeat | None:
    """The first (leftmost, then shortest unit) tandem repeat of ``min_repeats`` or more copies
    of an n-gram of ``1 <= n <= max_ngram`` items, or ``None``.

    For each ``n`` one pass over the items: a run of ``r`` consecutive positions ``j`` with
    ``items[j] == items[j + n]`` covers ``r + n`` items, ``(r + n) // n`` copies of the unit at
    the run's start. Time ``O(len(items) * max_ngram)``.

    Args:
      items: token ids (a list, or a 1-D tensor / array), words or characters; any sequence
        whose items compare with ``==``. A ``str`` is refused (ambiguous: split it first).
      min_repeats: copies in a row that count as a loop (>= 2; default 4).
      max_ngram: the longest unit looked for, in items (>= 1; default 8).

    Raises:
      TypeError: ``items`` is a ``str``/``bytes``, or a count is not an int.
      ValueError: ``min_repeats < 2`` or ``max_ngram < 1``.
    """
    seq = _check_args(items, min_repeats, max_ngram)
    best: Repeat | None = None
    for n in range(1, max_ngram + 1):
        found = _first_repeat(seq, n, min_repeats)
        if found is not None and (best is None or found.start < best.start):
            best = found
    return best


def _first_repeat(seq: list, n: int, min_repeats: int) -> Repeat | None:
    """The first run of ``min_repeats`` or more copies of an ``n``-item unit in ``seq``."""
    need = (min_repeats - 1) * n  # matching positions in a row for min_repeats copies
    run = 0
    for j in range(len(seq) - n):
        run = run + 1 if seq[j] == seq[j + n] else 0
        if run == need:
            start, end = j + 1 - run, j + 1
            while end + n < len(seq) and seq[end] == seq[end + n]:
                end += 1
            return Repeat(start, n, (end - start + n) // n)
    return None


def is_degenerate(items: Sequence, min_repeats: int = MIN_REPEATS,
                  max_ngram: int = MAX_NGRAM) -> bool:
    """Whether ``items`` hold a tandem repeat (:func:`find_repeat`)."""
    return find_repeat(items, min_repeats, max_ngram) is not None


def count_degenerate(hyps: Iterable[Sequence], min_repeats: int = MIN_REPEATS,
                     max_ngram: int = MAX_NGRAM) -> int:
    """How many of ``hyps`` (each a sequence of token ids or words) are degenerate
    (:func:`is_degenerate`). Count a hypothesis once, whichever unit it repeats.
    """
    return sum(is_degenerate(h, min_repeats, max_ngram) for h in hyps)
