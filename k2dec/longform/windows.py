"""Fixed windows with overlap, as icefall's ``long_file_recog`` cuts a long recording: chunks
of :attr:`WindowConfig.chunk` seconds, each decoded with :attr:`WindowConfig.context` seconds
of extra audio on each side; a word belongs to the chunk (the window's core) that holds its
midpoint (:func:`k2dec.longform.stitch_words`). For audio without pauses (music beds,
continuous speech), where a VAD finds no place to cut.

With :attr:`WindowConfig.search` > 0 (:func:`quiet_windows`) each seam between two cores is not
put at the nominal ``chunk`` stride but at the quietest point (lowest short-time energy, read
from the audio) within ``search`` seconds of it, so a seam falls in a pause where there is one
and the window that follows starts, as a model's training utterances do, at the onset of
speech rather than in the middle of a word. It is off by default: on the shipped model's dev
recording it did not lower the WER (BENCHMARKS.md, ``longform``)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import soundfile as sf

from ..primitives.sizes import check_float_range
from .segments import Segment, Segmentation
from .vad import VAD_RATE, read_blocks

__all__ = ["WindowConfig", "fixed_windows", "frame_energy", "quiet_windows", "window_segments"]

#: Seconds of silence a window keeps at an edge it is trimmed to (:attr:`WindowConfig.trim_db`),
#: as the VAD segmenter pads its segments.
TRIM_PAD = 0.2

#: Seconds of audio the energy is averaged over when looking for the quietest point (a
#: stop's closure inside a word is shorter; a pause between words or sentences is longer).
QUIET_SPAN = 0.2


@dataclass(frozen=True)
class WindowConfig:
    """Fixed windows (icefall's ``long_file_recog`` defaults).

    Attributes:
      chunk: seconds of each window's core (the part whose words it owns), in ``(0, 3600]``.
      context: seconds of extra audio decoded on each side of a core, in ``[0, 600]``.
      search: seconds on each side of a nominal seam within which the seam moves to the
        quietest point of the audio (:func:`quiet_windows`), in ``[0, chunk / 2]``; 0 (the
        default): every seam at the nominal stride (:func:`fixed_windows`).
      trim_db: with ``search`` > 0, the level (dBFS, mean square of a frame's samples) below
        which audio at a window's edge is silence and trimmed off, keeping
        :data:`TRIM_PAD` seconds of it, in ``[-200, 0]``; ``None`` (the default): no
        trimming.
    """

    chunk: float = 30.0
    context: float = 2.0
    search: float = 0.0
    trim_db: float | None = None

    def __post_init__(self) -> None:
        check_float_range(self, "chunk", 0.0, 3600.0)
        check_float_range(self, "context", 0.0, 600.0, low_open=False)
        check_float_range(self, "search", 0.0, self.chunk / 2, low_open=False)
        check_float_range(self, "trim_db", -200.0, 0.0, low_open=False, optional=True)


def fixed_windows(duration: float, config: WindowConfig = WindowConfig()) -> Segmentation:  # noqa: B008
    """The windows of a recording of ``duration`` seconds: cores ``[i * chunk, (i + 1) *
    chunk)`` tiling ``[0, duration)`` (the last one shorter), each widened by ``context`` on
    both sides within the recording. A recording of 0 s has no windows (said in ``notes``)."""
    _check_duration(duration)
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


def _check_duration(duration: float) -> None:
    if isinstance(duration, bool) or not isinstance(duration, int | float) or \
            not math.isfinite(duration) or duration < 0:
        raise ValueError(f"duration must be a finite number of seconds >= 0, got {duration!r}")


def _windows(cuts: list[float], duration: float, context: float) -> Segmentation:
    """Windows whose cores run between consecutive ``cuts`` (``0 = cuts[0] < ... <
    cuts[-1] = duration``), each widened by ``context`` within the recording."""
    segments = tuple(Segment(max(0.0, a - context), min(duration, b + context), a, b)
                     for a, b in zip(cuts, cuts[1:]))
    notes = "" if segments else "the recording is empty (0 s): no windows"
    return Segmentation(segments, float(duration), notes=notes)


def quiet_windows(energy: np.ndarray, frame: float, duration: float,
                  config: WindowConfig = WindowConfig()  # noqa: B008
                  ) -> Segmentation:
    """Windows whose seams sit at the quietest points near the nominal stride.

    Starting from 0, each next seam is the frame boundary, between ``chunk - search`` and
    ``chunk + search`` seconds after the previous one, where the energy averaged over
    :data:`QUIET_SPAN` around it is lowest (the earliest of equals); once at most ``chunk +
    search`` seconds are left, the last core runs to the end. Cores are therefore ``chunk -
    search`` to ``chunk + search`` seconds long, each window ``2 * context`` more (within
    the recording); seams are whole multiples of ``frame``.

    Args:
      energy: float ``[F]``: the mean square of the samples of frame ``i``, which covers
        ``[i, i + 1) * frame`` seconds (:func:`frame_energy`).
      frame: seconds per energy frame (> 0; the decoder's output frame, so that seams and
        window starts lie on its grid when ``context`` does).
      duration: the recording's length in seconds.
      config: ``chunk``, ``context``, ``search``.

    Raises:
      ValueError: a bad ``duration`` or ``frame``, an ``energy`` that is not 1-D.
      TypeError: ``config`` is not a :class:`WindowConfig`.
    """
    _check_duration(duration)
    if not isinstance(config, WindowConfig):
        raise TypeError(f"config must be a WindowConfig, got {type(config).__name__}")
    if isinstance(frame, bool) or not isinstance(frame, int | float) or not frame > 0:
        raise ValueError(f"frame must be a number of seconds > 0, got {frame!r}")
    energy = np.asarray(energy, dtype=np.float64)
    if energy.ndim != 1:
        raise ValueError(f"energy must be 1-D (one value per frame), got shape {energy.shape}")
    span = max(1, round(QUIET_SPAN / frame))
    padded = np.pad(energy, (span // 2, span - span // 2), mode="edge") if energy.size else \
        np.zeros(span + 1)
    sums = np.concatenate([[0.0], np.cumsum(padded)])
    around = (sums[span:] - sums[:-span])  # [b]: energy around boundary b (between b-1, b)
    cuts, last = [0.0], int(math.floor(duration / frame + 1e-9))
    low, high = (round((config.chunk - config.search) / frame),
                 round((config.chunk + config.search) / frame))
    at = 0
    while duration - at * frame > config.chunk + config.search + 1e-9:
        lo, hi = at + max(1, low), min(at + high, last - 1)
        if hi < lo:
            break
        scores = around[lo:hi + 1] if hi < around.size else np.zeros(hi + 1 - lo)
        at = lo + int(np.argmin(scores))
        cuts.append(round(at * frame, 6))
    if duration > cuts[-1]:
        cuts.append(float(duration))
    seg = _windows(cuts if duration > 0 else [], duration, config.context)
    if config.trim_db is None:
        return seg
    return _trimmed(seg, energy > 10.0 ** (config.trim_db / 10), frame)


def _trimmed(seg: Segmentation, loud: np.ndarray, frame: float) -> Segmentation:
    """``seg``'s windows without the silence at their edges (frames not ``loud``), keeping
    :data:`TRIM_PAD` seconds of it; a core moves in with its window's edge (the silence it
    gives up has no words), a window with no loud frame in its core is left out."""
    pad = round(TRIM_PAD / frame)
    loud_at = np.flatnonzero(loud)
    out, silent = [], 0.0
    for s in seg.segments:
        a, b = math.floor(s.own_start / frame + 1e-6), math.ceil(s.own_end / frame - 1e-6)
        inside = loud_at[(loud_at >= a) & (loud_at < b)]
        if inside.size == 0:
            silent += s.own_end - s.own_start
            continue
        lo = loud_at[(loud_at >= math.floor(s.start / frame + 1e-6))][0]
        hi = loud_at[loud_at < math.ceil(s.end / frame - 1e-6)][-1] + 1
        start = max(s.start, round((lo - pad) * frame, 6))
        end = min(s.end, round((hi + pad) * frame, 6))
        out.append(Segment(start, end, max(start, s.own_start), min(end, s.own_end)))
    notes = seg.notes or (f"{silent:.2f} s of windows without sound above the trim level left "
                          "out" if silent else "")
    if not out and seg.segments:
        notes = f"no sound above the trim level in {seg.duration:.2f} s of audio"
    return replace(seg, segments=tuple(out), notes=notes)


def frame_energy(path: str | Path, frame: float, block_seconds: float = 30.0
                 ) -> tuple[np.ndarray, float]:
    """Per ``frame`` seconds of an audio file (mono, 16 kHz, read in blocks), the mean square
    of its samples: float32 ``[ceil(duration / frame)]``, and the duration in seconds."""
    try:
        info = sf.info(str(path))
    except (sf.LibsndfileError, RuntimeError, OSError) as err:
        raise ValueError(f"audio file {str(path)!r} cannot be read: {err}") from err
    step = frame * VAD_RATE
    sums = np.zeros(max(1, math.ceil(info.frames / info.samplerate / frame)), dtype=np.float64)
    counts = np.zeros_like(sums)
    pos = 0
    for block in read_blocks(path, block_seconds):
        idx = np.minimum(((pos + np.arange(len(block))) / step).astype(np.int64),
                         len(sums) - 1)
        sums += np.bincount(idx, weights=block.astype(np.float64) ** 2, minlength=len(sums))
        counts += np.bincount(idx, minlength=len(sums))
        pos += len(block)
    return (sums / np.maximum(counts, 1)).astype(np.float32), info.frames / info.samplerate


def window_segments(path: str | Path, config: WindowConfig = WindowConfig(),  # noqa: B008
                    frame: float = 0.04) -> Segmentation:
    """The windows of an audio file: :func:`fixed_windows` of its duration (read from the
    header, no samples read) when ``config.search`` is 0, else :func:`quiet_windows` of its
    energy per ``frame`` seconds (the file read in blocks)."""
    if config.search > 0:
        energy, duration = frame_energy(path, frame)
        return quiet_windows(energy, frame, duration, config)
    try:
        info = sf.info(str(path))
    except (sf.LibsndfileError, RuntimeError, OSError) as err:
        raise ValueError(f"audio file {str(path)!r} cannot be read: {err}") from err
    return fixed_windows(info.frames / info.samplerate, config)
