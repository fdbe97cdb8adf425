"""Per-utterance Python loops for token and word frame spans: the references of
``k2dec.primitives.best_paths.ctc_token_spans`` and ``word_spans``."""

from __future__ import annotations


def ref_ctc_spans(labels: list[int], blank: int = 0):
    """``(token, first frame, end frame)`` of each run of a non-blank label (negative labels,
    the final -1, are no token)."""
    out = []
    t = 0
    while t < len(labels):
        u = t
        while u + 1 < len(labels) and labels[u + 1] == labels[t]:
            u += 1
        if labels[t] != blank and labels[t] >= 0:
            out.append((labels[t], t, u + 1))
        t = u + 1
    return out


def ref_word_spans(tokens, begin, end, starts):
    """``[first frame, end frame]`` of each word: a token with ``starts[token]`` (or the first
    token) opens a word, the others extend the last one."""
    words = []
    for tok, b, e in zip(tokens, begin, end):
        if starts[tok] or not words:
            words.append([b, e])
        else:
            words[-1][1] = e
    return words
