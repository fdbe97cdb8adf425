"""Brute-force forced alignment with a garbage label between words (tiny inputs only): every
labelling of the frames over the labels and ``G`` is tried, in plain Python.

A labelling is allowed when its runs of ``G`` each start where a whole number of words has
been emitted (a word boundary, the start and the end included) and the other frames, read
as CTC (repeats merged, blanks dropped, a ``G`` run separating repeats), spell the tokens.
Its score is the sum of the frames' log-probs (a ``G`` frame scores the frame's best
log-prob), minus ``entry`` per ``G`` run and ``frame`` per ``G`` frame.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

G = -1
"""The garbage label in the labellings returned."""


def _spell(labels: tuple[int, ...], bounds: set[int]) -> list[int] | None:
    """The tokens a labelling spells, or ``None`` if a ``G`` run starts off a boundary."""
    out: list[int] = []
    prev = None
    for x in labels:
        if x == G:
            if prev != G and len(out) not in bounds:
                return None
        elif x != 0 and x != prev:
            out.append(x)
        prev = x
    return out


def _score(lp: np.ndarray, labels: tuple[int, ...], entry: float, frame: float) -> float:
    total = 0.0
    prev = None
    for t, x in enumerate(labels):
        if x == G:
            total += float(lp[t].max()) - frame - (entry if prev != G else 0.0)
        else:
            total += float(lp[t, x])
        prev = x
    return total


def _runs(labels: tuple[int, ...], want) -> list[tuple[int, int]]:
    """``(begin, end)`` of each run of labels for which ``want(label, prev)`` starts or
    continues a run (see the callers)."""
    runs: list[tuple[int, int]] = []
    prev = None
    for t, x in enumerate(labels):
        kind = want(x, prev)
        if kind == "continue":
            runs[-1] = (runs[-1][0], t + 1)
        elif kind == "start":
            runs.append((t, t + 1))
        prev = x
    return runs


def _token_kind(x, prev):
    if x in (0, G):
        return None
    return "continue" if x == prev else "start"


def _garbage_kind(x, prev):
    if x != G:
        return None
    return "continue" if prev == G else "start"


def align_garbage_reference(lp: np.ndarray, words: list[list[int]], entry: float,
                            frame: float) -> dict | None:
    """The best labelling of ``lp`` (``[T, V]`` log-probs) spelling ``words`` (token lists)
    with garbage runs at word boundaries: its score, token runs, word frames with their
    confidences (as :func:`tests.reference.ctc_align.align_words_reference`: garbage frames
    are in no word) and garbage runs; ``None`` when no labelling spells the words."""
    tokens = [x for w in words for x in w]
    bounds = set(np.cumsum([0] + [len(w) for w in words]).tolist())
    best, arg = -math.inf, None
    for labels in itertools.product([*range(lp.shape[1]), G], repeat=lp.shape[0]):
        if _spell(labels, bounds) == tokens:
            score = _score(lp, labels, entry, frame)
            if score > best:
                best, arg = score, labels
    if arg is None:
        return None
    runs = _runs(arg, _token_kind)
    out = {"score": best, "token_runs": runs, "words": [],
           "garbage_runs": _runs(arg, _garbage_kind), "labels": arg}
    k = 0
    for w in words:
        begin, end = runs[k][0], runs[k + len(w) - 1][1]
        k += len(w)
        gaps = [lp[t, 0 if arg[t] == G else arg[t]] - lp[t].max() for t in range(begin, end)]
        out["words"].append((begin, end, math.exp(sum(gaps) / len(gaps))))
    return out


def _skip_masks(num_words: int, max_run: int):
    """Every choice of skipped words (a bool per word) with at most ``max_run`` in a row."""
    for mask in itertools.product([False, True], repeat=num_words):
        run = longest = 0
        for m in mask:
            run = run + 1 if m else 0
            longest = max(longest, run)
        if longest <= max_run:
            yield mask


def align_skip_reference(lp: np.ndarray, words: list[list[int]], entry: float, frame: float,
                         skip: float, max_run: int) -> dict | None:
    """:func:`align_garbage_reference` where words may also be skipped (at most ``max_run``
    in a row), at ``skip`` each: the best over every choice of skipped words of the
    garbage alignment of the words kept, minus ``skip`` per skipped word. A skipped word
    has no frames: it, and each of its tokens, is reported as ``(gap, gap)``, the end of the
    kept token before it (0 if none), with confidence 0; ``"skipped"`` lists a bool per
    word."""
    best = None
    for mask in _skip_masks(len(words), max_run):
        kept = [w for w, m in zip(words, mask) if not m]
        ref = align_garbage_reference(lp, kept, entry, frame)
        if ref is None:
            continue
        ref["score"] -= skip * sum(mask)
        if best is None or ref["score"] > best[0]["score"]:
            best = (ref, mask)
    if best is None:
        return None
    ref, mask = best
    runs, out_words, k, gap = [], [], 0, 0
    kept_words = iter(ref["words"])
    for w, m in zip(words, mask):
        if m:
            runs += [(gap, gap)] * len(w)
            out_words.append((gap, gap, 0.0))
            continue
        runs += ref["token_runs"][k:k + len(w)]
        k += len(w)
        gap = runs[-1][1]
        out_words.append(next(kept_words))
    return {**ref, "token_runs": runs, "words": out_words, "skipped": list(mask)}
