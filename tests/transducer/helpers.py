"""Seeded random transducers and inputs for the transducer tests."""

from __future__ import annotations

import pytest
import torch

from k2dec.transducer import Joiner, LinearEncoder, StatelessDecoder, Transducer


def random_model(
    vocab_size: int = 4,
    context_size: int = 2,
    dim: int = 8,
    seed: int = 0,
    scale: float = 1.5,
    device: torch.device | str = "cpu",
) -> Transducer:
    """A small transducer with weights scaled so the output distributions are far from uniform
    (and far from one-hot), which makes the searches disagree when they are wrong."""
    g = torch.Generator().manual_seed(seed)
    model = Transducer(
        LinearEncoder(dim, dim),
        StatelessDecoder(vocab_size, dim, blank_id=0, context_size=context_size),
        Joiner(dim, dim, dim, vocab_size),
    )
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * scale / max(1, p.shape[-1]) ** 0.5)
    return model.to(device).eval()


def random_batch(
    lens: list[int], dim: int = 8, seed: int = 0, device: torch.device | str = "cpu"
) -> tuple[torch.Tensor, torch.Tensor]:
    """Padded ``encoder_out [N, max(lens), dim]`` (padding filled with noise, which must not
    matter) and ``encoder_out_lens [N]``."""
    g = torch.Generator().manual_seed(seed + 1000)
    t = max(lens) if lens else 0
    enc = torch.randn(len(lens), t, dim, generator=g) * 1.5
    return enc.to(device), torch.tensor(lens, dtype=torch.int64, device=device)


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
