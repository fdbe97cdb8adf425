"""Random attention beam search problems (decoder, memory, CTC log-probs, LM), the search and
its reference with joint CTC/attention and LM fusion weights beside the search config, and the
comparison of two searches' hypotheses, shared by the AED, fusion and hotword tests."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import pytest
import torch

from k2dec.aed import BeamSearchConfig, beam_search
from k2dec.testing.aed import TinyLM, joint_scorers, random_decoder
from tests.reference.aed_reference import reference_beam_search

#: The weights a case gives besides the search config (a method's fusion part holds them).
FUSION_WEIGHTS = ("ctc_weight", "lm_scale")


@dataclass(frozen=True)
class Setup:
    """A search config and the weights of joint CTC/attention decoding and LM fusion."""

    search: BeamSearchConfig
    ctc_weight: float = 0.0
    lm_scale: float = 0.0


def setup(**kwargs) -> Setup:
    """``BeamSearchConfig(**kwargs)`` with :data:`FUSION_WEIGHTS` taken out of ``kwargs``."""
    weights = {k: kwargs.pop(k) for k in FUSION_WEIGHTS if k in kwargs}
    return Setup(BeamSearchConfig(**kwargs), **weights)


def with_(s: Setup, **kwargs) -> Setup:
    """``s`` with fields of its search config or weights replaced."""
    weights = {k: kwargs.pop(k) for k in FUSION_WEIGHTS if k in kwargs}
    return dataclasses.replace(s, search=dataclasses.replace(s.search, **kwargs), **weights)


def run(dec, memory, lens, s=None, ctc_log_probs=None, lm=None, scorers=()):
    """The attention beam search of ``s`` (a :class:`Setup` or a BeamSearchConfig) with the
    CTC and LM scorers of its weights (:func:`k2dec.testing.aed.joint_scorers`) before
    ``scorers``."""
    s = s if isinstance(s, Setup) else Setup(s or BeamSearchConfig())
    joint = joint_scorers(dec, lens, ctc_log_probs, s.ctc_weight, lm, s.lm_scale,
                          s.search.ctc_blank_id)
    return beam_search(dec, memory, lens, s.search, [*joint, *scorers])


def ref(dec, memory, lens, s=None, ctc_log_probs=None, lm=None, scorers=()):
    """The reference search of what :func:`run` searches."""
    s = s if isinstance(s, Setup) else Setup(s or BeamSearchConfig())
    return reference_beam_search(dec, memory, lens, s.search, ctc_log_probs, lm, scorers,
                                 s.ctc_weight, s.lm_scale)

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
