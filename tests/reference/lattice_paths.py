"""Brute-force enumeration of every path of a small acyclic k2 FSA (plain Python)."""

from __future__ import annotations

from dataclasses import dataclass

import k2
import torch


@dataclass(frozen=True)
class RefPath:
    arcs: tuple[int, ...]  # arc indexes within the FSA
    score: float  # sum of arc scores (double)
    labels: tuple[int, ...]  # labels of the arcs (including the final -1)
    words: tuple[int, ...]  # aux labels > 0 along the path (empty if no aux_labels)
    tokens: tuple[int, ...]  # `tokens` attribute > 0 (or labels > 0 if absent)
    lm_score: float | None


def enumerate_paths(fsa: k2.Fsa) -> list[RefPath]:
    """Every path from the start state to the final state of a single acyclic FSA."""
    fsa = fsa.to("cpu")
    arcs = fsa.arcs.values()[:, :3].tolist()
    scores = fsa.scores.double().tolist()
    aux = None
    if hasattr(fsa, "aux_labels"):
        a = fsa.aux_labels
        aux = a.tolist() if isinstance(a, k2.RaggedTensor) else [[x] for x in a.tolist()]
    tokens = fsa.tokens.tolist() if hasattr(fsa, "tokens") else None
    lm = fsa.lm_scores.double().tolist() if hasattr(fsa, "lm_scores") else None
    out: dict[int, list[int]] = {}
    for i, (src, _, _) in enumerate(arcs):
        out.setdefault(src, []).append(i)
    num_states = fsa.shape[0]
    if num_states == 0:
        return []
    final = num_states - 1
    paths: list[RefPath] = []

    def walk(state: int, taken: list[int]) -> None:
        if state == final:
            labels = tuple(arcs[i][2] for i in taken)
            words = tuple(w for i in taken for w in (aux[i] if aux else []) if w > 0)
            toks = tuple(
                t for t in ((tokens[i] for i in taken) if tokens else labels) if t > 0
            )
            paths.append(RefPath(
                arcs=tuple(taken), score=sum(scores[i] for i in taken), labels=labels,
                words=words, tokens=toks,
                lm_score=sum(lm[i] for i in taken) if lm else None,
            ))
            return
        for i in out.get(state, []):
            walk(arcs[i][1], taken + [i])

    walk(0, [])
    return paths


def best_by_key(paths: list[RefPath], key: str) -> dict[tuple[int, ...], float]:
    """Best (max) path score for each distinct key sequence ('words' or 'tokens')."""
    best: dict[tuple[int, ...], float] = {}
    for p in paths:
        k = getattr(p, key)
        best[k] = max(best.get(k, float("-inf")), p.score)
    return best


def to_cpu_single(vec: k2.Fsa, i: int) -> k2.Fsa:
    return vec[i].to(torch.device("cpu"))


def best_per_word_sequence(fsa: k2.Fsa) -> dict[tuple[int, ...], float]:
    """Best (max) path score for each word sequence (``aux_labels`` > 0) of a single acyclic
    FSA, by dynamic programming over states (the same as ``best_by_key(enumerate_paths(fsa),
    "words")`` without listing every path, which graphs with many equivalent paths need)."""
    import functools

    fsa = fsa.to("cpu")
    num_states = fsa.shape[0]
    if num_states == 0:
        return {}
    arcs = fsa.arcs.values()[:, :3].tolist()
    scores = fsa.scores.double().tolist()
    a = fsa.aux_labels
    aux = a.tolist() if isinstance(a, k2.RaggedTensor) else [[x] for x in a.tolist()]
    out: dict[int, list[int]] = {}
    for i, (src, _, _) in enumerate(arcs):
        out.setdefault(src, []).append(i)
    final = num_states - 1

    @functools.cache
    def from_state(state: int) -> dict[tuple[int, ...], float]:
        if state == final:
            return {(): 0.0}
        best: dict[tuple[int, ...], float] = {}
        for i in out.get(state, []):
            words = tuple(w for w in aux[i] if w > 0)
            for rest, score in from_state(arcs[i][1]).items():
                key = words + rest
                best[key] = max(best.get(key, float("-inf")), scores[i] + score)
        return best

    return dict(from_state(0))
