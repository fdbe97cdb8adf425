"""Token confidences of transducer hypotheses against a per-token Python loop over the
unprojected decoder and joiner (tests/reference/transducer_reference.NetOracle)."""

from __future__ import annotations

import math

import pytest

from k2dec.testing.transducer import random_batch, random_model
from k2dec.transducer import (
    GreedySearchConfig,
    ModifiedBeamSearchConfig,
    greedy_search,
    modified_beam_search,
)
from k2dec.transducer.joiner_confidences import token_confidences
from tests.reference.transducer_reference import NetOracle


def _reference(model, enc, hyps, temperature=1.0, blank_penalty=0.0):
    out = []
    for i, h in enumerate(hyps):
        oracle = NetOracle(model, enc[i], temperature, blank_penalty)
        ctx = oracle.initial_context()
        probs = []
        for tok, t in zip(h.tokens, h.timestamps):
            probs.append(math.exp(oracle.log_probs(t, ctx)[tok]))
            ctx = oracle.next_context(ctx, tok)
        out.append(probs)
    return out


@pytest.mark.parametrize("seed", range(3))
def test_greedy_and_modified_confidences(device, seed):
    model = random_model(vocab_size=5, context_size=1 + seed % 2, seed=seed, device=device)
    lens = [6, 1, 0, 9, 4][: 1 + seed * 2]
    enc, enc_lens = random_batch(lens, seed=seed, device=device)
    for hyps in (greedy_search(model, enc, enc_lens, GreedySearchConfig(max_sym_per_frame=2)),
                 modified_beam_search(model, enc, enc_lens, ModifiedBeamSearchConfig(beam_size=3))):
        got = token_confidences(model, enc, enc_lens, [h.tokens for h in hyps],
                                [h.timestamps for h in hyps])
        assert got.dim0 == len(lens)
        want = _reference(model, enc, hyps)
        for g, w in zip(got.tolist(), want):
            assert g == pytest.approx(w, abs=1e-5)
    # greedy search takes the most probable symbol: a token's probability is the maximum
    hyps = greedy_search(model, enc, enc_lens)
    assert sum(len(h.tokens) for h in hyps) > 0
    got = token_confidences(model, enc, enc_lens, [h.tokens for h in hyps],
                            [h.timestamps for h in hyps])
    for i, h in enumerate(hyps):
        oracle = NetOracle(model, enc[i])
        ctx = oracle.initial_context()
        for k, (tok, t) in enumerate(zip(h.tokens, h.timestamps)):
            assert got.tolist()[i][k] == pytest.approx(
                math.exp(max(oracle.log_probs(t, ctx))), abs=1e-5)
            ctx = oracle.next_context(ctx, tok)


def test_temperature_and_bad_inputs(device):
    model = random_model(vocab_size=4, seed=1, device=device)
    enc, lens = random_batch([5, 3], seed=1, device=device)
    tokens, times = [[1, 2], [3]], [[0, 4], [2]]
    got = token_confidences(model, enc, lens, tokens, times, temperature=2.0, blank_penalty=0.5)
    for i, (tk, tm) in enumerate(zip(tokens, times)):
        oracle = NetOracle(model, enc[i], 2.0, 0.5)
        ctx = oracle.initial_context()
        for k, (a, t) in enumerate(zip(tk, tm)):
            assert got.tolist()[i][k] == pytest.approx(math.exp(oracle.log_probs(t, ctx)[a]),
                                                       abs=1e-5)
            ctx = oracle.next_context(ctx, a)
    with pytest.raises(ValueError, match="N=2 rows"):
        token_confidences(model, enc, lens, [[1]], [[0]])
    with pytest.raises(ValueError, match="same number"):
        token_confidences(model, enc, lens, [[1], []], [[0, 1], []])
    with pytest.raises(ValueError, match="non-blank"):
        token_confidences(model, enc, lens, [[0], []], [[0], []])
    with pytest.raises(ValueError, match="frames within"):
        token_confidences(model, enc, lens, [[1], [1]], [[0], [3]])
    assert token_confidences(model, enc, lens, [[], []], [[], []]).tolist() == [[], []]
