from __future__ import annotations

import pytest
import torch

from k2dec.testing.transducer import random_batch, random_model
from k2dec.transducer import GreedySearch, GreedySearchConfig, greedy_search
from tests.reference.transducer_reference import NetOracle, greedy_reference
from tests.transducer.helpers import assert_same_hyps, random_chunks


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("max_sym", [1, 3])
def test_greedy_matches_framewise_argmax(device, seed, max_sym):
    context_size = 1 + seed % 3
    model = random_model(vocab_size=5, context_size=context_size, seed=seed, device=device)
    lens = [7, 0, 1, 4, 7, 2]
    enc, enc_lens = random_batch(lens, seed=seed, device=device)
    penalty = 0.5 * (seed % 2)
    config = GreedySearchConfig(max_sym_per_frame=max_sym, blank_penalty=penalty)
    hyps = greedy_search(model, enc, enc_lens, config)
    assert len(hyps) == len(lens)
    for i, n in enumerate(lens):
        oracle = NetOracle(model, enc[i], blank_penalty=penalty)
        tokens, times, score = greedy_reference(oracle, n, max_sym)
        assert hyps[i].tokens == tokens
        assert hyps[i].timestamps == times
        assert hyps[i].score == pytest.approx(score, abs=1e-4)
    if max_sym == 1:
        assert all(len(set(h.timestamps)) == len(h.timestamps) for h in hyps)


def test_greedy_emits_something_and_all_blank(device):
    model = random_model(vocab_size=5, seed=3, device=device)
    enc, lens = random_batch([6, 6], seed=3, device=device)
    assert any(h.tokens for h in greedy_search(model, enc, lens))
    # A huge negative penalty is a huge blank bonus: every frame emits blank.
    hyps = greedy_search(model, enc, lens, GreedySearchConfig(blank_penalty=-100.0))
    assert [h.tokens for h in hyps] == [[], []]
    assert all(h.score == pytest.approx(0.0, abs=1e-3) for h in hyps)


def test_batch_of_one_equals_batch_of_many(device):
    model = random_model(vocab_size=6, seed=1, device=device)
    lens = [9, 3, 0, 1, 8]
    enc, enc_lens = random_batch(lens, seed=1, device=device)
    many = greedy_search(model, enc, enc_lens, GreedySearchConfig(max_sym_per_frame=2))
    for i, n in enumerate(lens):
        one = greedy_search(
            model, enc[i : i + 1, :n], enc_lens[i : i + 1], GreedySearchConfig(max_sym_per_frame=2)
        )
        assert one[0].tokens == many[i].tokens
        assert one[0].timestamps == many[i].timestamps
        assert one[0].score == pytest.approx(many[i].score, abs=1e-5)


@pytest.mark.parametrize("seed", range(3))
def test_streaming_chunks_equal_offline(device, seed):
    model = random_model(vocab_size=5, context_size=2, seed=seed, device=device)
    lens = [11, 5, 8]
    enc, enc_lens = random_batch(lens, seed=seed, device=device)
    config = GreedySearchConfig(max_sym_per_frame=1 + seed)
    offline = greedy_search(model, enc, enc_lens, config)
    search = GreedySearch(model, config)
    streams = [search.new_stream(device) for _ in lens]
    for _, chunk, chunk_lens, _ in random_chunks(enc, lens, seed, shuffle=False):
        search.decode_chunk(streams, chunk, chunk_lens)
        partial = search.results(streams)
        for p, s in zip(partial, streams):
            assert all(t < s.num_frames for t in p.timestamps)
    assert_same_hyps(search.results(streams), offline)


def test_empty_batch_and_zero_frames(device):
    model = random_model(device=device)
    assert greedy_search(model, torch.zeros(0, 0, 8, device=device), torch.zeros(0).long()) == []
    hyps = greedy_search(model, torch.zeros(2, 0, 8, device=device), torch.zeros(2).long())
    assert [(h.tokens, h.timestamps, h.score) for h in hyps] == [([], [], 0.0)] * 2
