"""modified_beam_search with weighted scorers (LM shallow fusion, LODR, hotwords) against the
per-utterance reference, offline and streaming."""

from __future__ import annotations

import pytest

from k2dec.testing.transducer import random_batch, random_model
from k2dec.transducer import ModifiedBeamSearch, ModifiedBeamSearchConfig, modified_beam_search
from tests.reference.transducer_reference import (
    NetOracle,
    modified_beam_search_reference,
    pick_best,
)
from tests.scorers.factories import scorer_pairs
from tests.transducer.helpers import random_chunks

CASES = ["r", "t", "n", "h", "rn", "rnh", "th"]


def _check(got_hyps, want, tol=1e-6):
    got = {tuple(h.tokens): (h.score, h.timestamps) for h in got_hyps}
    assert set(got) == set(want)
    for k, (score, times) in want.items():
        assert got[k][0] == pytest.approx(score, abs=tol), k
        assert got[k][1] == times, k


@pytest.mark.parametrize("kinds", CASES)
@pytest.mark.parametrize("before", [False, True])
def test_matches_reference(device, tmp_path, kinds, before):
    seed = len(kinds) * 7 + before
    vocab = 5 + seed % 2
    model = random_model(vocab_size=vocab, context_size=1 + seed % 2, seed=seed, device=device)
    lens = [7, 0, 1, 5, 7]
    enc, enc_lens = random_batch(lens, seed=seed, device=device)
    scorers, refs = scorer_pairs(kinds, vocab, len(lens), seed, device, tmp_path)
    config = ModifiedBeamSearchConfig(beam_size=3, length_norm=bool(seed % 2))
    search = ModifiedBeamSearch(model, config, scorers=scorers, score_before_topk=before)
    streams = [search.new_stream(device, i) for i in range(len(lens))]
    search.decode_chunk(streams, enc, enc_lens)
    best = modified_beam_search(model, enc, enc_lens, config, scorers=scorers,
                                score_before_topk=before)
    for i, (n, hyps) in enumerate(zip(lens, search.hypotheses(streams))):
        oracle = NetOracle(model, enc[i])
        want = modified_beam_search_reference(oracle, n, 3, refs, utt=i, before_topk=before)
        _check(hyps, want)
        tokens, score, times = pick_best(want, config.length_norm, model.decoder.context_size)
        assert (tuple(best[i].tokens), best[i].timestamps) == (tokens, times)
        assert best[i].score == pytest.approx(score, abs=1e-6)


@pytest.mark.parametrize("kinds", ["rnh", "th"])
def test_streaming_equals_offline(device, tmp_path, kinds):
    vocab = 6
    model = random_model(vocab_size=vocab, context_size=2, seed=5, device=device)
    lens = [9, 4, 0, 7]
    enc, enc_lens = random_batch(lens, seed=5, device=device)
    scorers, _ = scorer_pairs(kinds, vocab, len(lens), 5, device, tmp_path)
    search = ModifiedBeamSearch(model, ModifiedBeamSearchConfig(beam_size=4), scorers=scorers)
    streams = [search.new_stream(device, i) for i in range(len(lens))]
    for order, chunk, chunk_lens, _ in random_chunks(enc, lens, seed=5, shuffle=True):
        search.decode_chunk([streams[i] for i in order], chunk, chunk_lens)
    offline = modified_beam_search(model, enc, enc_lens, ModifiedBeamSearchConfig(beam_size=4),
                                   scorers=scorers)
    for got, want in zip(search.results(streams), offline):
        assert (got.tokens, got.timestamps) == (want.tokens, want.timestamps)
        assert got.score == pytest.approx(want.score, abs=1e-6)


def test_scorers_change_the_result(device, tmp_path):
    """The test above would pass with scorers ignored on both sides only if they never mattered:
    check that they do on this input."""
    vocab = 6
    model = random_model(vocab_size=vocab, context_size=2, seed=3, device=device)
    enc, enc_lens = random_batch([9, 8, 9], seed=3, device=device)
    scorers, _ = scorer_pairs("rnh", vocab, 3, 3, device, tmp_path)
    plain = modified_beam_search(model, enc, enc_lens)
    fused = modified_beam_search(model, enc, enc_lens, scorers=scorers)
    assert [(h.tokens, h.score) for h in plain] != [(h.tokens, h.score) for h in fused]
