"""Sanity checks of the exhaustive reference itself, and of the decoder-output cache."""

from __future__ import annotations

import math

import pytest
import torch

from k2dec.testing.transducer import random_batch, random_model
from k2dec.transducer import DecoderCache
from k2dec.transducer.network import cached_row_ids
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


@pytest.mark.parametrize("vocab", [5, 1100])  # a dense key index, sorted keys
def test_decoder_cache_lookup_insert_and_reset(vocab):
    cache = DecoderCache(vocab_size=vocab, context_size=2, max_size=4)
    assert cache.dense == (vocab == 5)
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


@pytest.mark.parametrize("vocab", [7, 1100])
@pytest.mark.parametrize("max_size", [3, 10, 4096])
def test_cached_row_ids_give_every_contexts_row(vocab, max_size):
    """Random batches of contexts (1 to 40 rows, repeats within and across batches) through
    cached_row_ids: the rows it points at are each context's own, whether the cache is
    large, emptied again and again, or smaller than one batch; each distinct missing
    context is computed once per batch."""
    g = torch.Generator().manual_seed(vocab + max_size)
    cache = DecoderCache(vocab_size=vocab, context_size=2, max_size=max_size)
    computed: list[int] = []

    def compute(contexts):
        assert contexts.dtype == torch.int64 and contexts.size(0) >= 1
        computed.append(contexts.size(0))
        return torch.stack([contexts[:, 0].double() * 1e4 + contexts[:, 1],
                            -contexts[:, 1].double()], dim=1)

    for _ in range(60):
        m = int(torch.randint(1, 41, (1,), generator=g))
        contexts = torch.randint(-1, min(vocab, 9), (m, 2), generator=g, dtype=torch.int32)
        before = len(computed)
        rows = cached_row_ids(cache, contexts, compute)
        assert rows.dtype == torch.int64 and rows.shape == (m,)
        assert torch.equal(cache.values[rows], compute(contexts.long()))
        computed.pop()  # (the check's own call)
        assert len(computed) - before <= 1
        if len(computed) > before:
            assert computed[-1] <= len(set(map(tuple, contexts.tolist())))
