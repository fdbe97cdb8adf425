"""Monophone HCLG built with k2, and loading a Kaldi-style HCLG.fst with a tid->pdf table."""

from __future__ import annotations

import math
import random

import k2
import pytest
import torch

from k2dec.graph import (
    HmmTopology,
    build_G,
    build_hmm_topo,
    build_L,
    compile_HCLG,
    compile_LG,
    k2_to_openfst,
    load_kaldi_hclg,
    read_transition_pdf_table,
    write_openfst,
)
from k2dec.testing.lang import TINY_LEXICON
from tests.reference.ngram import ArpaScorer

from .exhaustive import best_intersection, linear_fsa, tiny_segmentations, tiny_word_sequences

LOOP = 0.6


def _inputs(lang, arpa):
    G = build_G(arpa, lang.word_table)
    L = build_L(lang.lexicon_disambig, lang.token_table, lang.word_table,
                disambig_self_loops=True)
    topo = HmmTopology(num_phones=lang.first_token_disambig_id - 1, num_states=3,
                       self_loop_prob=LOOP)
    return topo, L, G


def _frames(topo: HmmTopology, phones: list[int], rng: random.Random):
    """pdf frame sequence and its HMM score for ``phones``."""
    frames: list[int] = []
    score = 0.0
    for p in phones:
        for s in range(topo.num_states):
            d = rng.randint(1, 3)
            frames += [topo.pdf(p, s)] * d
            score += (d - 1) * math.log(LOOP)
        score += topo.num_states * math.log(1 - LOOP)
    return frames, score


def test_hclg_scores_words_like_the_arpa_plus_hmm(tiny_lang):
    lang, arpa = tiny_lang
    scorer = ArpaScorer(arpa)
    topo, L, G = _inputs(lang, arpa)
    HCLG = compile_HCLG(topo, L, G, lang.first_token_disambig_id, lang.first_word_disambig_id)
    assert int(HCLG.labels.max()) == topo.num_pdfs - 1 and int(HCLG.labels.min()) == -1
    assert (HCLG.labels[HCLG.labels >= 0] >= 0).all()
    rng = random.Random(3)
    tt, wt = lang.token_table, lang.word_table
    lex = dict(TINY_LEXICON)
    for seq in tiny_word_sequences(3):
        if not seq:
            continue  # zero frames: nothing for dense intersection to consume
        tokens = tuple(t for w in seq for t in lex[w])
        cands = {s: scorer.sentence_logprob(s) for s in tiny_segmentations(tokens)}
        best_words = max(cands, key=cands.get)
        frames, hmm_score = _frames(topo, [tt.get(t) for t in tokens], rng)
        score, path = best_intersection(linear_fsa(frames), HCLG, eps=False)
        assert score == pytest.approx(cands[best_words] + hmm_score, abs=1e-4), seq
        words = [wt.get(i) for i in path.aux_labels.values.tolist() if i > 0]
        assert tuple(words) == best_words


def test_hmm_topo_and_topology_validation():
    topo = HmmTopology(num_phones=2, num_states=3)
    Ha = build_hmm_topo(topo)
    assert set(Ha.aux_labels.tolist()) == {-1, 0, 1, 2}
    assert int(Ha.labels.max()) == topo.num_pdfs  # pdf + 1
    for kwargs, msg in [({"num_phones": 0}, "num_phones"),
                        ({"num_phones": 2, "num_states": 0}, "num_states"),
                        ({"num_phones": 2, "self_loop_prob": 1.0}, "self_loop_prob")]:
        with pytest.raises(ValueError, match=msg):
            HmmTopology(**kwargs)


def test_hclg_phone_count_mismatch(tiny_lang):
    lang, arpa = tiny_lang
    _, L, G = _inputs(lang, arpa)
    with pytest.raises(ValueError, match="phones but the lang dir has"):
        compile_HCLG(HmmTopology(num_phones=2), L, G, lang.first_token_disambig_id,
                     lang.first_word_disambig_id)


def _kaldi_style_hclg(lang, arpa, tmp_path):
    """An HCLG.fst as Kaldi writes it: input labels transition ids (two per pdf: self-loop
    2p+1 and forward 2p+2), input epsilons kept, output labels words."""
    topo, L, G = _inputs(lang, arpa)
    LG = k2.arc_sort(compile_LG(L, G, lang.first_token_disambig_id,
                                lang.first_word_disambig_id))
    Ha = k2.arc_sort(build_hmm_topo(topo))
    raw = k2.connect(k2.compose(Ha, LG))  # labels pdf + 1, 0 = epsilon
    raw = k2.Fsa(raw.arcs, aux_labels=raw.aux_labels)
    arcs = raw.arcs.values()
    pdf = arcs[:, 2].long() - 1
    self_loop = arcs[:, 0] == arcs[:, 1]
    tid = torch.where(self_loop, 2 * pdf + 1, 2 * pdf + 2)
    tid = torch.where(arcs[:, 2] > 0, tid, arcs[:, 2].long())
    raw.labels = tid.to(torch.int32)
    assert (raw.labels == 0).any(), "the test graph should keep input epsilons"
    fst_path = tmp_path / "HCLG.fst"
    write_openfst(k2_to_openfst(raw), fst_path)
    table = tmp_path / "tid2pdf.txt"
    table.write_text("".join(f"{2 * p + 1} {p}\n{2 * p + 2} {p}\n"
                             for p in range(topo.num_pdfs)))
    return topo, L, G, fst_path, table


def test_load_kaldi_hclg_matches_compiled(tiny_lang, tmp_path):
    lang, arpa = tiny_lang
    topo, L, G, fst_path, table = _kaldi_style_hclg(lang, arpa, tmp_path)
    loaded = load_kaldi_hclg(fst_path, table)
    compiled = compile_HCLG(topo, L, G, lang.first_token_disambig_id,
                            lang.first_word_disambig_id)
    assert not (loaded.labels == -2).any()
    rng = random.Random(5)
    tt = lang.token_table
    lex = dict(TINY_LEXICON)
    for seq in [("A", "B"), ("C", "D", "E"), ("BA",), ("AB", "C")]:
        frames, _ = _frames(topo, [tt.get(t) for w in seq for t in lex[w]], rng)
        s1, p1 = best_intersection(linear_fsa(frames), loaded, eps=False)
        s2, p2 = best_intersection(linear_fsa(frames), compiled, eps=False)
        assert s1 == pytest.approx(s2, abs=1e-3)
        assert p1.aux_labels.values.tolist() == p2.aux_labels.values.tolist()


def test_transition_table_errors(tmp_path):
    p = tmp_path / "t.txt"
    for text, msg in [("1 0\n3 1\n", "transition ids \\[2\\] are missing"),
                      ("1 0\n1 1\n", "t.txt:2: duplicate transition id 1"),
                      ("0 0\n", "t.txt:1: transition id 0 is epsilon"),
                      ("1 x\n", "t.txt:1: expected 'tid pdf'"),
                      ("", "is empty")]:
        p.write_text(text)
        with pytest.raises(ValueError, match=msg):
            read_transition_pdf_table(p)
    p.write_text("1 0\n2 0\n")
    assert read_transition_pdf_table(p).tolist() == [-1, 0, 0]


def test_load_kaldi_hclg_with_too_small_table(tiny_lang, tmp_path):
    lang, arpa = tiny_lang
    _, _, _, fst_path, table = _kaldi_style_hclg(lang, arpa, tmp_path)
    small = tmp_path / "small.txt"
    small.write_text("1 0\n2 0\n")
    with pytest.raises(ValueError, match="is not in the tid->pdf table"):
        load_kaldi_hclg(fst_path, small)


def test_loaded_kaldi_hclg_decodes_like_the_compiled_one(tiny_lang, tmp_path):
    """get_lattice on a Kaldi-style HCLG.fst loaded with its tid->pdf table gives the same
    1-best words and scores as the k2-compiled HCLG, on random peaked pdf posteriors."""
    from k2dec.lattice import get_lattice, hypotheses_from_lattice

    lang, arpa = tiny_lang
    topo, L, G, fst_path, table = _kaldi_style_hclg(lang, arpa, tmp_path)
    loaded = load_kaldi_hclg(fst_path, table)
    compiled = compile_HCLG(topo, L, G, lang.first_token_disambig_id,
                            lang.first_word_disambig_id)
    g = torch.Generator().manual_seed(0)
    log_probs = (torch.randn(4, 12, topo.num_pdfs, generator=g) * 3).log_softmax(-1)
    lengths = torch.tensor([12, 10, 9, 12])
    a = hypotheses_from_lattice(get_lattice(log_probs, lengths, loaded))
    b = hypotheses_from_lattice(get_lattice(log_probs, lengths, compiled))
    assert [h.words for h in a] == [h.words for h in b]
    assert [h.score for h in a] == pytest.approx([h.score for h in b], abs=1e-3)
    assert any(h.words for h in a)
