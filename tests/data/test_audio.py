"""A folder of someone's own audio -> cuts: any rate, channels, format and extension case; bad
files become failures with reasons; references from a Kaldi text file or *.trans.txt.

The variants are made here from one shipped test utterance: with sox (rates, channels, mp3,
ogg, aiff, au) and soundfile (float stereo, opus, corrupt files)."""

from __future__ import annotations

import logging
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from lhotse.cut import MonoCut

from k2dec.data import (
    AUDIO_EXTENSIONS,
    cuts_from_audio_dir,
    find_audio_files,
    load_references,
    read_kaldi_text,
)
from tests.sox_formats import sox_lacks

REPO = Path(__file__).resolve().parents[2]
UTT = "108-3000-0000"
SOURCE = REPO / "assets" / "librispeech-synth" / "corpus" / "test-clean" / "108" / "3000" / (
    UTT + ".flac")
needs_source = pytest.mark.skipif(not SOURCE.is_file(), reason="no shipped test audio")
needs_sox = pytest.mark.skipif(shutil.which("sox") is None,
                               reason="sox is not installed (Debian package sox)")

# name -> sox output options (before the output file) and the output file name
ALL_SOX_VARIANTS = {
    "rate8k": (["-r", "8000"], "rate8k.wav"),
    "rate22k": (["-r", "22050"], "rate22k.wav"),
    "rate44k": (["-r", "44100"], "rate44k.FLAC"),
    "rate48k": (["-r", "48000"], "rate48k.Wav"),
    "stereo48k": (["-r", "48000", "-c", "2"], "stereo48k.wav"),
    "mp3": ([], "mp3.MP3"),
    "vorbis": ([], "vorbis.ogg"),
    "aiff": ([], "aiff.aiff"),
    "au": (["-r", "8000"], "au.AU"),
}
# the variants this sox can write (test_each_variant_format_is_written_or_skipped says which not)
SOX_VARIANTS = {k: v for k, v in ALL_SOX_VARIANTS.items()
                if sox_lacks(v[1]) is None}


def sox(src: Path, dst: Path, *opts: str) -> None:
    subprocess.run(["sox", str(src), *opts, str(dst)], check=True, capture_output=True)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """The shipped utterance at 16 kHz mono (as ``orig.flac``) and its variants, plus an opus
    file (soundfile) in a subfolder, unusable files (corrupt, empty, no samples, shorter than a
    frame, truncated) and a text file."""
    if not SOURCE.is_file() or shutil.which("sox") is None:
        pytest.skip("needs the shipped test audio and sox")
    d = tmp_path_factory.mktemp("audio")
    shutil.copy(SOURCE, d / "orig.flac")
    for opts, name in SOX_VARIANTS.values():
        sox(SOURCE, d / name, *opts)
    samples, rate = sf.read(SOURCE, dtype="float32")
    (d / "sub").mkdir()
    sf.write(d / "sub" / "opus.opus", samples, rate, format="OGG", subtype="OPUS")
    (d / "corrupt.wav").write_bytes(b"RIFF" + bytes(range(256)) * 8)
    (d / "empty.flac").write_bytes(b"")
    (d / "phone.m4a").write_bytes(bytes(range(256)) * 8)  # no reader here, or not audio
    sf.write(d / "nosamples.wav", np.zeros(0, dtype="float32"), 16000)
    sf.write(d / "tiny.wav", np.zeros(30, dtype="float32"), 8000)
    (d / "truncated.flac").write_bytes(SOURCE.read_bytes()[:20000])
    (d / "notes.txt").write_text("not audio\n")
    return d


def features(result) -> dict[str, np.ndarray]:
    return {c.id: c.load_features() for c in result.cuts}


@needs_source
@needs_sox
@pytest.mark.parametrize("name", sorted(ALL_SOX_VARIANTS))
def test_each_variant_format_is_written_or_skipped(name, tmp_path):
    """A variant whose format this sox lacks is left out of the folder and skips here naming
    the package that adds it (it used to crash the fixture); the others are written."""
    opts, file_name = ALL_SOX_VARIANTS[name]
    reason = sox_lacks(file_name)
    if reason is not None:
        assert name not in SOX_VARIANTS
        pytest.skip(f"the {name} variant is not tested: {reason}")
    sox(SOURCE, tmp_path / file_name, *opts)
    assert name in SOX_VARIANTS and (tmp_path / file_name).stat().st_size > 1000


@needs_source
@needs_sox
def test_every_file_becomes_a_cut_or_a_failure(folder, tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="k2dec.data.audio"):
        result = cuts_from_audio_dir(folder, tmp_path / "feats", progress=False)
    ids = {c.id for c in result.cuts}
    assert ids == {"orig", "opus", *SOX_VARIANTS}
    assert {f.cut_id for f in result.failed} == {"corrupt", "empty", "nosamples", "tiny",
                                                  "truncated", "phone"}
    reasons = result.failures
    assert reasons["corrupt"].startswith(str(folder / "corrupt.wav"))
    assert "Format not recognised" in reasons["corrupt"]
    assert "too short: 0 samples" in reasons["nosamples"]
    assert "too short: 30 samples (0.00375 s)" in reasons["tiny"]
    assert "truncated or corrupt" in reasons["truncated"]
    assert all("\n" not in r for r in reasons.values())
    for c in result.cuts:
        assert isinstance(c, MonoCut)
        assert c.features.sampling_rate == 16000 and c.num_features == 80
        assert [s.text for s in c.supervisions] == [None]  # no reference (not the empty one)
        assert c.supervisions[0].duration == c.duration
    # downmixing is said once, however many files have several channels
    said = [r for r in caplog.records if "more than one channel" in r.getMessage()]
    assert len(said) == 1 and "stereo48k.wav" in said[0].getMessage()
    assert any("resampled 6 files to 16000 Hz" in r.getMessage() for r in caplog.records)
    assert any("1 files under" in r.getMessage() and "notes.txt" in r.getMessage()
               for r in caplog.records)
    assert result.missing_references == ()


@needs_source
@needs_sox
def test_resampled_and_downmixed_features_match_the_original(folder, tmp_path):
    feats = features(cuts_from_audio_dir(folder, tmp_path / "feats", progress=False))
    ref = feats["orig"]
    for name in ("rate22k", "rate44k", "rate48k", "stereo48k"):
        f = feats[name]
        assert abs(len(f) - len(ref)) <= 1, name
        n = min(len(f), len(ref))
        assert np.abs(f[:n] - ref[:n]).mean() < 0.1, name
    # 8 kHz has nothing above 4 kHz: the mel bins below ~3.4 kHz agree
    f = feats["rate8k"]
    n = min(len(f), len(ref))
    assert np.abs(f[:n, :50] - ref[:n, :50]).mean() < 0.1
    assert np.abs(f[:n, 70:] - ref[:n, 70:]).mean() > 1.0  # the test can see a difference
    assert np.abs(feats["aiff"] - ref).mean() < 0.01
    # lossy codecs: the same length of audio
    for name in ("mp3", "vorbis", "opus"):
        if name not in feats:  # a format this sox cannot write (test_every_variant...)
            continue
        assert abs(len(feats[name]) - len(ref)) <= 15, name


def test_channels_are_averaged_not_the_left_one_kept(tmp_path):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(16000) * 0.1).astype("float32")
    y = (rng.standard_normal(16000) * 0.1).astype("float32")
    d = tmp_path / "in"
    d.mkdir()
    sf.write(d / "stereo.wav", np.stack([x, y], axis=1), 16000, subtype="FLOAT")
    sf.write(d / "mean.wav", (x + y) / 2, 16000, subtype="FLOAT")
    sf.write(d / "left.wav", x, 16000, subtype="FLOAT")
    feats = features(cuts_from_audio_dir(d, tmp_path / "feats", progress=False))
    np.testing.assert_allclose(feats["stereo"], feats["mean"], atol=1e-3)
    assert np.abs(feats["stereo"] - feats["left"]).mean() > 0.1


def test_long_recording(tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    rng = np.random.default_rng(1)
    sf.write(d / "long.flac", (rng.standard_normal(60 * 44100) * 0.1).astype("float32"), 44100)
    result = cuts_from_audio_dir(d, tmp_path / "feats", progress=False)
    (cut,) = result.cuts
    assert cut.duration == pytest.approx(60.0) and cut.num_frames == 6000
    assert cut.load_features().shape == (6000, 80)


def test_find_audio_files(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    names = ["x.WAV", "a/y.flac", "a/b/z.Opus", "a/w.mp3", "v.OGG"]
    for n in names:
        (tmp_path / n).write_bytes(b"")
    (tmp_path / "t.txt").write_text("")
    (tmp_path / "a" / "w.trans.txt").write_text("")
    got = find_audio_files(tmp_path)
    assert sorted(p.relative_to(tmp_path).as_posix() for p in got) == sorted(names)
    assert find_audio_files(tmp_path, extensions=(".FLAC",)) == [tmp_path / "a" / "y.flac"]
    assert {".wav", ".flac", ".mp3", ".ogg", ".opus", ".m4a"} <= set(AUDIO_EXTENSIONS)
    assert ".txt" not in AUDIO_EXTENSIONS
    (tmp_path / "a" / "x.flac").write_bytes(b"")
    with pytest.raises(ValueError, match=r"'x': a/x.flac, x.WAV"):
        find_audio_files(tmp_path)
    with pytest.raises(ValueError, match="no audio files"):
        find_audio_files(tmp_path / "a" / "b", extensions=(".wav",))
    with pytest.raises(ValueError, match="no such directory"):
        find_audio_files(tmp_path / "nope")


def test_read_kaldi_text(tmp_path):
    p = tmp_path / "text"
    p.write_text("u1 HELLO  WORLD\n\nu2\tA B\nu3\n")
    assert read_kaldi_text(p) == {"u1": "HELLO WORLD", "u2": "A B", "u3": ""}
    p.write_text("u1 A\nu2 B\nu1 C\n")
    with pytest.raises(ValueError, match=r"text:3: utterance id 'u1' already .* line 1"):
        read_kaldi_text(p)
    with pytest.raises(ValueError, match="no such file"):
        read_kaldi_text(tmp_path / "missing")


def test_load_references(tmp_path):
    d = tmp_path / "audio"
    (d / "1" / "2").mkdir(parents=True)
    (d / "1" / "2" / "1-2.trans.txt").write_text("1-2-0000 A B\n1-2-0001 C\n")
    (d / "3.trans.txt").write_text("3-0 D\n")
    assert load_references(d) == {"1-2-0000": "A B", "1-2-0001": "C", "3-0": "D"}
    text = tmp_path / "text"
    text.write_text("1-2-0000 X\n")
    assert load_references(d, text) == {"1-2-0000": "X"}  # --text wins over *.trans.txt
    assert load_references(tmp_path / "audio" / "1" / "2" / "nothing") == {}
    (d / "dup.trans.txt").write_text("3-0 E\n")
    with pytest.raises(ValueError, match="'3-0' has references in"):
        load_references(d)


def test_references_become_supervision_text(tmp_path, caplog):
    d = tmp_path / "in"
    d.mkdir()
    for name in ("a", "b", "c"):
        sf.write(d / f"{name}.wav", np.zeros(1600, dtype="float32"), 16000)
    (d / "c.wav").write_bytes(b"garbage")
    with caplog.at_level(logging.WARNING, logger="k2dec.data.audio"):
        result = cuts_from_audio_dir(d, tmp_path / "feats", references={"a": "HI THERE",
                                                                        "z": "NO FILE"},
                                     progress=False)
    assert {c.id: c.supervisions[0].text for c in result.cuts} == {"a": "HI THERE", "b": None}
    assert result.missing_references == ("b", "c")
    text = caplog.text
    assert "2 of 3 audio files have no reference" in text
    assert "1 references match no audio file (e.g. z)" in text
    assert "1 of 3 audio files cannot be used" in text


@needs_source
def test_features_are_lossless_and_a_rerun_replaces_them(tmp_path):
    """The stored features are the extractor's float32 values (no lilcom rounding), and a
    second run into the same folder leaves one file per cut; a folder with other files is
    refused, not emptied."""
    from k2dec.data import FeatureConfig

    folder = tmp_path / "audio"
    folder.mkdir()
    shutil.copy(SOURCE, folder / "a.flac")
    feats = tmp_path / "feats"
    for _ in range(2):
        result = cuts_from_audio_dir(folder, feats, progress=False)
        assert len(list(feats.rglob("*.npy"))) == len(result.cuts) == 1
    samples, rate = sf.read(SOURCE, dtype="float32")
    expected = FeatureConfig().extractor().extract(samples, rate)
    np.testing.assert_array_equal(result.cuts[0].load_features(), expected)
    (feats / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="notes.txt, which k2dec did not write"):
        cuts_from_audio_dir(folder, feats, progress=False)
    assert (feats / "notes.txt").is_file()


@pytest.mark.parametrize("data, match", [
    ("u1 A\nu2 CAF\xc9\n".encode("latin-1"),
     r"text:2: references file is not UTF-8 text .*the encoding must be UTF-8"),
    (b"u1 A\n\x00\x01\xff\n", r"text:2: .*the encoding must be UTF-8"),
    ("u1 A\n".encode("utf-16"), r"text:1: .*the encoding must be UTF-8"),
    (b"", r"references file .*text is empty: it needs one '<utt-id> WORD"),
    (b"\n \n\t\n", r"references file .*text is empty"),
])
def test_read_kaldi_text_names_file_and_line_of_what_it_cannot_read(tmp_path, data, match):
    (tmp_path / "text").write_bytes(data)
    with pytest.raises(ValueError, match=match):
        read_kaldi_text(tmp_path / "text")


def test_read_kaldi_text_drops_a_byte_order_mark(tmp_path):
    (tmp_path / "text").write_bytes("\ufeffu1 HELLO\nu2 WORLD\n".encode())
    assert read_kaldi_text(tmp_path / "text") == {"u1": "HELLO", "u2": "WORLD"}
