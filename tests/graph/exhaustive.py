"""Brute force over the tiny lang (:mod:`k2dec.testing.lang`): every word sequence, every
spelling of a token sequence, and the best path of an intersection; shared by the graph
tests."""

from __future__ import annotations

import itertools

import k2

from k2dec.testing.lang import TINY_LEXICON

TINY_WORDS = sorted({w for w, _ in TINY_LEXICON})


def linear_fsa(labels: list[int]) -> k2.Fsa:
    fsa = k2.linear_fsa(labels)
    if not labels:
        # k2 1.23.4's intersect crashes on a one-arc FSA (its scores view has
        # stride 4); an epsilon self-loop changes no best-path score.
        fsa = k2.add_epsilon_self_loops(fsa)
    return fsa


def best_intersection(a: k2.Fsa, b: k2.Fsa, eps: bool) -> tuple[float, k2.Fsa]:
    inter = k2.intersect(a, b, treat_epsilons_specially=eps)
    inter = k2.connect(k2.remove_epsilon_self_loops(inter))
    if inter.num_arcs == 0:
        return float("-inf"), inter
    vec = k2.create_fsa_vec([inter])
    score = vec.get_tot_scores(use_double_scores=True, log_semiring=False)[0].item()
    return score, k2.shortest_path(vec, use_double_scores=True)


def tiny_word_sequences(max_len: int):
    yield ()
    for n in range(1, max_len + 1):
        yield from itertools.product(TINY_WORDS, repeat=n)


def tiny_segmentations(tokens: tuple[str, ...]):
    """Every way to spell ``tokens`` with TINY_LEXICON words."""
    if not tokens:
        yield ()
        return
    for word, pron in TINY_LEXICON:
        n = len(pron)
        if tuple(pron) == tokens[:n]:
            for rest in tiny_segmentations(tokens[n:]):
                yield (word,) + rest
