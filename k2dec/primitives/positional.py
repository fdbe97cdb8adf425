"""Sinusoidal position encodings shared by the Transformer networks (the joint model's Conformer,
the Transformer LM, the attention decoder)."""

from __future__ import annotations

import math

import torch

__all__ = ["sinusoidal_positions"]


def sinusoidal_positions(
    offset: int, length: int, dim: int, device: torch.device, dtype: torch.dtype
) -> torch.Tensor:
    """Float ``[length, dim]`` sinusoidal encodings of positions ``offset .. offset+length-1``
    (computed in float64, returned in ``dtype``; odd ``dim`` drops the last cosine)."""
    pos = torch.arange(offset, offset + length, device=device, dtype=torch.float64).unsqueeze(1)
    inv_freq = torch.exp(
        torch.arange(0, dim, 2, device=device, dtype=torch.float64) * (-math.log(10000.0) / dim)
    )
    angles = pos * inv_freq
    pe = torch.zeros(length, dim, device=device, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angles)
    pe[:, 1::2] = torch.cos(angles)[:, : dim // 2]
    return pe.to(dtype)
