"""Oracle paths: per utterance, the n-best path whose key sequence is closest to a reference.

Edit distances of all paths are computed together by :func:`edit_distances` (a dynamic
program over reference positions, vectorized over paths and hypothesis positions): time grows
with the reference length, memory with paths x hypothesis length (``k2.levenshtein_alignment``
builds a graph of ``len(ref) x len(hyp)`` cells per path: 1.8 GB and 87 s for 200 paths of a
60 s utterance).
"""

from __future__ import annotations

import k2
import torch

from .config import TIE_BREAKS

__all__ = ["check_refs", "edit_distances", "icefall_oracle_choice", "oracle_paths"]


def check_refs(refs: list[list[int]], num_utts: int) -> None:
    """``ValueError`` unless ``refs`` is a list (or tuple) of ``num_utts`` lists of int ids."""
    if not isinstance(refs, list | tuple) or len(refs) != num_utts:
        raise ValueError(f"need {num_utts} references (one list of ids per "
                         f"utterance), got {type(refs).__name__} of "
                         f"{len(refs) if hasattr(refs, '__len__') else '?'}")
    for u, ref in enumerate(refs):
        bad = [x for x in ref if isinstance(x, bool) or not isinstance(x, int)]
        if bad:
            raise ValueError(f"refs[{u}] has ids {bad[:5]} that are not ints")


def oracle_paths(key_seqs: k2.RaggedTensor, shape: k2.RaggedShape, refs: list[list[int]],
                 tie_break: str = "first") -> tuple[torch.Tensor, torch.Tensor]:
    """For each utterance, the path whose key sequence is closest to ``refs[utt]``.

    Args:
      key_seqs: int32 ragged ``[path][symbol]``; shape: ``[utt][path]``.
      refs: reference key sequences (word ids for word keys), one per utterance.
      tie_break: among paths at the same distance, ``"first"`` takes the lowest path index;
        ``"last"`` chooses as icefall's oracles do (:func:`icefall_oracle_choice`).

    Returns:
      ``(best_path, edit_distance)``: int64 ``[num_utts]`` path indexes (-1 for an
      utterance without paths) and their edit distances (-1 without paths), on
      ``key_seqs``' device.

    Raises:
      ValueError: not one reference per utterance, an id that is not an int, or an unknown
        ``tie_break``.
    """
    if tie_break not in TIE_BREAKS:
        raise ValueError(f"tie_break must be one of {TIE_BREAKS}, got {tie_break!r}")
    num_utts, num_paths = shape.dim0, shape.tot_size(1)
    check_refs(refs, num_utts)
    device = key_seqs.device
    dist_values = edit_distances(key_seqs, refs, shape.row_ids(1))
    dist = k2.RaggedTensor(shape, dist_values.to(torch.float64))
    best = torch.full((num_utts,), -1, dtype=torch.int64, device=device)
    best_dist = torch.full((num_utts,), -1, dtype=torch.int64, device=device)
    if num_paths:
        # k2's argmax returns the last of equal maxima: make every value distinct so
        # that ties go to the lowest index (distances times num_paths plus the index)
        index = torch.arange(num_paths, dtype=torch.float64, device=dist.values.device)
        neg = k2.RaggedTensor(shape, -(dist.values * num_paths + index))
        argmax = neg.argmax()  # -1 for empty rows
        has = argmax >= 0
        best[has] = argmax[has].to(torch.int64)
        best_dist[has] = dist.values[argmax[has].to(torch.int64)].to(torch.int64)
        if tie_break == "last":
            best = icefall_oracle_choice(key_seqs, shape, refs, dist_values, best_dist)
    return best, best_dist


def edit_distances(hyps: k2.RaggedTensor, refs: list[list[int]], hyp_to_ref: torch.Tensor
                   ) -> torch.Tensor:
    """Levenshtein distance (substitution, insertion, deletion: 1 each) of every hypothesis
    to its reference.

    Row ``i`` of the dynamic program (``D[i][j]``: distance of the first ``i`` reference and
    ``j`` hypothesis symbols) follows from row ``i - 1`` for all hypotheses at once: the
    substitution/deletion candidates ``E[j]`` are elementwise, and the insertion chain
    ``D[i][j] = min_k (E[k] + j - k)`` is a cumulative minimum.

    Args:
      hyps: int ragged ``[hyp][symbol]``.
      refs: reference symbol lists.
      hyp_to_ref: int ``[num_hyps]``: the reference of each hypothesis.

    Returns:
      int64 ``[num_hyps]`` on ``hyps``' device.
    """
    device = hyps.device
    num = hyps.dim0
    if num == 0:
        return torch.zeros(0, dtype=torch.int64, device=device)
    splits = hyps.shape.row_splits(1).to(torch.int64)
    hyp_len = splits[1:] - splits[:-1]
    width = int(hyp_len.max()) + 1
    col = torch.arange(width, device=device)
    # hypotheses padded with -1 (the padding's columns are never read)
    padded = torch.full((num, width), -1, dtype=torch.int64, device=device)
    rows = torch.repeat_interleave(torch.arange(num, device=device), hyp_len)
    padded[rows, torch.arange(hyps.numel(), device=device) - splits[:-1][rows] + 1] = \
        hyps.values.to(torch.int64)
    ref_len = torch.tensor([len(r) for r in refs], dtype=torch.int64)
    longest = int(ref_len.max()) if len(refs) else 0
    ref_pad = torch.full((max(len(refs), 1), longest + 1), -2, dtype=torch.int64)
    for u, r in enumerate(refs):  # references as a padded table (Python lists at the edge)
        ref_pad[u, 1:len(r) + 1] = torch.tensor(r, dtype=torch.int64)
    which = hyp_to_ref.to("cpu", torch.int64)
    ref_sym = ref_pad[which].to(device)  # [num, longest + 1]
    stop = ref_len[which].to(device)
    d = col.unsqueeze(0).expand(num, width).clone()  # row 0: j insertions
    out = torch.where(stop == 0, d.gather(1, hyp_len.unsqueeze(1)).squeeze(1),
                      torch.zeros_like(stop))
    for i in range(1, longest + 1):
        sub = (padded != ref_sym[:, i:i + 1]).to(torch.int64)
        e = d + 1  # delete reference symbol i
        e[:, 1:] = torch.minimum(e[:, 1:], d[:, :-1] + sub[:, 1:])
        d = torch.cummin(e - col, dim=1).values + col
        done = stop == i
        out = torch.where(done, d.gather(1, hyp_len.unsqueeze(1)).squeeze(1), out)
    return out


def icefall_oracle_choice(key_seqs: k2.RaggedTensor, shape: k2.RaggedShape,
                          refs: list[list[int]], dist: torch.Tensor, best_dist: torch.Tensor
                          ) -> torch.Tensor:
    """Per utterance, the path icefall's oracle takes among those at the best edit distance
    ``best_dist`` (int64 ``[num_utts]``; ``dist``: every path's distance): their float32
    ``k2.levenshtein_alignment`` scores against the reference, as icefall computes them
    (ins/del score -0.501, shortest alignment, offsets removed), and the last of the
    highest. The scores equal minus the distance up to float32 rounding, which decides;
    a path's score does not depend on the other paths scored with it. Returns int64
    ``[num_utts]`` path indexes (-1 for an utterance without paths)."""
    num_utts = shape.dim0
    path_utt = shape.row_ids(1).to(torch.int64)
    tied = torch.nonzero(dist.to(path_utt.device) == best_dist[path_utt]).squeeze(1)
    keys, _ = key_seqs.index(tied.to(torch.int32), axis=0, need_value_indexes=False)
    hyps = k2.levenshtein_graph(keys.to(torch.device("cpu")))
    ref_graphs = k2.levenshtein_graph([list(r) for r in refs])
    alignment = k2.levenshtein_alignment(ref_graphs, hyps,
                                         hyp_to_ref_map=path_utt[tied].to(torch.int32).cpu(),
                                         sorted_match_ref=True)
    scores = alignment.get_tot_scores(use_double_scores=False, log_semiring=False)
    counts = torch.bincount(path_utt[tied].cpu(), minlength=num_utts)
    splits = torch.cat([counts.new_zeros(1), counts.cumsum(0)]).to(torch.int32)
    splits_shape = k2.ragged.create_ragged_shape2(row_splits=splits, cached_tot_size=tied.numel())
    pick = k2.RaggedTensor(splits_shape, scores).argmax().to(torch.int64)
    best = torch.full((num_utts,), -1, dtype=torch.int64, device=dist.device)
    has = pick >= 0
    best[has] = tied.cpu()[pick[has]].to(best.device)
    return best
