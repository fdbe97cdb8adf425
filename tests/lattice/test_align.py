"""CTC forced alignment against exhaustive search over every frame labelling."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from k2dec.lattice.align import ctc_forced_alignment
from k2dec.testing.graphs import peaked_log_probs
from tests.reference.ctc_align import best_labelling
from tests.reference.word_spans import ref_ctc_spans


def test_alignment_matches_exhaustive_search(device):
    rng = np.random.default_rng(0)
    seen = set()
    for _ in range(8):
        n = int(rng.integers(1, 4))
        lengths = torch.from_numpy(rng.integers(1, 6, size=n))
        lp = peaked_log_probs(rng, n, int(lengths.max()), 3, scale=1.0)
        tokens = [[int(x) for x in rng.integers(1, 3, size=int(rng.integers(0, 4)))]
                  for _ in range(n)]
        out = ctc_forced_alignment(lp.to(device), lengths, tokens)
        for i in range(n):
            score, labels = best_labelling(lp[i, : int(lengths[i])].double().numpy(), tokens[i])
            assert bool(out.aligned[i]) == (labels is not None)
            seen.add(labels is not None)
            if labels is None:
                assert out.begin.tolist()[i] == [] and out.score[i] == -math.inf
                continue
            assert float(out.score[i]) == pytest.approx(score, abs=1e-4)
            spans = ref_ctc_spans(list(labels))
            assert [s[0] for s in spans] == tokens[i]
            assert out.begin.tolist()[i] == [s[1] for s in spans]
            assert out.end.tolist()[i] == [s[2] for s in spans]
    assert seen == {True, False}


def test_alignment_bad_inputs():
    lp = torch.zeros(1, 3, 4).log_softmax(-1)
    with pytest.raises(ValueError, match="ids in"):
        ctc_forced_alignment(lp, torch.tensor([3]), [[0]])
    with pytest.raises(ValueError, match="N=1"):
        ctc_forced_alignment(lp, torch.tensor([3]), [[1], [2]])
