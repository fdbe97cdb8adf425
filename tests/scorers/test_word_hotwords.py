"""Hotwords over the words of a decoding graph (:func:`k2dec.scorers.bias_word_graph`): for
random lexicons and LMs, every word sequence the biased HLG outputs for a CTC frame sequence
has HLG's best score plus the reference bonus of the word sequence (the per-hypothesis
Aho-Corasick reference, non-strict, with the final refund), and no other sequence."""

from __future__ import annotations

import logging
import random

import k2
import pytest
import torch

from k2dec.graph import build_ctc_topo, compile_HLG
from k2dec.scorers import Hotword, bias_word_graph, encode_hotword_words
from tests.graph.random_lang import RandomCase, ctc_realisations, decoded_words
from tests.reference.scorers import RefContextGraph, reference_bonus
from tests.scorers.helpers import word_phrases


@pytest.mark.parametrize("seed", range(6))
def test_biased_HLG_adds_the_reference_bonus_to_every_word_sequence(seed, tmp_path):
    case = RandomCase(seed, tmp_path)
    HLG = compile_HLG(build_ctc_topo(case.lang.max_token_id), case.L, case.G, *case.ids)
    HLG.lm_scores = HLG.scores.clone()
    wt = case.lang.word_table
    rng = random.Random(seed)
    scored = [wt[w] for w in case.spec.words if w not in case.spec.unscored]
    phrases = word_phrases(rng, [wt[w] for w in case.spec.words], 4)
    phrases.append(([rng.choice(scored)], None))  # one that surely completes somewhere
    biased = bias_word_graph(HLG, phrases, context_score=1.25)
    assert torch.equal(HLG.lm_scores, HLG.scores)  # the input is not modified
    assert biased.properties & k2.fsa_properties.ARC_SORTED
    ref = RefContextGraph(phrases, 1.25, strict=False)
    checked = bonus_seen = 0
    for tokens in sorted(case.token_sequences()):
        frames = ctc_realisations(case.token_ids(tokens), rng, num_random=1,
                                  exhaustive_up_to=1)[:3]
        for plain, got in zip(decoded_words(frames, HLG, wt), decoded_words(frames, biased, wt)):
            assert set(got) == set(plain), (tokens, got, plain)
            for words, score in plain.items():
                bonus = reference_bonus(ref, [wt[w] for w in words])
                assert got[words] == pytest.approx(score + bonus, abs=2e-4), (tokens, words)
                bonus_seen += bonus != 0.0
            checked += 1
    assert checked > 50 and bonus_seen > 10, (checked, bonus_seen)


def test_biased_graph_keeps_lm_scores_without_the_bonus(tmp_path):
    case = RandomCase(0, tmp_path)
    HLG = compile_HLG(build_ctc_topo(case.lang.max_token_id), case.L, case.G, *case.ids)
    HLG.lm_scores = HLG.scores.clone()
    wt = case.lang.word_table
    biased = bias_word_graph(HLG, [([wt[case.spec.words[0]]], None)], context_score=3.0)
    diff = biased.scores - biased.lm_scores
    assert set(diff.round(decimals=4).tolist()) == {0.0, 3.0}  # the bonus, on some arcs
    assert biased.num_arcs == HLG.num_arcs  # a single-word phrase copies nothing


def test_word_graph_inputs_are_checked(tmp_path):
    case = RandomCase(1, tmp_path)
    HLG = compile_HLG(build_ctc_topo(case.lang.max_token_id), case.L, case.G, *case.ids)
    wt = case.lang.word_table
    w = [wt[x] for x in case.spec.words]
    assert bias_word_graph(HLG, []) is HLG
    with pytest.raises(ValueError, match="single FSA"):
        bias_word_graph(k2.create_fsa_vec([HLG]), [([w[0]], None)])
    with pytest.raises(ValueError, match=">= 1"):
        bias_word_graph(HLG, [([0, w[0]], None)])
    with pytest.raises(ValueError, match="max_arcs="):
        bias_word_graph(HLG, [([w[0], w[1], w[2]], None)], max_arcs=HLG.num_arcs * 2)
    acceptor = k2.arc_sort(k2.Fsa.from_str("0 1 1 0\n1 2 -1 0\n2"))
    with pytest.raises(ValueError, match="no aux_labels"):
        bias_word_graph(acceptor, [([1], None)])
    two = k2.Fsa.from_str("0 1 1 0\n1 2 -1 0\n2")
    two.aux_labels = k2.RaggedTensor([[3, 4], [-1]])
    with pytest.raises(ValueError, match="2 words"):
        bias_word_graph(two, [([3], None)])


def test_hotword_words_map_through_words_txt_and_skip_oov(tmp_path, caplog):
    case = RandomCase(2, tmp_path)
    wt = case.lang.word_table
    a, b = case.spec.words[:2]
    with caplog.at_level(logging.WARNING, logger="k2dec.scorers.context_graph"):
        got = encode_hotword_words([f"{a} {b}", Hotword(f"{b} NOSUCHWORD", 2.5),
                                    Hotword(b, 0.5)], wt)
    assert got == [([wt[a], wt[b]], None), ([wt[b]], 0.5)]
    assert "'NOSUCHWORD'" in caplog.text and "skipped" in caplog.text
    with pytest.raises(TypeError, match="str or Hotword"):
        encode_hotword_words([3], wt)
