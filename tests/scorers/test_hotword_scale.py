"""Hotword lists at scale and their input checks: the sparse automaton steps of
:class:`k2dec.scorers.HotwordScorer` against the per-hypothesis reference, the size bounds
checked before anything is built, score bounds, case and the ``:SCORE`` separator."""

from __future__ import annotations

import math
import random
import re
from pathlib import Path

import pytest
import torch

from k2dec.lang import load_bpe_model
from k2dec.scorers import (
    HOTWORD_MAX_SCORE,
    ContextGraph,
    HotwordScorer,
    bias_word_graph,
    check_hotword_score,
    check_hotword_size,
    encode_hotword_words,
    encode_hotwords,
    hotword_graph,
    read_hotwords,
)
from tests.reference.scorers import RefContextGraph
from tests.scorers.helpers import SCHEMES, PerUtteranceRef, check_against_reference, random_phrases

SHIPPED = Path(__file__).resolve().parents[2] / "assets" / "librispeech-synth"


@pytest.mark.parametrize("strict", [False, True])
@pytest.mark.parametrize("scheme", sorted(SCHEMES))
@pytest.mark.parametrize("seed", range(3))
def test_sparse_steps_match_the_reference(strict, scheme, seed):
    """Without dense tables (dense_entries=0) every row's scores, moves and final scores are
    the reference's, per-utterance lists included."""
    rng = random.Random(100 + seed)
    vocab = 7
    partial, starts = SCHEMES[scheme]
    lists = [random_phrases(rng, vocab, rng.randint(1, 8), with_scores=True) for _ in range(3)]
    graphs = [ContextGraph(p, context_score=1.5) for p in lists]
    mask = None if starts is None else torch.isin(torch.arange(vocab + 2),
                                                  torch.tensor(starts))
    scorer = HotwordScorer(graphs, vocab, strict=strict, word_start=mask, partial=partial,
                           dense_entries=0)
    assert not scorer.dense
    ref = PerUtteranceRef(lists, 1.5, strict, partial, starts)
    check_against_reference(scorer, ref, [0, 1, 2, 1], vocab, steps=12, seed=seed)


@pytest.mark.parametrize("strict", [False, True])
def test_sparse_and_dense_scorers_agree(strict):
    rng = random.Random(7)
    graph = ContextGraph(random_phrases(rng, 9, 30, with_scores=True), context_score=1.0)
    dense = HotwordScorer(graph, 9, strict=strict)
    sparse = HotwordScorer(graph, 9, strict=strict, dense_entries=0)
    assert dense.dense and not sparse.dense
    states = torch.arange(graph.num_nodes)
    assert torch.equal(dense.score(states)[0], sparse.score(states)[0])
    rows = torch.randint(0, graph.num_nodes, (50,), generator=torch.Generator().manual_seed(0))
    tokens = torch.randint(0, 9, (50,), generator=torch.Generator().manual_seed(1))
    assert torch.equal(dense.advance(states, None, rows, tokens),
                       sparse.advance(states, None, rows, tokens))
    assert torch.equal(dense.score_tokens(states, rows, tokens)[0],
                       sparse.score_tokens(states, rows, tokens)[0])


def test_size_is_checked_before_building():
    phrases = [([1, 2, 3], None)] * 4 + [([4, 5], None)]
    assert check_hotword_size(phrases, max_states=15) == 15
    with pytest.raises(ValueError, match=r"^5 hotword phrases have 14 tokens: their automaton "
                                         r"could have 15 states, more than the bound 14"):
        check_hotword_size(phrases, max_states=14)
    with pytest.raises(ValueError, match="5 hotword phrases have 14 tokens"):
        ContextGraph(phrases, max_states=14)
    # a graph's bound: states x tokens, refused before any arc is written
    graph = ContextGraph(phrases)
    with pytest.raises(ValueError, match=r"hotword graph of 5 phrases would have 6 states x 10 "
                                         r"arcs = 60 arcs, more than the bound 59"):
        hotword_graph(graph, 10, max_arcs=59)
    assert hotword_graph(graph, 10, max_arcs=60).num_arcs == 60


def test_build_is_linear_in_the_list():
    """Twice the phrases, about twice the nodes and links: 20,000 random phrases of 8 tokens
    (V = 500) build and give a scorer's sparse steps in seconds, not the ``S x V`` tables."""
    rng = random.Random(0)
    phrases = [([rng.randrange(1, 500) for _ in range(8)], None) for _ in range(20000)]
    graph = ContextGraph(phrases)
    assert graph.num_nodes > 100000
    scorer = HotwordScorer(graph, 500, dense_entries=0)
    assert scorer.steps.goto.tok.numel() == graph.num_nodes - 1  # one entry per child
    state = scorer.init_state(torch.zeros(4, dtype=torch.int64))
    scores, _ = scorer.score(state)
    assert scores.shape == (4, 500)


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan, 1e30,
                                   HOTWORD_MAX_SCORE + 0.5, -HOTWORD_MAX_SCORE - 1])
def test_scores_out_of_range_are_refused(value):
    with pytest.raises(ValueError, match=r"^where: a hotword score must be a finite number in "
                                         r"\[-50, 50\]"):
        check_hotword_score(value, "where")
    with pytest.raises(ValueError, match="hotword phrase 1: a hotword score"):
        ContextGraph([([1], None), ([2], value)])
    with pytest.raises(ValueError, match="context_score: a hotword score"):
        ContextGraph([([1], None)], context_score=value)
    with pytest.raises(TypeError, match="a hotword score must be a number, got 'x'"):
        check_hotword_score("x", "where")
    assert check_hotword_score(HOTWORD_MAX_SCORE, "w") == HOTWORD_MAX_SCORE


@pytest.mark.parametrize("score", ["1e30", "inf", "nan", "-1e3"])
def test_read_hotwords_names_line_phrase_and_value_of_a_bad_score(tmp_path, score):
    path = tmp_path / "hot.txt"
    path.write_text(f"GOOD ONE :2\nBIG BONUS :{score}\n")
    value = re.escape(str(float(score)))
    with pytest.raises(ValueError, match=rf"hot.txt:2: phrase 'BIG BONUS': a hotword score "
                                         rf"must be a finite number .* got {value}"):
        read_hotwords(path)


@pytest.mark.parametrize("sep", [" ", "\t", "  \t ", "\t\t"])
def test_any_white_space_before_the_score(tmp_path, sep):
    path = tmp_path / "hot.txt"
    path.write_text(f"HELLO WORLD{sep}:3.5\nONLY\t WORDS\n{sep}:2\n".replace(f"{sep}:2\n", ""))
    words = read_hotwords(path)
    assert [(w.text, w.score) for w in words] == [("HELLO WORLD", 3.5), ("ONLY\t WORDS", None)]
    path.write_text(f"{sep}:2\n")
    with pytest.raises(ValueError, match="hot.txt:1: a score with no phrase"):
        read_hotwords(path)
    path.write_text("RATIO:2\n")  # no white space: part of the phrase
    assert read_hotwords(path)[0].text == "RATIO:2"


@pytest.mark.skipif(not (SHIPPED / "lang" / "bpe.model").is_file(), reason="no shipped lang")
def test_lower_case_phrases_are_matched_to_an_upper_case_vocabulary():
    import k2

    sp = load_bpe_model(SHIPPED / "lang" / "bpe.model")
    upper = encode_hotwords(["THE CAT", "HOME"], sp)
    assert encode_hotwords(["the cat", "Home"], sp) == upper
    assert sp.unk_id() not in [t for ts, _ in upper for t in ts]
    table = k2.SymbolTable.from_file(SHIPPED / "lang" / "words.txt")
    assert encode_hotword_words(["the cat"], table) == [([table["THE"], table["CAT"]], None)]


def test_biased_word_graph_size_is_estimated_before_building():
    """The bound of bias_word_graph is checked on the trie: an over-large multi-word list is
    refused naming the phrases, the estimate and the bound; it fits just at the bound."""
    import k2

    arcs = torch.tensor([[0, 1, 1, 0], [1, 2, 2, 0], [2, 3, -1, 0]], dtype=torch.int32)
    graph = k2.Fsa(arcs)
    graph.aux_labels = torch.tensor([5, 6, -1], dtype=torch.int32)
    phrases = [([5, 6], None), ([6, 5], None), ([7, 8, 9], None)]
    # unfinished states: root, 5, 6, 7, 7 8 -> 5; the graph has 3 arcs -> 15 arcs
    with pytest.raises(ValueError, match=r"^3 hotword phrases: the hotword-biased graph could "
                                         r"have 15 arcs \(5 unfinished-phrase states x 3\), "
                                         r"more than the bound max_arcs=14"):
        bias_word_graph(graph, phrases, 1.0, max_arcs=14)
    # the word acceptor: 5 states x (5 words + 2) labels
    with pytest.raises(ValueError, match="the word acceptor could have 35 arcs"):
        bias_word_graph(graph, phrases, 1.0, max_arcs=34)
    biased = bias_word_graph(graph, phrases, 1.0, max_arcs=35)
    assert biased.num_arcs >= graph.num_arcs


@pytest.mark.parametrize("seed", range(4))
def test_lattice_bonus_is_the_biased_graphs(seed, tmp_path):
    """Every word sequence of a lattice biased by LatticeHotwords has its best score plus the
    reference bonus of the sequence, as the biased graph gives it (no sequence lost)."""
    import k2

    from k2dec.graph import build_ctc_topo, compile_HLG
    from k2dec.scorers import LatticeHotwords
    from tests.graph.exhaustive import linear_fsa
    from tests.graph.random_lang import RandomCase, ctc_realisations
    from tests.reference.lattice_paths import best_per_word_sequence
    from tests.reference.scorers import reference_bonus
    from tests.scorers.helpers import word_phrases

    case = RandomCase(seed, tmp_path)
    HLG = compile_HLG(build_ctc_topo(case.lang.max_token_id), case.L, case.G, *case.ids)
    wt = case.lang.word_table
    rng = random.Random(seed)
    phrases = word_phrases(rng, [wt[w] for w in case.spec.words], 4)
    phrases.append(([wt[rng.choice(case.spec.words)]], None))
    bias = LatticeHotwords(phrases, 1.25)
    ref = RefContextGraph(phrases, 1.25, strict=False)
    checked = bonus_seen = 0
    for tokens in sorted(case.token_sequences()):
        for f in ctc_realisations(case.token_ids(tokens), rng, num_random=1,
                                  exhaustive_up_to=1)[:2]:
            lat = k2.connect(k2.intersect(linear_fsa(f), HLG, treat_epsilons_specially=False))
            if not lat.num_arcs:
                continue
            plain = best_per_word_sequence(lat)
            got = best_per_word_sequence(bias(k2.create_fsa_vec([lat]))[0])
            assert set(got) == set(plain), tokens
            for words, score in plain.items():
                bonus = reference_bonus(ref, list(words))
                assert got[words] == pytest.approx(score + bonus, abs=2e-4), (tokens, words)
                bonus_seen += bonus != 0.0
            checked += 1
    assert checked > 20 and bonus_seen > 3, (checked, bonus_seen)


def test_a_graph_carrying_a_lattice_bias_biases_every_searched_lattice(tmp_path):
    import k2

    from k2dec.graph import build_ctc_topo, compile_HLG
    from k2dec.lattice import LatticeConfig, get_lattice
    from k2dec.scorers import LatticeHotwords, lattice_biased_graph
    from tests.graph.random_lang import RandomCase

    case = RandomCase(3, tmp_path)
    HLG = k2.arc_sort(compile_HLG(build_ctc_topo(case.lang.max_token_id), case.L, case.G,
                                  *case.ids))
    wt = case.lang.word_table
    words = [wt[w] for w in case.spec.words]
    bias = LatticeHotwords([([w], 2.0) for w in words[:3]] + [(words[3:5], None)], 1.0)
    carrying = lattice_biased_graph(HLG, bias)
    assert carrying.num_arcs == HLG.num_arcs
    log_probs = torch.randn(3, 12, case.lang.max_token_id + 1,
                            generator=torch.Generator().manual_seed(0)).log_softmax(-1)
    lens = torch.tensor([12, 10, 7])
    cfg = LatticeConfig(search_beam=30, output_beam=10)
    got = get_lattice(log_probs, lens, carrying, cfg).lattice
    want = bias(get_lattice(log_probs, lens, HLG, cfg).lattice)
    plain = get_lattice(log_probs, lens, HLG, cfg).lattice
    assert "hotword_lattice_bias" not in dict(got.named_non_tensor_attr())
    for lat in (got, want):
        assert torch.allclose(lat.get_tot_scores(True, False), want.get_tot_scores(True, False))
    assert not torch.equal(got.get_tot_scores(True, False), plain.get_tot_scores(True, False))
