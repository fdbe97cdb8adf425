from __future__ import annotations

import pytest
import torch

from k2dec.testing.transducer import random_batch, random_model
from k2dec.transducer import (
    ModifiedBeamSearch,
    ModifiedBeamSearchConfig,
    modified_beam_search,
)
from tests.reference.transducer_reference import (
    NetOracle,
    modified_beam_search_reference,
    pick_best,
    sequence_log_probs,
)
from tests.transducer.helpers import assert_same_hyps, random_chunks


def _as_dict(hyps):
    return {tuple(h.tokens): (h.score, h.timestamps) for h in hyps}


def _assert_same_hyps(got, want):
    assert set(got) == set(want)
    for k, (score, times) in want.items():
        assert got[k][0] == pytest.approx(score, abs=1e-4), k
        assert got[k][1] == times, k


@pytest.mark.parametrize("seed", range(8))
def test_matches_per_utterance_reference(device, seed):
    context_size = 1 + seed % 3
    beam = [1, 2, 4, 5][seed % 4]
    temperature = [1.0, 0.7, 1.5][seed % 3]
    penalty = [0.0, 0.8][seed % 2]
    vocab_size = 4 + seed % 3
    model = random_model(vocab_size=vocab_size, context_size=context_size, seed=seed, device=device)
    lens = [9, 0, 1, 6, 9, 3]
    enc, enc_lens = random_batch(lens, seed=seed, device=device)
    config = ModifiedBeamSearchConfig(
        beam_size=beam, temperature=temperature, blank_penalty=penalty, length_norm=bool(seed % 2)
    )
    search = ModifiedBeamSearch(model, config)
    streams = [search.new_stream(device) for _ in lens]
    search.decode_chunk(streams, enc, enc_lens)
    all_hyps = search.hypotheses(streams)
    best = modified_beam_search(model, enc, enc_lens, config)
    for i, n in enumerate(lens):
        oracle = NetOracle(model, enc[i], temperature=temperature, blank_penalty=penalty)
        want = modified_beam_search_reference(oracle, n, beam)
        _assert_same_hyps(_as_dict(all_hyps[i]), want)
        tokens, score, times = pick_best(want, config.length_norm, context_size)
        assert tuple(best[i].tokens) == tokens
        assert best[i].timestamps == times
        assert best[i].score == pytest.approx(score, abs=1e-4)
    if beam > 1:
        assert any(len(h) > 1 for h in all_hyps)  # the beam is actually exercised


@pytest.mark.parametrize("seed", range(3))
def test_huge_beam_gives_exact_sequence_probabilities(device, seed):
    """With a beam larger than the number of alignments nothing is pruned, so every token
    sequence's score is the log-sum over all its alignments (exhaustive enumeration)."""
    vocab_size, num_frames = 3, 4
    model = random_model(vocab_size=vocab_size, context_size=2, seed=seed, device=device)
    enc, enc_lens = random_batch([num_frames], seed=seed, device=device)
    config = ModifiedBeamSearchConfig(beam_size=vocab_size**num_frames)
    search = ModifiedBeamSearch(model, config)
    streams = [search.new_stream(device)]
    search.decode_chunk(streams, enc, enc_lens)
    got = {tuple(h.tokens): h.score for h in search.hypotheses(streams)[0]}
    want = sequence_log_probs(NetOracle(model, enc[0]), num_frames)
    assert set(got) == set(want)
    for k in want:
        assert got[k] == pytest.approx(want[k], abs=1e-4)


def test_batch_of_one_equals_batch_of_many(device):
    model = random_model(vocab_size=6, seed=5, device=device)
    lens = [12, 3, 0, 1, 10]
    enc, enc_lens = random_batch(lens, seed=5, device=device)
    many = modified_beam_search(model, enc, enc_lens)
    for i, n in enumerate(lens):
        one = modified_beam_search(model, enc[i : i + 1, :n], enc_lens[i : i + 1])[0]
        assert one.tokens == many[i].tokens
        assert one.timestamps == many[i].timestamps
        assert one.score == pytest.approx(many[i].score, abs=1e-5)


@pytest.mark.parametrize("seed", range(3))
def test_streaming_chunks_equal_offline(device, seed):
    model = random_model(vocab_size=5, context_size=2, seed=seed, device=device)
    lens = [13, 5, 9]
    enc, enc_lens = random_batch(lens, seed=seed, device=device)
    config = ModifiedBeamSearchConfig(beam_size=3 + seed)
    search = ModifiedBeamSearch(model, config)
    offline_streams = [search.new_stream(device) for _ in lens]
    search.decode_chunk(offline_streams, enc, enc_lens)
    offline = search.hypotheses(offline_streams)

    streams = [search.new_stream(device) for _ in lens]
    for order, chunk, chunk_lens, _ in random_chunks(enc, lens, seed, shuffle=True):
        search.decode_chunk([streams[p] for p in order], chunk, chunk_lens)
        search.results(streams)
    streamed = search.hypotheses(streams)
    for a, b in zip(streamed, offline):
        _assert_same_hyps(_as_dict(a), _as_dict(b))


def test_scripted_model_gives_identical_results(tmp_path, device):
    model = random_model(vocab_size=5, context_size=2, seed=2, device=device)
    path = tmp_path / "model.pt"
    torch.jit.script(model).save(str(path))
    loaded = torch.jit.load(str(path), map_location=device)
    lens = [8, 4]
    enc, enc_lens = random_batch(lens, seed=2, device=device)
    assert_same_hyps(
        modified_beam_search(loaded, enc, enc_lens), modified_beam_search(model, enc, enc_lens)
    )


def test_all_blank(device):
    model = random_model(vocab_size=5, seed=4, device=device)
    enc, lens = random_batch([5, 2], seed=4, device=device)
    hyps = modified_beam_search(model, enc, lens, ModifiedBeamSearchConfig(blank_penalty=-50.0))
    assert [h.tokens for h in hyps] == [[], []]


def test_config_validation():
    with pytest.raises(ValueError, match="beam"):
        ModifiedBeamSearchConfig(beam_size=0)
    with pytest.raises(ValueError, match="temperature"):
        ModifiedBeamSearchConfig(temperature=0.0)
    with pytest.raises(ValueError, match="blank_penalty"):
        ModifiedBeamSearchConfig(blank_penalty=float("nan"))


def test_decoder_cache_gives_identical_results(device):
    model = random_model(vocab_size=6, context_size=2, seed=8, device=device)
    enc, lens = random_batch([12, 7, 10], seed=8, device=device)
    outs = []
    for size in (0, 1000, 3):  # off, large, tiny (forces resets)
        search = ModifiedBeamSearch(model, decoder_cache_size=size)
        streams = [search.new_stream(device) for _ in range(3)]
        search.decode_chunk(streams, enc, lens)
        outs.append(search.hypotheses(streams))
        if size == 1000:
            assert search.net.cache is not None and search.net.cache.hits > 0
    for other in outs[1:]:
        for a, b in zip(outs[0], other):
            assert_same_hyps(a, b)
