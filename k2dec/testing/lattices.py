"""Random lattices for tests and benchmarks: tiny acyclic word lattices (k2's conventions) with
their plain-Python form for references, and lattices of random peaked posteriors through a
graph."""

from __future__ import annotations

import k2
import numpy as np
import torch

__all__ = ["Dag", "dag_to_k2", "dags_to_vec", "empty_fsa", "make_lattices", "random_word_dag"]

Dag = tuple[int, list[tuple[int, int, int, float]]]


def random_word_dag(rng: np.random.Generator, num_states: int, num_words: int = 3,
                    p_word: float = 0.6, max_out: int = 3, one_word: bool = False) -> Dag:
    """``(num_states, arcs)``, arcs ``(src, dst, word, score)`` sorted by ``src`` with
    ``src < dst``; only ``-1`` arcs (word 0 here) enter the final state; every state reaches
    it. With ``one_word`` only the arcs leaving the start state carry words, so every path has
    at most one word."""
    final = num_states - 1
    arcs = []
    for s in range(final):
        if s == final - 1:
            arcs.append((s, final, 0, float(np.float32(rng.normal()))))
            continue
        dsts = {s + 1} | {int(d) for d in rng.integers(s + 1, final, size=int(rng.integers(0, 2)))}
        for d in sorted(dsts):
            for _ in range(int(rng.integers(1, max_out))):
                w = int(rng.integers(1, num_words + 1)) if rng.random() < p_word else 0
                if one_word and s != 0:
                    w = 0
                arcs.append((s, d, w, float(np.float32(rng.normal()))))
        if s > 0 and rng.random() < 0.25:
            arcs.append((s, final, 0, float(np.float32(rng.normal()))))
    arcs.sort(key=lambda a: a[0])
    return num_states, arcs


def dag_to_k2(dag: Dag, device: torch.device | str = "cpu") -> k2.Fsa:
    """A single k2 Fsa: labels are tokens (1, or -1 into the final state), ``aux_labels`` the
    words (-1 on final arcs)."""
    num_states, arcs = dag
    final = num_states - 1
    lines = []
    for src, dst, w, score in arcs:
        if dst == final:
            lines.append(f"{src} {dst} -1 -1 {score!r}")
        else:
            lines.append(f"{src} {dst} 1 {w} {score!r}")
    lines.append(str(final))
    return k2.Fsa.from_str("\n".join(lines), acceptor=False).to(device)


def empty_fsa(device: torch.device | str = "cpu") -> k2.Fsa:
    """An FSA with no states (what get_lattice gives an utterance with no path): a dead end
    that ``k2.connect`` removes entirely."""
    return k2.connect(k2.Fsa.from_str("0 1 1 0 0.0\n2", acceptor=False)).to(device)


def dags_to_vec(dags: list[Dag | None], device: torch.device | str = "cpu") -> k2.Fsa:
    """An FsaVec of the DAGs (``None``: an empty FSA)."""
    return k2.create_fsa_vec([empty_fsa(device) if d is None else dag_to_k2(d, device)
                              for d in dags])


def make_lattices(graph: k2.Fsa, num_utts: int, max_frames: int, seed: int,
                  device: torch.device, vocab: int, scale: float = 1.5) -> k2.Fsa:
    """Lattices of ``num_utts`` random utterances (lengths 2..max_frames) with wide beams."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(2, max_frames + 1, (num_utts,), generator=g)
    lengths, _ = torch.sort(lengths, descending=True)
    log_probs = (torch.randn(num_utts, int(lengths.max()), vocab, generator=g) * scale)
    log_probs = log_probs.log_softmax(-1).to(device)
    sup = torch.stack([torch.arange(num_utts), torch.zeros(num_utts, dtype=torch.int64),
                       lengths], dim=1).to(torch.int32)
    dense = k2.DenseFsaVec(log_probs, sup)
    graphs = k2.create_fsa_vec([graph.to(device)] * num_utts)
    return k2.intersect_dense_pruned(graphs, dense, search_beam=100, output_beam=100,
                                     min_active_states=1, max_active_states=100000)
