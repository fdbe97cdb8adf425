"""Test helpers: k2 versions of the reference graphs, lattice walking, exact-search beams, and
small HLG lattices with a bigram G to rescore them."""

from __future__ import annotations

import k2
import numpy as np
import torch

from k2dec.lattice import LatticeConfig, get_lattice
from k2dec.testing.graphs import ctc_lexicon_graph, peaked_log_probs
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


#: word -> tokens of the HLG of :func:`hlg_lattices` (words 1-4, tokens 1-3)
LEXICON = {1: [1], 2: [2], 3: [1, 3], 4: [3, 2]}

# a bigram-with-backoff word acceptor: state 0 = history-less (backoff) state, state w = last
# word w; epsilon (0) arcs back off to state 0; every state may end.
G_ARCS = [
    (0, 1, 1, -1.2), (0, 2, 2, -1.6), (0, 3, 3, -2.3), (0, 4, 4, -2.0), (0, 5, -1, -0.5),
    (1, 2, 2, -0.3), (1, 0, 0, -1.0), (1, 5, -1, -0.7),
    (2, 2, 2, -2.5), (2, 3, 3, -0.4), (2, 0, 0, -0.9), (2, 5, -1, -0.2),
    (3, 1, 1, -0.6), (3, 0, 0, -1.1), (3, 5, -1, -1.5),
    (4, 4, 4, -0.1), (4, 0, 0, -0.8), (4, 5, -1, -0.9),
]


def bigram_G(device) -> k2.Fsa:
    """:data:`G_ARCS` as an arc-sorted k2 acceptor with epsilon self-loops and ``lm_scores``."""
    text = "\n".join(f"{s} {d} {lab} {sc!r}" for s, d, lab, sc in G_ARCS) + "\n5"
    G = k2.arc_sort(k2.add_epsilon_self_loops(k2.Fsa.from_str(text, acceptor=True)))
    G.lm_scores = G.scores.clone()
    return G.to(device)


def hlg_lattices(device, seed=0, n=4, output_beam=5.0, ragged=False):
    """``(get_lattice result, HLG)``: ``n`` seeded peaked CTC outputs (2-6 frames) searched in
    the CTC-lexicon HLG of :data:`LEXICON` (``ragged``: word 3's arcs emit two words)."""
    rng = np.random.default_rng(seed)
    scores = {1: -1.0, 2: -1.4, 3: -2.0, 4: -1.8}
    HLG = k2.Fsa.from_str(ctc_lexicon_graph(LEXICON, scores), acceptor=False)
    if ragged:
        # ragged word labels, as after k2.remove_epsilon; word 3's arcs emit "3 1" (two words)
        aux = HLG.aux_labels.tolist()
        HLG.aux_labels = k2.RaggedTensor(
            [[3, 1] if a == 3 else ([a] if a != 0 else []) for a in aux]
        )
    HLG = HLG.to(device)
    HLG.lm_scores = HLG.scores.clone()
    lengths = torch.from_numpy(rng.integers(2, 7, size=n))
    log_probs = peaked_log_probs(rng, n, int(lengths.max()), 4, scale=1.5).to(device)
    config = LatticeConfig(search_beam=30.0, output_beam=output_beam)
    return get_lattice(log_probs, lengths, HLG, config), HLG
