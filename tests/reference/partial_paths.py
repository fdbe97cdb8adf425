"""Brute force over a tiny graph: every path of exactly ``T`` emitting arcs from the start state,
the best complete one (then a final arc) and the best partial one (k2's ``allow_partial``: the
path's last state, which has no final arc, ends it with its best leaving arc's score)."""

from __future__ import annotations

import math

import k2
import torch


def best_paths_of_length(graph: k2.Fsa, log_probs: torch.Tensor
                         ) -> tuple[tuple[float, tuple[int, ...]] | None,
                                    tuple[float, tuple[int, ...]] | None]:
    """``(score, labels)`` of the best complete and the best partial path of a single graph
    through ``log_probs`` ``(T, V)`` (labels: one token per frame), each ``None`` when there is
    none. Enumerates every arc sequence: keep the graph and ``T`` tiny."""
    graph = graph.to("cpu")
    arcs = graph.arcs.values()[:, :3].tolist()
    scores = graph.scores.double().tolist()
    lp = log_probs.double().cpu().tolist()
    leaving: dict[int, list[int]] = {}
    for i, (src, _, _) in enumerate(arcs):
        leaving.setdefault(src, []).append(i)
    best_complete: tuple[float, tuple[int, ...]] | None = None
    best_partial: tuple[float, tuple[int, ...]] | None = None

    def better(old, score, labels):
        return old is None or score > old[0]

    def walk(state: int, t: int, score: float, labels: tuple[int, ...]) -> None:
        nonlocal best_complete, best_partial
        out = leaving.get(state, [])
        if t == len(lp):
            finals = [scores[i] for i in out if arcs[i][2] == -1]
            if finals:
                total = score + max(finals)
                if better(best_complete, total, labels):
                    best_complete = (total, labels)
            elif out:
                total = score + max(scores[i] for i in out)
                if better(best_partial, total, labels):
                    best_partial = (total, labels)
            return
        for i in out:
            label = arcs[i][2]
            if label == -1 or lp[t][label] == -math.inf:
                continue
            walk(arcs[i][1], t + 1, score + scores[i] + lp[t][label], labels + (label,))

    walk(0, 0, 0.0, ())
    return best_complete, best_partial
