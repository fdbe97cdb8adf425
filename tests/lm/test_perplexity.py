"""Perplexity == exp(-sum log-prob / number of tokens incl. eos), computed by hand."""

from __future__ import annotations

import math
import random

import k2
import pytest
import torch

from k2dec.lm import compute_perplexity
from k2dec.testing.lm import make_lm, random_seqs
from tests.reference.lm_reference import perplexity_by_hand


@pytest.mark.parametrize("name", ["rnn", "transformer"])
@pytest.mark.parametrize("batch_size", [1, 3, 100])
def test_perplexity_by_hand(name, batch_size, device):
    lm = make_lm(name, device, seed=batch_size)
    seqs = random_seqs(random.Random(batch_size), 8)
    result = compute_perplexity(lm, k2.RaggedTensor(seqs, dtype=torch.int32), batch_size)
    assert result.num_sentences == 8
    assert result.num_tokens == sum(len(s) + 1 for s in seqs)
    with torch.no_grad():
        expected = perplexity_by_hand(lm, seqs)
    assert result.perplexity == pytest.approx(expected, rel=1e-9)
    assert result.perplexity == pytest.approx(
        math.exp(-result.total_log_prob / result.num_tokens), rel=1e-12)


def test_perplexity_bad_inputs():
    lm = make_lm("rnn", torch.device("cpu"))
    with pytest.raises(ValueError, match="batch_size must be a positive int, got 0"):
        compute_perplexity(lm, k2.RaggedTensor([[3]], dtype=torch.int32), batch_size=0)
    with pytest.raises(TypeError, match="lm must be a k2dec.lm NeuralLM, got str"):
        compute_perplexity("lm", k2.RaggedTensor([[3]], dtype=torch.int32))
    with pytest.raises(ValueError, match="2 axes"):
        compute_perplexity(lm, k2.RaggedTensor([[[3]]], dtype=torch.int32))
