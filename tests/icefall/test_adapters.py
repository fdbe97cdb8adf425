"""The adapters of ``k2dec.icefall`` that take icefall's objects (``tests/icefall/
icefall_shaped.py``) against per-hypothesis references: an ``LmScorer`` in shallow fusion and
its LM in sequence scoring, ``NgramLm`` as ``NgramLmStateCost`` scores it, ``ContextGraph``,
and both attention-decoder conventions."""

from __future__ import annotations

import math
import random

import k2
import pytest
import torch

from k2dec.icefall.attention import NllAttentionDecoder, attention_decoder
from k2dec.icefall.lm import IcefallLm, ScoreTokenScorer, fusion_scorer, sequence_lm
from k2dec.icefall.state_scorers import (
    ContextStateScorer,
    FstNgramScorer,
    context_scorer,
    ngram_scorer,
)
from k2dec.scorers import ContextGraph, HotwordScorer, NeuralLmScorer
from k2dec.testing.lm import VOCAB, make_lm, random_seqs
from tests.icefall import icefall_shaped
from tests.reference.scorers import RefContextGraph, RefNeuralLm
from tests.scorers.helpers import check_against_reference, random_phrases


@pytest.mark.parametrize("name", ["rnn", "transformer"])
def test_an_icefall_lm_scorer_in_shallow_fusion(name):
    lm = make_lm(name, torch.device("cpu"), seed=2)
    shaped = (icefall_shaped.LmScorer(lm, 0.3) if name == "rnn"
              else icefall_shaped.TransformerLmScorer(lm, 0.3))
    scorer, scale = fusion_scorer(shaped)
    assert isinstance(scorer, ScoreTokenScorer) and scale == 0.3
    check_against_reference(scorer, RefNeuralLm(lm, score_eos=False), [0, 1, 0], VOCAB,
                            steps=7, seed=len(name), tol=1e-6)


def test_a_k2dec_lm_needs_its_scale():
    lm = make_lm("rnn", torch.device("cpu"))
    from k2dec.icefall import LmScorer

    scorer, scale = fusion_scorer(LmScorer(lm, 0.25))
    assert isinstance(scorer, NeuralLmScorer) and scale == 0.25
    with pytest.raises(TypeError, match="lm_scale"):
        fusion_scorer(lm)
    with pytest.raises(ValueError, match="lm_scale"):
        LmScorer(lm, float("nan"))


def test_an_icefall_lm_scores_sequences_as_k2dec_does():
    lm = make_lm("rnn", torch.device("cpu"), seed=4)
    seqs = random_seqs(random.Random(0), 9)  # the first two: empty and length 1
    tokens = k2.RaggedTensor(seqs, dtype=torch.int32)
    want = lm.score_sequences(tokens)
    for wrapped in (icefall_shaped.RnnLmModel(lm), icefall_shaped.LmScorer(lm, 0.3)):
        adapter = sequence_lm(wrapped, blank_id=0)
        assert isinstance(adapter, IcefallLm)
        for batch_size in (None, 4):
            got = adapter.score_sequences(tokens, batch_size=batch_size)
            assert torch.allclose(got.totals.double(), want.totals.double(), atol=1e-9)
            assert torch.equal(got.token_log_probs.shape.row_splits(1),
                               want.token_log_probs.shape.row_splits(1))
            assert torch.allclose(got.token_log_probs.values.double(),
                                  want.token_log_probs.values.double(), atol=1e-9)
    assert sequence_lm(lm) is lm


class RefIcefallNgram:
    """``NgramLmStateCost`` from scratch for every prefix: the cheapest cost of each FST state
    the prefix reaches (following backoff arcs), its score minus the smallest."""

    def __init__(self, fst) -> None:
        self.fst = fst

    def _value(self, prefix) -> float:
        costs = {0: 0.0}
        for tok in prefix:
            nxt: dict[int, float] = {}
            for s, c in costs.items():
                for ns, nc in zip(*self.fst.get_next_state_and_cost(s, tok)):
                    nxt[ns] = min(nxt.get(ns, math.inf), c + nc)
            costs = nxt
        return -min(costs.values()) if costs else -math.inf

    def start(self, utt):
        return ()

    def step(self, state, token):
        return self._value(state + (token,)) - self._value(state), state + (token,)

    def final(self, state):
        return 0.0


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_an_icefall_ngram_lm_scores_as_its_state_cost(seed):
    vocab = 6
    fst = icefall_shaped.random_bigram(vocab, seed)
    scorer = ngram_scorer(fst, vocab)
    assert isinstance(scorer, FstNgramScorer)
    # token 0 (blank) is on no arc: its score is -inf in both
    check_against_reference(scorer, RefIcefallNgram(fst), [0, 0, 0], vocab, steps=8, seed=seed,
                            final_tokens=(0,))


@pytest.mark.parametrize("strict", [False, True])
@pytest.mark.parametrize("seed", [0, 1])
def test_an_icefall_context_graph_is_k2decs_hotword_scoring(strict, seed):
    vocab = 7
    phrases = random_phrases(random.Random(seed), vocab, 5, with_scores=True)
    graph = ContextGraph(phrases, context_score=1.5)
    scorer = context_scorer(icefall_shaped.TableContextGraph(graph, vocab), vocab, strict,
                            torch.device("cpu"))
    assert isinstance(scorer, ContextStateScorer)
    check_against_reference(scorer, RefContextGraph(phrases, 1.5, strict), [0, 0, 0], vocab,
                            steps=9, seed=seed)
    assert isinstance(context_scorer(graph, vocab, strict, torch.device("cpu")), HotwordScorer)
    with pytest.raises(TypeError, match="ContextGraph"):
        context_scorer(object(), vocab, strict, torch.device("cpu"))


def test_icefall_attention_decoders_score_as_k2decs():
    from k2dec.aed import TransformerDecoder

    torch.manual_seed(0)
    decoder = TransformerDecoder(vocab_size=VOCAB, memory_dim=8, d_model=16, nhead=2,
                                 num_layers=1, dim_feedforward=16, dropout=0.0).eval()
    memory = torch.randn(3, 9, 8)
    lens = torch.tensor([9, 4, 1])
    seqs = random_seqs(random.Random(1), 7)
    tokens = k2.RaggedTensor(seqs, dtype=torch.int32)
    seq_to_utt = torch.tensor([0, 1, 2, 2, 1, 0, 0])
    with torch.no_grad():
        want = decoder.score_sequences(memory, lens, tokens, seq_to_utt).tolist()
    for shaped, ids in ((icefall_shaped.ZipformerAttentionDecoder(decoder), ()),
                        (icefall_shaped.ConformerModel(decoder),
                         (decoder.sos_id, decoder.eos_id))):
        adapter = attention_decoder(shaped, *ids)
        assert isinstance(adapter, NllAttentionDecoder)
        got = adapter.score_sequences(memory, lens, tokens, seq_to_utt).tolist()
        assert [len(r) for r in got] == [len(s) + 1 for s in seqs]
        assert got == [pytest.approx(r, abs=1e-5) for r in want]
    assert attention_decoder(decoder) is decoder
    with pytest.raises(ValueError, match="sos_id"):
        attention_decoder(icefall_shaped.ConformerModel(decoder))
