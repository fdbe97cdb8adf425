"""Batched CTC prefix beam search against the per-utterance reference, with and without
scorers; exactness against brute force when nothing is pruned."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from k2dec.lattice.ctc_prefix_beam_search import (
    CtcPrefixBeamSearchConfig,
    ctc_prefix_beam_search,
)
from tests.reference.ctc_prefix_reference import ctc_prefix_beam_search_reference
from tests.scorers.factories import scorer_pairs


def _problem(seed, lens, vocab, device):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(len(lens), max(lens), vocab, generator=g).mul(2.5).log_softmax(-1)
    return x.to(device), torch.tensor(lens, device=device)


def _check(got, want, tol):
    got = {tuple(h.tokens): (h.score, h.ctc_score, h.timestamps) for h in got}
    assert set(got) == set(want)
    for k, (score, ctc, times) in want.items():
        assert got[k][0] == pytest.approx(score, abs=tol), k
        assert got[k][1] == pytest.approx(ctc, abs=tol), k
        assert got[k][2] == times, k


@pytest.mark.parametrize("kinds", ["", "r", "t", "n", "h", "rnh"])
@pytest.mark.parametrize("beam", [1, 3, 5])
def test_matches_reference(device, tmp_path, kinds, beam):
    vocab = 6
    lens = [8, 1, 5, 8]
    x, lengths = _problem(beam + len(kinds), lens, vocab, device)
    scorers, refs = scorer_pairs(kinds, vocab, len(lens), beam, device, tmp_path, strict=True)
    got = ctc_prefix_beam_search(x, lengths, CtcPrefixBeamSearchConfig(beam_size=beam), scorers)
    for i, n in enumerate(lens):
        want = ctc_prefix_beam_search_reference(x[i, :n].double().tolist(), beam,
                                                scorers=refs, utt=i)
        _check(got[i], want, 1e-6)
        assert got[i][0].score == max(h.score for h in got[i])


def test_no_pruning_gives_exact_ctc_probabilities():
    """With a beam over every symbol and prefix, ctc_score is log P_ctc(tokens) summed over
    all alignments (brute force)."""
    vocab, frames = 3, 4
    x, lengths = _problem(0, [frames], vocab, "cpu")
    hyps = ctc_prefix_beam_search(x, lengths, CtcPrefixBeamSearchConfig(beam_size=40))[0]
    totals: dict = {}
    for path in itertools.product(range(vocab), repeat=frames):
        out, prev = [], None
        for s in path:
            if s != prev and s != 0:
                out.append(s)
            prev = s
        lp = sum(float(x[0, t, s]) for t, s in enumerate(path))
        totals.setdefault(tuple(out), []).append(lp)
    assert len(hyps) == len(totals)
    for h in hyps:
        vals = totals[tuple(h.tokens)]
        m = max(vals)
        assert h.ctc_score == pytest.approx(m + math.log(sum(math.exp(v - m) for v in vals)),
                                            abs=1e-5)


def test_config_and_input_validation():
    with pytest.raises(ValueError, match="beam"):
        CtcPrefixBeamSearchConfig(beam_size=0)
    x, lengths = _problem(0, [3], 4, "cpu")
    with pytest.raises(ValueError, match="blank_id"):
        ctc_prefix_beam_search(x, lengths, CtcPrefixBeamSearchConfig(blank_id=7))
    with pytest.raises(TypeError, match="float32"):
        ctc_prefix_beam_search(x.double(), lengths)
