"""Real-time factor: seconds spent decoding per second of audio decoded."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["RtfTimer"]


class RtfTimer:
    """Accumulates decoding wall time and audio duration; ``rtf`` is their ratio.

    Example::

        timer = RtfTimer()
        for batch in dl:
            cuts = batch["supervisions"]["cut"]
            with timer.measure(sum(c.duration for c in cuts)):
                hyps = decode(batch)
        print(f"RTF {timer.rtf:.3f}")

    An RTF below 1 is faster than real time.
    """

    def __init__(self) -> None:
        self.decode_seconds = 0.0
        self.audio_seconds = 0.0

    def add(self, decode_seconds: float, audio_seconds: float) -> None:
        """Add a measurement made elsewhere.

        Raises:
          ValueError: for a negative or non-finite value.
        """
        for name, v in (("decode_seconds", decode_seconds), ("audio_seconds", audio_seconds)):
            if not v >= 0 or v == float("inf"):
                raise ValueError(f"{name} must be finite and >= 0, got {v}")
        self.decode_seconds += decode_seconds
        self.audio_seconds += audio_seconds

    @contextmanager
    def measure(self, audio_seconds: float) -> Iterator[None]:
        """Time the ``with`` block as decoding ``audio_seconds`` of audio (also when it
        raises: the time was spent)."""
        if not audio_seconds >= 0 or audio_seconds == float("inf"):
            raise ValueError(f"audio_seconds must be finite and >= 0, got {audio_seconds}")
        start = time.perf_counter()
        try:
            yield
        finally:
            self.add(time.perf_counter() - start, audio_seconds)

    @property
    def rtf(self) -> float:
        """``decode_seconds / audio_seconds``.

        Raises:
          ValueError: if no audio has been timed.
        """
        if self.audio_seconds <= 0:
            raise ValueError("no audio timed yet: the real-time factor is undefined")
        return self.decode_seconds / self.audio_seconds
