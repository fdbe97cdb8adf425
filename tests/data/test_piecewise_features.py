"""Features of a recording computed from its audio read in pieces
(:func:`k2dec.data.audio_io.piecewise_features`): the same frames as the whole file's, for
any length and piece size, at 16 kHz mono and through resampling and downmixing; bad
samples refused in any piece; the range warning said once."""

from __future__ import annotations

import logging
import tracemalloc

import numpy as np
import pytest
import soundfile as sf
from lhotse import Recording
from lhotse.features.io import NumpyFilesWriter

from k2dec.data import audio_io
from k2dec.data.audio_io import _mono, cut_features, load_feature_range, piecewise_features
from k2dec.data.features import FeatureConfig


@pytest.fixture(scope="module")
def extractor():
    return FeatureConfig().extractor()


def _cut(tmp_path, samples: np.ndarray, rate: int, name: str = "a"):
    path = tmp_path / f"{name}.wav"
    sf.write(str(path), samples, rate, subtype="FLOAT")
    return Recording.from_file(path).to_cut()


def _whole(cut, extractor) -> np.ndarray:
    """The reference: the whole recording read at once, then its features."""
    return extractor.extract(np.atleast_2d(cut.load_audio()), 16000)


@pytest.mark.parametrize("seed", range(6))
def test_pieces_give_the_whole_files_frames(tmp_path, extractor, seed):
    rng = np.random.default_rng(seed)
    # lengths from one frame to several pieces, not multiples of the shift
    num = int(rng.choice([400, 161, 16000 * 3 + 7, int(rng.integers(16000, 16000 * 9))]))
    x = (rng.standard_normal(num) * 0.1).astype(np.float32)
    cut = _cut(tmp_path, x, 16000)
    whole = _whole(cut, extractor)
    for piece in (0.05, float(rng.uniform(0.3, 2.5)), 1.0, 100.0):
        got, n = piecewise_features(cut, extractor, "x", piece)
        assert n == num
        assert got.shape == whole.shape, (piece, num)
        np.testing.assert_allclose(got, whole, atol=1e-4, rtol=0)


def test_pieces_through_resampling_and_downmix(tmp_path, extractor):
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((8000 * 7 + 37, 2)) * 0.1).astype(np.float32)
    mono = _mono(_cut(tmp_path, x, 8000).resample(16000))
    whole = _whole(mono, extractor)
    for piece in (0.7, 2.0):
        got, _ = piecewise_features(mono, extractor, "x", piece)
        assert got.shape == whole.shape
        np.testing.assert_allclose(got, whole, atol=1e-3, rtol=0)


def test_bad_samples_in_a_later_piece_are_refused(tmp_path, extractor):
    x = np.zeros(16000 * 5, dtype=np.float32)
    x[16000 * 4 + 5] = np.inf
    with pytest.raises(ValueError, match="NaN or infinite"):
        piecewise_features(_cut(tmp_path, x, 16000), extractor, "x", 1.0)


def test_range_warning_once_with_the_peak(tmp_path, extractor, caplog):
    x = np.full(16000 * 5, 0.01, dtype=np.float32)
    x[100] = 3.0
    x[16000 * 3] = 7.0
    with caplog.at_level(logging.WARNING, logger=audio_io.logger.name):
        piecewise_features(_cut(tmp_path, x, 16000), extractor, "long.wav", 1.0)
    warned = [r.getMessage() for r in caplog.records if "samples reach" in r.getMessage()]
    assert len(warned) == 1 and "long.wav" in warned[0] and "samples reach 7" in warned[0]


def test_cut_features_of_a_long_file_reads_it_in_pieces(tmp_path, extractor, monkeypatch):
    rng = np.random.default_rng(2)
    cut = _cut(tmp_path, (rng.standard_normal(16000 * 6 + 3) * 0.1).astype(np.float32),
               16000)
    loaded: list[float] = []
    real = type(cut).load_audio

    def spy(self, *args, **kwargs):
        loaded.append(self.duration)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(audio_io, "FEATURE_PIECE_SECONDS", 2.0)
    monkeypatch.setattr(type(cut), "load_audio", spy)
    with NumpyFilesWriter(tmp_path / "feats") as writer:
        done = cut_features(cut, extractor, writer)
    assert len(loaded) == 3 and max(loaded) < 2.5
    np.testing.assert_allclose(done.load_features(), _whole(cut, extractor), atol=1e-4)
    assert done.num_frames == _whole(cut, extractor).shape[0]


def test_a_feature_range_reads_only_its_frames(tmp_path, extractor, monkeypatch):
    """load_feature_range gives lhotse's load_features of any truncation (random offsets
    and durations, length-1-frame and whole ranges) without loading the whole array."""
    rng = np.random.default_rng(3)
    cut = _cut(tmp_path, (rng.standard_normal(16000 * 9 + 11) * 0.1).astype(np.float32),
               16000)
    with NumpyFilesWriter(tmp_path / "feats") as writer:
        done = cut_features(cut, extractor, writer)
    whole_loads: list[int] = []
    real_load = np.load

    def spy(*args, **kwargs):
        if kwargs.get("mmap_mode") is None:
            whole_loads.append(1)
        return real_load(*args, **kwargs)

    spans = [(0.0, done.duration), (0.0, 0.025), (done.duration - 0.03, 0.03)] + [
        (float(a), float(rng.uniform(0.01, done.duration - a)))
        for a in rng.uniform(0, done.duration - 0.02, 12)]
    for offset, duration in spans:
        piece = done.truncate(offset=offset, duration=duration, preserve_id=True)
        want = piece.load_features()
        monkeypatch.setattr(np, "load", spy)
        got = load_feature_range(piece)
        monkeypatch.setattr(np, "load", real_load)
        assert got.shape == want.shape and got.dtype == want.dtype, (offset, duration)
        np.testing.assert_array_equal(got, want)
    assert not whole_loads


def test_a_long_files_features_are_never_whole_in_memory(tmp_path, extractor, monkeypatch):
    """cut_features of a file longer than a piece: while each piece is extracted, the
    features file is not mapped into the process (a mapped file's written pages count in its
    RSS) and Python holds no more than a few pieces' samples and frames (tracemalloc counts
    numpy's buffers); the file is the one np.save writes of the whole file's frames."""
    rng = np.random.default_rng(4)
    seconds, piece = 120, 2.0
    cut = _cut(tmp_path, (rng.standard_normal(16000 * seconds + 5) * 0.1).astype(np.float32),
               16000)
    whole = _whole(cut, extractor)
    store = tmp_path / "feats"
    mapped: list[str] = []
    real_extract = type(extractor).extract

    def spy(self, *args, **kwargs):
        with open("/proc/self/maps") as maps:
            mapped.extend(line for line in maps if str(store) in line)
        return real_extract(self, *args, **kwargs)

    monkeypatch.setattr(audio_io, "FEATURE_PIECE_SECONDS", piece)
    monkeypatch.setattr(type(extractor), "extract", spy)
    tracemalloc.start()
    try:
        with NumpyFilesWriter(store) as writer:
            done = cut_features(cut, extractor, writer)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert not mapped
    samples_mb, frames_mb = seconds * 16000 * 4 / 2**20, whole.nbytes / 2**20
    assert peak / 2**20 < 0.25 * min(samples_mb, frames_mb), (peak, samples_mb, frames_mb)
    np.testing.assert_allclose(done.load_features(), whole, atol=1e-4, rtol=0)
    (path,) = store.rglob("*.npy")
    saved = tmp_path / "saved.npy"
    np.save(saved, np.load(path))
    assert path.read_bytes() == saved.read_bytes()
