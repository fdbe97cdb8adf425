"""Plain-Python reference of :mod:`k2dec.nbest.list_confidences`: one Levenshtein table per pair,
one utterance at a time."""

from __future__ import annotations

import math


def aligned_matches(hyp: list[int], ref: list[int]) -> list[bool]:
    """Per reference symbol, whether the alignment (fewest errors, then most matches; ties
    traced back from the end: diagonal, then skip a hypothesis symbol, then a reference
    symbol) aligns an equal hypothesis symbol to it."""
    w = len(hyp) + len(ref) + 3  # any weight above the number of matches

    def step(x, y):
        return -1 if x == y else w

    d = [[0] * (len(ref) + 1) for _ in range(len(hyp) + 1)]
    for j in range(len(ref) + 1):
        d[0][j] = j * w
    for i in range(1, len(hyp) + 1):
        d[i][0] = i * w
        for j in range(1, len(ref) + 1):
            d[i][j] = min(d[i - 1][j - 1] + step(hyp[i - 1], ref[j - 1]), d[i - 1][j] + w,
                          d[i][j - 1] + w)
    out = [False] * len(ref)
    i, j = len(hyp), len(ref)
    while i > 0 or j > 0:
        if i > 0 and j > 0 and d[i - 1][j - 1] + step(hyp[i - 1], ref[j - 1]) == d[i][j]:
            out[j - 1] = hyp[i - 1] == ref[j - 1]
            i, j = i - 1, j - 1
        elif i > 0 and d[i - 1][j] + w == d[i][j]:
            i -= 1
        else:
            j -= 1
    return out


def nbest_confidences(lists: list[list[list[int]]], scores: list[list[float]],
                      chosen: list[int], scale: float = 1.0) -> list[list[float]]:
    """Per utterance: its hypotheses, their scores and the chosen one (index within the
    utterance, -1: none) -> the confidence of each symbol of the chosen hypothesis."""
    out = []
    for hyps, sc, c in zip(lists, scores, chosen):
        if c < 0:
            out.append([])
            continue
        finite = [s for s in sc if s != -math.inf]
        top = max(finite) if finite else 0.0
        e = [math.exp(scale * (s - top)) if s != -math.inf else 0.0 for s in sc]
        total = sum(e)
        post = [x / total if total > 0 else 0.0 for x in e]
        conf = [0.0] * len(hyps[c])
        for h, p in zip(hyps, post):
            for k, m in enumerate(aligned_matches(h, hyps[c])):
                if m:
                    conf[k] += p
        out.append([min(1.0, x) for x in conf])
    return out
