"""Random attention beam search problems (decoder, memory, CTC log-probs, LM) and the
comparison of two searches' hypotheses, shared by the AED, fusion and hotword tests."""

from __future__ import annotations

import pytest
import torch

from k2dec.testing.aed import TinyLM, random_decoder

HYP_SCORE_FIELDS = ("score", "raw_score", "attention_score", "ctc_score", "lm_score")


def random_problem(seed, device, n=3, t=7, v=6, c=5, eos_bias=1.0, dtype=torch.float64):
    """A seeded problem: ``(decoder, memory [n, t, c], memory_lens [n] (the first is t; padding
    frames hold 50), CTC log-probs [n, t, v], TinyLM)`` over ``v`` tokens, in ``dtype``."""
    g = torch.Generator().manual_seed(seed)
    dec = random_decoder(v, c, seed, eos_bias=eos_bias, dtype=dtype).to(device)
    memory = torch.randn(n, t, c, generator=g, dtype=dtype)
    lens = torch.randint(1, t + 1, (n,), generator=g)
    lens[0] = t
    pad = torch.arange(t).unsqueeze(0) >= lens.unsqueeze(1)
    memory = memory.masked_fill(pad.unsqueeze(2), 50.0)  # padding must not matter
    ctc = torch.randn(n, t, v, generator=g, dtype=dtype).mul(2).log_softmax(-1)
    lm = TinyLM(v, seed=seed).to(dtype).to(device).eval()
    return dec, memory.to(device), lens.to(device), ctc.to(device), lm


def assert_same_hyps(got, want, tol):
    """``[utt][hyp]`` results with the same tokens, and scores within ``tol``."""
    assert len(got) == len(want)
    for hyps, ref in zip(got, want):
        assert [h.tokens for h in hyps] == [h.tokens for h in ref]
        for h, r in zip(hyps, ref):
            for f in HYP_SCORE_FIELDS:
                assert getattr(h, f) == pytest.approx(getattr(r, f), abs=tol), f
            assert h.token_scores == pytest.approx(r.token_scores, abs=tol)
            assert len(h.token_scores) == len(h.tokens) + 1
