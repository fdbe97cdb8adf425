"""Malformed and unusual audio files in an audio folder: each is either decoded (a cut with
the right duration) or a failure whose one-line reason names the file and says what is wrong,
while a good file beside it is always decoded. Nothing is dropped silently and nothing is
read whole before its header has been checked (a 1 GB WAV or a header claiming 1 Hz is
refused from the header, in bounded memory).

The files are made here: numpy / soundfile for WAV variants, hand-written headers for
implausible ones, ffmpeg for .m4a / .webm / .wma / .aac (skipped without it), symlinks and
FIFOs for the folder cases."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from k2dec.data import AudioLimits, cuts_from_audio_dir, scan_audio_dir, utterance_id

RATE = 16000
needs_ffmpeg = pytest.mark.skipif(shutil.which("ffmpeg") is None or shutil.which("ffprobe")
                                  is None, reason="ffmpeg is not installed (Debian: ffmpeg)")
needs_sox = pytest.mark.skipif(shutil.which("sox") is None, reason="sox is not installed")


def noise(seconds: float, channels: int = 1, seed: int = 0) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((int(RATE * seconds), channels)) * 0.1
    return x.astype(np.float32)[:, 0] if channels == 1 else x.astype(np.float32)


def wav_bytes(seconds: float = 1.0, rate: int = RATE, channels: int = 1) -> bytes:
    """A 16-bit PCM WAV whose header says ``rate`` and ``channels`` (the data is noise)."""
    data = (noise(seconds) * 32767).astype("<i2").tobytes()
    block = 2 * channels
    data = data[: len(data) // block * block]
    fmt = struct.pack("<HHIIHH", 1, channels, rate, rate * block, block, 16)
    return (b"RIFF" + struct.pack("<I", 36 + len(data)) + b"WAVE" + b"fmt "
            + struct.pack("<I", 16) + fmt + b"data" + struct.pack("<I", len(data)) + data)


def sparse_wav(path: Path, data_bytes: int, rate: int = RATE) -> None:
    """A WAV whose header declares ``data_bytes`` of 16-bit mono audio, the file that long but
    sparse (no disk used): a "1 GB WAV" in a few KB."""
    fmt = struct.pack("<HHIIHH", 1, 1, rate, rate * 2, 2, 16)
    head = (b"RIFF" + struct.pack("<I", 36 + data_bytes) + b"WAVE" + b"fmt "
            + struct.pack("<I", 16) + fmt + b"data" + struct.pack("<I", data_bytes))
    with open(path, "wb") as f:
        f.write(head)
        f.truncate(len(head) + data_bytes)


def ffmpeg(src: Path, dst: Path, *opts: str) -> None:
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-i", str(src), *opts, str(dst)],
                   check=True, capture_output=True)


def truncated(path: Path, fraction: float = 0.5) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * fraction)])


# Each case writes its file(s) into a folder and names the expected outcome: ("ok", seconds)
# for a cut of that duration, or ("fail", text) for a failure whose reason contains text.
Case = Callable[[Path], tuple[str, str, object]]


def _wav(name: str, x: np.ndarray, subtype: str = "PCM_16", rate: int = RATE):
    def make(d: Path):
        sf.write(d / name, x, rate, subtype=subtype)
    return make


def _raw(name: str, data: bytes):
    def make(d: Path):
        (d / name).write_bytes(data)
    return make


def _sox_truncated(ending: str, fraction: float = 0.5):
    def make(d: Path):
        sf.write(d / "src.wav", noise(2.0), RATE)
        subprocess.run(["sox", str(d / "src.wav"), str(d / f"cut{ending}")], check=True,
                       capture_output=True)
        (d / "src.wav").unlink()
        truncated(d / f"cut{ending}", fraction)
    return make


def _ffmpeg_made(name: str, *opts: str, channels: int = 1):
    def make(d: Path):
        sf.write(d / "src.wav", noise(2.0, channels), RATE)
        ffmpeg(d / "src.wav", d / name, *opts)
        (d / "src.wav").unlink()
    return make


def _streamed_wav(d: Path) -> None:
    """A WAV written to a pipe by ffmpeg: its sizes are the 0xFFFFFFFF placeholder."""
    sf.write(d / "src.wav", noise(2.0), RATE)
    out = subprocess.run(["ffmpeg", "-v", "error", "-i", str(d / "src.wav"), "-f", "wav", "-"],
                         check=True, capture_output=True).stdout
    assert out[4:8] == b"\xff\xff\xff\xff"
    (d / "streamed.wav").write_bytes(out)
    (d / "src.wav").unlink()


NAN = noise(1.0).copy()
NAN[100:200] = np.nan
INF = noise(1.0).copy()
INF[5] = np.inf

CASES: dict[str, tuple[Callable[[Path], None], str, str, object]] = {
    # name: (make, file stem, outcome, seconds or reason text)
    "rate-1Hz": (_raw("a.wav", wav_bytes(rate=1)), "a", "fail",
                 "implausible sampling rate 1 Hz"),
    "rate-100Hz": (_raw("a.wav", wav_bytes(rate=100)), "a", "fail",
                   "implausible sampling rate 100 Hz"),
    "rate-3999Hz": (_raw("a.wav", wav_bytes(rate=3999)), "a", "fail",
                    "implausible sampling rate 3999 Hz"),
    "rate-1MHz": (_raw("a.wav", wav_bytes(rate=1_000_000)), "a", "fail",
                  "implausible sampling rate 1000000 Hz"),
    "rate-2GHz": (_raw("a.wav", wav_bytes(rate=2_000_000_000)), "a", "fail",
                  "implausible sampling rate"),
    "rate-8kHz": (_raw("a.wav", wav_bytes(seconds=1.0, rate=8000)), "a", "ok", 2.0),
    "65-channels": (_raw("a.wav", wav_bytes(seconds=0.65, channels=65)), "a", "fail",
                    "65 channels, more than AudioLimits.max_channels=64"),
    "1GB-wav": (lambda d: sparse_wav(d / "a.wav", 1 << 30), "a", "fail",
                "too long: 33554.4 s of audio, more than max_duration=200 s"),
    "nan-samples": (_wav("a.wav", NAN, "FLOAT"), "a", "fail",
                    "100 of 16000 samples are NaN or infinite"),
    "inf-sample": (_wav("a.wav", INF, "FLOAT"), "a", "fail",
                   "1 of 16000 samples are NaN or infinite"),
    "all-nan": (_wav("a.wav", np.full(16000, np.nan, np.float32), "FLOAT"), "a", "fail",
                "16000 of 16000 samples are NaN"),
    "truncated-wav-half": (_raw("a.wav", wav_bytes(3.2)[: 44 + 51200]), "a", "fail",
                           "truncated: its header declares 102400 bytes of audio but the file "
                           "holds 51200 (about 1.60 of 3.20 s"),
    "truncated-wav-90%": (_raw("a.wav", wav_bytes(2.0)[: 44 + 57600]), "a", "fail",
                          "truncated: its header declares 64000 bytes"),
    "truncated-float-wav": (lambda d: (sf.write(d / "a.wav", noise(2.0), RATE, "FLOAT"),
                                       truncated(d / "a.wav", 0.6)), "a", "fail", "truncated"),
    "truncated-aiff": (_sox_truncated(".aiff"), "cut", "fail", "truncated"),
    "truncated-au": (_sox_truncated(".au"), "cut", "fail", "truncated"),
    "truncated-w64": (_sox_truncated(".w64"), "cut", "fail", "truncated"),
    "truncated-flac": (_sox_truncated(".flac"), "cut", "fail", "truncated or corrupt"),
    "streamed-wav-placeholder-sizes": (_streamed_wav, "streamed", "ok", 2.0),
    "corrupt-wav": (_raw("a.wav", b"RIFF" + bytes(range(256)) * 8), "a", "fail",
                    "not audio that soundfile"),
    "corrupt-flac": (_raw("a.flac", b"fLaC" + bytes(range(256)) * 8), "a", "fail",
                     "not audio that soundfile"),
    "text-as-wav": (_raw("a.wav", b"hello, this is not audio\n" * 100), "a", "fail",
                    "not audio that soundfile"),
    "corrupt-m4a": (_raw("a.m4a", bytes(range(256)) * 8), "a", "fail", "not audio"),
    "empty-file": (_raw("a.wav", b""), "a", "fail", "empty file (0 bytes)"),
    "header-only": (_wav("a.wav", np.zeros(0, np.float32)), "a", "fail",
                    "too short: 0 samples"),
    "30-samples": (_wav("a.wav", np.zeros(30, np.float32)), "a", "fail",
                   "too short: 30 samples (0.001875 s)"),
    "m4a-aac": (_ffmpeg_made("a.m4a", "-c:a", "aac"), "a", "ok", 2.0),
    "m4a-aac-stereo": (_ffmpeg_made("a.m4a", "-c:a", "aac", channels=2), "a", "ok", 2.0),
    "adts-aac": (_ffmpeg_made("a.aac", "-c:a", "aac"), "a", "ok", 2.0),
    "webm-opus": (_ffmpeg_made("a.webm", "-c:a", "libopus"), "a", "ok", 2.0),
    "wma": (_ffmpeg_made("a.wma", "-c:a", "wmav2"), "a", "ok", 2.0),
    "m4a-44k": (_ffmpeg_made("a.m4a", "-c:a", "aac", "-ar", "44100"), "a", "ok", 2.0),
}
FFMPEG_CASES = {"m4a-aac", "m4a-aac-stereo", "adts-aac", "webm-opus", "wma", "m4a-44k",
                "streamed-wav-placeholder-sizes"}
SOX_CASES = {"truncated-aiff", "truncated-au", "truncated-w64", "truncated-flac"}


def _params():
    for name in CASES:
        marks = [needs_ffmpeg] if name in FFMPEG_CASES else [needs_sox] if name in SOX_CASES \
            else []
        yield pytest.param(name, marks=marks, id=name)


@pytest.mark.parametrize("name", _params())
def test_each_file_decodes_or_fails_with_a_reason_naming_it(name, tmp_path):
    make, stem, outcome, expect = CASES[name]
    d = tmp_path / "in"
    d.mkdir()
    make(d)
    sf.write(d / "good.wav", noise(1.0, seed=1), RATE)
    result = cuts_from_audio_dir(d, tmp_path / "feats", progress=False,
                                 limits=AudioLimits(max_duration=200.0))
    cuts = {c.id: c for c in result.cuts}
    assert "good" in cuts and cuts["good"].num_frames == 100
    path = next(p for p in d.iterdir() if p.stem == stem)
    if outcome == "ok":
        assert not result.failed, result.failures
        # lossy codecs add their encoder delay and frame padding (raw ADTS AAC: 0.11 s)
        slack = 0.15 if name in FFMPEG_CASES else 0.001
        assert cuts[stem].duration == pytest.approx(expect, abs=slack)
        assert cuts[stem].load_features().shape[1] == 80
        assert np.isfinite(cuts[stem].load_features()).all()
    else:
        assert stem not in cuts
        reason = result.failures[stem]
        assert reason.startswith(f"{path}: ") and expect in reason, reason
        assert "\n" not in reason and len(reason) < 400, reason


def test_a_1_hz_header_is_refused_in_bounded_memory(tmp_path):
    """48000 samples "at 1 Hz" (13 hours) would be resampled to 768M samples; a 1 GB WAV with
    a valid header (33,554 s) that is read whole (a name that is not UTF-8: read through
    ``cat``, which cannot seek) and --max-duration raised to cover it would be held whole.
    Both are refused from their headers: the process stays far below 1 GB."""
    d = tmp_path / "in"
    d.mkdir()
    (d / "onehz.wav").write_bytes(wav_bytes(3.0, rate=1))
    sparse_wav(d / os.fsdecode(b"huge\xff.wav"), 1 << 30)
    code = (
        "import resource, sys\n"
        "from k2dec.data import AudioLimits, cuts_from_audio_dir\n"
        "r = cuts_from_audio_dir(sys.argv[1], sys.argv[2], progress=False,\n"
        "                        limits=AudioLimits(max_duration=1e5))\n"
        "print(sorted(r.failures.items()))\n"
        "print('peak', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n")
    out = subprocess.run([sys.executable, "-c", code, str(d), str(tmp_path / "f")],
                         capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])})
    assert "implausible sampling rate 1 Hz" in out.stdout
    assert "MiB of samples once read (33554 s x 16000 Hz x 1 channels" in out.stdout
    assert "AudioLimits.max_audio_mb=1024" in out.stdout
    peak_kb = int(out.stdout.split("peak")[1])
    assert peak_kb < 1024 * 1024, f"peak RSS {peak_kb / 1024:.0f} MB"


def test_without_ffmpeg_an_m4a_says_to_install_it(tmp_path, monkeypatch):
    if shutil.which("ffmpeg") is None:
        pytest.skip("needs ffmpeg to make the file")
    d = tmp_path / "in"
    d.mkdir()
    _ffmpeg_made("phone.m4a", "-c:a", "aac")(d)
    monkeypatch.setenv("PATH", str(tmp_path / "no-tools"))
    result = cuts_from_audio_dir(d, tmp_path / "feats", progress=False)
    reason = result.failures["phone"]
    assert reason.startswith(str(d / "phone.m4a")) and "install ffmpeg" in reason, reason


def test_m4a_features_match_the_wav_they_were_made_from(tmp_path):
    if shutil.which("ffmpeg") is None:
        pytest.skip("needs ffmpeg")
    d = tmp_path / "in"
    d.mkdir()
    t = np.arange(2 * RATE) / RATE
    tone = (0.3 * np.sin(2 * np.pi * 300 * t) * (1 + np.sin(2 * np.pi * 3 * t))).astype("f4")
    sf.write(d / "tone.wav", tone, RATE)
    ffmpeg(d / "tone.wav", d / "tone_aac.m4a", "-c:a", "aac", "-b:a", "128k")
    feats = {c.id: c.load_features()
             for c in cuts_from_audio_dir(d, tmp_path / "f", progress=False).cuts}
    a, b = feats["tone"], feats["tone_aac"]
    assert a.shape == b.shape
    loud = a.mean(axis=1) > np.median(a.mean(axis=1))  # the codec drops inaudible detail
    assert np.abs(a[loud, :40] - b[loud, :40]).mean() < 0.5


# -- the folder: symlinks, FIFOs, names --------------------------------------------------


def _folder(tmp_path: Path) -> Path:
    d = tmp_path / "in"
    d.mkdir()
    sf.write(d / "good.wav", noise(1.0), RATE)
    return d


@pytest.mark.parametrize("make, stem, expect", [
    (lambda d: os.symlink(d / "gone.wav", d / "dangling.wav"), "dangling",
     "dangling symlink: it points to"),
    (lambda d: os.symlink("loop.wav", d / "loop.wav"), "loop", "symlink loop"),
    (lambda d: (os.symlink("b.flac", d / "a.flac"), os.symlink("a.flac", d / "b.flac")), "a",
     "symlink loop"),
    (lambda d: os.mkfifo(d / "fifo.wav"), "fifo", "not a regular file"),
], ids=["dangling", "self-loop", "two-link-loop", "fifo"])
def test_entries_that_cannot_be_opened_are_failures(tmp_path, make, stem, expect):
    d = _folder(tmp_path)
    make(d)
    result = cuts_from_audio_dir(d, tmp_path / "feats", progress=False)
    assert [c.id for c in result.cuts] == ["good"]
    reason = result.failures[stem]
    assert reason.startswith(str(d / f"{stem}.")) and expect in reason, reason


def test_symlinks_to_files_and_folders_are_followed_once(tmp_path):
    d = _folder(tmp_path)
    outside = tmp_path / "elsewhere"
    (outside / "deep").mkdir(parents=True)
    sf.write(outside / "deep" / "far.wav", noise(0.5), RATE)
    sf.write(tmp_path / "single.wav", noise(0.5), RATE)
    os.symlink(outside, d / "linked")            # a folder symlink: searched
    os.symlink(tmp_path / "single.wav", d / "s.wav")  # a file symlink: read
    os.symlink(".", d / "itself")                # a loop back to the folder: not again
    (d / "sub").mkdir()
    os.symlink("..", d / "sub" / "up")           # another loop, deeper
    result = cuts_from_audio_dir(d, tmp_path / "feats", progress=False)
    assert sorted(c.id for c in result.cuts) == ["far", "good", "s"]
    assert not result.failed


def test_unreadable_file_is_a_failure(tmp_path):
    if os.geteuid() == 0:
        pytest.skip("root reads any file")
    d = _folder(tmp_path)
    sf.write(d / "locked.wav", noise(0.5), RATE)
    os.chmod(d / "locked.wav", 0)
    result = cuts_from_audio_dir(d, tmp_path / "feats", progress=False)
    assert "Permission denied" in result.failures["locked"]


@pytest.mark.parametrize("name, utt", [
    ("my talk.wav", "my_talk"),
    ("tab\there.wav", "tab_here"),
    ("new\nline.wav", "new_line"),
    (b"caf\xe9.wav", "caf%E9"),
    (b"\xff\xfe.flac", "%FF%FE"),
    ("café.wav", "café"),
    ("日本語.wav", "日本語"),
], ids=["space", "tab", "newline", "latin1-byte", "invalid-bytes", "utf8-accent", "utf8-cjk"])
def test_file_names_become_safe_utterance_ids(tmp_path, name, utt):
    d = _folder(tmp_path)
    path = os.path.join(os.fsencode(d), name if isinstance(name, bytes) else name.encode())
    sf.write(d / "tmp.wav", noise(0.5), RATE)
    os.rename(d / "tmp.wav", path)
    assert utterance_id(os.fsdecode(path)) == utt
    result = cuts_from_audio_dir(d, tmp_path / "feats", progress=False)
    assert sorted(c.id for c in result.cuts) == sorted(["good", utt])
    cut = next(c for c in result.cuts if c.id == utt)
    assert cut.duration == pytest.approx(0.5)
    assert os.fsencode(cut.recording.sources[0].source).endswith(
        name if isinstance(name, bytes) else name.encode()) or "cat -- " in \
        cut.recording.sources[0].source  # the original path is kept


def test_two_names_with_one_id_are_refused_naming_both(tmp_path):
    d = _folder(tmp_path)
    sf.write(d / "a b.wav", noise(0.5), RATE)
    sf.write(d / "a_b.flac", noise(0.5), RATE)
    with pytest.raises(ValueError, match=r"'a_b': a b\.wav, a_b\.flac; the file stem \(spaces "
                                         r"as _\) is the utterance id"):
        scan_audio_dir(d)


def test_samples_beyond_one_warn_alike_on_files_and_waveforms(tmp_path, caplog):
    """One check (``check_sample_values``) on both paths: a float file read for the CLI and
    a waveform given to the Python API, both far outside [-1, 1], warn with the peak."""
    import logging

    from lhotse import NumpyFilesWriter, Recording

    from k2dec.data import FeatureConfig
    from k2dec.data.audio_io import cut_features
    from k2dec.recognizer.inputs import waveform_samples

    x = (np.random.default_rng(0).standard_normal(16000) * 0.1).astype(np.float32)
    x[5] = 0.5
    sf.write(tmp_path / "loud.wav", x * 1e6, 16000, subtype="FLOAT")
    writer = NumpyFilesWriter(tmp_path / "feats")
    with caplog.at_level(logging.WARNING):
        cut_features(Recording.from_file(tmp_path / "loud.wav").to_cut(),
                     FeatureConfig().extractor(), writer)
        waveform_samples(x * 1e6, "inputs[0]")
        cut_features(Recording.from_file(tmp_path / "loud.wav").to_cut().perturb_volume(1e-6),
                     FeatureConfig().extractor(), writer)
    warned = [r.getMessage() for r in caplog.records
              if "expects floats in [-1, 1]" in r.getMessage()]
    assert len(warned) == 2, warned  # the file scaled back into [-1, 1] does not warn
    assert warned[0].startswith(f"{tmp_path / 'loud.wav'}: samples reach 5e+05")
    assert warned[1].startswith("inputs[0]: samples reach 5e+05")


def test_two_files_with_one_utterance_id_are_refused_naming_both(tmp_path):
    """The stem is the utterance id (spaces as _): two files that would share one result line
    stop the folder before anything is read, naming both; one file per id passes."""
    for name in ("a/x.wav", "b/x.flac", "c/my talk.wav", "c/my_talk.ogg", "d/y.wav"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(b"")
    with pytest.raises(ValueError, match=r"^2 utterance ids belong to more than one file under "
                                         r".*, e\.g\. 'x': a/x\.wav, b/x\.flac; the file stem"):
        scan_audio_dir(tmp_path)
    for name in ("b/x.flac", "c/my_talk.ogg"):
        (tmp_path / name).unlink()
    assert sorted(scan_audio_dir(tmp_path).files) == ["my_talk", "x", "y"]


def test_a_file_read_in_pieces_is_bounded_by_a_piece_not_its_length(tmp_path, monkeypatch):
    """max_audio_mb bounds the samples held at once: a file soundfile seeks in is read a
    piece at a time, so one whose whole samples are 20 times the bound decodes (a 1 GB WAV's
    header, 9.3 hours, too), and no read holds more than the bound (a spy on every
    load_audio: it fails when the whole file is loaded); a file read whole (through ``cat``)
    is still refused from its header."""
    from lhotse.cut import MonoCut

    from k2dec.data import audio_io, probe_recording

    monkeypatch.setattr(audio_io, "FEATURE_PIECE_SECONDS", 2.0)
    seconds, limit_mb = 60.0, 0.25  # the whole: 3.7 MiB of float32; a piece: 0.19 MiB
    d = tmp_path / "in"
    d.mkdir()
    sf.write(d / "long.wav", noise(seconds), RATE, subtype="PCM_16")
    (d / os.fsdecode(b"piped\xff.wav")).write_bytes((d / "long.wav").read_bytes())
    loaded: list[int] = []
    real = MonoCut.load_audio

    def spy(self, *args, **kwargs):
        out = real(self, *args, **kwargs)
        loaded.append(out.nbytes)
        return out

    monkeypatch.setattr(MonoCut, "load_audio", spy)
    got = cuts_from_audio_dir(d, tmp_path / "f", progress=False,
                              limits=AudioLimits(max_audio_mb=limit_mb))
    assert [c.id for c in got.cuts] == ["long"]
    assert got.cuts[0].num_frames == 6000 and got.cuts[0].load_features().shape == (6000, 80)
    assert loaded and max(loaded) <= limit_mb * 2**20, loaded
    (reason,) = [f.reason for f in got.failed]
    assert "MiB of samples once read (60 s x 16000 Hz" in reason, reason
    assert f"AudioLimits.max_audio_mb={limit_mb:g}" in reason, reason
    sparse_wav(tmp_path / "huge.wav", 1 << 30)
    monkeypatch.undo()
    huge = tmp_path / "huge.wav"
    assert probe_recording(huge, "huge", in_pieces=True).duration == pytest.approx(33554.43)
    with pytest.raises(ValueError, match=r"held at once \(a piece of the 33554 s file\)"):
        probe_recording(huge, "huge", AudioLimits(max_audio_mb=0.5), in_pieces=True)
    with pytest.raises(ValueError, match=r"MiB of samples once read \(33554 s"):
        probe_recording(huge, "huge")  # a caller that reads it whole (the Recognizer)
