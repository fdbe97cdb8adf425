"""Transducer test helpers: comparing hypotheses, feeding a batch in random chunks (the random
models and inputs are in :mod:`k2dec.testing.transducer`)."""

from __future__ import annotations

import pytest
import torch

# the old home of the random models: branches written before k2dec.testing import them here
from k2dec.testing.transducer import random_batch, random_model  # noqa: F401


def assert_same_hyps(got, want, abs_tol: float = 1e-5) -> None:
    """Same tokens and timestamps, scores equal up to float rounding (batched matmuls and
    TorchScript may round differently)."""
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert (a.tokens, a.timestamps) == (b.tokens, b.timestamps)
        assert a.score == pytest.approx(b.score, abs=abs_tol)


def random_chunks(enc: torch.Tensor, lens: list[int], seed: int, shuffle: bool):
    """Feed a padded batch in random-size chunks (0-3 frames, different per utterance) until
    every frame is fed.

    Yields ``(order, chunk, chunk_lens, done)``: row ``r`` of ``chunk`` belongs to stream
    ``order[r]`` (the batch order is shuffled between chunks when ``shuffle``: streams carry
    their own state), and ``done[i]`` is how many frames of utterance ``i`` are fed after it.
    """
    g = torch.Generator().manual_seed(seed)
    n = len(lens)
    done = [0] * n
    while any(d < m for d, m in zip(done, lens)):
        take = [min(m - d, int(torch.randint(0, 4, (1,), generator=g))) for d, m in zip(done, lens)]
        chunk = torch.zeros(n, max(take), enc.size(2), device=enc.device)
        for i, (d, k) in enumerate(zip(done, take)):
            chunk[i, :k] = enc[i, d : d + k]
        order = torch.randperm(n, generator=g).tolist() if shuffle else list(range(n))
        done = [d + k for d, k in zip(done, take)]
        yield order, chunk[order], torch.tensor([take[p] for p in order]), done
