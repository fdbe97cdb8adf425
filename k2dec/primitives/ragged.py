"""Ragged-tensor utilities the search modules share: build a 2-axis ``k2.RaggedTensor`` from row
ids, keep a subset of its elements, row splits from counts. Whole batches, no per-row loops."""

from __future__ import annotations

import k2
import torch

__all__ = ["add_at", "exclusive_cumsum", "ragged_from_row_ids", "ragged_select"]


def add_at(target: torch.Tensor, index: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """``target[index[i]] += values[i]`` for every ``i``, in place; returns ``target``.

    Each row's sum depends only on that row's values and their order in ``index``: not on the
    other rows, their values or how they interleave, and not on the run. ``Tensor.index_add_``
    on a CUDA tensor adds with atomics, in an order that changes from run to run and with
    whatever else the batch holds, so float sums (posteriors, scores, confidences) differed in
    their last bits between a batch and the same utterance alone, which can flip exact ties.
    ``index_put_(accumulate=True)`` sorts the indexes stably and sums each run of equal
    indexes on its own: one value after another on the CPU (the same bits as ``index_add_``
    there), in a fixed tree over the run on CUDA (which may round differently from the CPU).

    Args:
      target: tensor ``(M, ...)``.
      index: int64 ``(K,)``, each in ``[0, M)``.
      values: ``(K, ...)`` (``target``'s trailing shape and dtype).
    """
    return target.index_put_((index,), values, accumulate=True)


def ragged_from_row_ids(row_ids: torch.Tensor, values: torch.Tensor, dim0: int) -> k2.RaggedTensor:
    """Build a 2-axis ragged tensor ``[row][elem]`` from per-element row indexes.

    Args:
      row_ids: int tensor of shape ``(num_elems,)``, non-decreasing, each in ``[0, dim0)``.
      values: tensor of shape ``(num_elems,)`` (any dtype k2 supports: int32, float32, float64).
      dim0: number of rows; trailing rows with no elements are kept (empty).

    Returns:
      ``k2.RaggedTensor`` with axes ``[row][elem]`` on ``values.device``.
    """
    device = values.device
    counts = torch.zeros(dim0, dtype=torch.int64, device=device)
    counts.index_add_(0, row_ids.to(device=device, dtype=torch.int64),
                      torch.ones_like(row_ids, dtype=torch.int64, device=device))
    row_splits = torch.zeros(dim0 + 1, dtype=torch.int32, device=device)
    row_splits[1:] = torch.cumsum(counts, dim=0).to(torch.int32)
    shape = k2.ragged.create_ragged_shape2(row_splits, None, values.numel())
    return k2.RaggedTensor(shape, values.contiguous())


def ragged_select(ragged: k2.RaggedTensor, keep: torch.Tensor) -> k2.RaggedTensor:
    """Keep the elements of a 2-axis ragged tensor where ``keep`` is True.

    Args:
      ragged: ``k2.RaggedTensor`` with axes ``[row][elem]``.
      keep: bool tensor of shape ``(ragged.numel(),)``.

    Returns:
      ``k2.RaggedTensor`` ``[row][elem]`` with the same number of rows (rows may become empty).
    """
    if ragged.num_axes != 2:
        raise ValueError(f"ragged must have 2 axes, got {ragged.num_axes}")
    row_ids = ragged.shape.row_ids(1)
    return ragged_from_row_ids(row_ids[keep], ragged.values[keep], ragged.dim0)


def exclusive_cumsum(counts: torch.Tensor) -> torch.Tensor:
    """Row splits of groups of ``counts`` rows: int64 ``[0, c0, c0 + c1, ...]``
    (``len(counts) + 1``)."""
    out = torch.zeros(counts.numel() + 1, dtype=torch.int64, device=counts.device)
    out[1:] = torch.cumsum(counts, dim=0)
    return out
