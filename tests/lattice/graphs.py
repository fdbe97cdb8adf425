"""Test helpers: k2 versions of the reference graphs, lattice walking, exact-search beams."""

from __future__ import annotations

import k2
import torch

from k2dec.lattice import LatticeConfig
from tests.reference.viterbi import RefGraph


def to_k2(graph: RefGraph, device: torch.device, ragged: bool = False) -> k2.Fsa:
    """The reference graph as a k2 Fsa with an ``arc_id`` attribute (index into graph.arcs);
    with ``ragged=True`` the aux_labels are a RaggedTensor holding every aux id of each arc."""
    fsa = k2.Fsa.from_str(graph.to_k2_str(), acceptor=False)
    labels = torch.tensor([a.label for a in graph.arcs], dtype=torch.int32)
    if not torch.equal(fsa.labels, labels):
        raise AssertionError("k2.Fsa.from_str reordered the arcs")
    fsa.arc_id = torch.arange(len(graph.arcs), dtype=torch.int32)
    if ragged:
        rows = [list(a.aux) if a.label != -1 else [-1] for a in graph.arcs]
        fsa.aux_labels = k2.RaggedTensor(rows)
    return fsa.to(device)


def lattice_arc_frames(lattice: k2.Fsa) -> list[int]:
    """Frame of each arc of a single lattice (2 axes), by walking from the start state."""
    arcs = lattice.arcs.values()[:, :3].tolist()
    state_frame = {0: 0}
    frames = [-1] * len(arcs)
    changed = True
    while changed:
        changed = False
        for i, (src, dst, _) in enumerate(arcs):
            if src in state_frame and frames[i] < 0:
                frames[i] = state_frame[src]
                if dst not in state_frame:
                    state_frame[dst] = state_frame[src] + 1
                changed = True
    return frames


def lattice_has_path(lattice: k2.Fsa, arc_ids: tuple[int, ...]) -> tuple[bool, float]:
    """Whether a single lattice (2 axes) has a path whose ``arc_id`` sequence is ``arc_ids``,
    and its best score."""
    arcs = lattice.arcs.values()[:, :3].tolist()
    ids = lattice.arc_id.tolist()
    scores = lattice.scores.double().tolist()
    final = lattice.shape[0] - 1
    current = {0: 0.0}
    for want in arc_ids:
        nxt: dict[int, float] = {}
        for i, (src, dst, _) in enumerate(arcs):
            if src in current and ids[i] == want:
                s = current[src] + scores[i]
                if s > nxt.get(dst, -float("inf")):
                    nxt[dst] = s
        current = nxt
        if not current:
            return False, -float("inf")
    if final in current:
        return True, current[final]
    return False, -float("inf")


#: Beams wide enough that nothing is pruned on the tests' small graphs (the exact search).
HUGE = LatticeConfig(search_beam=1e4, output_beam=1e4, min_active_states=0,
                     max_active_states=100000)
