"""One hypothesis record from every method: the search's own results, converted unchanged."""

from __future__ import annotations

import math

import pytest
import torch

from k2dec.aed import BeamSearchConfig, TransformerDecoder, beam_search
from k2dec.lattice import (
    Hypothesis,
    LatticeStatus,
    get_lattice,
    hypotheses_from_lattice,
)
from k2dec.methods import AedInputs, CtcInputs, Resources, TransducerInputs, get_method
from k2dec.methods.aed import AttentionBeamSearchMethodConfig
from k2dec.methods.ctc import HlgConfig
from k2dec.methods.parts import FusionConfig, GraphConfig
from k2dec.methods.records import from_ids, from_lattice, from_transducer
from k2dec.primitives.hypothesis import HypothesisRecord
from k2dec.testing.transducer import random_batch, random_model
from k2dec.transducer import TransducerHypothesis, greedy_search


def test_record_checks_lengths_and_writes_json():
    r = HypothesisRecord(tokens=(3, 4), token_frames=(0, 2), words=(7,), word_frames=(1,),
                         score=-1.5)
    assert r.to_json() == {"tokens": [3, 4], "words": [7], "token_frames": [0, 2],
                           "word_frames": [1], "score": -1.5}
    assert HypothesisRecord.failure("empty lattice", tokens=True, words=False).to_json() == {
        "tokens": [], "error": "empty lattice"}
    for bad in (dict(tokens=(1,), token_frames=(0, 1)), dict(words=None, word_frames=(0,)),
                dict(words=(1, 2), word_confidences=(0.5,)),
                dict(words=(1,), word_durations=(1, 2))):
        with pytest.raises(ValueError, match="needs one value per entry"):
            HypothesisRecord(**bad)
    with pytest.raises(ValueError, match="needs its reason"):
        HypothesisRecord.failure("", tokens=True, words=True)


def test_lattice_and_transducer_conversions_keep_everything():
    ok = Hypothesis((1, 2), (0, 3), (5,), (3,), -2.0)
    empty = Hypothesis((), (), (), (), -math.inf, LatticeStatus.EMPTY, "no final state")
    recs = from_lattice([ok, empty], words=True)
    assert recs[0] == HypothesisRecord(tokens=(1, 2), token_frames=(0, 3), words=(5,),
                                       word_frames=(3,), score=-2.0)
    assert recs[1] == HypothesisRecord(tokens=(), words=(), error="no final state")
    assert from_lattice([ok], words=False)[0].words is None
    t = from_transducer([TransducerHypothesis([4, 5], [1, 6], -3.0),
                         TransducerHypothesis([], [], -math.inf)], words=[[9], []])
    assert t[0] == HypothesisRecord(tokens=(4, 5), token_frames=(1, 6), words=(9,), score=-3.0)
    assert t[1].error == "empty lattice" and t[1].score is None
    ids = from_ids([[1, 2], []], words=True, failed=["", "why"],
                   scores=torch.tensor([-1.0, -math.inf], dtype=torch.float64))
    assert ids[0] == HypothesisRecord(words=(1, 2), score=-1.0)
    assert ids[1] == HypothesisRecord(words=(), error="why")


def test_1best_record_is_the_lattice_hypothesis(tiny_hlg):
    lang, HLG, _ = tiny_hlg
    g = torch.Generator().manual_seed(3)
    lengths = torch.tensor([7, 5, 1])
    log_probs = (torch.randn(3, 7, lang.max_token_id + 1, generator=g) * 2).log_softmax(-1)
    cfg = HlgConfig(graph=GraphConfig(1.0))
    out = get_method("1best")(CtcInputs(log_probs, lengths), Resources(graphs={"HLG": HLG}),
                              cfg)[0]
    want = hypotheses_from_lattice(get_lattice(log_probs, lengths, HLG, cfg.lattice))
    for rec, h in zip(out.hyps, want):
        if h.status is LatticeStatus.EMPTY:
            assert rec.error == h.reason and rec.words == ()
            continue
        assert (rec.tokens, rec.token_frames, rec.words, rec.word_frames) == (
            h.tokens, h.token_frames, h.words, h.word_frames)
        assert rec.score == pytest.approx(h.score)


def test_transducer_and_aed_records_carry_frames_and_scores():
    model = random_model(vocab_size=5, seed=4)
    enc, lens = random_batch([6, 2, 4], seed=4)
    out = get_method("greedy_search")(TransducerInputs(model, enc, lens), Resources())[0]
    for rec, h in zip(out.hyps, greedy_search(model, enc, lens)):
        assert rec.tokens == tuple(h.tokens) and rec.token_frames == tuple(h.timestamps)
        assert rec.score == pytest.approx(h.score)
    torch.manual_seed(0)
    dec = TransformerDecoder(vocab_size=8, memory_dim=6, d_model=16, nhead=2, num_layers=1,
                             dim_feedforward=16, dropout=0.0).eval()
    memory, mlens = torch.randn(2, 9, 6), torch.tensor([9, 6])
    cfg = BeamSearchConfig(beam_size=3)
    out = get_method("attention-beam-search")(AedInputs(memory, mlens),
                                              Resources(attention_decoder=dec),
                                              AttentionBeamSearchMethodConfig(
                                                  cfg, FusionConfig(ctc_weight=0.0)))[0]
    with torch.no_grad():
        want = beam_search(dec, memory, mlens, cfg)
    assert [r.score for r in out.hyps] == pytest.approx([nb[0].score for nb in want])
    assert [r.tokens for r in out.hyps] == [tuple(nb[0].tokens) for nb in want]
