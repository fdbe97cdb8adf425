"""G and HLG against a reference backoff scorer, over every word sequence up to length 3."""

from __future__ import annotations

import random

import k2
import pytest
import torch

from k2dec.graph import build_ctc_topo, build_G, build_L, build_rescoring_G, compile_HLG, compile_LG
from k2dec.testing.lang import TINY_LEXICON
from tests.graph.exhaustive import (
    best_intersection,
    linear_fsa,
    tiny_segmentations,
    tiny_word_sequences,
)
from tests.reference.ngram import ArpaScorer


def test_G_scores_every_sequence_as_the_arpa(tiny_lang):
    lang, arpa = tiny_lang
    scorer = ArpaScorer(arpa)
    G = build_rescoring_G(arpa, lang.word_table)  # #0 -> epsilon
    assert torch.equal(G.lm_scores, G.scores)
    wt = lang.word_table
    n = 0
    for seq in tiny_word_sequences(3):
        score, _ = best_intersection(linear_fsa([wt.get(w) for w in seq]), G, eps=True)
        assert score == pytest.approx(scorer.sentence_logprob(seq), abs=1e-4), seq
        n += 1
    assert n == 1 + 7 + 49 + 343


def test_G_rejects_nothing_and_uses_backoff(tiny_lang):
    lang, arpa = tiny_lang
    G = build_G(arpa, lang.word_table)
    backoff = G.labels == lang.word_table.get("#0")
    assert backoff.any(), "G should carry #0 on backoff arcs"
    assert (G.aux_labels[backoff] == 0).all()


def _hlg(lang, arpa):
    G = build_G(arpa, lang.word_table)
    L = build_L(lang.lexicon_disambig, lang.token_table, lang.word_table,
                disambig_self_loops=True)
    H = build_ctc_topo(lang.max_token_id)
    return compile_HLG(H, L, G, lang.first_token_disambig_id, lang.first_word_disambig_id)


def _ctc_frames(token_ids: list[int], rng: random.Random) -> list[int]:
    """A CTC frame sequence for ``token_ids`` with random blanks and repeats."""
    frames: list[int] = []
    for t in token_ids:
        if rng.random() < 0.5 or (frames and frames[-1] == t):
            frames += [0] * rng.randint(1, 2)
        frames += [t] * rng.randint(1, 3)
    frames += [0] * rng.randint(0, 2)
    return frames


def test_HLG_maps_ctc_token_sequences_to_the_best_words(tiny_lang):
    lang, arpa = tiny_lang
    scorer = ArpaScorer(arpa)
    HLG = _hlg(lang, arpa)
    assert not any(i >= lang.first_token_disambig_id for i in HLG.labels.tolist())
    rng = random.Random(0)
    tt, wt = lang.token_table, lang.word_table
    lex = {w: p for w, p in TINY_LEXICON}
    checked = 0
    for seq in tiny_word_sequences(3):
        tokens = tuple(t for w in seq for t in lex[w])
        # The reference: the best-scoring word sequence spelled by these tokens.
        cands = {s: scorer.sentence_logprob(s) for s in tiny_segmentations(tokens)}
        best_words = max(cands, key=cands.get)
        frames = _ctc_frames([tt.get(t) for t in tokens], rng)
        score, path = best_intersection(linear_fsa(frames), HLG, eps=False)
        assert score == pytest.approx(cands[best_words], abs=1e-4), (seq, frames)
        words = [wt.get(i) for i in path.aux_labels.values.tolist() if i > 0]
        assert tuple(words) == best_words
        checked += 1
    assert checked == 400


def test_HLG_rejects_token_sequences_outside_the_lexicon(tiny_lang):
    lang, arpa = tiny_lang
    HLG = _hlg(lang, arpa)
    tt = lang.token_table
    for bad in (["d"], ["b", "d"], ["a", "c", "c", "a", "d", "d"]):
        ids = [tt.get(t) for t in bad]
        # blanks between tokens so that repeats are real repeats
        frames = [x for t in ids for x in (t, 0)]
        score, _ = best_intersection(linear_fsa(frames), HLG, eps=False)
        assert score == float("-inf"), bad


def test_LG_accepts_the_same_word_sequences(tiny_lang):
    lang, arpa = tiny_lang
    G = build_G(arpa, lang.word_table)
    L = build_L(lang.lexicon_disambig, lang.token_table, lang.word_table,
                disambig_self_loops=True)
    LG = compile_LG(L, G, lang.first_token_disambig_id, lang.first_word_disambig_id,
                    log_weight_pushing=True)
    assert isinstance(LG.aux_labels, k2.RaggedTensor)
    assert not (LG.aux_labels.values >= lang.first_word_disambig_id).any()
    assert not (LG.labels >= lang.first_token_disambig_id).any()
    tt, wt = lang.token_table, lang.word_table
    lex = {w: p for w, p in TINY_LEXICON}
    for seq in [("A", "B"), ("C", "D", "E"), ("BA",), ()]:
        ids = [tt.get(t) for w in seq for t in lex[w]]
        score, path = best_intersection(linear_fsa(ids), LG, eps=False)
        assert score > float("-inf")
        words = [wt.get(i) for i in path.aux_labels.values.tolist() if i > 0]
        # "A B" is also spelled "AB"; the best parse is checked in the HLG test.
        assert "".join(words) == "".join(seq)
