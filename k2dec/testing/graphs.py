"""Decoding graphs written as k2 text for tests and benchmarks (a CTC lexicon graph like HLG, a
monophone HMM graph like HCLG) and random peaked network outputs."""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["ctc_lexicon_graph", "hmm_lexicon_graph", "peaked_log_probs"]


def peaked_log_probs(
    rng: np.random.Generator, n: int, t: int, v: int, scale: float = 3.0
) -> torch.Tensor:
    """float32 ``(n, t, v)`` log-softmax of scaled Gaussian logits (peaked for large scale)."""
    x = torch.from_numpy(rng.normal(size=(n, t, v)) * scale).float()
    return x.log_softmax(dim=-1)


def ctc_lexicon_graph(lexicon: dict[int, list[int]], word_scores: dict[int, float]) -> str:
    """k2 text of an HLG-like graph: labels are CTC tokens (0 = blank), aux_labels word ids.

    State 0 is the word boundary (blank self-loop). A word's first token arc leaves state 0 (or
    the end of the previous word) and outputs the word with its score (a unigram G); each token
    state has a self-loop; repeated tokens inside a word need a blank in between. The end state
    of every word returns to state 0 on blank, may start any word whose first token differs, and
    may end the utterance."""
    arcs: list[tuple[int, int, int, int, float]] = []
    next_state = 1
    word_ends = []
    word_starts = []  # (word, first token, first state)
    for word, tokens in lexicon.items():
        states = []
        for _ in tokens:
            states.append(next_state)
            next_state += 1
        word_starts.append((word, tokens[0], states[0]))
        for i, (tok, st) in enumerate(zip(tokens, states)):
            arcs.append((st, st, tok, 0, 0.0))
            if i + 1 < len(tokens):
                nxt_tok, nxt_st = tokens[i + 1], states[i + 1]
                if nxt_tok != tok:
                    arcs.append((st, nxt_st, nxt_tok, 0, 0.0))
                else:
                    blank_state = next_state
                    next_state += 1
                    arcs.append((st, blank_state, 0, 0, 0.0))
                    arcs.append((blank_state, blank_state, 0, 0, 0.0))
                    arcs.append((blank_state, nxt_st, nxt_tok, 0, 0.0))
        word_ends.append((tokens[-1], states[-1]))
    final = next_state
    arcs.append((0, 0, 0, 0, 0.0))
    for word, tok, st in word_starts:
        arcs.append((0, st, tok, word, word_scores[word]))
    arcs.append((0, final, -1, -1, 0.0))
    for last_tok, end in word_ends:
        arcs.append((end, 0, 0, 0, 0.0))
        for word, tok, st in word_starts:
            if tok != last_tok:
                arcs.append((end, st, tok, word, word_scores[word]))
        arcs.append((end, final, -1, -1, 0.0))
    arcs.sort(key=lambda a: a[0])
    lines = [f"{s} {d} {lab} {aux} {sc!r}" for s, d, lab, aux, sc in arcs]
    lines.append(str(final))
    return "\n".join(lines)


def hmm_lexicon_graph(
    lexicon: dict[int, list[int]], word_scores: dict[int, float], states_per_phone: int = 2,
    self_loop_score: float = -0.4, forward_score: float = -1.1,
) -> str:
    """k2 text of a monophone HCLG-like graph: labels are pdf ids (``phone * states_per_phone +
    k``, pdf 0 is an ordinary class, there is no blank), aux_labels word ids. Each HMM state has
    a self-loop and a forward arc (with transition scores); a word's first arc outputs the word
    with its unigram score; after a word's last state the graph may start any word or end."""
    arcs: list[tuple[int, int, int, int, float]] = []
    next_state = 1
    chains = []
    for word, phones in lexicon.items():
        pdfs = [p * states_per_phone + k for p in phones for k in range(states_per_phone)]
        states = list(range(next_state, next_state + len(pdfs)))
        next_state += len(pdfs)
        chains.append((word, pdfs, states))
    final = next_state
    for _, pdfs, states in chains:
        for i, (pdf, st) in enumerate(zip(pdfs, states)):
            arcs.append((st, st, pdf, 0, self_loop_score))
            if i + 1 < len(pdfs):
                arcs.append((st, states[i + 1], pdfs[i + 1], 0, forward_score))
    starts = [(w, pdfs[0], states[0]) for w, pdfs, states in chains]
    for src in [0] + [states[-1] for _, _, states in chains]:
        for word, pdf, st in starts:
            arcs.append((src, st, pdf, word, word_scores[word]))
        if src != 0:
            arcs.append((src, final, -1, -1, 0.0))
    arcs.sort(key=lambda a: a[0])
    lines = [f"{s} {d} {lab} {aux} {sc!r}" for s, d, lab, aux, sc in arcs]
    lines.append(str(final))
    return "\n".join(lines)
