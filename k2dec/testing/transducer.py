"""Seeded random stateless transducers and encoder outputs for tests and benchmarks."""

from __future__ import annotations

import torch

from k2dec.transducer import Joiner, LinearEncoder, StatelessDecoder, Transducer

__all__ = ["random_batch", "random_model"]


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
