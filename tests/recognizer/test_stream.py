"""Recognizer streams on a streaming (causal zipformer-like) TorchScript export: fed audio in
pieces of any size, a stream's final result is the offline result of the same model and
method; its features are the offline features; misuse is refused with clear errors."""

from __future__ import annotations

import numpy as np
import pytest
import soundfile as sf
import torch

from k2dec import Recognizer
from k2dec.data import FeatureConfig
from k2dec.demo import ASSETS
from k2dec.recognizer import FeatureStream
from tests.model import icefall_like as il

STREAMING = ("greedy_search", "modified_beam_search", "fast_beam_search")


def _wave(seconds: float, seed: int) -> np.ndarray:
    """Speech from the shipped test set when it is there, else noise with a varying
    envelope."""
    rng = np.random.default_rng(seed)
    n = int(seconds * 16000)
    flac = ASSETS / "corpus" / "test-clean" / "101" / "3000" / "101-3000-0000.flac"
    if flac.is_file():
        x = sf.read(flac, dtype="float32")[0]
        start = int(rng.integers(0, max(1, x.size - n)))
        return np.ascontiguousarray(x[start: start + n])
    env = np.abs(np.sin(np.arange(n) / 1600.0))
    return (rng.standard_normal(n) * 0.2 * env).astype(np.float32)


@pytest.fixture(scope="module")
def streaming_model(tmp_path_factory):
    d = tmp_path_factory.mktemp("streaming")
    il.write_tokens(d / "tokens.txt", 12)
    return il.save_jit(il.build_streaming(), d / "jit_script_chunk_8_left_32.pt")


@pytest.fixture(scope="module")
def recognizers(streaming_model):
    rec = Recognizer.from_files(streaming_model, method="greedy_search")
    return {m: rec.with_method(m) for m in STREAMING}


def _feed(stream, x: np.ndarray, rng: np.random.Generator, sizes: tuple[int, int]):
    pos, partials = 0, []
    while pos < x.size:
        n = int(rng.integers(*sizes))
        stream.accept_waveform(x[pos: pos + n], sample_rate=16000)
        partials.append(stream.result)
        pos += n
    return partials


@pytest.mark.parametrize("method", STREAMING)
@pytest.mark.parametrize("seconds, sizes", [(2.3, (1, 5000)), (0.9, (100, 400)),
                                            (3.1, (4000, 16000)), (0.05, (50, 900))])
def test_final_result_of_a_stream_is_the_offline_result(recognizers, method, seconds, sizes):
    rec = recognizers[method]
    x = _wave(seconds, seed=int(seconds * 10))
    (offline,) = rec.decode(x, sample_rate=16000)
    stream = rec.create_stream("utt")
    partials = _feed(stream, x, np.random.default_rng(len(method)), sizes)
    final = stream.finish()
    assert final.id == "utt" and stream.finished
    assert (final.error, final.words, final.tokens, final.timestamps) == (
        offline.error, offline.words, offline.tokens, offline.timestamps)
    if not offline.error:
        assert final.record.token_frames == offline.record.token_frames
        assert final.record.score == pytest.approx(offline.record.score, abs=1e-3)
    assert stream.finish() is final and stream.result is final
    if method == "greedy_search":  # partial results only grow
        for a, b in zip(partials, partials[1:] + [final]):
            assert b.record.tokens[: len(a.record.tokens)] == a.record.tokens


def test_streams_see_tokens_of_a_real_model_run(recognizers):
    """Not a vacuous comparison: the random export emits tokens on this audio."""
    (offline,) = recognizers["greedy_search"].decode(_wave(2.3, 23), sample_rate=16000)
    assert len(offline.tokens) >= 3


@pytest.mark.parametrize("num_samples", [400, 401, 479, 480, 16000, 23457])
@pytest.mark.parametrize("sizes", [(1, 300), (150, 170), (2000, 9000)])
def test_stream_features_are_the_offline_features(num_samples, sizes):
    config = FeatureConfig()
    x = _wave(num_samples / 16000, seed=num_samples)[:num_samples]
    offline = config.extractor().extract(x, 16000)
    fs = FeatureStream(config)
    rng = np.random.default_rng(sizes[0])
    parts, pos = [], 0
    while pos < x.size:
        n = int(rng.integers(*sizes))
        parts.append(fs.accept(x[pos: pos + n]))
        pos += n
        assert fs.samples.size <= config.frame_length * 16000 + n + 160  # bounded memory
    parts.append(fs.finish())
    online = np.concatenate(parts)
    assert online.shape == offline.shape == (config.num_frames(num_samples), 80)
    np.testing.assert_allclose(online, offline, atol=1e-4, rtol=0)


def test_stream_misuse_is_refused(recognizers):
    rec = recognizers["greedy_search"]
    stream = rec.create_stream()
    with pytest.raises(ValueError, match="audio at 8000 Hz, the model takes 16000 Hz"):
        stream.accept_waveform(np.zeros(800, dtype=np.float32), sample_rate=8000)
    with pytest.raises(TypeError, match="sample_rate must be an int"):
        stream.accept_waveform(np.zeros(800, dtype=np.float32), sample_rate=16000.0)
    with pytest.raises(ValueError, match="one channel"):
        stream.accept_waveform(np.zeros((2, 800), dtype=np.float32), sample_rate=16000)
    with pytest.raises(ValueError, match="empty"):
        stream.accept_waveform(np.zeros(0, dtype=np.float32), sample_rate=16000)
    stream.accept_waveform(np.zeros(100, dtype=np.float32), sample_rate=16000)
    short = stream.finish()
    assert short.error.startswith("too short: 100 samples") and short.words == ()
    with pytest.raises(ValueError, match="is finished; create a new stream"):
        stream.accept_waveform(np.zeros(800, dtype=np.float32), sample_rate=16000)
    with pytest.raises(ValueError, match="method 'beam_search' has no streaming search"):
        rec.with_method("beam_search").create_stream()


@pytest.mark.skipif(not (ASSETS / "model.pt").is_file(), reason="no shipped model")
def test_a_model_that_needs_whole_utterances_has_no_streams():
    rec = Recognizer.from_files(ASSETS / "model.pt", ASSETS / "lang", method="greedy_search")
    with pytest.raises(ValueError, match="streams need a streaming model .* use decode()"):
        rec.create_stream()


def test_streams_of_one_recognizer_are_independent(recognizers):
    rec = recognizers["modified_beam_search"]
    x, y = _wave(1.7, 1), _wave(1.2, 2)
    a, b = rec.create_stream("a"), rec.create_stream("b")
    for i in range(0, max(x.size, y.size), 3000):  # interleaved
        if i < x.size:
            a.accept_waveform(torch.from_numpy(x[i: i + 3000]), sample_rate=16000)
        if i < y.size:
            b.accept_waveform(y[i: i + 3000], sample_rate=16000)
    offline = rec.decode([x, y], sample_rate=16000)
    assert [a.finish().tokens, b.finish().tokens] == [r.tokens for r in offline]
