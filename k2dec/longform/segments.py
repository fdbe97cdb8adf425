"""The pieces a long recording is decoded in: :class:`Segment` (times in seconds of the
recording's clock) and :class:`Segmentation` (the kept segments, the speech a segmenter
dropped, and the recording's duration)."""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["Segment", "Segmentation"]


@dataclass(frozen=True)
class Segment:
    """One piece of a recording, in seconds of the recording's clock.

    Attributes:
      start, end: the audio decoded for this piece (``0 <= start < end``).
      core_start, core_end: the part whose words this piece owns when pieces overlap (fixed
        windows with context: the window without its context); ``None`` (the default) means
        ``start`` / ``end``. ``start <= core_start < core_end <= end``.
    """

    start: float
    end: float
    core_start: float | None = None
    core_end: float | None = None

    def __post_init__(self) -> None:
        for name in ("start", "end", "core_start", "core_end"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)
                                      or not math.isfinite(value) or value < 0):
                raise ValueError(f"Segment.{name} must be a finite number >= 0 (seconds), "
                                 f"got {value!r}")
        if not self.start <= self.own_start < self.own_end <= self.end:
            raise ValueError(f"Segment needs start <= core_start < core_end <= end, got "
                             f"{self.start!r}, {self.core_start!r}, {self.core_end!r}, "
                             f"{self.end!r}")

    @property
    def own_start(self) -> float:
        """Where the part this segment owns starts (seconds)."""
        return self.start if self.core_start is None else self.core_start

    @property
    def own_end(self) -> float:
        """Where the part this segment owns ends (seconds)."""
        return self.end if self.core_end is None else self.core_end

    @property
    def duration(self) -> float:
        """Seconds of audio decoded for this segment."""
        return self.end - self.start


@dataclass(frozen=True)
class Segmentation:
    """A recording cut into segments.

    Attributes:
      segments: the segments to decode, sorted by start.
      duration: the recording's duration in seconds.
      dropped: speech the segmenter found but does not decode (a VAD's runs shorter than its
        minimum speech length), sorted by start; never silently lost: see
        :attr:`dropped_speech`.
      notes: what the caller should be told (e.g. that no speech was found); ``""`` if nothing.
    """

    segments: tuple[Segment, ...]
    duration: float
    dropped: tuple[Segment, ...] = ()
    notes: str = ""

    @property
    def dropped_speech(self) -> float:
        """Seconds of speech dropped (the total duration of :attr:`dropped`)."""
        return sum(s.duration for s in self.dropped)

    @property
    def kept_speech(self) -> float:
        """Seconds of audio in the kept segments' own parts."""
        return sum(s.own_end - s.own_start for s in self.segments)
