"""Brute-force references for lattice decoding over tiny graphs (numpy, no k2).

A graph here is a plain list of arcs ``(src, dst, label, aux, score)`` with start state 0 and
final state ``num_states - 1`` (k2's convention). ``label >= 0`` consumes one frame and scores
``score + log_probs[t, label]``; ``label == -1`` enters the final state on the extra frame ``T``
and scores ``score``. ``aux`` is a tuple of output ids (words), possibly empty.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from k2dec.testing.graphs import peaked_log_probs


@dataclass(frozen=True)
class RefArc:
    src: int
    dst: int
    label: int
    aux: tuple[int, ...]
    score: float


@dataclass(frozen=True)
class RefGraph:
    num_states: int
    arcs: tuple[RefArc, ...]

    @property
    def final_state(self) -> int:
        return self.num_states - 1

    def to_k2_str(self) -> str:
        """k2 text format (transducer: ``src dst label aux score``); aux is the first id or 0."""
        lines = []
        for a in self.arcs:
            aux = a.aux[0] if a.aux else (-1 if a.label == -1 else 0)
            lines.append(f"{a.src} {a.dst} {a.label} {aux} {a.score!r}")
        lines.append(str(self.final_state))
        return "\n".join(lines)

    def max_label(self) -> int:
        return max(a.label for a in self.arcs)


def random_graph(
    rng: np.random.Generator,
    num_states: int,
    vocab_size: int,
    num_words: int = 0,
    arcs_per_state: int = 3,
    score_scale: float = 1.0,
    ragged_aux: bool = False,
) -> RefGraph:
    """A random graph that accepts input of any length: state 0 has a blank self-loop and an arc
    to the final state. Arcs are sorted by source state, as k2 requires."""
    arcs: list[RefArc] = []
    final = num_states - 1
    for s in range(final):
        outs = []
        if s == 0:
            outs.append((0, 0))
        for _ in range(arcs_per_state):
            outs.append((int(rng.integers(0, max(final, 1))), int(rng.integers(0, vocab_size))))
        for dst, label in outs:
            if num_words == 0:
                aux: tuple[int, ...] = ()
            elif ragged_aux:
                k = int(rng.integers(0, 3))
                aux = tuple(int(w) for w in rng.integers(1, num_words + 1, size=k))
            else:
                w = int(rng.integers(0, num_words + 1))
                aux = (w,) if w > 0 else ()
            arcs.append(RefArc(s, dst, label, aux, float(np.float32(rng.normal() * score_scale))))
        if s == 0 or rng.random() < 0.5:
            arcs.append(RefArc(s, final, -1, (), float(np.float32(rng.normal() * score_scale))))
    return RefGraph(num_states, tuple(arcs))


def random_case(seed: int, ragged: bool = False, max_n: int = 5, max_t: int = 9,
                one_frame: bool = False) -> tuple[RefGraph, torch.Tensor, torch.Tensor]:
    """A random graph (:func:`random_graph`), peaked log-probs ``(N, T, vocab)`` and lengths
    ``(N,)`` of 1 to ``max_n - 1`` utterances; ``one_frame``: one of them lasts one frame."""
    rng = np.random.default_rng(seed)
    vocab = int(rng.integers(2, 6))
    graph = random_graph(rng, int(rng.integers(2, 7)), vocab, num_words=6, ragged_aux=ragged)
    n = int(rng.integers(1, max_n))
    lengths = rng.integers(1, max_t, size=n)
    if one_frame:
        lengths[int(rng.integers(0, n))] = 1
    log_probs = peaked_log_probs(rng, n, int(lengths.max()), vocab, scale=float(rng.uniform(1, 4)))
    return graph, log_probs, torch.from_numpy(lengths)


def viterbi(graph: RefGraph, log_probs: np.ndarray) -> tuple[float, list[int]]:
    """Best path by dynamic programming over states x frames.

    Args:
      log_probs: ``(T, V)`` array.

    Returns:
      ``(score, arc_indexes)`` with ``T + 1`` arc indexes (the last is the final ``-1`` arc), or
      ``(-inf, [])`` when no path of this length exists.
    """
    t_max = log_probs.shape[0]
    lp = log_probs.astype(np.float64)
    neg = -math.inf
    delta = np.full((t_max + 2, graph.num_states), neg)
    back = np.full((t_max + 2, graph.num_states), -1, dtype=np.int64)
    delta[0, 0] = 0.0
    for t in range(t_max + 1):
        for i, a in enumerate(graph.arcs):
            if delta[t, a.src] == neg:
                continue
            if a.label == -1:
                if t != t_max:
                    continue
                s = delta[t, a.src] + a.score
            else:
                if t == t_max:
                    continue
                s = delta[t, a.src] + a.score + lp[t, a.label]
            if s > delta[t + 1, a.dst]:
                delta[t + 1, a.dst] = s
                back[t + 1, a.dst] = i
    best = delta[t_max + 1, graph.final_state]
    if best == neg:
        return neg, []
    path = []
    state = graph.final_state
    for t in range(t_max + 1, 0, -1):
        i = int(back[t, state])
        path.append(i)
        state = graph.arcs[i].src
    path.reverse()
    return float(best), path


def enumerate_paths(graph: RefGraph, log_probs: np.ndarray) -> list[tuple[float, tuple[int, ...]]]:
    """Every complete path for ``T`` frames with its score (exponential: tiny inputs only)."""
    t_max = log_probs.shape[0]
    lp = log_probs.astype(np.float64)
    out_arcs: dict[int, list[int]] = {}
    for i, a in enumerate(graph.arcs):
        out_arcs.setdefault(a.src, []).append(i)
    results: list[tuple[float, tuple[int, ...]]] = []

    def walk(state: int, t: int, score: float, path: tuple[int, ...]) -> None:
        for i in out_arcs.get(state, []):
            a = graph.arcs[i]
            if t == t_max:
                if a.label == -1:
                    results.append((score + a.score, path + (i,)))
            elif a.label >= 0:
                walk(a.dst, t + 1, score + a.score + lp[t, a.label], path + (i,))

    walk(0, 0, 0.0, ())
    return results


def path_outputs(
    graph: RefGraph, path: list[int] | tuple[int, ...], blank_id: int = 0
) -> tuple[list[int], list[int], list[int], list[int]]:
    """``(tokens, token_frames, words, word_frames)`` of a path: tokens by CTC collapse of the
    per-frame labels (repeats merged, blanks dropped), words are the aux ids in order."""
    tokens, token_frames, words, word_frames = [], [], [], []
    prev = None
    for t, i in enumerate(path):
        a = graph.arcs[i]
        if a.label >= 0 and a.label != blank_id and a.label != prev:
            tokens.append(a.label)
            token_frames.append(t)
        prev = a.label
        for w in a.aux:
            words.append(w)
            word_frames.append(t)
    return tokens, token_frames, words, word_frames


def ctc_greedy(log_probs: np.ndarray, blank_id: int = 0) -> tuple[list[int], float]:
    """Per-frame argmax, merge repeats, drop blanks; score is the sum of the maxima."""
    ids = log_probs.argmax(axis=1)
    out = []
    prev = None
    for x in ids.tolist():
        if x != prev and x != blank_id:
            out.append(x)
        prev = x
    return out, float(log_probs.max(axis=1).astype(np.float64).sum())


def ctc_greedy_confidences(log_probs: np.ndarray, blank_id: int = 0) -> list[float]:
    """Per token of :func:`ctc_greedy`: the largest probability of the token over the frames
    of its run, frame by frame."""
    out: list[float] = []
    prev = None
    for frame in log_probs.astype(np.float64):
        x = int(frame.argmax())
        p = float(np.exp(frame[x]))
        if x != prev and x != blank_id:
            out.append(p)
        elif x == prev and x != blank_id:
            out[-1] = max(out[-1], p)
        prev = x
    return out


def path_score(graph: RefGraph, log_probs: np.ndarray, path: list[int] | tuple[int, ...]) -> float:
    """Score of an arc path for ``T`` frames; raises ValueError if it is not a complete path."""
    t_max = log_probs.shape[0]
    if len(path) != t_max + 1:
        raise ValueError(f"path has {len(path)} arcs, need T + 1 = {t_max + 1}")
    state, score = 0, 0.0
    for t, i in enumerate(path):
        a = graph.arcs[i]
        if a.src != state or (a.label == -1) != (t == t_max):
            raise ValueError(f"arc {i} does not continue the path at frame {t}")
        score += a.score + (float(log_probs[t, a.label]) if a.label >= 0 else 0.0)
        state = a.dst
    if state != graph.final_state:
        raise ValueError("path does not end in the final state")
    return score
