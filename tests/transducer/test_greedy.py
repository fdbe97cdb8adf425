from __future__ import annotations

import pytest
import torch

from k2dec.testing.transducer import random_batch, random_model
from k2dec.transducer import GreedySearch, GreedySearchConfig, greedy_search
from tests.reference.transducer_reference import NetOracle, greedy_reference
from tests.transducer.helpers import assert_same_hyps, random_chunks


@pytest.fixture(params=["windows", "frames"])
def loop(request, monkeypatch) -> str:
    """Which of greedy search's two loops runs (with one symbol per frame; more always take
    the look-ahead windows): forced through the joiner-work threshold that picks one."""
    from k2dec.transducer import greedy

    monkeypatch.setattr(greedy, "_FRAME_LOOP_WORK", 0 if request.param == "frames" else 1 << 62)
    return request.param


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("max_sym", [1, 3])
def test_greedy_matches_framewise_argmax(device, seed, max_sym, loop):
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


@pytest.mark.parametrize("max_sym", [1, 2])
def test_batch_of_one_equals_batch_of_many(device, max_sym, loop):
    model = random_model(vocab_size=6, seed=1, device=device)
    lens = [9, 3, 0, 1, 8]
    enc, enc_lens = random_batch(lens, seed=1, device=device)
    config = GreedySearchConfig(max_sym_per_frame=max_sym)
    many = greedy_search(model, enc, enc_lens, config)
    for i, n in enumerate(lens):
        one = greedy_search(model, enc[i : i + 1, :n], enc_lens[i : i + 1], config)
        assert one[0].tokens == many[i].tokens
        assert one[0].timestamps == many[i].timestamps
        assert one[0].score == pytest.approx(many[i].score, abs=1e-5)


@pytest.mark.parametrize("seed", range(3))
def test_streaming_chunks_equal_offline(device, seed, loop):
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


def test_empty_batch_and_zero_frames(device, loop):
    model = random_model(device=device)
    assert greedy_search(model, torch.zeros(0, 0, 8, device=device), torch.zeros(0).long()) == []
    hyps = greedy_search(model, torch.zeros(2, 0, 8, device=device), torch.zeros(2).long())
    assert [(h.tokens, h.timestamps, h.score) for h in hyps] == [([], [], 0.0)] * 2


@pytest.mark.parametrize("seed", range(4))
def test_both_loops_take_the_same_decisions(device, seed, monkeypatch):
    from k2dec.transducer import greedy

    model = random_model(vocab_size=7, context_size=1 + seed % 2, dim=16, seed=seed,
                         device=device)
    lens = [int(x) for x in torch.randint(0, 40, (9,), generator=torch.Generator()
                                          .manual_seed(seed))]
    enc, enc_lens = random_batch(lens, dim=16, seed=seed, device=device)
    config = GreedySearchConfig(blank_penalty=0.3 * seed)
    got = {}
    for name, work in (("windows", 1 << 62), ("frames", 0)):
        monkeypatch.setattr(greedy, "_FRAME_LOOP_WORK", work)
        got[name] = greedy_search(model, enc, enc_lens, config)
    assert_same_hyps(got["frames"], got["windows"])
    assert sum(len(h.tokens) for h in got["frames"]) > 0


def test_frame_loop_is_chosen_for_large_joiners():
    from k2dec.transducer import TransducerNet, greedy

    for dim, vocab, utts, frames in ((512, 500, 40, True), (256, 256, 40, False),
                                     (512, 500, 1, False)):
        model = random_model(vocab_size=vocab, dim=dim)
        net = TransducerNet(model)
        chosen = greedy._frame_synchronous(utts, net, torch.zeros(1, 1, dim))
        assert chosen is frames, (dim, vocab, utts)
