"""Bookkeeping shared by the frame-synchronous batched searches (transducer greedy / beam
searches, CTC prefix beam search): which utterances are still active on a frame, growing padded
token columns, and the rolling hash that finds equal hypotheses."""

from __future__ import annotations

import torch

__all__ = ["COLUMN_STEP", "HASH_MULT", "column_capacity", "extend_hash", "grow_columns",
           "num_active_per_frame"]


HASH_MULT = 0x9E3779B97F4A7C15 - (1 << 64)
"""Multiplier of the rolling hash of token sequences (odd, so multiplication is invertible
modulo 2**64; int64 overflow wraps around)."""


def extend_hash(old: torch.Tensor, tokens: torch.Tensor, emit: torch.Tensor) -> torch.Tensor:
    """Rolling hash (int64) of token sequences whose hashes are ``old``, extended by
    ``tokens`` where ``emit`` (bool) is True; the empty sequence hashes to 0. Searches compare
    (hash, length) to find equal hypotheses."""
    return torch.where(emit, old * HASH_MULT + tokens + 1, old)


#: Token columns of beam-search hypotheses grow in steps of this many, so their width stays
#: within ``COLUMN_STEP - 1`` of the longest hypothesis (doubling made every later copy of
#: the hypotheses up to twice as wide once one hypothesis passed a power of two).
COLUMN_STEP = 16


def column_capacity(need: int) -> int:
    """Columns to allocate for ``need`` tokens: ``need`` rounded up to a multiple of
    :data:`COLUMN_STEP`."""
    return -(-need // COLUMN_STEP) * COLUMN_STEP


def grow_columns(x: torch.Tensor, cap: int) -> torch.Tensor:
    """``x`` (``[R, W]``) zero-padded to ``cap >= W`` columns."""
    out = x.new_zeros((x.size(0), cap))
    out[:, : x.size(1)] = x
    return out


def num_active_per_frame(lens_desc: list[int]) -> list[int]:
    """For lengths sorted in decreasing order, the number of utterances with length > t for
    t = 0 .. max(lens) - 1 (the utterances still active on frame t are a prefix)."""
    if not lens_desc:
        return []
    out = []
    n = len(lens_desc)
    for t in range(lens_desc[0]):
        while n > 0 and lens_desc[n - 1] <= t:
            n -= 1
        out.append(n)
    return out
