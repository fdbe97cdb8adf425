"""Per-path scores of an n-best's linear FSAs and orders of paths by score.

The paths are an FsaVec ``[path][state][arc]`` of linear FSAs with a ``k2.RaggedShape``
``[utt][path]`` saying which utterance each belongs to; scores come back as float64 ragged
``[utt][path]``.
"""

from __future__ import annotations

import k2
import torch

__all__ = ["arcs_per_path", "path_sums", "path_tot_scores", "ragged_sort_desc", "top_k_index"]


def arcs_per_path(fsa: k2.Fsa) -> torch.Tensor:
    """int64 ``[num_paths]``: the number of arcs of each linear FSA (0 for an empty one)."""
    splits = fsa.arcs.shape().remove_axis(1).row_splits(1)
    return (splits[1:] - splits[:-1]).to(torch.int64)


def path_sums(fsa: k2.Fsa, shape: k2.RaggedShape, values: torch.Tensor) -> k2.RaggedTensor:
    """float64 ragged ``[utt][path]``: the sum over each path's arcs of ``values`` (one per
    arc of ``fsa``, e.g. its ``scores`` or ``lm_scores``)."""
    arc_shape = fsa.arcs.shape().remove_axis(1)  # [path][arc]
    per_arc = k2.RaggedTensor(arc_shape, values.to(torch.float64))
    return k2.RaggedTensor(shape, per_arc.sum())


def path_tot_scores(fsa: k2.Fsa, shape: k2.RaggedShape) -> k2.RaggedTensor:
    """float64 ragged ``[utt][path]``: sum of arc scores of each path (``-inf`` for a path
    with no arcs, i.e. a key sequence missing from the lattice it was intersected with)."""
    sums = path_sums(fsa, shape, fsa.scores)
    empty = arcs_per_path(fsa) == 0
    if empty.any():
        values = sums.values.clone()
        values[empty] = float("-inf")
        sums = k2.RaggedTensor(shape, values)
    return sums


def ragged_sort_desc(scores: k2.RaggedTensor) -> torch.Tensor:
    """Order of a 2-axis ragged float tensor's values with each row sorted best first (ties
    in path order); int64 indexes into ``scores.values``, rows kept in order."""
    values = scores.values
    row_ids = scores.shape.row_ids(1).to(torch.int64)
    by_score = torch.sort(-values, stable=True).indices
    by_row = torch.sort(row_ids[by_score], stable=True).indices
    return by_score[by_row]


def top_k_index(scores: k2.RaggedTensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``k`` best paths of each utterance by ``scores`` (float ragged ``[utt][path]``),
    best first, ties in path order; an utterance with fewer than ``k`` paths repeats its last
    (worst) one.

    Returns:
      ``(index, padded)``: int64 ``[num_utts, k]`` path indexes (into ``scores.values``) and
      bool ``[num_utts, k]``, True where a path is such a repeat; on ``scores``' device.

    Raises:
      ValueError: ``k`` is not an int ``>= 1``, or an utterance has no paths at all.
    """
    if not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be an int >= 1, got {k!r}")
    splits = scores.shape.row_splits(1)
    counts = (splits[1:] - splits[:-1]).to(torch.int64)
    if (counts == 0).any():
        bad = torch.nonzero(counts == 0).flatten().tolist()
        raise ValueError(f"utterances {bad} have no paths (empty lattices); drop them first")
    device = scores.values.device
    new2old = ragged_sort_desc(scores)
    starts = splits[:-1].to(device=device, dtype=torch.int64)
    counts = counts.to(device)
    ranks = torch.arange(k, device=device).unsqueeze(0)  # [1, k]
    padded = ranks >= counts.unsqueeze(1)
    clipped = torch.minimum(ranks, counts.unsqueeze(1) - 1)
    return new2old[starts.unsqueeze(1) + clipped], padded
