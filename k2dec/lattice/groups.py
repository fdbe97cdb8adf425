"""A batch's lattices group by group (:func:`lattice_groups`), so that a caller which
processes each group (rescores it, samples and rescores its n-best, decodes its sausages)
never holds the lattices of the whole batch: what it holds is bounded by a number of
lattice arcs, whatever the density of the batch's densest lattices.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from functools import partial

import k2
import torch

from k2dec.lattice.dense import validate_log_probs
from k2dec.lattice.search import (
    LatticeConfig,
    LatticeResult,
    config_subsampling,
    cpu_group_size,
    get_lattice,
)
from k2dec.primitives.sizes import check_int

__all__ = ["MAX_GROUP_ARCS", "lattice_groups"]

#: The default of every ``max_group_arcs`` bound: at most this many lattice arcs are
#: processed together (about 60 MB of k2 arcs with their attributes; what the processing
#: makes of them, e.g. a whole-lattice composition or an n-best, is bounded by its own
#: settings per utterance).
MAX_GROUP_ARCS = 100_000

#: The largest ``max_group_arcs`` a setting may have.
MAX_GROUP_ARCS_LIMIT = 100_000_000


def lattice_groups(
    log_probs: torch.Tensor,
    log_probs_lens: torch.Tensor,
    graph: k2.Fsa,
    config: LatticeConfig = LatticeConfig(),  # noqa: B008 (frozen, immutable)
    subsampling_factor: int | None = None,
    max_group_arcs: int = MAX_GROUP_ARCS,
) -> Iterator[tuple[torch.Tensor, LatticeResult]]:
    """:func:`~k2dec.lattice.get_lattice` of a batch, group by group.

    On CPU the utterances are searched in the groups of one k2 search call
    (:func:`~k2dec.lattice.search.cpu_group_size`), longest first; the lattices found are
    handed over (and no longer held here) as soon as they hold ``max_group_arcs`` arcs, or
    before the next call's lattices would take them past that. On GPU, or with a graph per
    utterance, the whole batch is one group in the caller's order. Every utterance is
    searched on its own, so its lattice and report are those of ``get_lattice`` of the whole
    batch.

    Args: as :func:`~k2dec.lattice.get_lattice` (``log_probs`` float32 ``(N, T, V)``,
      ``log_probs_lens`` integer ``(N,)``, ``graph`` a single Fsa or an FsaVec of one or
      ``N``), and ``max_group_arcs``: the most lattice arcs of a group (one utterance at
      least, whatever its size).

    Returns:
      an iterator of ``(utts, result)`` (the search runs as it is iterated; the arguments
      are checked at the call): ``utts`` int64 CPU, the caller's indexes of the group's utterances
      (every index once over all groups), and their :class:`LatticeResult` in that order.
      A caller that should not hold two groups at once drops ``result`` before asking for
      the next group.
    """
    if not isinstance(config, LatticeConfig):
        raise TypeError(f"config must be a LatticeConfig, got {type(config).__name__}")
    check_int("max_group_arcs", max_group_arcs, 1, MAX_GROUP_ARCS_LIMIT)
    factor = config_subsampling(config, subsampling_factor)
    num_frames = validate_log_probs(log_probs, log_probs_lens, factor)
    search = partial(get_lattice, graph=graph, config=config, subsampling_factor=factor)
    per_utt_graph = graph.arcs.num_axes() == 3 and graph.shape[0] > 1
    if per_utt_graph or log_probs.device.type != "cpu":
        return iter([(torch.arange(num_frames.numel()), search(log_probs, log_probs_lens))])
    order = torch.sort(num_frames, descending=True, stable=True).indices
    calls = order.split(cpu_group_size(config.max_active_states))
    return _grouped(log_probs, log_probs_lens, calls, search, max_group_arcs)


def _grouped(log_probs: torch.Tensor, log_probs_lens: torch.Tensor,
             calls: Sequence[torch.Tensor], search, max_group_arcs: int
             ) -> Iterator[tuple[torch.Tensor, LatticeResult]]:
    """The loop of :func:`lattice_groups`: ``search`` (``get_lattice`` with the graph and
    settings) on each of ``calls`` (caller indexes, int64 CPU) in turn, the lattices waiting
    handed over whenever they are full."""
    waiting: list[tuple[torch.Tensor, LatticeResult]] = []
    for utts in calls:
        found = search(log_probs[utts], log_probs_lens[utts])
        if waiting and _arcs(waiting) + found.lattice.num_arcs > max_group_arcs:
            yield _joined(waiting)
        waiting.append((utts, found))
        del found
        if _arcs(waiting) >= max_group_arcs:  # full already
            yield _joined(waiting)
    if waiting:
        yield _joined(waiting)


def _arcs(waiting: list[tuple[torch.Tensor, LatticeResult]]) -> int:
    return sum(r.lattice.num_arcs for _, r in waiting)


def _joined(waiting: list[tuple[torch.Tensor, LatticeResult]]
            ) -> tuple[torch.Tensor, LatticeResult]:
    """The groups ``waiting`` as one, their utterances and lattices in order; ``waiting``
    is emptied (so the pieces are not held beyond the joined group)."""
    if len(waiting) == 1:
        return waiting.pop()
    utts = torch.cat([u for u, _ in waiting])
    lattice = k2.cat([r.lattice for _, r in waiting])
    reports = tuple(rep for _, r in waiting for rep in r.reports)
    waiting.clear()
    return utts, LatticeResult(lattice=lattice, reports=reports)
