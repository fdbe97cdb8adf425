"""Sanity checks of the exhaustive reference itself, and of the decoder-output cache."""

from __future__ import annotations

import math

import pytest
import torch

from k2dec.testing.transducer import random_batch, random_model
from k2dec.transducer import DecoderCache
from tests.reference.transducer_reference import (
    NetOracle,
    all_alignments,
    best_alignment,
    greedy_reference,
    sequence_log_probs,
    total_log_prob,
)


@pytest.mark.parametrize("context_size", [1, 2, 3])
def test_alignment_enumeration_is_complete(context_size):
    """Per-frame distributions sum to one, so all V**T alignments together have probability 1;
    a missing or duplicated alignment would break this."""
    model = random_model(vocab_size=3, context_size=context_size, seed=context_size)
    enc, _ = random_batch([4], seed=context_size)
    oracle = NetOracle(model, enc[0], temperature=0.9, blank_penalty=0.3)
    assert len(list(all_alignments(oracle, 4))) == 3**4
    assert total_log_prob(oracle, 4) == pytest.approx(0.0, abs=1e-9)
    seqs = sequence_log_probs(oracle, 4)
    assert math.log(sum(math.exp(v) for v in seqs.values())) == pytest.approx(0.0, abs=1e-9)
    best = best_alignment(oracle, 4)
    assert best[2] >= greedy_reference(oracle, 4)[2] - 1e-12


def test_decoder_cache_lookup_insert_and_reset():
    cache = DecoderCache(vocab_size=5, context_size=2, max_size=4)
    ctx = torch.tensor([[-1, 0], [0, 0], [3, 4], [-1, 0]])
    keys = cache.key(ctx)
    assert keys[0] == keys[3] and len(set(keys[:3].tolist())) == 3
    found, _ = cache.lookup(keys)
    assert not found.any()
    values = torch.arange(6.0).view(3, 2)
    cache.insert(keys[:3], values)
    found, rows = cache.lookup(keys)
    assert found.all()
    torch.testing.assert_close(cache.values[rows], values[[0, 1, 2, 0]])
    # overflowing max_size empties the cache first
    more = cache.key(torch.tensor([[1, 1], [2, 2]]))
    cache.insert(more, torch.ones(2, 2))
    found, _ = cache.lookup(keys[:3])
    assert not found.any()
    assert cache.lookup(more)[0].all()
    with pytest.raises(ValueError, match="int64"):
        DecoderCache(vocab_size=500, context_size=8, max_size=10)
