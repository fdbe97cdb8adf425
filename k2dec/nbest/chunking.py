"""Ranges of items whose summed cost stays within a budget: how the n-best intersection and
the list rescorers bound the memory of one call."""

from __future__ import annotations

from collections.abc import Iterator

import torch

__all__ = ["chunk_end", "chunks"]


def chunks(cost: torch.Tensor, max_count: int, max_cost: int | None = None
           ) -> Iterator[tuple[int, int]]:
    """``(start, end)`` ranges covering ``0 .. len(cost)`` in order, each of at most
    ``max_count`` items whose ``cost`` (int ``[n]``, e.g. the memory each item's processing
    takes) adds up to at most ``max_cost`` (``None``: no cost bound); every range has at least
    one item. How the n-best and list rescorers bound the memory of one call."""
    cost = cost.to("cpu", torch.int64)
    start = 0
    while start < cost.numel():
        end = chunk_end(cost, start, max_count,
                        max_cost if max_cost is not None else int(cost[start:].sum()) + 1)
        yield start, end
        start = end


def chunk_end(cost: torch.Tensor, start: int, max_count: int, max_cost: int) -> int:
    """End of the chunk starting at ``start``: at most ``max_count`` items whose summed
    ``cost`` (int64 ``[n]``, on the CPU) stays within ``max_cost`` (always at least one
    item)."""
    end = min(start + max_count, cost.numel())
    within = torch.cumsum(cost[start:end], 0) <= max_cost
    return start + max(1, int(within.sum()))
