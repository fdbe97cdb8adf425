"""CTC prefix scores against brute-force summation over every CTC alignment."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from k2dec.aed import CtcPrefixScorer
from tests.reference.aed_reference import ctc_full_logprob, ctc_prefix_logprob, logsumexp

BLANK = 0


def _collapse(path):
    out, prev = [], None
    for s in path:
        if s != prev and s != BLANK:
            out.append(s)
        prev = s
    return tuple(out)


def _brute_force(x):
    """Every alignment of x [T][V]: {collapsed output: log-prob}."""
    totals: dict = {}
    for path in itertools.product(range(len(x[0])), repeat=len(x)):
        lp = sum(x[t][s] for t, s in enumerate(path))
        totals.setdefault(_collapse(path), []).append(lp)
    return {k: logsumexp(v) for k, v in totals.items()}


def _prefixes(max_len, vocab, eos):
    labels = [v for v in range(vocab) if v not in (BLANK, eos)]
    for n in range(max_len + 1):
        yield from itertools.product(labels, repeat=n)


def _vectorized(scorer, utt, prefix, eos):
    """log psi(prefix) and log P(prefix) from the vectorized scorer, extending token by token."""
    row = torch.tensor([utt])
    state = scorer.initial_state(row)
    log_psi = torch.zeros(1, dtype=scorer.x.dtype)
    for u, tok in enumerate(prefix):
        cand = torch.tensor([[tok, eos]])
        lp, r = scorer.score(state, row, cand, u)
        state = CtcPrefixScorer.extend(r, lp, torch.tensor([0]), torch.tensor([0]),
                                       torch.tensor([tok]))
        log_psi = lp[0, 0]
    cand = torch.tensor([[eos]])
    full, _ = scorer.score(state, row, cand, len(prefix))
    return float(log_psi), float(full[0, 0])


@pytest.mark.parametrize("num_frames, vocab, seed", [(1, 3, 0), (2, 3, 1), (3, 4, 2), (4, 3, 3),
                                                      (5, 3, 4)])
def test_prefix_and_full_scores_match_brute_force(num_frames, vocab, seed):
    g = torch.Generator().manual_seed(seed)
    eos = vocab  # the decoder's eos is an extra CTC column that CTC itself never emits
    log_probs = torch.randn(1, num_frames, vocab + 1, generator=g, dtype=torch.float64)
    log_probs[..., eos] = -30.0
    log_probs = log_probs.log_softmax(-1)
    x = log_probs[0].tolist()
    totals = _brute_force([row[:vocab] + [row[eos]] for row in x])
    scorer = CtcPrefixScorer(log_probs, torch.tensor([num_frames]), BLANK, eos)
    checked = 0
    for prefix in _prefixes(num_frames + 1, vocab, eos):
        full_bf = totals.get(prefix, -math.inf)
        starts = [v for k, v in totals.items() if k[: len(prefix)] == prefix]
        psi_bf = logsumexp(starts)
        psi_ref = ctc_prefix_logprob(x, list(prefix), BLANK)
        full_ref = ctc_full_logprob(x, list(prefix), BLANK)
        psi_vec, full_vec = _vectorized(scorer, 0, prefix, eos)
        for got in (psi_ref, psi_vec):
            assert got == pytest.approx(psi_bf, abs=1e-9) or got == psi_bf == -math.inf
        for got in (full_ref, full_vec):
            assert got == pytest.approx(full_bf, abs=1e-9) or got == full_bf == -math.inf
        checked += psi_bf > -math.inf
    assert checked > 1


def test_padded_frames_do_not_count():
    g = torch.Generator().manual_seed(7)
    vocab, eos = 4, 4
    lp = torch.randn(3, 6, vocab + 1, generator=g, dtype=torch.float64).log_softmax(-1)
    lens = torch.tensor([6, 2, 4])
    batch = CtcPrefixScorer(lp, lens, BLANK, eos)
    for n in range(3):
        t = int(lens[n])
        single = CtcPrefixScorer(lp[n : n + 1, :t], lens[n : n + 1], BLANK, eos)
        for prefix in [(), (1,), (2, 2), (3, 1, 2)]:
            a = _vectorized(batch, n, prefix, eos)
            b = _vectorized(single, 0, prefix, eos)
            assert a == pytest.approx(b, abs=1e-9)
            ref = ctc_prefix_logprob(lp[n, :t].tolist(), list(prefix), BLANK)
            assert a[0] == pytest.approx(ref, abs=1e-9) or a[0] == ref == -math.inf


def test_blank_candidate_is_impossible():
    lp = torch.randn(1, 3, 4, dtype=torch.float64).log_softmax(-1)
    scorer = CtcPrefixScorer(lp, torch.tensor([3]), BLANK, 3)
    row = torch.tensor([0])
    out, _ = scorer.score(scorer.initial_state(row), row, torch.tensor([[BLANK, 1]]), 0)
    assert out[0, 0] == -math.inf and out[0, 1] > -math.inf


@pytest.mark.parametrize(
    "log_probs, lens, blank, eos, exc, match",
    [
        (torch.zeros(2, 3), torch.tensor([3, 3]), 0, 2, ValueError, "log_probs must have shape"),
        (torch.zeros(1, 3, 4, dtype=torch.int64), torch.tensor([3]), 0, 2, TypeError, "float"),
        (torch.zeros(2, 3, 4), torch.tensor([3]), 0, 2, ValueError, "lens must have shape"),
        (torch.zeros(1, 3, 4), torch.tensor([0]), 0, 2, ValueError, "lens must be in"),
        (torch.zeros(1, 3, 4), torch.tensor([4]), 0, 2, ValueError, "lens must be in"),
        (torch.zeros(1, 3, 4), torch.tensor([3]), 4, 2, ValueError, "blank_id"),
        (torch.zeros(1, 3, 4), torch.tensor([3]), 0, 7, ValueError, "eos_id"),
        (torch.zeros(1, 3, 4), torch.tensor([3]), 1, 1, ValueError, "differ"),
        (torch.full((1, 3, 4), float("nan")), torch.tensor([3]), 0, 2, ValueError, "NaN"),
    ],
)
def test_bad_inputs(log_probs, lens, blank, eos, exc, match):
    with pytest.raises(exc, match=match):
        CtcPrefixScorer(log_probs, lens, blank, eos)


def _first_frames(path):
    """The frame at which each collapsed label is first emitted."""
    frames, prev = [], None
    for t, s in enumerate(path):
        if s != prev and s != BLANK:
            frames.append(t)
        prev = s
    return frames


@pytest.mark.parametrize("seed", range(3))
def test_windowed_scores_match_brute_force(seed):
    g = torch.Generator().manual_seed(seed)
    num_frames, vocab = 5, 3
    eos = vocab
    log_probs = torch.randn(1, num_frames, vocab + 1, generator=g, dtype=torch.float64)
    log_probs[..., eos] = -30.0
    log_probs = log_probs.log_softmax(-1)
    x = log_probs[0].tolist()
    rng = torch.Generator().manual_seed(100 + seed)
    scorer = CtcPrefixScorer(log_probs, torch.tensor([num_frames]), BLANK, eos)
    for prefix in _prefixes(3, vocab, eos):
        if not prefix:
            continue
        peaks = torch.randint(0, num_frames, (len(prefix),), generator=rng).tolist()
        windows = [(p - 1, p + 1) for p in peaks]
        starts, exact = [], []
        for path in itertools.product(range(vocab + 1), repeat=num_frames):
            out = _collapse(path)
            if out[: len(prefix)] != prefix:
                continue
            frames = _first_frames(path)
            if all(lo <= f <= hi for f, (lo, hi) in zip(frames, windows)):
                lp = sum(x[t][s] for t, s in enumerate(path))
                starts.append(lp)
                if out == prefix:
                    exact.append(lp)
        psi_bf, full_bf = logsumexp(starts), logsumexp(exact)
        assert ctc_prefix_logprob(x, list(prefix), BLANK, windows) == pytest.approx(
            psi_bf, abs=1e-9) or psi_bf == -math.inf
        assert ctc_full_logprob(x, list(prefix), BLANK, windows) == pytest.approx(
            full_bf, abs=1e-9) or full_bf == -math.inf
        # vectorized: extend token by token with each token's window
        row = torch.tensor([0])
        state = scorer.initial_state(row)
        for u, (tok, (lo, hi)) in enumerate(zip(prefix, windows)):
            lp, r = scorer.score(state, row, torch.tensor([[tok]]), u,
                                 (torch.tensor([lo]), torch.tensor([hi])))
            state = CtcPrefixScorer.extend(r, lp, torch.tensor([0]), torch.tensor([0]),
                                           torch.tensor([tok]))
        full, _ = scorer.score(state, row, torch.tensor([[eos]]), len(prefix))
        for got, want in ((float(state.log_psi[0]), psi_bf), (float(full[0, 0]), full_bf)):
            assert got == pytest.approx(want, abs=1e-9) or got == want == -math.inf
