"""Brute-force references for whole-lattice rescoring and lattice weight sweeps: enumerate every
path of a (small) lattice in Python and score it independently."""

from __future__ import annotations

import math


def lattice_paths(arcs, scores, lm_scores, words):
    """Every complete path of a single lattice.

    Args:
      arcs: list of ``(src, dst, label)``; the final state is the largest state index.
      scores, lm_scores, words: per-arc lists. ``words[i]`` is the arc's word id (0 for none,
        -1 on final arcs) or a list of word ids (ragged aux_labels).

    Returns:
      list of ``(am, lm, g_steps, labels)``: ``am = sum(scores - lm_scores)``; ``g_steps`` the
      symbols G reads along the path (each arc's words in order, a single 0 for an arc without
      words, -1 for the final arc); ``labels`` the arcs' labels.
    """
    out_arcs: dict[int, list[int]] = {}
    final = max(max(a[0], a[1]) for a in arcs) if arcs else 0
    for i, (src, _, _) in enumerate(arcs):
        out_arcs.setdefault(src, []).append(i)
    paths = []

    def steps(w):
        if isinstance(w, list | tuple):
            ws = tuple(x for x in w if x != 0)
            return ws if ws else (0,)
        return (w,)

    def walk(state, am, lm, seq, labels):
        if state == final:
            paths.append((am, lm, seq, labels))
            return
        for i in out_arcs.get(state, []):
            walk(arcs[i][1], am + scores[i] - lm_scores[i], lm + lm_scores[i],
                 seq + steps(words[i]), labels + (arcs[i][2],))

    walk(0, 0.0, 0.0, (), ())
    return paths


def g_score(g_arcs, word_seq) -> float:
    """Best score of the word acceptor G (``(src, dst, label, score)``, start state 0) reading
    ``word_seq`` in lock-step: each element is one G arc with that label, where 0 may be G's
    epsilon (backoff) arcs or staying put at score 0 (the added epsilon self-loop); -1 is a
    final arc."""
    current = {0: 0.0}
    for w in word_seq:
        nxt: dict[int, float] = {}
        if w == 0:
            for s, v in current.items():
                nxt[s] = max(nxt.get(s, -math.inf), v)
        for src, dst, label, score in g_arcs:
            if label == w and src in current:
                v = current[src] + score
                if v > nxt.get(dst, -math.inf):
                    nxt[dst] = v
        current = nxt
        if not current:
            return -math.inf
    return max(current.values()) if current else -math.inf


def rescore_reference(paths, g_arcs, lm_scale):
    """``(best_total, best_words)`` with total ``am / lm_scale + G(words)``."""
    best = (-math.inf, None)
    for am, _, seq, _ in paths:
        total = am / lm_scale + g_score(g_arcs, seq)
        if total > best[0]:
            best = (total, [w for w in seq if w > 0])
    return best


def weighted_best(paths, acoustic_scale, lm_scale, penalty):
    """Words of the best path under ``a * am + m * lm - penalty * num_words``."""
    best = (-math.inf, [])
    for am, lm, seq, _ in paths:
        words = [w for w in seq if w > 0]
        total = acoustic_scale * am + lm_scale * lm - penalty * len(words)
        if total > best[0]:
            best = (total, words)
    return best


def levenshtein(ref, hyp) -> int:
    """Edit distance (unit costs)."""
    prev = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        cur = [i] + [0] * len(hyp)
        for j, h in enumerate(hyp, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (r != h))
        prev = cur
    return prev[-1]
