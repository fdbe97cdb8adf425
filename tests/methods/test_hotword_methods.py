"""Hotwords in the graph-based methods: the HLG methods (word-level automaton in HLG) against
the exhaustive reference (every word sequence of the unpruned lattice, plus its reference
bonus), and the routing of the biased graphs into 1best / n-best / MBR on HLG and the LG
n-best / MBR methods; per-utterance biased graphs through ``get_lattice``."""

from __future__ import annotations

import k2
import pytest
import torch

from k2dec.lattice import LatticeConfig, get_lattice, hypotheses_from_lattice
from k2dec.lattice.dense import make_dense_fsa_vec
from k2dec.methods import (
    CtcInputs,
    Resources,
    TransducerInputs,
    config_field_path,
    get_method,
    list_methods,
)
from k2dec.methods.ctc import HlgConfig
from k2dec.methods.hotword_biasing import HotwordConfig, WordHotwordConfig
from k2dec.methods.mbr import FastBeamSearchMbrLGConfig, MbrMethodConfig
from k2dec.methods.parts import GraphConfig
from k2dec.methods.transducer import FastBeamSearchNbestLGConfig
from k2dec.nbest import NbestConfig
from k2dec.scorers import bias_word_graph
from k2dec.testing.lang import tiny_lg
from k2dec.testing.transducer import random_batch, random_model
from tests.methods.conftest import method_config
from tests.reference.lattice_paths import best_per_word_sequence
from tests.reference.scorers import RefContextGraph, reference_bonus

HOTWORD_METHODS = {
    "1best", "attention-beam-search", "attention-decoder", "beam_search",
    "ctc-prefix-beam-search", "ctc-prefix-beam-search-shallow-fussion", "fast_beam_search",
    "fast_beam_search_LG", "fast_beam_search_mbr", "fast_beam_search_mbr_LG",
    "fast_beam_search_nbest", "fast_beam_search_nbest_LG", "fast_beam_search_nbest_oracle",
    "mbr", "modified_beam_search",
    "modified_beam_search_LODR", "modified_beam_search_lm_shallow_fusion", "multi-pass",
    "nbest", "nbest-oracle", "nbest-rescoring", "rnn-lm", "whole-lattice-rescoring"}

WIDE = LatticeConfig(search_beam=100.0, output_beam=100.0, min_active_states=1,
                     max_active_states=100000)


def test_the_methods_that_take_hotwords_say_so():
    got = {m.name for m in list_methods() if m.hotwords}
    assert got == HOTWORD_METHODS
    for name in got:
        cfg = get_method(name).default_config()
        assert (config_field_path(cfg, "hotwords.token_score") is not None
                or config_field_path(cfg, "word_hotwords.word_score") is not None), name


def _phrases(wt):
    """``C D`` (two words, default score), ``AB`` (own score), ``B A`` (unfinished
    refund when only ``B`` is said)."""
    return (((wt["C"], wt["D"]), None), ((wt["AB"],), 1.0), ((wt["B"], wt["A"]), 0.7))


def _inputs(seed: int, vocab: int, lengths: list[int]) -> CtcInputs:
    g = torch.Generator().manual_seed(seed)
    n, t = len(lengths), max(lengths)
    log_probs = (torch.randn(n, t, vocab, generator=g) * 1.5).log_softmax(-1)
    return CtcInputs(log_probs, torch.tensor(lengths), memory=torch.randn(n, t, 8, generator=g),
                     memory_lens=torch.tensor(lengths))


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("lengths", [[6], [7, 1, 5, 3]])
def test_1best_with_hotwords_is_the_best_word_sequence_plus_its_reference_bonus(
        setup, seed, lengths):
    lang, res = setup
    wt = lang.word_table
    phrases = _phrases(wt)
    cfg = HlgConfig(lattice=WIDE, word_hotwords=WordHotwordConfig(1.5), graph=GraphConfig(0.8))
    inp = _inputs(seed, lang.max_token_id + 1, lengths)
    hres = Resources(graphs=dict(res.graphs), hotword_words=phrases)
    out = get_method("1best")(inp, hres, cfg)[0]
    # reference: every word sequence of the unpruned plain-HLG lattice, plus its bonus
    scaled = res.graphs["HLG"].clone()
    scaled.scores = scaled.scores * cfg.graph.scale
    scaled = k2.create_fsa_vec([k2.arc_sort(scaled)])
    ref = RefContextGraph([(list(w), s) for w, s in phrases], 1.5, strict=False)
    changed = 0
    for i, rec in enumerate(out.hyps):
        dense = make_dense_fsa_vec(inp.log_probs[i:i + 1], inp.log_probs_lens[i:i + 1])
        lattice = k2.intersect_dense(scaled, dense.dense_fsa_vec, output_beam=1000.0)
        seqs = best_per_word_sequence(lattice[0]) if lattice.shape[0] else {}
        if not seqs:
            assert rec.error, i
            continue
        totals = {ws: s + reference_bonus(ref, ws) for ws, s in seqs.items()}
        best = max(totals, key=totals.get)
        assert list(rec.words) == list(best), (i, totals)
        assert rec.score == pytest.approx(totals[best], abs=1e-3)
        changed += best != max(seqs, key=seqs.get)
    if seed == 0:  # the bonus matters for some utterance of the batch
        assert changed or len(lengths) == 1


def test_hlg_methods_search_the_biased_graph(setup):
    """Each HLG method with hotwords gives what it gives without them on the biased graph."""
    lang, res = setup
    phrases = _phrases(lang.word_table)
    inp = _inputs(3, lang.max_token_id + 1, [7, 5, 6])
    cfg = dict(nbest=NbestConfig(num_paths=20), word_score=2.5, scale=0.7, top_k=5)
    scaled = res.graphs["HLG"].clone()
    scaled.scores = scaled.scores * 0.7
    scaled.lm_scores = res.graphs["HLG"].lm_scores * 0.7
    biased = bias_word_graph(scaled, phrases, 2.5)
    hres = Resources(graphs=dict(res.graphs), lms=res.lms,
                     attention_decoder=res.attention_decoder, hotword_words=phrases)
    direct = Resources(graphs={**res.graphs, "HLG": biased}, lms=res.lms,
                       attention_decoder=res.attention_decoder)
    plain_cfg = dict(nbest=cfg["nbest"], scale=1.0, top_k=5)
    for name in ("1best", "nbest", "nbest-rescoring", "rnn-lm", "multi-pass", "attention-decoder",
                 "whole-lattice-rescoring"):
        got = get_method(name)(inp, hres, method_config(name, **cfg))
        want = get_method(name)(inp, direct, method_config(name, **plain_cfg))
        assert [r.words for r in got] == [r.words for r in want], name
    got = get_method("mbr")(inp, hres, MbrMethodConfig(
        word_hotwords=WordHotwordConfig(2.5), graph=GraphConfig(0.7)))
    want = get_method("mbr")(inp, direct, MbrMethodConfig(graph=GraphConfig(1.0)))
    assert [r.words for r in got] == [r.words for r in want]
    # one biased graph per setting, reused by every method
    assert len([k for k in hres.cache if k[0] == "word_hotword_graph"]) == 2  # w/o lm_scores


def test_a_large_bonus_puts_the_hotword_into_every_hypothesis(setup):
    lang, res = setup
    wt = lang.word_table
    inp = _inputs(4, lang.max_token_id + 1, [7, 5, 6])
    plain = get_method("1best")(inp, res, HlgConfig())[0]
    hres = Resources(graphs=dict(res.graphs), hotword_words=(((wt["C"],), None),))
    out = get_method("1best")(inp, hres, HlgConfig(word_hotwords=WordHotwordConfig(30.0)))[0]
    assert all(wt["C"] in w for w in out.words)
    assert out.words != plain.words
    with pytest.raises(ValueError, match="word_score: a hotword score must be a finite number"):
        WordHotwordConfig(word_score=float("nan"))


def test_per_utterance_hotword_lists_through_one_graph_per_utterance(setup):
    """The lower-level API: an FsaVec with each utterance's biased HLG decodes every utterance
    as its own graph alone does."""
    lang, res = setup
    wt = lang.word_table
    HLG = res.graphs["HLG"]
    lists = [(((wt["C"],), 4.0),), (((wt["A"],), 4.0),), ()]
    graphs = [bias_word_graph(HLG, lst) for lst in lists]
    inp = _inputs(5, lang.max_token_id + 1, [7, 5, 6])
    together = get_lattice(inp.log_probs, inp.log_probs_lens, k2.create_fsa_vec(graphs), WIDE)
    got = [h.words for h in hypotheses_from_lattice(together)]
    for i, g in enumerate(graphs):
        alone = get_lattice(inp.log_probs[i:i + 1], inp.log_probs_lens[i:i + 1], g, WIDE)
        assert got[i] == hypotheses_from_lattice(alone)[0].words
    assert graphs[2] is HLG


@pytest.fixture(scope="module")
def tiny_LG(tmp_path_factory):
    return tiny_lg(tmp_path_factory.mktemp("hot_lg"))  # tokens a b c d = 1..4 (vocab 5)


@pytest.mark.parametrize("name,cfg_cls", [("fast_beam_search_nbest_LG",
                                           FastBeamSearchNbestLGConfig),
                                          ("fast_beam_search_mbr_LG",
                                           FastBeamSearchMbrLGConfig)])
def test_LG_nbest_and_mbr_search_the_biased_LG(tiny_LG, name, cfg_cls):
    _, LG = tiny_LG
    hotwords = (((1, 2), None), ((3,), 1.0))
    model = random_model(vocab_size=5, seed=1)
    enc, enc_lens = random_batch([4, 1, 3], seed=1)
    inputs = TransducerInputs(model, enc, enc_lens)
    res = Resources(graphs={"LG": LG}, hotwords=hotwords)
    got = get_method(name)(inputs, res, cfg_cls(hotwords=HotwordConfig(token_score=3.0)))
    biased = [g for k, g in res.cache.items() if k[0] == "hotword_graph"]
    assert len(biased) == 1  # the same graph fast_beam_search_LG builds (same cache key)
    get_method("fast_beam_search_LG")(inputs, res, get_method(
        "fast_beam_search_LG").config_cls(hotwords=HotwordConfig(token_score=3.0)))
    assert len([k for k in res.cache if k[0] == "hotword_graph"]) == 1
    want = get_method(name)(inputs, Resources(graphs={"LG": biased[0]}),
                            cfg_cls(graph=GraphConfig(1.0)))
    assert [r.words for r in got] == [r.words for r in want]
    plain = get_method(name)(inputs, Resources(graphs={"LG": LG}),
                             cfg_cls(hotwords=HotwordConfig(token_score=3.0)))
    big = get_method(name)(inputs, res, cfg_cls(hotwords=HotwordConfig(token_score=12.0)))
    assert [r.words for r in big] != [r.words for r in plain]
