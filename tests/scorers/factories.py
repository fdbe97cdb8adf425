"""Weighted scorers of every kind for small random search problems (the search tests pair each
with its reference from tests/reference/scorers.py)."""

from __future__ import annotations

import random

import torch

from k2dec.lm import RnnLM, RnnLmConfig, TransformerLM, TransformerLmConfig
from k2dec.scorers import ContextGraph, HotwordScorer, NeuralLmScorer, TokenNgramScorer
from k2dec.scorers import WeightedScorer as WS
from tests.reference.scorers import RefContextGraph, RefNeuralLm, RefNgram
from tests.scorers.helpers import random_phrases, token_arpa


def random_lm(kind: str, vocab: int, seed: int, device) -> RnnLM | TransformerLM:
    torch.manual_seed(seed)
    if kind == "rnn":
        lm = RnnLM(RnnLmConfig(vocab_size=vocab, embedding_dim=6, hidden_dim=6, num_layers=1,
                               sos_id=1, eos_id=1))
    else:
        lm = TransformerLM(TransformerLmConfig(vocab_size=vocab, d_model=8, nhead=2,
                                               num_layers=1, dim_feedforward=8, dropout=0.0,
                                               sos_id=1, eos_id=1))
    with torch.no_grad():
        for p in lm.parameters():
            p.mul_(2.0)
    return lm.to(device=device, dtype=torch.float64).eval()


class PerUtteranceRef:
    """Reference of a HotwordScorer with one list per utterance."""

    def __init__(self, refs):
        self.refs = refs

    def start(self, utt):
        return (utt, 0)

    def step(self, state, token):
        score, node = self.refs[state[0]].step(state[1], token)
        return score, (state[0], node)

    def final(self, state):
        return self.refs[state[0]].final(state[1])


def scorer_pairs(kinds: str, vocab: int, num_utts: int, seed: int, device, tmp_path,
                 strict: bool = False, score_eos: bool = False):
    """``(weighted scorers, [(reference, weight)])`` for the kinds in ``kinds`` (letters:
    ``r`` RNN LM, ``t`` Transformer LM, ``n`` token bigram with a negative weight (LODR),
    ``h`` per-utterance hotword lists)."""
    rng = random.Random(seed)
    scorers, refs = [], []
    for k in kinds:
        if k in "rt":
            lm = random_lm("rnn" if k == "r" else "transformer", vocab, seed, device)
            w = round(rng.uniform(0.2, 0.8), 2)
            scorers.append(WS(NeuralLmScorer(lm, score_eos=score_eos), w))
            refs.append((RefNeuralLm(lm, score_eos), w))
        elif k == "n":
            arpa = token_arpa(tmp_path, rng, vocab, 2)
            w = -round(rng.uniform(0.1, 0.5), 2)
            scorers.append(WS(TokenNgramScorer.from_arpa(arpa, vocab, device=device), w))
            refs.append((RefNgram(arpa), w))
        elif k == "h":
            lists = [random_phrases(rng, vocab, rng.randint(1, 4), with_scores=True)
                     for _ in range(num_utts)]
            graphs = [ContextGraph(p, context_score=1.5) for p in lists]
            scorers.append(WS(HotwordScorer(graphs, vocab, strict=strict, device=device), 1.0))
            refs.append((PerUtteranceRef([RefContextGraph(p, 1.5, strict) for p in lists]),
                         1.0))
    return scorers, refs
