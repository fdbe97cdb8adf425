"""One audio file (or one cut of a recording) -> fbank features, with every check that can be
made before its samples are read, and one-line reasons when it cannot be used.

Before any sample is read, from the file's header (:func:`probe_recording`,
:meth:`AudioLimits.check`):

- the sampling rate must be plausible (:attr:`AudioLimits.min_sampling_rate` to
  :attr:`~AudioLimits.max_sampling_rate`): a header claiming 1 Hz would otherwise be resampled
  to 16 kHz, 16000 times its size in memory;
- the duration must fit the job's bound (:attr:`AudioLimits.max_duration`, the decode job's
  ``--max-duration``) and the samples held in memory at once (all channels, float32) must fit
  :attr:`AudioLimits.max_audio_mb`: a file soundfile reads is read in pieces
  (:func:`piecewise_features`, :func:`held_seconds`), so its length does not matter; one
  that is read whole (through the ``ffmpeg`` command) and would not fit is refused from its
  header, not after reading it;
- an uncompressed file whose header declares more audio than the file holds (a WAV, AIFF, AU
  or W64 cut short, e.g. by an interrupted copy) is refused as truncated: libsndfile would
  silently read the part that is there, and its hypothesis would be scored against the whole
  reference. The fix is the user's (copy the file again, or rewrite its header, e.g.
  ``sox in.wav out.wav``, to decode what is there). Ogg files without an end-of-stream mark
  are decoded as far as they go, with a warning (Ogg declares no length to compare with).

Files soundfile (libsndfile) cannot read go to lhotse's other backends, then, when the
``ffmpeg`` and ``ffprobe`` commands are installed (Debian: ``apt-get install ffmpeg``), to
them: ``.m4a`` / ``.aac`` / ``.wma`` / ``.webm`` decode through the ``ffmpeg`` command when
torchaudio's FFmpeg bindings are missing (torchaudio 0.13 needs FFmpeg 4's libraries; Debian
12 ships FFmpeg 5). Such a recording's source is that command (lhotse's ``command`` audio
source), downmixed by ffmpeg to one channel and padded or trimmed to the length ffprobe reports.

After reading (:func:`cut_features`): samples that are NaN or infinite fail the file with a
clear reason rather than a ``cannot convert float NaN to integer`` deep in the feature code.

Utterance ids are made from file names by :func:`utterance_id`: whitespace becomes ``_`` and
bytes that are not UTF-8 become ``%XX``, so ids are safe in every result file (JSONL,
icefall's files, CTM); messages show paths with :func:`shown_path`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf
from lhotse import Recording
from lhotse.audio import AudioSource
from lhotse.audio.utils import AudioLoadingError, DurationMismatchError
from lhotse.cut import Cut, MixedCut, MixTrack, MonoCut, MultiCut
from lhotse.features.base import FeatureExtractor, Features
from lhotse.features.io import (
    FeaturesWriter,
    NumpyFilesReader,
    NumpyFilesWriter,
    register_reader,
)
from lhotse.utils import fastcopy

from ..primitives.sizes import check_positive

__all__ = [
    "FEATURE_PIECE_SECONDS",
    "held_seconds",
    "mono_samples",
    "piecewise_features",
    "AUDIO_READ_ERRORS",
    "AudioLimits",
    "check_sample_values",
    "cut_features",
    "ffmpeg_available",
    "id_clashes",
    "load_feature_range",
    "probe_recording",
    "safe_name",
    "shown_path",
    "too_long",
    "utterance_id",
]

logger = logging.getLogger(__name__)

#: What reading or decoding a bad file raises through lhotse, soundfile and the ffmpeg
#: commands (lhotse's backends wrap most errors in AudioLoadingError; soundfile's
#: LibsndfileError is a RuntimeError; a hung ffmpeg is a subprocess.TimeoutExpired).
AUDIO_READ_ERRORS = (AudioLoadingError, DurationMismatchError, OSError, RuntimeError,
                     ValueError, EOFError, subprocess.SubprocessError)

# WAV / AIFF / AU / W64 size fields at or above this are "unknown length" placeholders that
# streaming writers leave (0xFFFFFFFF from ffmpeg on a pipe), not truncation.
_PLACEHOLDER_SIZE = 0x7FFFF000
# libsndfile's header log: "data : 96000 (should be 47978)" when the file is shorter
_SIZE_LINE = re.compile(r"^\s*(RIFF|riff|FORM|data|SSND|Data Size)\s*:\s*(\d+)\s*"
                        r"\(should be (\d+)\)", re.MULTILINE)
_PROBE_TIMEOUT_S = 60.0


def too_long(duration: float, max_duration: float) -> str:
    """The reason a recording longer than ``max_duration`` seconds is not decoded (the decode
    job's ``--max-duration``: a batch holds at most that much audio, which bounds memory)."""
    return (f"too long: {duration:.1f} s of audio, more than max_duration={max_duration:g} s "
            "per batch; raise max_duration (--max-duration) or split it")


@dataclass(frozen=True)
class AudioLimits:
    """What a decode job accepts of a recording, checked from its header before any sample
    is read (:meth:`check`).

    Attributes:
      min_sampling_rate, max_sampling_rate: plausible sampling rates in Hz (4 kHz to 384 kHz);
        a header outside them is taken as corrupt.
      max_channels: channels a recording may have (they are averaged into one).
      max_duration: seconds a recording (a cut) may last; ``None``: no bound here (the decode
        job passes its ``max_duration``).
      max_audio_mb: MiB the samples of one recording held in memory at once may take
        (float32, all channels, at the file's rate): the bound on a file's memory whatever
        ``max_duration`` is. A file soundfile reads is read in pieces of seconds
        (:func:`held_seconds`), so it bounds a piece, and a file of any length fits; a file
        read whole (through ffmpeg) must fit as a whole (1024 MiB: 4.7 hours of 16 kHz
        mono, 93 minutes of 48 kHz stereo).

    Raises:
      ValueError: a bound out of range, naming the field.
    """

    min_sampling_rate: int = 4000
    max_sampling_rate: int = 384_000
    max_channels: int = 64
    max_duration: float | None = None
    max_audio_mb: float = 1024.0

    def __post_init__(self) -> None:
        for name in ("min_sampling_rate", "max_sampling_rate", "max_channels"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"AudioLimits.{name} must be an int >= 1, got {value!r}")
        if self.min_sampling_rate > self.max_sampling_rate:
            raise ValueError(f"AudioLimits: min_sampling_rate={self.min_sampling_rate} is "
                             f"above max_sampling_rate={self.max_sampling_rate}")
        for name in ("max_duration", "max_audio_mb"):
            value = getattr(self, name)
            if value is not None:
                check_positive(f"AudioLimits.{name}", value)

    def check_rate(self, rate: int, where: str, advice: str) -> None:
        """``ValueError`` when ``rate`` (Hz) is outside the accepted sampling rates: the one
        check of a file's header and of a waveform's ``sample_rate`` (``where`` says which,
        ``advice`` what to do)."""
        if not self.min_sampling_rate <= rate <= self.max_sampling_rate:
            raise ValueError(
                f"implausible sampling rate {rate} Hz {where} (accepted: "
                f"{self.min_sampling_rate}-{self.max_sampling_rate} Hz, AudioLimits); {advice}")

    def check(self, rate: int, channels: int, duration: float,
              held: float | None = None) -> None:
        """Raise ``ValueError`` (one line saying what to do) if ``duration`` seconds of a
        recording with this sampling rate (Hz) and number of channels are outside these
        limits. ``held``: the seconds of it in memory at once (:func:`held_seconds`: one
        piece of a file read in pieces); ``None``: all of it. :attr:`max_audio_mb` bounds
        those samples, not the file's length."""
        self.check_rate(rate, "in its header", "the header is likely corrupt: if the rate is "
                        "right, resample the file (e.g. sox IN -r 16000 OUT)")
        if channels > self.max_channels:
            raise ValueError(f"{channels} channels, more than AudioLimits.max_channels="
                             f"{self.max_channels}; keep the channels to decode (e.g. sox IN "
                             "OUT remix 1)")
        if self.max_duration is not None and duration > self.max_duration:
            raise ValueError(too_long(duration, self.max_duration))
        seconds = duration if held is None else min(duration, held)
        mib = seconds * rate * channels * 4 / 2**20
        if mib > self.max_audio_mb:
            what = "once read" if seconds == duration else (
                f"held at once (a piece of the {duration:.0f} s file)")
            raise ValueError(
                f"{mib:.0f} MiB of samples {what} ({seconds:.0f} s x {rate} Hz x "
                f"{channels} channels, float32), more than AudioLimits.max_audio_mb="
                f"{self.max_audio_mb:g}; split, downmix or resample it first")


def shown_path(path: str | Path) -> str:
    """``path`` as printable text: bytes of the name that are not UTF-8 as ``\\xNN``."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def safe_name(name: str | bytes) -> str:
    """``name`` as UTF-8 text without whitespace or control characters: those become ``_``,
    bytes that are not UTF-8 ``%XX`` (``"caf\\udce9 x"`` from a Latin-1 file name ->
    ``caf%E9_x``). For utterance ids and the test-set names in result file names."""
    raw = os.fsencode(name)
    text = raw.decode("utf-8", "surrogateescape")
    return "".join(f"%{ord(c) - 0xDC00:02X}" if 0xDC80 <= ord(c) <= 0xDCFF
                   else "_" if c.isspace() or not c.isprintable() else c for c in text)


def utterance_id(path: str | Path) -> str:
    """The utterance id of an audio file: its stem (the name without its last extension)
    made safe by :func:`safe_name` (``"my talk.wav"`` -> ``my_talk``, ``b"caf\\xe9.wav"`` ->
    ``caf%E9``): result files separate fields by whitespace and are UTF-8."""
    return safe_name(Path(path).stem)


def id_clashes(paths: Sequence[str | Path]) -> dict[str, list[str | Path]]:
    """``{utterance id: its paths}`` of the ids (:func:`utterance_id`) that more than one of
    ``paths`` has, in the order of ``paths``: files that would share one result line."""
    by_id: dict[str, list[str | Path]] = {}
    for path in paths:
        by_id.setdefault(utterance_id(path), []).append(path)
    return {utt: ps for utt, ps in by_id.items() if len(ps) > 1}


def ffmpeg_available() -> bool:
    """Whether the ``ffmpeg`` and ``ffprobe`` commands are installed."""
    return shutil.which("ffmpeg") is not None and shutil.which("ffprobe") is not None


def _first_line(text: str) -> str:
    return next((x.strip() for x in text.splitlines() if x.strip()), "").rstrip(".")


def _soundfile_info(path: Path) -> tuple[sf._SoundFileInfo | None, str]:
    """libsndfile's header (with its parser's log), or ``None`` and why it cannot read it."""
    try:
        return sf.info(os.fsencode(path), verbose=True), ""
    except (RuntimeError, OSError) as e:  # LibsndfileError is a RuntimeError
        msg = getattr(e, "error_string", "") or str(e)
        return None, _first_line(msg.split(": ", 1)[-1] if "Error opening" in msg else msg)


def _truncation(info: sf._SoundFileInfo, path: Path) -> None:
    """Refuse an uncompressed file shorter than its header declares; warn about an Ogg file
    without an end-of-stream mark."""
    log = info.extra_info or ""
    sizes = sorted(_SIZE_LINE.findall(log), key=lambda m: m[0] in ("RIFF", "riff", "FORM"))
    for _, declared, present in sizes[:1]:  # the data chunk's when the log has it
        declared, present = int(declared), int(present)
        if declared < _PLACEHOLDER_SIZE and declared - present > 64:
            have = info.frames / info.samplerate
            raise ValueError(
                f"truncated: its header declares {declared} bytes of audio but the file holds "
                f"{present} (about {have:.2f} of {have * declared / max(present, 1):.2f} s; "
                "e.g. an interrupted copy): copy it again, or rewrite its header to decode "
                "what is there (e.g. sox IN OUT)")
    if "lacks an end-of-stream bit" in log:
        logger.warning("%s: the Ogg stream has no end-of-stream mark (truncated?); decoding "
                       "the %.2f s it holds", shown_path(path), info.frames / info.samplerate)


def _ffprobe(path: Path) -> tuple[int, int, float | None, float | None]:
    """``(sampling rate, channels, stream duration, container duration)`` of the first audio
    stream; a duration is ``None`` where ffprobe has none (a raw ADTS / MP3 stream's container
    duration is only an estimate from its bit rate)."""
    cmd = ["ffprobe", "-v", "error", "-select_streams", "a:0", "-show_entries",
           "stream=sample_rate,channels,duration:format=duration", "-of", "json", str(path)]
    out = subprocess.run(cmd, capture_output=True, timeout=_PROBE_TIMEOUT_S)
    if out.returncode != 0:
        raise ValueError(_first_line(out.stderr.decode("utf-8", "replace")
                                     .replace(str(path) + ": ", "")) or "ffprobe failed")
    info = json.loads(out.stdout or b"{}")
    streams = info.get("streams") or []
    if not streams:
        raise ValueError("no audio stream")

    def seconds(value: object) -> float | None:
        return float(value) if value not in (None, "N/A") else None

    stream = streams[0]
    return (int(stream["sample_rate"]), int(stream["channels"]), seconds(stream.get("duration")),
            seconds((info.get("format") or {}).get("duration")))


def _ffmpeg_command(path: Path, num_samples: int | None = None, seconds: float | None = None
                    ) -> str:
    """The shell command decoding ``path`` to a mono float32 WAV on stdout (exactly
    ``num_samples`` samples when given; at most ``seconds`` when given)."""
    cmd = f"ffmpeg -nostdin -v error -i {shlex.quote(str(path))} -map 0:a:0 -ac 1"
    if num_samples is not None:
        cmd += f" -af apad=whole_len={num_samples},atrim=end_sample={num_samples}"
    if seconds is not None:
        cmd += f" -t {seconds:.3f}"
    return cmd + " -c:a pcm_f32le -f wav -"


def _count_samples(path: Path, seconds: float) -> int:
    """Mono samples ffmpeg decodes from ``path`` within ``seconds`` (read in chunks; nothing
    kept)."""
    cmd = _ffmpeg_command(path, seconds=seconds).replace("-f wav", "-f f32le")
    proc = subprocess.Popen(cmd, shell=True, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    total = 0
    assert proc.stdout is not None
    for chunk in iter(lambda: proc.stdout.read(1 << 20), b""):
        total += len(chunk)
    proc.wait()
    return total // 4


def _ffmpeg_recording(path: Path, recording_id: str, limits: AudioLimits) -> Recording:
    """A recording read through the ``ffmpeg`` command (mono), its length from the stream's
    duration, else counted by decoding (at most the longest length ``limits`` allow)."""
    rate, channels, duration, estimate = _ffprobe(path)
    limits.check(rate, channels, duration or estimate or 0.0)
    if duration is not None:
        num_samples = round(duration * rate)
    else:
        cap = limits.max_audio_mb * 2**20 / 4 / rate / channels
        cap = min(cap, limits.max_duration) if limits.max_duration is not None else cap
        num_samples = _count_samples(path, cap + 1.0)
        limits.check(rate, channels, num_samples / rate)
    if num_samples == 0:
        raise ValueError("ffmpeg decodes no samples from it")
    source = AudioSource(type="command", channels=[0],
                         source=_ffmpeg_command(path, num_samples=num_samples))
    return Recording(id=recording_id, sources=[source], sampling_rate=rate,
                     num_samples=num_samples, duration=num_samples / rate)


def _piped_recording(info: sf._SoundFileInfo, path: Path, recording_id: str) -> Recording:
    """A recording of a file whose name is not UTF-8, which soundfile cannot open by name:
    read through ``cat`` (lhotse's ``command`` source), its header from ``info``."""
    source = AudioSource(type="command", channels=list(range(info.channels)),
                         source=f"cat -- {shlex.quote(str(path))}")
    return Recording(id=recording_id, sources=[source], sampling_rate=info.samplerate,
                     num_samples=info.frames, duration=info.frames / info.samplerate)


def probe_recording(path: str | Path, recording_id: str, limits: AudioLimits = AudioLimits(),  # noqa: B008
                    in_pieces: bool = False) -> Recording:
    """A lhotse ``Recording`` of an audio file from its header alone, checked against
    ``limits`` (see the module docstring): soundfile, then lhotse's other backends, then the
    ``ffmpeg`` command. ``in_pieces``: the caller reads it in pieces (:func:`cut_features`),
    so ``limits.max_audio_mb`` bounds a piece (:func:`held_seconds`); else the whole file.

    Raises:
      ValueError: one line (without the path) saying why the file cannot be used and what
        to do: empty, unreadable, not audio any reader knows, truncated, or outside
        ``limits``.
    """
    path = Path(path)
    with open(path, "rb") as f:  # a missing or unreadable file: OSError with its reason
        if not f.read(1):
            raise ValueError("empty file (0 bytes)")
    info, sf_error = _soundfile_info(path)
    if info is not None:
        _truncation(info, path)
    try:
        if info is not None and shown_path(path) != str(path):  # a name that is not UTF-8
            return _checked(_piped_recording(info, path, recording_id), limits, in_pieces)
        rec = Recording.from_file(path, recording_id=recording_id)
    except (AudioLoadingError, RuntimeError, OSError, ValueError, EOFError) as e:
        if not ffmpeg_available():
            raise ValueError(f"not audio that soundfile can read ({sf_error or e}); install "
                             "ffmpeg (e.g. apt-get install ffmpeg) to read more formats"
                             ) from None
        try:
            rec = _ffmpeg_recording(path, recording_id, limits)
        except (ValueError, KeyError, OSError, subprocess.SubprocessError) as fe:
            raise ValueError(f"not audio that soundfile or ffmpeg can read (soundfile: "
                             f"{sf_error or 'cannot read it'}; ffmpeg: {fe})") from None
    return _checked(rec, limits, in_pieces)


def _checked(rec: Recording, limits: AudioLimits, in_pieces: bool) -> Recording:
    limits.check(rec.sampling_rate, rec.num_channels, rec.duration,
                 held_seconds(rec) if in_pieces else None)
    return rec


def held_seconds(rec: Recording) -> float | None:
    """Seconds of ``rec`` in memory at once when its features are computed
    (:func:`cut_features`): one piece (:data:`FEATURE_PIECE_SECONDS` and its margins) when
    lhotse reads a range of it without the rest (every source a file soundfile opens: it
    seeks), so a file of any length fits :attr:`AudioLimits.max_audio_mb`; ``None`` (all of
    it) for a command's output (ffmpeg, ``cat``), which is read whole."""
    for src in rec.sources:
        if src.type != "file":
            return None
        try:
            sf.info(src.source)
        except (sf.LibsndfileError, RuntimeError, OSError, TypeError):
            return None
    return FEATURE_PIECE_SECONDS + 1.0


def _relative_hint(path: str | Path) -> str:
    """For a relative path: from where it was looked for."""
    if os.path.isabs(path):
        return ""
    return f" (a relative path: looked for from the current directory {shown_path(os.getcwd())})"


def _recordings(cut: Cut) -> Iterator[Recording]:
    if isinstance(cut, MixedCut):
        for track in cut.tracks:
            yield from _recordings(track.cut)
    elif getattr(cut, "recording", None) is not None:
        yield cut.recording


def mono_samples(rec: Recording) -> np.ndarray:
    """The samples of a recording as one channel (the average of its channels): float32
    ``(num_samples,)``."""
    return np.atleast_2d(_mono(rec.to_cut()).load_audio())[0]


def _mono(cut: Cut) -> Cut:
    """A one-channel cut of ``cut``: itself, or the average of its channels."""
    if not isinstance(cut, MultiCut):
        return cut
    channels = cut.to_mono(mono_downmix=False)
    scale = 1.0 / len(channels)
    return MixedCut(id=cut.id, tracks=[
        MixTrack(cut=c.perturb_volume(scale, affix_id=False)) for c in channels])


def _stored_features(extractor: FeatureExtractor, feats: np.ndarray | _NpyStream, num_samples: int,
                     rate: int, start: float, writer: FeaturesWriter, cut_id: str,
                     stored_key: str | None = None) -> Features:
    """``feats`` (of ``num_samples`` samples at ``rate``) stored by ``writer`` under a key
    derived from ``cut_id`` (lhotse's ``extract_from_samples_and_store`` draws a random one):
    the same audio gives the same manifest entry on every run, which is what a decode job's
    resume compares (:func:`k2dec.job.resume.cut_digest`). ``stored_key``: ``feats`` is
    already in ``writer``'s store under that key (:func:`_streamed_output`)."""
    key = hashlib.blake2b(cut_id.encode(), digest_size=16).hexdigest()
    return Features(start=start, duration=round(num_samples / rate, ndigits=8),
                    type=extractor.name, num_frames=feats.shape[0],
                    num_features=feats.shape[1], frame_shift=extractor.frame_shift,
                    sampling_rate=rate, channels=0, storage_type=writer.name,
                    storage_path=str(writer.storage_path),
                    storage_key=stored_key or writer.write(key, feats))


class _NpyStream:
    """A float32 ``.npy`` file of ``shape`` written front to back with ordinary writes
    (``out[f0:f1] = frames`` in order, then :meth:`close`): a long recording's features go to
    disk piece by piece and are never in this process's memory. (A memory-mapped file would
    do the same on disk, but every page written stays resident while it is mapped: 148 MB
    for 77 minutes, the peak RSS's growth with a recording's length.)"""

    def __init__(self, path: Path, shape: tuple[int, int], key: str) -> None:
        self.shape = shape
        self.key = key
        self._next = 0
        self._file = open(path, "wb")  # noqa: SIM115 (closed by close())
        np.lib.format.write_array_header_1_0(
            self._file, {"descr": "<f4", "fortran_order": False, "shape": shape})

    def __setitem__(self, rows: slice, frames: np.ndarray) -> None:
        if rows.start != self._next or frames.shape != (rows.stop - rows.start, self.shape[1]):
            raise ValueError(f"_NpyStream: rows {rows.start}:{rows.stop} written out of order "
                             f"(next is {self._next}) or of shape {frames.shape}")
        self._file.write(np.ascontiguousarray(frames, dtype="<f4").tobytes())
        self._next = rows.stop

    def close(self) -> None:
        self._file.close()


def _streamed_output(writer: FeaturesWriter, cut_id: str
                     ) -> tuple[Callable[[int, int], _NpyStream], list[str]] | None:
    """For a local ``NumpyFilesWriter``: an allocator of the features' ``.npy`` file where
    ``writer.write`` would put it, written front to back (:class:`_NpyStream`), and a list
    that receives the stream it opens (its ``key`` is the storage key; the caller closes
    it); ``None`` for other writers."""
    if not isinstance(writer, NumpyFilesWriter) or "://" in str(writer.storage_path):
        return None
    key = hashlib.blake2b(cut_id.encode(), digest_size=16).hexdigest() + ".npy"
    opened: list[_NpyStream] = []

    def alloc(frames: int, dim: int) -> _NpyStream:
        folder = Path(writer.storage_path) / key[:3]
        folder.mkdir(parents=True, exist_ok=True)
        opened.append(_NpyStream(folder / key, (frames, dim), f"{key[:3]}/{key}"))
        return opened[-1]
    return alloc, opened


#: Seconds of audio read at a time when computing a recording's features
#: (:func:`piecewise_features`): memory for samples and the extractor's intermediates is
#: that of one piece whatever the recording's length. Short on purpose: with 60 s pieces
#: (about 50 MB of the extractor's torch intermediates each) the allocator's heap settled
#: 60-90 MB higher after a few pieces than after one or two (a 77-minute file's peak RSS
#: 383 MB against a 1-minute file's 324); with 10 s pieces both are within 3 MB (0.2 s of
#: margins recomputed per piece: 2%).
FEATURE_PIECE_SECONDS = 10.0

#: Feature frames read beyond each side of a piece and dropped, so that every kept frame
#: sees the samples it would see in the whole recording (a frame spans 2.5 shifts; the
#: rest absorbs a resampler's edge).
_PIECE_MARGIN_FRAMES = 10


def _empty(frames: int, dim: int) -> np.ndarray:
    return np.empty((frames, dim), dtype=np.float32)


def piecewise_features(cut: Cut, extractor: FeatureExtractor, where: str,
                       piece_seconds: float = FEATURE_PIECE_SECONDS,
                       alloc: Callable[[int, int], Any] | None = None
                       ) -> tuple[Any, int]:
    """The features of a one-channel ``cut`` (at the extractor's rate), its audio read
    ``piece_seconds`` at a time (lhotse reads the range of the file), each piece's frames
    computed with ``_PIECE_MARGIN_FRAMES`` of context on each side that are then dropped:
    the frames are those of the whole recording (``snip_edges=False``: frame ``i`` is
    centred on sample ``i * shift``), to float rounding.

    ``alloc(num_frames, num_features)`` gives the array the frames are written to, in order
    (``out[f0:f1] = frames``; e.g. a file written front to back; default ``np.empty``) when
    the cut is longer than one piece.

    Returns:
      ``(float32 [num_frames, num_features], number of samples)``: the array (what ``alloc``
      gave, for a cut longer than one piece).

    Raises:
      ValueError: NaN or infinite samples (:func:`check_sample_values`; its range warning
        names ``where``, once, with the recording's peak).
    """
    rate = int(extractor.config.sampling_rate)
    shift = round(extractor.frame_shift * rate)
    if cut.duration <= piece_seconds:
        samples = np.atleast_2d(cut.load_audio())
        check_sample_values(samples, where)
        return extractor.extract(samples=samples, sampling_rate=rate), samples.shape[1]
    total = cut.num_samples
    frames = (total + shift // 2) // shift
    step = max(1, round(piece_seconds * rate / shift))
    out: np.ndarray | None = None  # filled piece by piece (no list of pieces to join)
    peak = 0.0
    for f0 in range(0, frames, step):
        f1 = min(frames, f0 + step)
        a = max(0, f0 - _PIECE_MARGIN_FRAMES) * shift
        b = min(total, (f1 + _PIECE_MARGIN_FRAMES) * shift)
        piece = cut.truncate(offset=a / rate, duration=(b - a) / rate, preserve_id=True)
        samples = np.atleast_2d(piece.load_audio())
        if not np.isfinite(samples).all():
            check_sample_values(samples, where)  # raises
        peak = max(peak, float(np.abs(samples).max()) if samples.size else 0.0)
        feats = extractor.extract(samples=samples, sampling_rate=rate)
        if out is None:
            out = (alloc or _empty)(frames, feats.shape[1])
        out[f0:f1] = feats[f0 - a // shift: f1 - a // shift]
    if peak > 1.0:
        check_sample_values(np.array([peak], dtype=np.float32), where)
    assert out is not None
    return out, total


@register_reader
class _MappedNumpyFilesReader(NumpyFilesReader):
    """lhotse's ``numpy_files`` reader that maps the file and copies only the frames asked
    for (lhotse's loads the whole array, then slices it)."""

    name = "k2dec_numpy_files_mapped"

    def __init__(self, storage_path: str | Path, *args: Any, **kwargs: Any) -> None:
        super().__init__(storage_path, *args, **kwargs)
        self._folder = Path(storage_path)

    def read(self, key: str, left_offset_frames: int = 0,
             right_offset_frames: int | None = None) -> np.ndarray:
        arr = np.load(self._folder / key, mmap_mode="r", allow_pickle=False)
        return np.array(arr[left_offset_frames:right_offset_frames])


def load_feature_range(cut: Cut) -> np.ndarray:
    """``cut.load_features()`` (float32 ``[num_frames, num_features]``), reading only the
    cut's frames from a local ``numpy_files`` store (a segment of a long recording costs its
    own frames, not the whole recording's); other stores as lhotse reads them."""
    feats = getattr(cut, "features", None)
    if (isinstance(cut, MonoCut) and feats is not None and feats.storage_type == "numpy_files"
            and "://" not in str(feats.storage_path)):
        cut = fastcopy(cut, features=fastcopy(feats, storage_type=_MappedNumpyFilesReader.name))
    return cut.load_features()


def check_sample_values(samples: np.ndarray, where: str) -> None:
    """The check of every waveform k2dec computes features of (files on the CLI and in
    jobs, arrays and tensors given to the Python API): NaN or infinite samples are an error,
    samples beyond [-1, 1] (int16 values stored as floats, a gain applied twice) a warning
    naming ``where`` and the peak: such audio decodes, to garbage.

    Args:
      samples: float samples, any shape.
      where: the file or input, for the messages.

    Raises:
      ValueError: NaN or infinite samples (the message gives how many, not ``where``:
        callers that report failures by file prefix it themselves).
    """
    bad = int(np.count_nonzero(~np.isfinite(samples)))
    if bad:
        raise ValueError(f"{bad} of {samples.size} samples are NaN or infinite (a float file "
                         "written from broken data?); fix or remove the file")
    peak = float(np.abs(samples).max()) if samples.size else 0.0
    if peak > 1.0:
        logger.warning("%s: samples reach %.4g; k2dec expects floats in [-1, 1] (int16 values "
                       "should be divided by 32768): the words decoded are likely wrong", where,
                       peak)


def cut_features(cut: Cut, extractor: FeatureExtractor, writer: FeaturesWriter,
                 limits: AudioLimits = AudioLimits()) -> Cut:  # noqa: B008
    """``cut`` with features (float32 ``[num_frames, num_features]``) computed by
    ``extractor`` from its audio and stored by ``writer``: the recording checked against
    ``limits`` first, resampled (lazily, by lhotse) to the extractor's rate, its channels
    averaged into one.

    Returns:
      a ``MonoCut`` with the cut's id, duration and supervisions (and its recording, for a
      one-channel cut of one recording).

    Raises:
      ValueError: outside ``limits``, shorter than a feature frame, or NaN / infinite
        samples (one line, without the path); what lhotse raises for audio it cannot read
        (:data:`AUDIO_READ_ERRORS`).
    """
    for rec in _recordings(cut):
        limits.check(rec.sampling_rate, rec.num_channels, cut.duration, held_seconds(rec))
        for src in rec.sources:
            if src.type == "file" and not os.path.isfile(src.source):
                raise ValueError(f"its audio file {shown_path(src.source)} does not exist"
                                 + _relative_hint(src.source))
    rate = int(extractor.config.sampling_rate)
    frame = float(extractor.config.frame_length)
    if cut.duration < frame:
        samples = round(cut.duration * cut.sampling_rate)
        raise ValueError(f"too short: {samples} samples ({cut.duration:g} s), less than one "
                         f"{frame:g} s feature frame")
    mono = _mono(cut.resample(rate) if cut.sampling_rate != rate else cut)
    sources = [src.source for rec in _recordings(cut) for src in rec.sources
               if src.type == "file"]
    where = shown_path(sources[0]) if sources else cut.id
    alloc, opened = _streamed_output(writer, cut.id) or (None, [])
    try:
        arr, num_samples = piecewise_features(mono, extractor, where, FEATURE_PIECE_SECONDS,
                                              alloc)
    finally:
        for stream in opened:
            stream.close()
    stored = opened[0].key if opened else None
    start = mono.start if isinstance(mono, MonoCut) else 0.0
    feats = _stored_features(extractor, arr, num_samples, rate, start, writer, cut.id, stored)
    del arr
    if isinstance(mono, MonoCut) and isinstance(cut, MonoCut):
        return fastcopy(mono, features=fastcopy(feats, recording_id=mono.recording_id))
    rec_id = next((r.id for r in _recordings(cut)), None)
    return MonoCut(id=cut.id, start=0.0, duration=feats.duration, channel=0,
                   supervisions=list(cut.supervisions),
                   features=fastcopy(feats, recording_id=rec_id), custom=_whole_file(cut))


def _whole_file(cut: Cut) -> dict[str, Any] | None:
    """``{"audio_file": path}`` for a multi-channel cut of one file's recording (the
    downmixed cut made of it has no recording: the path is what a long one's VAD reads,
    channels averaged), with ``"audio_offset"`` (seconds) when the cut starts after the
    file's start; else ``None``."""
    recs = list(_recordings(cut))
    if not isinstance(cut, MultiCut) or len(recs) != 1 or len(recs[0].sources) != 1:
        return None
    src = recs[0].sources[0]
    if src.type != "file" or cut.start + cut.duration > recs[0].duration + 0.02:
        return None
    if cut.start > 1e-6:
        return {"audio_file": src.source, "audio_offset": float(cut.start)}
    return {"audio_file": src.source}
