"""The voice-activity segmenter: silero-vad (the ``silero-vad`` package; its wheel ships the
model, loaded with ``torch.jit``, so it runs offline) over audio read in blocks.

A file is never held whole in memory: it is read :attr:`VadConfig.block_seconds` at a time
(soundfile), its channels averaged, resampled to 16 kHz (lhotse's resampler) when it is at
another rate, and fed to the VAD 512 samples (32 ms) at a time, keeping only one speech
probability and one energy per 32 ms frame (about 0.9 MB for an hour). Segments are then made
from the probabilities:

1. speech starts where the probability reaches :attr:`~VadConfig.threshold` and ends where it
   falls below :attr:`~VadConfig.neg_threshold` (hysteresis, as silero's own
   ``get_speech_timestamps``);
2. gaps shorter than :attr:`~VadConfig.min_gap` are merged;
3. speech shorter than :attr:`~VadConfig.min_speech` is dropped, and reported
   (:attr:`Segmentation.dropped`, :attr:`~Segmentation.dropped_speech`);
4. segments are widened by :attr:`~VadConfig.speech_pad` (before and after them:
   :attr:`~VadConfig.speech_pad_start` / :attr:`~VadConfig.speech_pad_end`; never into their
   neighbours);
5. a segment longer than :attr:`~VadConfig.max_segment` is split at its quietest frame (the
   lowest energy) between half the cap and the cap, until every piece fits.
"""

from __future__ import annotations

import array
import functools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile as sf
import torch

from ..primitives.sizes import check_float_range
from .segments import Segment, Segmentation

__all__ = ["VAD_FRAME", "VAD_RATE", "VadConfig", "read_blocks", "speech_frames",
           "vad_segments"]

VAD_RATE = 16000
"""The sampling rate the VAD runs at (Hz)."""
_FRAME_SAMPLES = 512
VAD_FRAME = _FRAME_SAMPLES / VAD_RATE
"""Seconds per VAD frame (32 ms)."""
_RUN_CHUNK = 1 << 16


@dataclass(frozen=True)
class VadConfig:
    """The VAD segmenter's settings (seconds unless said).

    Attributes:
      threshold: speech probability where speech starts, in ``(0, 1)`` (silero's default).
      neg_threshold: probability below which speech ends, in ``(0, threshold]``; ``None``:
        ``threshold - 0.15`` (at least 0.01), as silero.
      min_speech: speech shorter than this is dropped (and reported), in ``[0, 60]``.
      min_gap: pauses shorter than this are merged into the speech around them, ``[0, 60]``.
      speech_pad: audio kept on each side of a segment, in ``[0, 10]``.
      speech_pad_start, speech_pad_end: audio kept before / after a segment, in ``[0, 10]``;
        ``None`` (the default): ``speech_pad``.
      max_segment: the longest segment, in ``[1, 3600]``; longer speech is split at its
        quietest point.
      block_seconds: seconds of audio read at a time, in ``[1, 600]``, rounded down to whole
        seconds (memory: one block).

    The defaults were checked on a development recording (96 utterances of the shipped
    model's dev split joined with 0.3-1.5 s pauses, 940 words; seven methods): the long-form
    WER averaged over the methods moved by -0.23 to +0.31 from the defaults' for
    ``speech_pad`` 0.05-0.3 s, 0.05-0.1 s before or 0.1-0.3 s after a segment,
    ``threshold`` 0.35-0.65 and ``min_gap`` 0.3 s, not monotonically (a one-frame, 32 ms,
    change of the pad moved it by 0.06), and rose by 1.0-1.1 with no pad before a segment
    (its first sound clipped) and by 0.4 with ``min_gap`` 1 s (neighbouring utterances
    merged). What long-form decoding loses there against the
    utterances decoded one by one (1.1 on average) is not the pads': the same utterance files
    decoded with under 40 ms of silence put before them lose as much (1.3-1.6).
    """

    threshold: float = 0.5
    neg_threshold: float | None = None
    min_speech: float = 0.25
    min_gap: float = 0.5
    speech_pad: float = 0.2
    speech_pad_start: float | None = None
    speech_pad_end: float | None = None
    max_segment: float = 30.0
    block_seconds: float = 30.0

    def __post_init__(self) -> None:
        check_float_range(self, "threshold", 0.0, 0.999)
        check_float_range(self, "neg_threshold", 0.0, self.threshold, optional=True)
        check_float_range(self, "min_speech", 0.0, 60.0, low_open=False)
        check_float_range(self, "min_gap", 0.0, 60.0, low_open=False)
        check_float_range(self, "speech_pad", 0.0, 10.0, low_open=False)
        for name in ("speech_pad_start", "speech_pad_end"):
            check_float_range(self, name, 0.0, 10.0, low_open=False, optional=True)
        check_float_range(self, "max_segment", 1.0, 3600.0, low_open=False)
        check_float_range(self, "block_seconds", 1.0, 600.0, low_open=False)

    @property
    def end_threshold(self) -> float:
        """The probability below which speech ends."""
        if self.neg_threshold is not None:
            return self.neg_threshold
        return max(0.01, self.threshold - 0.15)

    @property
    def pads(self) -> tuple[float, float]:
        """Seconds of audio kept ``(before, after)`` a segment."""
        start, end = self.speech_pad_start, self.speech_pad_end
        return (self.speech_pad if start is None else start,
                self.speech_pad if end is None else end)


def _open(path: str | Path) -> sf.SoundFile:
    try:
        return sf.SoundFile(str(path))
    except (sf.LibsndfileError, RuntimeError, OSError) as err:
        raise ValueError(f"audio file {str(path)!r} cannot be read: {err}") from err


def _range(f: sf.SoundFile, path: str | Path, offset: float, duration: float | None
           ) -> tuple[int, int]:
    """``(first sample, number of samples)`` of ``offset`` / ``duration`` seconds of ``f``."""
    if not (np.isfinite(offset) and offset >= 0) or (
            duration is not None and not (np.isfinite(duration) and duration > 0)):
        raise ValueError(f"audio file {str(path)!r}: the VAD's range needs offset >= 0 and "
                         f"duration > 0 seconds, got offset={offset!r}, duration={duration!r}")
    first = min(f.frames, round(offset * f.samplerate))
    count = f.frames - first
    if duration is not None:
        count = min(count, round(duration * f.samplerate))
    return first, count


def read_blocks(path: str | Path, block_seconds: float = 30.0, offset: float = 0.0,
                duration: float | None = None) -> Iterator[np.ndarray]:
    """The samples of an audio file (``duration`` seconds from ``offset``; default: all of
    it), mono (channels averaged) at 16 kHz, ``block_seconds`` of the file at a time: 1-D
    float32 arrays (the last one shorter). Only one block is in memory.

    Raises:
      ValueError: a file soundfile cannot open, with a sampling rate below 1 kHz, or a
        negative ``offset`` / a ``duration`` that is not positive.
    """
    with _open(path) as f:
        rate = f.samplerate
        if rate < 1000:
            raise ValueError(f"audio file {str(path)!r} has sampling rate {rate} Hz; the VAD "
                             "needs at least 1000 Hz")
        first, count = _range(f, path, offset, duration)
        resample = None
        if rate != VAD_RATE:
            from lhotse.augmentation import Resample

            resample = Resample(rate, VAD_RATE)
        step = max(1, int(block_seconds)) * rate  # whole seconds: exact sample counts
        f.seek(first)
        for block in f.blocks(blocksize=step, frames=count, dtype="float32", always_2d=True):
            mono = block.mean(axis=1, dtype=np.float32)
            if resample is not None:
                mono = resample(mono[None, :], rate)[0].astype(np.float32, copy=False)
            yield mono


@functools.lru_cache(maxsize=1)
def _silero() -> torch.jit.ScriptModule:
    from silero_vad import load_silero_vad

    return load_silero_vad(onnx=False)


def speech_frames(path: str | Path, block_seconds: float = 30.0, offset: float = 0.0,
                  duration: float | None = None) -> tuple[np.ndarray, np.ndarray, float]:
    """Per 32 ms frame of a file (of ``duration`` seconds from ``offset``; default: all of
    it), the VAD's speech probability and the frame's energy.

    Returns:
      ``(probs, energy, duration)``: ``probs`` float32 ``[F]`` in ``[0, 1]``; ``energy``
      float32 ``[F]``, mean square of the frame's 16 kHz samples; ``duration`` the length
      read in seconds. Frame ``i`` covers ``[i, i + 1) * VAD_FRAME`` seconds from ``offset``
      (the last one zero-padded).
    """
    with _open(path) as f:
        duration = _range(f, path, offset, duration)[1] / f.samplerate
    model = _silero()
    model.reset_states()
    probs, energy = array.array("f"), array.array("f")
    carry = np.zeros(0, dtype=np.float32)
    with torch.inference_mode():
        for block in read_blocks(path, block_seconds, offset, duration):
            x = np.concatenate([carry, block])
            whole = len(x) // _FRAME_SAMPLES * _FRAME_SAMPLES
            for i in range(0, whole, _FRAME_SAMPLES):
                frame = torch.from_numpy(x[i:i + _FRAME_SAMPLES])
                probs.append(float(model(frame[None, :], VAD_RATE)))
                energy.append(float(frame.square().mean()))
            carry = x[whole:]
        if len(carry):
            frame = torch.from_numpy(np.pad(carry, (0, _FRAME_SAMPLES - len(carry))))
            probs.append(float(model(frame[None, :], VAD_RATE)))
            energy.append(float(frame.square().mean()))
    return (np.asarray(probs, dtype=np.float32), np.asarray(energy, dtype=np.float32),
            duration)


def _runs(probs: np.ndarray, on: float, off: float) -> list[list[int]]:
    """``[start, end)`` frame runs of speech, with hysteresis. The probabilities are read
    64k frames at a time (a 10-hour file has 1.1 million: as one list of Python floats, 36
    MB)."""
    runs: list[list[int]] = []
    speaking = False
    for i, p in ((base + j, p) for base in range(0, len(probs), _RUN_CHUNK)
                 for j, p in enumerate(probs[base:base + _RUN_CHUNK].tolist())):
        if not speaking and p >= on:
            runs.append([i, i + 1])
            speaking = True
        elif speaking:
            if p < off:
                speaking = False
            else:
                runs[-1][1] = i + 1
    return runs


def _merged(runs: list[list[int]], min_gap: int) -> list[list[int]]:
    out: list[list[int]] = []
    for s, e in runs:
        if out and s - out[-1][1] < min_gap:
            out[-1][1] = e
        else:
            out.append([s, e])
    return out


def _padded(runs: list[list[int]], pads: tuple[int, int], num_frames: int) -> list[list[int]]:
    """Each run widened by ``pads`` frames (before, after), each at most half of the gap to a
    neighbour."""
    out = []
    for k, (s, e) in enumerate(runs):
        left = pads[0] if k == 0 else min(pads[0], (s - runs[k - 1][1]) // 2)
        right = pads[1] if k + 1 == len(runs) else min(pads[1], (runs[k + 1][0] - e) // 2)
        out.append([max(0, s - left), min(num_frames, e + right)])
    return out


def _capped(s: int, e: int, energy: np.ndarray, cap: int) -> list[tuple[int, int]]:
    """``[s, e)`` split at its quietest frames until every piece has at most ``cap``
    frames: each cut at the lowest energy between ``cap // 2`` and ``cap`` frames in."""
    pieces = []
    while e - s > cap:
        low = s + max(1, cap // 2)
        cut = low + int(np.argmin(energy[low:s + cap + 1]))
        pieces.append((s, cut))
        s = cut
    pieces.append((s, e))
    return pieces


def _seconds(frames: tuple[int, int] | list[int], duration: float) -> Segment | None:
    start, end = frames[0] * VAD_FRAME, min(frames[1] * VAD_FRAME, duration)
    return Segment(start, end) if end > start else None


def vad_segments(path: str | Path, config: VadConfig = VadConfig(),  # noqa: B008
                 offset: float = 0.0, duration: float | None = None) -> Segmentation:
    """The speech segments of an audio file (any rate and channels soundfile reads), found
    by silero-vad over the file read in blocks, as the module docstring says; with
    ``offset`` / ``duration`` (seconds), of that range of it only (a cut that is part of a
    recording), its times counted from ``offset``.

    Returns:
      a :class:`Segmentation`: segments of at most ``config.max_segment`` seconds, the
      speech dropped as too short, and ``notes`` saying when no speech was found or some
      was dropped.

    Raises:
      TypeError: ``config`` is not a :class:`VadConfig`.
      ValueError: a file that cannot be read (naming it).
    """
    if not isinstance(config, VadConfig):
        raise TypeError(f"config must be a VadConfig, got {type(config).__name__}")
    probs, energy, duration = speech_frames(path, config.block_seconds, offset, duration)
    runs = _merged(_runs(probs, config.threshold, config.end_threshold),
                   round(config.min_gap / VAD_FRAME))
    min_speech = round(config.min_speech / VAD_FRAME)
    kept = [r for r in runs if r[1] - r[0] >= min_speech]
    dropped = [_seconds(r, duration) for r in runs if r[1] - r[0] < min_speech]
    cap = int(config.max_segment / VAD_FRAME)
    pads = tuple(round(p / VAD_FRAME) for p in config.pads)
    segments = [_seconds(p, duration) for s, e in _padded(kept, pads, len(probs))
                for p in _capped(s, e, energy, cap)]
    result = Segmentation(tuple(s for s in segments if s), duration,
                          tuple(s for s in dropped if s))
    notes = [] if result.segments else [f"no speech found in {duration:.2f} s of audio"]
    if result.dropped:
        notes.append(f"{result.dropped_speech:.2f} s of speech dropped ({len(result.dropped)} "
                     f"runs shorter than min_speech={config.min_speech:g} s)")
    return Segmentation(result.segments, duration, result.dropped, "; ".join(notes))
