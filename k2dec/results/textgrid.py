"""Praat TextGrids of one recording's timed words (a ``words`` interval tier), written by
``praatio``."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from praatio import textgrid
from praatio.utilities.constants import Interval

from .alignments import sorted_words
from .ctm import CtmWord
from .paths import replace_saved

__all__ = ["MIN_INTERVAL", "write_textgrid"]

MIN_INTERVAL = 0.001
"""Seconds a word of zero duration is given (Praat intervals cannot be empty)."""


def _intervals(words: Sequence[CtmWord]) -> list[Interval]:
    out: list[Interval] = []
    for w in sorted_words(words):
        start = max(w.start, out[-1].end if out else 0.0)
        end = max(w.start + w.duration, start + MIN_INTERVAL)
        out.append(Interval(start, end, w.word))
    return out


def write_textgrid(path: str | Path, words: Sequence[CtmWord], duration: float | None = None,
                   tier: str = "words") -> Path:
    """Write one recording's words as a TextGrid (Praat's long format) with one interval tier.

    Words are sorted by start; a word that starts before the previous one ends starts at its
    end instead (Praat's intervals cannot overlap), and a word of zero duration lasts
    :data:`MIN_INTERVAL`. The gaps between words are left empty (Praat shows them as blank
    intervals).

    Args:
      path: the ``.TextGrid`` file (its directory is created).
      words: the recording's words (:class:`~k2dec.results.CtmWord`, seconds).
      duration: the recording's length in seconds (the grid's end); ``None``: the last
        word's end.
      tier: the tier's name.

    Raises:
      ValueError: a ``duration`` before the last word's end, or not > 0.
    """
    intervals = _intervals(words)
    last = intervals[-1].end if intervals else 0.0
    end = last if duration is None else duration
    if not end > 0 or end < last:
        raise ValueError(f"duration must be > 0 and not before the last word's end "
                         f"({last:.3f} s), got {duration!r}")
    grid = textgrid.Textgrid(minTimestamp=0.0, maxTimestamp=end)
    grid.addTier(textgrid.IntervalTier(tier, intervals, 0.0, end))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    replace_saved(path, lambda tmp: grid.save(str(tmp), format="long_textgrid",
                                              includeBlankSpaces=True, reportingMode="error"))
    return path
