"""The CTC methods of the registry on random posteriors through a tiny HLG."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch

from k2dec.lattice import LatticeCache, get_lattice, hypotheses_from_lattice
from k2dec.lattice.rescore import RescoreConfig, rescore_with_whole_lattice
from k2dec.methods import CtcInputs, Family, Resources, get_method, list_methods
from k2dec.methods.ctc import (
    CtcLatticeConfig,
    HlgConfig,
    MultiPassMethodConfig,
    NbestRescoringConfig,
    RnnLmRescoringConfig,
    WholeLatticeRescoringConfig,
)
from k2dec.methods.parts import GraphConfig
from k2dec.nbest import MultiPassConfig, Nbest, NbestConfig, rescore_with_ngram
from tests.methods.conftest import method_config
from tests.methods.ctc_inputs import random_ctc_inputs

CTC_METHODS = ["1best", "attention-decoder", "ctc-decoding", "ctc-greedy-search", "mbr",
               "multi-pass", "nbest", "nbest-oracle", "nbest-rescoring", "rnn-lm",
               "whole-lattice-rescoring"]




#: the CTC methods with their own configs (tests/methods/test_scorer_methods.py)
PREFIX_METHODS = ["attention-decoder-rescoring-no-ngram", "ctc-prefix-beam-search",
                  "ctc-prefix-beam-search-attention-decoder-rescoring",
                  "ctc-prefix-beam-search-shallow-fussion"]


def test_registry_lists_the_ctc_methods():
    assert [m.name for m in list_methods(Family.CTC)] == sorted(CTC_METHODS + PREFIX_METHODS)


@pytest.mark.parametrize("name", [m for m in CTC_METHODS if m != "mbr"])  # own config: see
def test_every_ctc_method_runs_and_passes_its_config(setup, name):     # test_mbr_methods
    lang, res = setup
    cfg = method_config(name, nbest=NbestConfig(num_paths=20), ngram_lm_scale=0.5,
                        attention_scale=0.3, lm_scale=0.5, sweep=True,
                        ngram_lm_scales=(0.5, 1.0), lm_scales=(0.5, 1.0),
                        attention_scales=(0.3,), top_k=5)
    out = get_method(name)(random_ctc_inputs(1, lang.max_token_id + 1), res, cfg)
    assert out and all(r.config is cfg for r in out)
    for r in out:
        hyps = r.words if r.words is not None else r.tokens
        assert len(hyps) == 3 and len(r.failed) == 3
    keys = [r.key for r in out]
    if name == "nbest-rescoring":
        assert keys == ["ngram_lm_scale_0.5", "ngram_lm_scale_1.0"]
    elif name == "attention-decoder":
        assert keys == ["ngram_lm_scale_0.5_attention_scale_0.3",
                        "ngram_lm_scale_1.0_attention_scale_0.3"]
    elif name == "whole-lattice-rescoring":
        assert keys == ["lm_scale_0.5", "lm_scale_1.0"]
    elif name == "rnn-lm":
        assert keys == ["rnn_lm_scale_0.5", "rnn_lm_scale_1.0"]
    else:
        assert keys == [name]


def test_1best_equals_the_lattice_best_path(setup):
    lang, res = setup
    inp = random_ctc_inputs(2, lang.max_token_id + 1)
    out = get_method("1best")(inp, res, HlgConfig(graph=GraphConfig(1.0)))[0]
    lat = get_lattice(inp.log_probs, inp.log_probs_lens, res.graphs["HLG"],
                      CtcLatticeConfig().lattice)
    assert out.words == [list(h.words) for h in hypotheses_from_lattice(lat)]


def test_nbest_rescoring_equals_the_library_call(setup):
    lang, res = setup
    inp = random_ctc_inputs(3, lang.max_token_id + 1)
    cfg = method_config("nbest-rescoring", nbest=NbestConfig(num_paths=30),
                        ngram_lm_scale=0.7, scale=1.0)
    assert isinstance(cfg, NbestRescoringConfig)
    out = get_method("nbest-rescoring")(inp, res, cfg)
    HLG = res.graphs["HLG"].clone()
    HLG.lm_scores = HLG.scores.clone()
    lat = get_lattice(inp.log_probs, inp.log_probs_lens, HLG, cfg.lattice).lattice
    nbest = Nbest.from_lattice(lat, 30, cfg.nbest.nbest_scale).intersect(lat)
    want = rescore_with_ngram(nbest, res.graphs["G"], [0.7])["ngram_lm_scale_0.7"].hyps
    assert out[0].words == want


def test_multi_pass_at_full_budget_equals_rnn_lm_rescoring(setup):
    lang, res = setup
    inp = random_ctc_inputs(4, lang.max_token_id + 1)
    mp = MultiPassConfig(first_k=2, batch_k=2, stop_sigmas=math.inf, lm_scale=1.0, top_k=200)
    nbest = NbestConfig(num_paths=30)
    cfg = MultiPassMethodConfig(nbest=nbest, multi_pass=mp)
    multi = get_method("multi-pass")(inp, res, cfg)[0]
    rnn = method_config("rnn-lm", nbest=nbest, lm_scale=1.0)
    assert isinstance(rnn, RnnLmRescoringConfig)
    full = get_method("rnn-lm")(inp, res, rnn)[0]
    assert multi.words == full.words


def test_missing_resources_are_clear_errors(setup):
    lang, res = setup
    inp = random_ctc_inputs(5, lang.max_token_id + 1)
    with pytest.raises(ValueError, match="needs the HLG graph"):
        get_method("1best")(inp, Resources())
    with pytest.raises(ValueError, match="needs a neural LM"):
        get_method("rnn-lm")(inp, Resources(graphs=res.graphs))
    with pytest.raises(ValueError, match="needs reference word ids"):
        get_method("nbest-oracle")(CtcInputs(inp.log_probs, inp.log_probs_lens), res)
    with pytest.raises(ValueError, match="needs the encoder output"):
        get_method("attention-decoder")(CtcInputs(inp.log_probs, inp.log_probs_lens), res)


def test_whole_lattice_rescoring_equals_the_library_call(setup):
    lang, res = setup
    inp = random_ctc_inputs(6, lang.max_token_id + 1)
    cfg = method_config("whole-lattice-rescoring", ngram_lm_scale=0.6, scale=1.0)
    assert isinstance(cfg, WholeLatticeRescoringConfig)
    out = get_method("whole-lattice-rescoring")(inp, res, cfg)
    HLG = res.graphs["HLG"].clone()
    HLG.lm_scores = HLG.scores.clone()
    lat = get_lattice(inp.log_probs, inp.log_probs_lens, HLG, cfg.lattice)
    want = rescore_with_whole_lattice(lat, res.graphs["G"], RescoreConfig(lm_scales=(0.6,)))
    assert out[0].words == [list(h.words) for h in want.per_scale[0].hypotheses]


@pytest.mark.parametrize("scale", [0.3, 1.7])
def test_graph_scale_scales_the_graph_not_the_callers(setup, scale):
    lang, res = setup
    inp = random_ctc_inputs(5, lang.max_token_id + 1)
    before = res.graphs["HLG"].scores.clone()
    out = get_method("1best")(inp, res, HlgConfig(graph=GraphConfig(scale)))[0]
    scaled = res.graphs["HLG"].clone()
    scaled.scores = before * scale
    lat = get_lattice(inp.log_probs, inp.log_probs_lens, scaled, CtcLatticeConfig().lattice)
    assert out.words == [list(h.words) for h in hypotheses_from_lattice(lat)]
    assert torch.equal(res.graphs["HLG"].scores, before)
    # n-gram rescoring sees the scaled graph's lm_scores (am = tot - lm stays acoustic)
    cfg = method_config("nbest-rescoring", scale=scale, nbest=NbestConfig(num_paths=30),
                        ngram_lm_scale=0.7)
    got = get_method("nbest-rescoring")(inp, res, cfg)[0].words
    scaled.lm_scores = scaled.scores.clone()
    lat = get_lattice(inp.log_probs, inp.log_probs_lens, scaled, cfg.lattice).lattice
    nbest = Nbest.from_lattice(lat, 30, cfg.nbest.nbest_scale).intersect(lat)
    assert got == rescore_with_ngram(nbest, res.graphs["G"], [0.7])["ngram_lm_scale_0.7"].hyps


def test_graph_scale_must_be_positive():
    for bad in (0.0, -1.0):
        with pytest.raises(ValueError, match="graph.scale must be > 0 and finite"):
            HlgConfig(graph=GraphConfig(bad))
    for bad in (math.inf, math.nan):
        with pytest.raises(ValueError, match="scale must be a finite number"):
            HlgConfig(graph=GraphConfig(bad))


def test_whole_lattice_rescoring_in_groups_equals_the_shared_lattice(setup):
    """Searched and rescored one utterance's lattice at a time (``max_group_arcs=1``, no
    lattice cache) or rescored from the job's shared whole-batch lattice: the same words,
    frames and scores at every scale."""
    lang, res = setup
    inp = random_ctc_inputs(3, lang.max_token_id + 1)
    cfg = method_config("whole-lattice-rescoring", ngram_lm_scale=0.6, sweep=True,
                        ngram_lm_scales=(0.3, 0.6, 1.2))
    one = replace(cfg, whole_lattice=replace(cfg.whole_lattice, max_group_arcs=1))
    grouped = get_method("whole-lattice-rescoring")(inp, res, one)
    shared = CtcInputs(inp.log_probs, inp.log_probs_lens, lattices=LatticeCache(64))
    whole = get_method("whole-lattice-rescoring")(shared, res, cfg)
    assert shared.lattices.misses == 1  # the shared path was taken
    assert [r.key for r in grouped] == [r.key for r in whole]
    for a, b in zip(grouped, whole, strict=True):
        assert a.hyps == b.hyps


def test_attention_chunk_cells_bound_the_decoder_calls_not_the_results(setup,
                                                                       attention_call_sizes):
    """``attention-decoder``: at ``rescore.attention_chunk_cells=1`` every decoder call scores
    one path; the words and scores are those of the default chunks."""
    lang, res = setup
    sizes = attention_call_sizes(res.attention_decoder)
    inp = random_ctc_inputs(4, lang.max_token_id + 1)
    cfg = method_config("attention-decoder", nbest=NbestConfig(num_paths=20))
    default = get_method("attention-decoder")(inp, res, cfg)
    default_sizes, sizes[:] = list(sizes), []
    small = get_method("attention-decoder")(
        inp, res, replace(cfg, rescore=replace(cfg.rescore, attention_chunk_cells=1)))
    assert sizes and set(sizes) == {1} and len(sizes) == sum(default_sizes)
    assert max(default_sizes) > 1
    for a, b in zip(default, small, strict=True):
        assert [h.words for h in a.hyps] == [h.words for h in b.hyps]
        assert [h.score for h in a.hyps] == pytest.approx([h.score for h in b.hyps], abs=1e-4)
