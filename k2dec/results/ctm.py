"""Kaldi CTM files: one line per word, ``<utt> <channel> <start> <duration> <word>
<confidence>`` (times in seconds), as ``lattice-to-ctm-conf`` writes them, sorted by utterance
and start time."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..primitives.sizes import check_positive
from .paths import replace_file

__all__ = ["CtmWord", "frames_to_seconds", "read_ctm", "record_ctm_words", "timed_words",
           "write_ctm"]

FRAME_SHIFT = 0.01
"""Seconds between feature frames (10 ms fbank, as in icefall's recipes)."""


@dataclass(frozen=True)
class CtmWord:
    """One word of a CTM file.

    Attributes:
      word: the word.
      start: start time in seconds.
      duration: duration in seconds (>= 0).
      confidence: in ``[0, 1]``.
    """

    word: str
    start: float
    duration: float
    confidence: float

    def __post_init__(self) -> None:
        if not isinstance(self.word, str) or not self.word or any(c.isspace() for c in self.word):
            raise ValueError(f"word must be a non-empty string without spaces, got {self.word!r}")
        for name in ("start", "duration"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be finite and >= 0, got {value!r} "
                                 f"(word {self.word!r})")
        if not (0.0 <= self.confidence <= 1.0):
            raise ValueError(f"confidence must be in [0, 1], got {self.confidence!r} "
                             f"(word {self.word!r})")


def frames_to_seconds(frames: int | float, subsampling_factor: int = 4,
                      frame_shift: float = FRAME_SHIFT) -> float:
    """Time in seconds of a model output frame: ``frames * subsampling_factor * frame_shift``
    (icefall's ``convert_timestamp``)."""
    if isinstance(subsampling_factor, bool) or not isinstance(subsampling_factor, int) or \
            subsampling_factor < 1:
        raise ValueError(f"subsampling_factor must be an int >= 1, got {subsampling_factor!r}")
    check_positive("frame_shift", frame_shift)
    return frames * subsampling_factor * frame_shift


def timed_words(
    words: Sequence[str],
    begin: Sequence[int],
    end: Sequence[int],
    confidences: Sequence[float],
    subsampling_factor: int = 4,
    frame_shift: float = FRAME_SHIFT,
) -> list[CtmWord]:
    """:class:`CtmWord` s of one utterance from per-word frames (``begin <= f < end``, model
    output frames) and confidences (clipped to ``[0, 1]`` against rounding)."""
    if not len(words) == len(begin) == len(end) == len(confidences):
        raise ValueError(f"words, begin, end and confidences must have the same length, got "
                         f"{len(words)}, {len(begin)}, {len(end)}, {len(confidences)}")
    out = []
    for w, b, e, c in zip(words, begin, end, confidences):
        if e < b:
            raise ValueError(f"word {w!r} ends (frame {e}) before it begins (frame {b})")
        start = frames_to_seconds(b, subsampling_factor, frame_shift)
        dur = frames_to_seconds(e - b, subsampling_factor, frame_shift)
        out.append(CtmWord(w, start, dur, min(1.0, max(0.0, float(c)))))
    return out


def write_ctm(
    path: str | Path,
    utterances: Mapping[str, Sequence[CtmWord]] | Iterable[tuple[str, Sequence[CtmWord]]],
    channel: str = "1",
) -> Path:
    """Write a CTM file: utterances sorted by id, words by start time.

    Args:
      path: the file (its directory is created).
      utterances: ``{utt_id: words}`` or ``(utt_id, words)`` pairs.
      channel: the channel column (Kaldi writes ``1``).
    """
    items = utterances.items() if isinstance(utterances, Mapping) else utterances
    rows = []
    for utt, words in items:
        if not isinstance(utt, str) or not utt or any(c.isspace() for c in utt):
            raise ValueError(f"utterance ids must be non-empty strings without spaces, got "
                             f"{utt!r}")
        for w in words:
            if not isinstance(w, CtmWord):
                raise TypeError(f"utterance {utt!r}: words must be CtmWord, got "
                                f"{type(w).__name__}")
            rows.append((utt, w.start, w.duration, w.word, w.confidence))
    rows.sort(key=lambda r: (r[0], r[1]))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    replace_file(path, lambda f: f.writelines(
        f"{utt} {channel} {start:.3f} {dur:.3f} {word} {conf:.4f}\n"
        for utt, start, dur, word, conf in rows))
    return path


def read_ctm(path: str | Path) -> dict[str, list[CtmWord]]:
    """``{utt_id: words}`` of a CTM file (6 columns; a missing confidence reads as 1)."""
    out: dict[str, list[CtmWord]] = {}
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            parts = line.split()
            if not parts or parts[0].startswith(";;"):
                continue
            if len(parts) not in (5, 6):
                raise ValueError(f"{path}:{lineno}: expected 5 or 6 columns, got {line!r}")
            conf = float(parts[5]) if len(parts) == 6 else 1.0
            out.setdefault(parts[0], []).append(
                CtmWord(parts[4], float(parts[2]), float(parts[3]), conf))
    return out


def record_ctm_words(
    record: Mapping[str, Any],
    word_start: Sequence[bool] | None = None,
    subsampling_factor: int = 4,
    frame_shift: float = FRAME_SHIFT,
) -> list[CtmWord] | None:
    """The CTM words of one setting of a results line (a
    :class:`~k2dec.primitives.hypothesis.HypothesisRecord` as JSON plus ``text``, its words), or
    ``None`` when the record has no frames and confidences for its words.

    Words with ``word_frames``, ``word_durations`` and ``word_confidences`` are used as they
    are. Otherwise tokens with ``token_frames`` and ``token_confidences`` are grouped into
    ``text``'s words by ``word_start`` (which token ids begin a word): a word spans from its
    first token's frame to one frame after its last token's, and its confidence is its least
    confident token's. ``None`` also when the grouping does not give ``text``'s words.
    """
    text = record.get("text")
    if text is None:
        return None
    if all(k in record for k in ("word_frames", "word_durations", "word_confidences")):
        frames = record["word_frames"]
        if len(frames) != len(text):
            return None
        ends = [b + d for b, d in zip(frames, record["word_durations"])]
        return timed_words(text, frames, ends, record["word_confidences"], subsampling_factor,
                           frame_shift)
    if word_start is None or not all(k in record for k in ("tokens", "token_frames",
                                                           "token_confidences")):
        return None
    begin: list[int] = []
    end: list[int] = []
    conf: list[float] = []
    for tok, frame, c in zip(record["tokens"], record["token_frames"],
                             record["token_confidences"]):
        starts = 0 <= tok < len(word_start) and bool(word_start[tok])
        if starts or not begin:
            begin.append(frame)
            end.append(frame + 1)
            conf.append(c)
        else:
            end[-1] = max(end[-1], frame + 1)
            conf[-1] = min(conf[-1], c)
    if len(begin) != len(text):
        return None
    return timed_words(text, begin, end, conf, subsampling_factor, frame_shift)
