"""Slow references for MBR decoding over tiny acyclic lattices (plain Python, no k2).

A lattice here is ``(num_states, arcs)`` with arcs ``(src, dst, word, score)`` listed so that
``src < dst`` (a topological order), start state 0 and final state ``num_states - 1``; word 0
means no word.

- :func:`ref_acc_stats` / :func:`ref_mbr`: the edit-distance recursion of Xu et al. (2011) as
  Kaldi's ``MinimumBayesRisk`` writes it, one state, arc and position at a time (arcs without a
  word pass their source's values through);
- :func:`path_distribution` / :func:`expected_edit_distance` / :func:`exhaustive_mbr`: the
  exact quantities by enumerating every path.
"""

from __future__ import annotations

import itertools
import math

from tests.reference.lattice_rescore import levenshtein

DELTA = 2.0**-17  # k2dec.lattice.mbr.DELTA
GRID = 2.0**-32  # k2dec.lattice.mbr.GRID


def _logadd(a: float, b: float) -> float:
    if a == -math.inf:
        return b
    if b == -math.inf:
        return a
    m = max(a, b)
    return m + math.log(math.exp(a - m) + math.exp(b - m))


def _pad(hyp: list[int]) -> list[int]:
    out = [0]
    for w in hyp:
        out += [w, 0]
    return out


def ref_acc_stats(num_states: int, arcs: list[tuple[int, int, int, float]], hyp: list[int]
                  ) -> tuple[dict[int, dict[int, float]], float]:
    """One forward/backward pass for hypothesis ``hyp``: ``({bin: {word: posterior}}, L)``
    with bins numbered ``1..2K+1``."""
    r = [None] + _pad(hyp)  # 1-based
    q_max = len(r) - 1
    final = num_states - 1
    pre: dict[int, list[int]] = {}
    for i, (_, dst, _, _) in enumerate(arcs):
        pre.setdefault(dst, []).append(i)
    alpha = [-math.inf] * num_states
    alpha[0] = 0.0
    for n in range(1, num_states):
        for i in pre.get(n, []):
            s, _, _, p = arcs[i]
            alpha[n] = _logadd(alpha[n], alpha[s] + p)

    def weight(i: int) -> float:
        s, n, _, p = arcs[i]
        if alpha[n] == -math.inf:
            return 0.0
        return math.exp(alpha[s] + p - alpha[n])

    def cost(a: int, b: int) -> float:
        return 0.0 if a == b else 1.0

    alpha_d = [[0.0] * (q_max + 1) for _ in range(num_states)]
    for q in range(1, q_max + 1):
        alpha_d[0][q] = alpha_d[0][q - 1] + cost(0, r[q])

    def arc_values(i: int) -> tuple[list[float], list[int]]:
        s, _, w, _ = arcs[i]
        if w == 0:
            return list(alpha_d[s]), [0] * (q_max + 1)
        val = [0.0] * (q_max + 1)
        move = [2] * (q_max + 1)
        val[0] = alpha_d[s][0] + cost(w, 0) + DELTA
        for q in range(1, q_max + 1):
            a1 = alpha_d[s][q - 1] + cost(w, r[q])
            a2 = alpha_d[s][q] + cost(w, 0) + DELTA
            a3 = val[q - 1] + cost(0, r[q])
            if a1 <= a2 and a1 <= a3:
                val[q], move[q] = a1, 1
            elif a2 <= a3:
                val[q], move[q] = a2, 2
            else:
                val[q], move[q] = a3, 3
        return val, move

    for n in range(1, num_states):
        for i in pre.get(n, []):
            val, _ = arc_values(i)
            wt = weight(i)
            for q in range(q_max + 1):
                alpha_d[n][q] += wt * val[q]
        alpha_d[n] = [round(v / GRID) * GRID for v in alpha_d[n]]
    big_l = alpha_d[final][q_max]

    beta_d = [[0.0] * (q_max + 1) for _ in range(num_states)]
    beta_d[final][q_max] = 1.0
    gamma: dict[int, dict[int, float]] = {q: {} for q in range(1, q_max + 1)}

    def add(q: int, w: int, v: float) -> None:
        gamma[q][w] = gamma[q].get(w, 0.0) + v

    for n in range(num_states - 1, 0, -1):
        for i in pre.get(n, []):
            s, _, w, _ = arcs[i]
            wt = weight(i)
            if w == 0:
                for q in range(q_max + 1):
                    beta_d[s][q] += wt * beta_d[n][q]
                continue
            _, move = arc_values(i)
            beta_arc = [0.0] * (q_max + 1)
            for q in range(q_max, 0, -1):
                beta_arc[q] += wt * beta_d[n][q]
                if move[q] == 1:
                    beta_d[s][q - 1] += beta_arc[q]
                    add(q, w, beta_arc[q])
                elif move[q] == 2:
                    beta_d[s][q] += beta_arc[q]
                else:
                    beta_arc[q - 1] += beta_arc[q]
                    add(q, 0, beta_arc[q])
            beta_arc[0] += wt * beta_d[n][0]
            beta_d[s][0] += beta_arc[0]
    carry = 0.0
    for q in range(q_max, 0, -1):
        carry += beta_d[0][q]
        add(q, 0, carry)
    gamma = {q: {w: v for w, v in g.items() if v != 0.0} for q, g in gamma.items()}
    return gamma, big_l


def ref_mbr(num_states: int, arcs: list[tuple[int, int, int, float]], hyp: list[int],
            decode_mbr: bool = True, max_iterations: int = 100) -> dict:
    """The consensus loop: ``{"words", "confidences", "gamma", "L", "iterations",
    "converged"}``; ties in a bin go to the current word, then to the lower id."""
    current = list(hyp)
    for it in range(1, max_iterations + 1):
        gamma, big_l = ref_acc_stats(num_states, arcs, current)
        padded = _pad(current)
        chosen = []
        for q in range(1, len(padded) + 1):
            entries = gamma.get(q, {})
            cur = padded[q - 1]
            best = min(entries.items(), key=lambda kv: (-kv[1], kv[0] != cur, kv[0]),
                       default=(0, 0.0))[0]
            chosen.append(best if decode_mbr else cur)
        changed = chosen != padded
        words = [w for w in chosen if w > 0]
        confs = [gamma[q + 1].get(w, 0.0) for q, w in enumerate(chosen) if w > 0]
        if not changed or it == max_iterations:
            return {"words": words, "confidences": confs, "gamma": gamma, "L": big_l,
                    "iterations": it, "converged": not changed}
        current = words
    raise AssertionError("unreachable")


def path_distribution(num_states: int, arcs: list[tuple[int, int, int, float]]
                      ) -> dict[tuple[int, ...], float]:
    """Posterior probability of each word sequence (summed over its paths)."""
    out: dict[int, list[int]] = {}
    for i, (src, _, _, _) in enumerate(arcs):
        out.setdefault(src, []).append(i)
    seqs: dict[tuple[int, ...], float] = {}

    def walk(state: int, words: tuple[int, ...], score: float) -> None:
        if state == num_states - 1:
            seqs[words] = _logadd(seqs.get(words, -math.inf), score)
            return
        for i in out.get(state, []):
            _, dst, w, p = arcs[i]
            walk(dst, words + ((w,) if w > 0 else ()), score + p)

    walk(0, (), 0.0)
    tot = -math.inf
    for v in seqs.values():
        tot = _logadd(tot, v)
    return {k: math.exp(v - tot) for k, v in seqs.items()}


def expected_edit_distance(dist: dict[tuple[int, ...], float], hyp) -> float:
    return sum(p * levenshtein(tuple(hyp), seq) for seq, p in dist.items())


def exhaustive_mbr(dist: dict[tuple[int, ...], float], max_extra: int = 1
                   ) -> tuple[float, list[tuple[int, ...]]]:
    """The minimum expected edit distance over every word sequence of length up to the longest
    sequence in ``dist`` plus ``max_extra``, over the words in ``dist``, and the sequences
    reaching it."""
    vocab = sorted({w for seq in dist for w in seq})
    longest = max((len(s) for s in dist), default=0)
    best, arg = math.inf, []
    for length in range(longest + max_extra + 1):
        for cand in itertools.product(vocab, repeat=length):
            e = expected_edit_distance(dist, cand)
            if e < best - 1e-12:
                best, arg = e, [cand]
            elif abs(e - best) <= 1e-12:
                arg.append(cand)
        if not vocab:
            break
    return best, arg
