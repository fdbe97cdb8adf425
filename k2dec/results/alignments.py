"""Lhotse supervisions with word alignments (``AlignmentItem``) of one recording, written by
lhotse's own ``SupervisionSet.to_file``, and the words as JSON-ready dicts for result lines
(``{"word", "start", "end", "confidence"}``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lhotse import SupervisionSegment, SupervisionSet
from lhotse.supervision import AlignmentItem

from .ctm import CtmWord
from .paths import replace_saved

__all__ = ["sorted_words", "word_dicts", "word_supervision", "words_from_dicts", "write_alignments"]


def sorted_words(words: Sequence[CtmWord]) -> list[CtmWord]:
    """``words`` sorted by start, each checked to be a :class:`~k2dec.results.CtmWord`
    (``TypeError`` naming the index and type otherwise): the input check of every writer of
    timed words."""
    for i, w in enumerate(words):
        if not isinstance(w, CtmWord):
            raise TypeError(f"words[{i}] must be a CtmWord, got {type(w).__name__}")
    return sorted(words, key=lambda w: w.start)


def word_dicts(words: Sequence[CtmWord]) -> list[dict[str, Any]]:
    """Words as ``{"word", "start", "end", "confidence"}`` dicts (seconds, rounded to ms;
    sorted by start): the ``words`` field of a result line."""
    return [{"word": w.word, "start": round(w.start, 3), "end": round(w.start + w.duration, 3),
             "confidence": round(w.confidence, 4)} for w in sorted_words(words)]


def words_from_dicts(items: Sequence[Mapping[str, Any]]) -> list[CtmWord]:
    """The inverse of :func:`word_dicts`."""
    return [CtmWord(d["word"], float(d["start"]), float(d["end"]) - float(d["start"]),
                    float(d["confidence"])) for d in items]


def word_supervision(recording_id: str, words: Sequence[CtmWord], duration: float | None = None
                     ) -> SupervisionSegment:
    """One supervision spanning the recording (``start`` 0, ``duration`` the recording's, or
    the last word's end when ``None``), its ``text`` the words and its ``alignment["word"]``
    one ``AlignmentItem`` per word (``symbol``, ``start``, ``duration``, ``score`` = the
    confidence)."""
    if not isinstance(recording_id, str) or not recording_id:
        raise ValueError(f"recording_id must be a non-empty string, got {recording_id!r}")
    words = sorted_words(words)
    last = max((w.start + w.duration for w in words), default=0.0)
    span = last if duration is None else duration
    if span < last:
        raise ValueError(f"duration {duration!r} ends before the last word ({last:.3f} s)")
    items = [AlignmentItem(symbol=w.word, start=round(w.start, 3),
                           duration=round(w.duration, 3), score=round(w.confidence, 4))
             for w in words]
    return SupervisionSegment(id=recording_id, recording_id=recording_id, start=0.0,
                              duration=span, text=" ".join(w.word for w in words),
                              alignment={"word": items})


def write_alignments(path: str | Path, recording_id: str, words: Sequence[CtmWord],
                     duration: float | None = None) -> Path:
    """Write one recording's :func:`word_supervision` as a lhotse SupervisionSet file
    (``.jsonl`` or ``.jsonl.gz``; lhotse's ``to_file``), its directory created."""
    path = Path(path)
    if not (path.name.endswith(".jsonl") or path.name.endswith(".jsonl.gz")):
        raise ValueError(f"alignments path must end in .jsonl or .jsonl.gz, got {str(path)!r}")
    path.parent.mkdir(parents=True, exist_ok=True)
    sups = SupervisionSet.from_segments([word_supervision(recording_id, words, duration)])
    replace_saved(path, sups.to_file)
    return path
