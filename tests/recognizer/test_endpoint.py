"""Streaming endpointing: the three Kaldi / sherpa-onnx rules against a plain reading of their
definition, and a real stream (shipped test utterances joined by silences, fed in random
pieces) that yields one result per utterance, each inside its utterance's time span in the
stream's clock; a length cap splits long speech; silence alone yields nothing."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import soundfile as sf
import torch

from k2dec.demo import ASSETS
from k2dec.recognizer import EndpointConfig, EndpointRule, RecognizerStream

UTT_DIR = ASSETS / "corpus" / "test-clean" / "101" / "3000"
RATE = 16000


def _reference(config: EndpointConfig, frames: int, trailing: int, speech: bool,
               shift: float) -> int:
    """The rules as sherpa-onnx's endpoint.cc words them, one by one."""
    length, silence = frames * shift, trailing * shift
    for k, rule in ((1, config.rule1), (2, config.rule2), (3, config.rule3)):
        if rule.must_contain_nonsilence and not speech:
            continue
        if silence < rule.min_trailing_silence or length < rule.min_utterance_length:
            continue
        return k
    return 0


def test_rules_match_their_definition():
    configs = [EndpointConfig(), EndpointConfig(rule1=EndpointRule(True, 0.5, 1.0),
                                                rule2=EndpointRule(False, 0.08, 0.2),
                                                rule3=EndpointRule(True, 0.0, 0.4))]
    fired = set()
    for config, frames, speech in itertools.product(configs, [0, 1, 5, 30, 61, 500, 700],
                                                    [False, True]):
        for trailing in sorted({0, 1, frames // 2, frames}):
            got = config.detect(frames, trailing, speech, 0.04)
            assert got == _reference(config, frames, trailing, speech, 0.04)
            fired.add(got)
    assert fired == {0, 1, 2, 3}


def test_bad_rules_are_refused():
    with pytest.raises(ValueError, match="min_trailing_silence"):
        EndpointRule(True, -1.0, 0.0)
    with pytest.raises(TypeError, match="must_contain_nonsilence"):
        EndpointRule(1, 1.0, 0.0)
    with pytest.raises(TypeError, match="rule2"):
        EndpointConfig(rule2=(True, 1.2, 0.0))


class WindowedEncoder:
    """The shipped (whole-utterance) model's encoder run on each streaming window alone: a
    streaming encoder of the interface :class:`RecognizerStream` drives, good enough to tell
    speech from silence."""

    def __init__(self, model, chunk_length: int = 64, pad: int = 32) -> None:
        self.model, self.chunk_length, self.window = model, chunk_length, chunk_length + pad

    def init_states(self, batch_size: int, device) -> list:
        return []

    def encode_chunk(self, x: torch.Tensor, lens: torch.Tensor, states: list):
        out = self.model.encode(x, lens)
        keep = min(int(lens[0]), self.chunk_length) // 4
        return out.encoder_out[:, :keep], torch.tensor([keep]), states


@pytest.fixture(scope="module")
def rec():
    if not (ASSETS / "model.pt").is_file():
        pytest.skip("no shipped model in this checkout")
    from k2dec import Recognizer

    r = Recognizer.from_files(ASSETS / "model.pt", ASSETS / "lang", method="greedy_search")
    r.model.streaming_encoder = WindowedEncoder(r.model)
    return r


def _joined(ids: list[str], lead: float, gap: float) -> tuple[np.ndarray, list[tuple]]:
    parts, spans, pos = [np.zeros(int(lead * RATE), np.float32)], [], int(lead * RATE)
    for k in ids:
        x = sf.read(UTT_DIR / f"{k}.flac", dtype="float32")[0]
        spans.append((pos / RATE, (pos + x.size) / RATE))
        parts += [x, np.zeros(int(gap * RATE), np.float32)]
        pos += x.size + int(gap * RATE)
    return np.concatenate(parts), spans


def _feed(stream: RecognizerStream, audio: np.ndarray, seed: int) -> list:
    rng, pos, popped = np.random.default_rng(seed), 0, []
    while pos < audio.size:
        n = int(rng.integers(500, 9000))
        stream.accept_waveform(audio[pos: pos + n], sample_rate=RATE)
        popped += stream.pop_utterances()
        pos += n
    stream.finish()
    return popped + stream.pop_utterances()


def test_a_stream_yields_one_result_per_utterance(rec):
    ids = ["101-3000-0000", "101-3000-0001", "101-3000-0002"]
    audio, spans = _joined(ids, lead=3.0, gap=2.0)  # 3 s: rule 1 fires before any speech
    utts = _feed(rec.create_stream("s", endpoint=EndpointConfig()), audio, seed=1)
    assert [u.id for u in utts] == ["s-0", "s-1", "s-2"]
    for u, (start, end) in zip(utts, spans):
        assert len(u.words) >= 4
        assert start - 0.1 <= u.timestamps[0] and u.timestamps[-1] <= end + 0.1, (u, start, end)
    assert "FLYING" in utts[0].words and "NEVER" in utts[1].words


def test_a_length_cap_splits_speech(rec):
    audio, spans = _joined(["101-3000-0002"], lead=0.2, gap=0.5)
    config = EndpointConfig(rule2=EndpointRule(True, 100.0, 0.0),
                            rule3=EndpointRule(False, 0.0, 1.5))
    utts = _feed(RecognizerStream(rec, "cap", endpoint=config), audio, seed=2)
    assert len(utts) >= 2
    bounds = [(u.timestamps[0], u.timestamps[-1]) for u in utts]
    assert all(b[1] - b[0] <= 1.5 + 0.64 for b in bounds)  # the cap, plus one chunk
    assert all(a[1] <= b[0] for a, b in zip(bounds, bounds[1:]))  # in order, no overlap


def test_silence_yields_nothing_and_no_endpoint_keeps_one_utterance(rec):
    stream = RecognizerStream(rec, "quiet", endpoint=EndpointConfig())
    assert _feed(stream, np.zeros(6 * RATE, np.float32), seed=3) == []
    assert stream.finish().text == ""
    audio, _ = _joined(["101-3000-0000", "101-3000-0001"], lead=0.5, gap=2.0)
    plain = RecognizerStream(rec, "one")
    assert _feed(plain, audio, seed=4) == []
    assert {"FLYING", "NEVER"} <= set(plain.finish().words)
    with pytest.raises(TypeError, match="EndpointConfig"):
        RecognizerStream(rec, endpoint={"rule1": None})
