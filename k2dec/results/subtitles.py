"""Subtitles (SRT, WebVTT) of one recording's timed words, written by ``pysubs2``.

Words are grouped into lines as subtitle tools do: a new line starts after a pause longer than
:attr:`SubtitleConfig.max_pause` (a sentence-like break), and before a word that would make the
line longer than :attr:`~SubtitleConfig.max_chars` characters or
:attr:`~SubtitleConfig.max_duration` seconds. A line shows from its first word's start to its
last word's end (at least :attr:`~SubtitleConfig.min_duration`, never into the next line).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pysubs2

from ..primitives.sizes import check_float_range, check_int_range
from .alignments import sorted_words
from .ctm import CtmWord
from .paths import replace_saved

__all__ = ["SUBTITLE_FORMATS", "SubtitleConfig", "SubtitleLine", "subtitle_lines",
           "write_subtitles"]

SUBTITLE_FORMATS = {".srt": "srt", ".vtt": "vtt"}
"""File suffix -> pysubs2 format."""


@dataclass(frozen=True)
class SubtitleConfig:
    """How words become subtitle lines (defaults: the common 42 characters, 7 s per line).

    Attributes:
      max_pause: seconds of silence between words that end a line, in ``(0, 60]``.
      max_chars: characters per line (words and spaces), in ``[1, 1000]``.
      max_duration: seconds per line, in ``(0, 600]``.
      min_duration: seconds a line is shown at least (if the next line allows), ``[0, 60]``.
    """

    max_pause: float = 0.8
    max_chars: int = 42
    max_duration: float = 7.0
    min_duration: float = 0.5

    def __post_init__(self) -> None:
        check_float_range(self, "max_pause", 0.0, 60.0)
        check_int_range(self, "max_chars", 1, 1000)
        check_float_range(self, "max_duration", 0.0, 600.0)
        check_float_range(self, "min_duration", 0.0, 60.0, low_open=False)


@dataclass(frozen=True)
class SubtitleLine:
    """One subtitle line: ``start``, ``end`` in seconds and its ``text`` (the words joined
    by spaces)."""

    start: float
    end: float
    text: str


def subtitle_lines(words: Sequence[CtmWord],
                   config: SubtitleConfig = SubtitleConfig()  # noqa: B008
                   ) -> list[SubtitleLine]:
    """The subtitle lines of one recording's words (any order; sorted by start), as the
    module docstring says. A single word longer than ``max_chars`` gets a line of its own."""
    groups: list[list[CtmWord]] = []
    for w in sorted_words(words):
        if groups:
            line = groups[-1]
            last_end = line[-1].start + line[-1].duration
            chars = sum(len(x.word) + 1 for x in line) + len(w.word)
            if (w.start - last_end <= config.max_pause and chars <= config.max_chars
                    and w.start + w.duration - line[0].start <= config.max_duration):
                line.append(w)
                continue
        groups.append([w])
    lines = []
    for k, g in enumerate(groups):
        start, end = g[0].start, g[-1].start + g[-1].duration
        end = max(end, start + config.min_duration)
        if k + 1 < len(groups):
            end = min(end, max(groups[k + 1][0].start, g[-1].start + g[-1].duration))
        lines.append(SubtitleLine(start, end, " ".join(x.word for x in g)))
    return lines


def write_subtitles(path: str | Path, words: Sequence[CtmWord],
                    config: SubtitleConfig = SubtitleConfig()  # noqa: B008
                    ) -> Path:
    """Write one recording's subtitles, SRT or WebVTT by ``path``'s suffix (``.srt`` /
    ``.vtt``), through pysubs2; times rounded to milliseconds. The directory is created.

    Raises:
      ValueError: another suffix.
      TypeError: words that are not :class:`~k2dec.results.CtmWord`.
    """
    path = Path(path)
    fmt = SUBTITLE_FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise ValueError(f"subtitle path must end in one of {sorted(SUBTITLE_FORMATS)}, got "
                         f"{str(path)!r}")
    subs = pysubs2.SSAFile()
    for line in subtitle_lines(words, config):
        subs.append(pysubs2.SSAEvent(start=round(line.start * 1000),
                                     end=round(line.end * 1000), text=line.text))
    path.parent.mkdir(parents=True, exist_ok=True)
    replace_saved(path, lambda tmp: subs.save(str(tmp), format_=fmt))
    return path
