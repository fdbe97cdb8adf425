"""Fixed windows with overlap, as icefall's ``long_file_recog`` cuts a long recording: chunks
of :attr:`WindowConfig.chunk` seconds, each decoded with :attr:`WindowConfig.context` seconds
of extra audio on each side; a word belongs to the chunk (the window's core) that holds its
midpoint (:func:`k2dec.longform.stitch_words`). For audio without pauses (music beds,
continuous speech), where a VAD finds no place to cut."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import soundfile as sf

from ..primitives.sizes import check_float_range
from .segments import Segment, Segmentation

__all__ = ["WindowConfig", "fixed_windows", "window_segments"]


@dataclass(frozen=True)
class WindowConfig:
    """Fixed windows (icefall's ``long_file_recog`` defaults).

    Attributes:
      chunk: seconds of each window's core (the part whose words it owns), in ``(0, 3600]``.
      context: seconds of extra audio decoded on each side of a core, in ``[0, 600]``.
    """

    chunk: float = 30.0
    context: float = 2.0

    def __post_init__(self) -> None:
        check_float_range(self, "chunk", 0.0, 3600.0)
        check_float_range(self, "context", 0.0, 600.0, low_open=False)


def fixed_windows(duration: float, config: WindowConfig = WindowConfig()) -> Segmentation:  # noqa: B008
    """The windows of a recording of ``duration`` seconds: cores ``[i * chunk, (i + 1) *
    chunk)`` tiling ``[0, duration)`` (the last one shorter), each widened by ``context`` on
    both sides within the recording. A recording of 0 s has no windows (said in ``notes``)."""
    if isinstance(duration, bool) or not isinstance(duration, int | float) or \
            not math.isfinite(duration) or duration < 0:
        raise ValueError(f"duration must be a finite number of seconds >= 0, got {duration!r}")
    if not isinstance(config, WindowConfig):
        raise TypeError(f"config must be a WindowConfig, got {type(config).__name__}")
    segments = []
    n = math.ceil(duration / config.chunk)
    for i in range(n):
        core_start, core_end = i * config.chunk, min((i + 1) * config.chunk, duration)
        if core_end <= core_start:
            break
        segments.append(Segment(max(0.0, core_start - config.context),
                                min(duration, core_end + config.context), core_start, core_end))
    notes = "" if segments else "the recording is empty (0 s): no windows"
    return Segmentation(tuple(segments), float(duration), notes=notes)


def window_segments(path: str | Path, config: WindowConfig = WindowConfig()  # noqa: B008
                    ) -> Segmentation:
    """:func:`fixed_windows` of an audio file, its duration read from the header (no samples
    are read)."""
    try:
        info = sf.info(str(path))
    except (sf.LibsndfileError, RuntimeError, OSError) as err:
        raise ValueError(f"audio file {str(path)!r} cannot be read: {err}") from err
    return fixed_windows(info.frames / info.samplerate, config)
