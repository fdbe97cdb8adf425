"""Decoding problems for the lattice area: a graph with the log-probs to decode through it,
and synthetic ones, an HLG-like CTC lexicon graph and an HCLG-like HMM graph (random lexicons,
unigram word scores) with peaked random log-softmax frames around random word strings."""

from __future__ import annotations

from dataclasses import dataclass

import k2
import numpy as np
import torch

from k2dec.testing.graphs import ctc_lexicon_graph, hmm_lexicon_graph

__all__ = ["Problem", "hmm_graph", "lexicon_graph", "make_inputs", "synthetic_problems"]


def lexicon_graph(rng: np.random.Generator, num_words: int, num_tokens: int) -> tuple[k2.Fsa, dict]:
    """CTC lexicon graph: state 0 is the word boundary; word w is a chain of token states with
    self-loops; its first token arc outputs w with a unigram score; word ends go back to state 0
    on blank, directly into any word starting with a different token, or to the final state."""
    lexicon = {}
    for w in range(1, num_words + 1):
        n = int(rng.integers(2, 6))
        toks = [int(rng.integers(1, num_tokens))]
        while len(toks) < n:
            t = int(rng.integers(1, num_tokens))
            if t != toks[-1]:
                toks.append(t)
        lexicon[w] = toks
    scores = np.log(rng.dirichlet(np.ones(num_words)))
    text = ctc_lexicon_graph(lexicon, {w: float(scores[w - 1]) for w in lexicon})
    return k2.arc_sort(k2.Fsa.from_str(text, acceptor=False)), lexicon


def hmm_graph(rng: np.random.Generator, num_words: int, num_phones: int) -> tuple[k2.Fsa, dict]:
    """Monophone HCLG-like graph: 2 HMM states (pdfs) per phone with self-loop and forward
    transition scores, pdf ids as labels (no blank), words on each word's first arc, unigram
    word scores; after a word any word may follow, or the utterance may end."""
    lexicon = {w: [int(p) for p in rng.integers(0, num_phones, size=int(rng.integers(2, 5)))]
               for w in range(1, num_words + 1)}
    scores = np.log(rng.dirichlet(np.ones(num_words)))
    text = hmm_lexicon_graph(lexicon, {w: float(scores[w - 1]) for w in lexicon})
    pdf_lexicon = {w: [2 * p + k for p in phones for k in range(2)]
                   for w, phones in lexicon.items()}
    return k2.arc_sort(k2.Fsa.from_str(text, acceptor=False)), pdf_lexicon


def make_inputs(rng, lexicon, num_tokens, utts, frames, blank=True):
    """Peaked log-probs: a random word string, each token held 1-3 frames (blanks between)."""
    lp = np.full((utts, frames, num_tokens), 0.0, dtype=np.float32)
    lengths = []
    words = list(lexicon)
    for u in range(utts):
        seq = []
        while len(seq) < frames:
            for t in lexicon[int(rng.choice(words))]:
                seq += [t] * int(rng.integers(1, 4)) + [0] * int(blank and rng.integers(0, 2))
        n = int(rng.integers(frames // 2, frames + 1))
        seq = seq[:n]
        logits = rng.normal(size=(n, num_tokens)).astype(np.float32)
        logits[np.arange(n), seq] += 5.0
        lp[u, :n] = logits
        lengths.append(n)
    x = torch.from_numpy(lp).log_softmax(-1)
    return x, torch.tensor(lengths)


@dataclass
class Problem:
    """A graph with the log-probs to decode through it (and kaldi's copy of the graph)."""

    name: str
    graph: k2.Fsa
    log_probs: torch.Tensor
    lengths: torch.Tensor
    fst: object = None


def synthetic_problems(seed: int, words: int, tokens: int, utts: int, frames: int
                       ) -> tuple[Problem, Problem]:
    """A synthetic HLG-like graph (``words`` words over ``tokens`` tokens) and an HCLG-like
    one (``tokens // 2`` phones, 2 pdfs each), each with ``utts`` utterances of up to
    ``frames`` frames (no FSTs yet); from ``numpy.random.default_rng(seed)``."""
    rng = np.random.default_rng(seed)
    hlg, lexicon = lexicon_graph(rng, words, tokens)
    hlg_inputs = make_inputs(rng, lexicon, tokens, utts, frames)
    hclg, pdf_lexicon = hmm_graph(rng, words, tokens // 2)
    hclg_inputs = make_inputs(rng, pdf_lexicon, tokens, utts, frames, blank=False)
    return (Problem(f"synthetic HLG-like ({hlg.num_arcs} arcs)", hlg, *hlg_inputs),
            Problem(f"synthetic HCLG-like ({hclg.num_arcs} arcs)", hclg, *hclg_inputs))
