"""Bounding lattice size: beam pruning to at most a given number of arcs per utterance.

Everything after the search (n-best sampling and intersection, whole-lattice rescoring with a
bigger G) costs time and memory in proportion to the lattice's arcs, and a long utterance
decoded with a wide output beam can have millions (the shipped model, 30 s of audio,
icefall's output beam 8: 1.9M arcs). :func:`prune_lattice` keeps, per utterance, the arcs on
paths within a beam of the best path (what ``intersect_dense_pruned``'s ``output_beam``
does), narrowing the beam per utterance until at most ``max_arcs`` arcs remain. The best
path always survives; every kept arc lies on a complete path of kept arcs; utterances within
the bound are returned unchanged. What was pruned is reported per utterance, so that callers
can record it (never silently).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import k2
import torch

__all__ = ["MAX_LATTICE_ARCS", "PruneReport", "prune_lattice"]

#: The default bound on one utterance's lattice arcs before the stages that cost time and
#: memory per arc (n-best sampling and intersection, MBR decoding): ``NbestConfig`` and
#: ``MbrConfig`` both take it.
MAX_LATTICE_ARCS = 50_000


@dataclass(frozen=True)
class PruneReport:
    """What :func:`prune_lattice` did to one utterance's lattice.

    Attributes:
      arcs_before, arcs_after: arc counts (equal when not pruned).
      beam: the output beam the lattice was pruned to (``None`` when not pruned): every
        kept arc is on a path whose score is within ``beam`` of the best path's.
    """

    arcs_before: int
    arcs_after: int
    beam: float | None = None

    @property
    def pruned(self) -> bool:
        return self.beam is not None

    def describe(self) -> str:
        """``""`` when not pruned, else a sentence for the utterance's report."""
        if self.beam is None:
            return ""
        return (f"lattice pruned from {self.arcs_before} to {self.arcs_after} arcs "
                f"(output beam {self.beam:.3g})")


def _arc_gaps(lattice: k2.Fsa) -> torch.Tensor:
    """float64 ``[num_arcs]``: how far below its utterance's best path the best path through
    each arc is (``inf`` for arcs on no complete path)."""
    fwd = lattice.get_forward_scores(use_double_scores=True, log_semiring=False)
    bwd = lattice.get_backward_scores(use_double_scores=True, log_semiring=False)
    shape = lattice.arcs.shape()
    states_split = shape.row_splits(1).to(torch.int64)
    src = shape.row_ids(2).to(torch.int64)  # state idx01 of each arc's source
    fsa_of_state = shape.row_ids(1).to(torch.int64)
    dest = lattice.arcs.values()[:, 1].to(torch.int64) + states_split[fsa_of_state[src]]
    through = fwd[src] + lattice.scores.to(torch.float64) + bwd[dest]
    best = bwd[states_split[:-1].clamp(max=max(len(bwd) - 1, 0))]  # start state of each FSA
    gap = best[fsa_of_state[src]] - through
    return torch.where(torch.isfinite(gap), gap.clamp(min=0.0),
                       torch.full_like(gap, math.inf))


def prune_lattice(
    lattice: k2.Fsa,
    max_arcs: int | Sequence[int] | torch.Tensor | None = None,
    beam: float | None = None,
    connect: bool = False,
) -> tuple[k2.Fsa, tuple[PruneReport, ...]]:
    """Keep, per utterance, the arcs within ``beam`` of the best path and at most
    ``max_arcs`` arcs (the beam narrowed as needed).

    Args:
      lattice: FsaVec ``[utt][state][arc]`` (acyclic, e.g. from ``get_lattice`` or
        fast_beam_search), any tensor attributes (carried to the kept arcs).
      max_arcs: the most arcs an utterance may keep: one bound for all, or one per utterance
        (``None``: no bound). Arcs tied at the cut-off are all dropped, so an utterance may
        keep fewer.
      beam: an output beam to apply to every utterance (``None``: only ``max_arcs``).
      connect: also drop the arcs on no complete path (``k2.connect``) when nothing else is
        pruned (``intersect_dense_pruned`` leaves many: later stages would still visit them).

    Returns:
      ``(pruned, reports)``: the pruned FsaVec (``lattice`` itself when nothing was pruned and
      ``connect`` is False; never modified) and one :class:`PruneReport` per utterance (a
      lattice only connected is not reported as pruned).
    """
    if not isinstance(lattice, k2.Fsa) or len(lattice.shape) != 3:
        raise TypeError(f"lattice must be a k2.Fsa FsaVec [utt][state][arc], got "
                        f"{type(lattice).__name__} {getattr(lattice, 'shape', '')}")
    num_utts = lattice.shape[0]
    caps = _caps(max_arcs, num_utts)
    if beam is not None and not beam > 0:
        raise ValueError(f"beam must be > 0 or None, got {beam!r}")
    shape = lattice.arcs.shape()
    arc_splits = shape.row_splits(2).to(torch.int64)[shape.row_splits(1).to(torch.int64)]
    counts = (arc_splits[1:] - arc_splits[:-1]).cpu()
    over = counts > caps
    if beam is None and not bool(over.any()):
        if connect:
            out = k2.connect(lattice)
            return out, tuple(PruneReport(int(c), int(a), None) for c, a in
                              zip(counts.tolist(), _arc_counts(out).tolist()))
        return lattice, tuple(PruneReport(int(c), int(c)) for c in counts.tolist())
    device = lattice.device
    gap = _arc_gaps(lattice)
    arc_utt = torch.repeat_interleave(torch.arange(num_utts, device=device),
                                      (arc_splits[1:] - arc_splits[:-1]))
    limit = _gap_limits(gap, arc_utt, arc_splits, caps, over, beam)
    out = _keep_arcs(lattice, gap <= limit[arc_utt])
    out = k2.connect(out)
    new_counts = _arc_counts(out).tolist()
    limits = limit.cpu().tolist()
    # arcs on some complete path: removing only the others is no pruning
    live = torch.zeros(num_utts, dtype=torch.int64, device=device).index_add_(
        0, arc_utt, torch.isfinite(gap).to(torch.int64)).tolist()
    reports = []
    for u, (before, after) in enumerate(zip(counts.tolist(), new_counts)):
        pruned = after < live[u] and math.isfinite(limits[u])
        reports.append(PruneReport(int(before), int(after), limits[u] if pruned else None))
    return out, tuple(reports)


def _gap_limits(gap: torch.Tensor, arc_utt: torch.Tensor, arc_splits: torch.Tensor,
                caps: torch.Tensor, over: torch.Tensor, beam: float | None) -> torch.Tensor:
    """float64 ``[num_utts]``: the largest gap an utterance's arcs may have to be kept (the
    beam, narrowed below the ``(max_arcs + 1)``-th best arc's gap where over ``caps``)."""
    num_utts, device = caps.numel(), gap.device
    limit = torch.full((num_utts,), math.inf if beam is None else float(beam),
                       dtype=torch.float64, device=device)
    if bool(over.any()):
        max_arcs_dev = caps.clamp(max=max(len(gap), 1)).to(torch.int64).to(device)
        # per utterance, the gap of its (max_arcs + 1)-th best arc: keep arcs strictly below
        # it (ties at 0, i.e. more than max_arcs arcs on equally best paths, are all kept)
        order = torch.sort(gap, stable=True).indices
        order = order[torch.sort(arc_utt[order], stable=True).indices]  # by utt, then gap
        kth = gap[order[(arc_splits[:-1] + max_arcs_dev).clamp(max=max(len(gap) - 1, 0))]]
        below = torch.nextafter(kth, torch.full_like(kth, -math.inf))
        cut = torch.where(kth > 0, below, torch.zeros_like(kth))
        limit = torch.where(over.to(device), torch.minimum(limit, cut), limit)
    return limit


def _keep_arcs(lattice: k2.Fsa, keep: torch.Tensor) -> k2.Fsa:
    """The arcs of ``lattice`` where ``keep`` (bool, per arc), with their attributes."""
    import _k2

    kept_idx = torch.nonzero(keep).flatten().to(torch.int32)
    ragged_keep = k2.RaggedTensor(lattice.arcs.shape(), keep.to(torch.int32))
    new_shape = ragged_keep.remove_values_eq(0).shape
    values = lattice.arcs.values()[kept_idx.to(torch.int64)]
    return k2.utils.fsa_from_unary_function_tensor(
        lattice, _k2.RaggedArc(new_shape, values), kept_idx)


def _caps(max_arcs, num_utts: int) -> torch.Tensor:
    """float64 CPU ``[num_utts]`` arc bounds (``inf``: none) from :func:`prune_lattice`'s
    ``max_arcs``."""
    if max_arcs is None:
        return torch.full((num_utts,), math.inf, dtype=torch.float64)
    if isinstance(max_arcs, bool | float | str):
        raise TypeError(f"max_arcs must be an int, ints or None, got {max_arcs!r}")
    if isinstance(max_arcs, int) and not isinstance(max_arcs, bool):
        values = [max_arcs] * num_utts
    else:
        values = [int(x) for x in (max_arcs.tolist() if isinstance(max_arcs, torch.Tensor)
                                   else max_arcs)]
        if len(values) != num_utts:
            raise ValueError(f"max_arcs has {len(values)} bounds for {num_utts} utterances")
    if any(v < 1 for v in values):
        raise ValueError(f"max_arcs must be >= 1, got {max_arcs!r}")
    return torch.tensor(values, dtype=torch.float64)


def _arc_counts(fsas: k2.Fsa) -> torch.Tensor:
    shape = fsas.arcs.shape()
    splits = shape.row_splits(2).to(torch.int64)[shape.row_splits(1).to(torch.int64)]
    return (splits[1:] - splits[:-1]).cpu()
