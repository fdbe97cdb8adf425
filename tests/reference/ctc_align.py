"""Brute-force CTC forced alignment of words: every labelling of the frames is tried (tiny
inputs only), and word frames and confidences are read off the best one in plain Python."""

from __future__ import annotations

import itertools
import math

import numpy as np


def collapse(labels: tuple[int, ...]) -> list[int]:
    """CTC collapse (merge repeats, then drop blank 0)."""
    out, prev = [], None
    for x in labels:
        if x != prev and x != 0:
            out.append(x)
        prev = x
    return out


def best_labelling(lp: np.ndarray, tokens: list[int]) -> tuple[float, tuple[int, ...] | None]:
    """The best-scoring frame labelling of ``lp`` (``[T, V]``) that collapses to ``tokens``."""
    best, arg = -math.inf, None
    for labels in itertools.product(range(lp.shape[1]), repeat=lp.shape[0]):
        if collapse(labels) == tokens:
            score = float(sum(lp[t, x] for t, x in enumerate(labels)))
            if score > best:
                best, arg = score, labels
    return best, arg


def token_runs(labels: tuple[int, ...]) -> list[tuple[int, int]]:
    """``(begin, end)`` frames of each token of a labelling (its run of repeats)."""
    runs: list[tuple[int, int]] = []
    prev = 0
    for t, x in enumerate(labels):
        if x != 0 and x == prev:
            runs[-1] = (runs[-1][0], t + 1)
        elif x != 0:
            runs.append((t, t + 1))
        prev = x
    return runs


def align_words_reference(lp: np.ndarray, words: list[list[int]]) -> dict | None:
    """Word frames and confidences of the best alignment of ``words`` (token lists) to ``lp``
    (``[T, V]`` log-probs); ``None`` when no labelling spells them."""
    tokens = [x for w in words for x in w]
    score, labels = best_labelling(lp, tokens)
    if labels is None:
        return None
    runs = token_runs(labels)
    out = {"score": score, "token_runs": runs, "words": []}
    k = 0
    for w in words:
        begin, end = runs[k][0], runs[k + len(w) - 1][1]
        k += len(w)
        gaps = [lp[t, labels[t]] - lp[t].max() for t in range(begin, end)]
        out["words"].append((begin, end, math.exp(sum(gaps) / len(gaps))))
    return out
