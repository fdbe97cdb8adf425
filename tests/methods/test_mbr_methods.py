"""The MBR methods (``mbr``, ``fast_beam_search_mbr``, ``fast_beam_search_mbr_LG``) compose
the lattice searches with k2dec.lattice.mbr: their settings equal the library's results, their
best-path settings equal the plain methods', and greedy / modified beam search / attention
beam search carry token frames and confidences."""

from __future__ import annotations

import pytest
import torch

from k2dec.graph import build_rescoring_G
from k2dec.lattice import (
    MbrConfig,
    PosteriorConfig,
    Topology,
    get_lattice,
    lattice_timed_units,
)
from k2dec.methods import CtcInputs, Resources, TransducerInputs, get_method
from k2dec.methods.ctc import HlgConfig, WholeLatticeRescoringConfig
from k2dec.methods.mbr import FastBeamSearchMbrLGConfig, MbrMethodConfig
from k2dec.methods.parts import GraphConfig, MbrPart, RescorePart
from k2dec.testing.lang import TINY_ARPA
from k2dec.testing.transducer import random_batch, random_model
from k2dec.transducer import fast_beam_search
from k2dec.transducer.joiner_confidences import token_confidences


def _ctc_inputs(seed: int, vocab: int, n: int = 4) -> CtcInputs:
    g = torch.Generator().manual_seed(seed)
    lengths = torch.tensor([7, 5, 6, 3][:n])
    log_probs = (torch.randn(n, 7, vocab, generator=g) * 2).log_softmax(-1)
    return CtcInputs(log_probs, lengths)


def _same(got: list[list[float]], want: list[list[float]]) -> None:
    assert [len(g) for g in got] == [len(w) for w in want]
    assert [x for g in got for x in g] == pytest.approx([x for w in want for x in w], abs=1e-6)


def _check_records(records, words: bool):
    for rec in records:
        if rec.error:
            continue
        if words:
            assert len(rec.word_frames) == len(rec.words) == len(rec.word_confidences)
            assert all(d >= 0 for d in rec.word_durations)
            assert list(rec.word_frames) == sorted(rec.word_frames)
            assert all(0.0 <= c <= 1.0 for c in rec.word_confidences)
        else:
            assert len(rec.token_frames) == len(rec.tokens) == len(rec.token_confidences)
            assert all(0.0 <= c <= 1.0 for c in rec.token_confidences)


def test_mbr_method_equals_the_library(tiny_hlg):
    lang, HLG, _ = tiny_hlg
    post = PosteriorConfig(acoustic_scale=0.7)
    cfg = MbrMethodConfig(graph=GraphConfig(0.8), mbr=MbrPart(am_posterior_scale=0.7))
    res = Resources(graphs={"HLG": HLG})
    inputs = _ctc_inputs(0, lang.max_token_id + 1)
    mbr, best = get_method("mbr")(inputs, res, cfg)
    assert (mbr.key, best.key) == ("mbr", "1best") and mbr.config is cfg
    graph = res.scaled_graph("HLG", 0.8, "test", lm_scores=True)
    lattice = get_lattice(inputs.log_probs, inputs.log_probs_lens, graph, cfg.lattice)
    for decode_mbr, out in ((True, mbr), (False, best)):
        units, _ = lattice_timed_units(lattice, Topology.CTC,
                                       MbrConfig(posterior=post, decode_mbr=decode_mbr))
        assert out.words == units.ids.tolist()
        _same([list(r.word_confidences) for r in out.hyps], units.confidences.tolist())
        assert [list(r.word_frames) for r in out.hyps] == units.begin.tolist()
        _check_records(out.hyps, words=True)
    one_best = get_method("1best")(inputs, res, HlgConfig(graph=GraphConfig(0.8)))[0]
    assert best.words == one_best.words and best.tokens == one_best.tokens


@pytest.mark.parametrize("cap", [6, 15, 40])
def test_mbr_bounds_the_lattice_and_says_so(tiny_hlg, cap):
    from k2dec.lattice import prune_lattice

    lang, HLG, _ = tiny_hlg
    cfg = MbrMethodConfig(mbr=MbrPart(max_lattice_arcs=cap))
    res = Resources(graphs={"HLG": HLG})
    inputs = _ctc_inputs(1, lang.max_token_id + 1)
    mbr, best = get_method("mbr")(inputs, res, cfg)
    graph = res.scaled_graph("HLG", cfg.graph.scale, "test", lm_scores=True)
    lattice = get_lattice(inputs.log_probs, inputs.log_probs_lens, graph, cfg.lattice).lattice
    pruned, reports = prune_lattice(lattice, cap)
    assert any(r.pruned for r in reports) or cap == 40
    for decode_mbr, out in ((True, mbr), (False, best)):
        units, _ = lattice_timed_units(pruned, Topology.CTC, MbrConfig(decode_mbr=decode_mbr))
        assert out.words == units.ids.tolist()
        _same([list(r.word_confidences) for r in out.hyps], units.confidences.tolist())
        assert [r.notes for r in out.hyps] == [r.describe() for r in reports]
        assert all(("pruned" in r.notes) == rep.pruned for r, rep in zip(out.hyps, reports))
    with pytest.raises(ValueError, match="max_lattice_arcs"):
        MbrConfig(max_lattice_arcs=0)
    with pytest.raises(ValueError, match="max_lattice_arcs"):
        MbrPart(max_lattice_arcs=0)


def test_mbr_after_whole_lattice_rescoring(tiny_hlg, tmp_path):
    lang, HLG, _ = tiny_hlg
    (tmp_path / "lm.arpa").write_text(TINY_ARPA)
    G = build_rescoring_G(tmp_path / "lm.arpa", lang.word_table)
    res = Resources(graphs={"HLG": HLG, "G": G})
    rescore = RescorePart(sweep=True, ngram_lm_scale=0.5, ngram_lm_scales=(0.5, 1.0))
    ctc = WholeLatticeRescoringConfig(rescore=rescore)
    inputs = _ctc_inputs(1, lang.max_token_id + 1)
    out = get_method("mbr")(inputs, res,
                            MbrMethodConfig(rescore=rescore, mbr=MbrPart(rescore_with_g=True)))
    assert [r.key for r in out] == ["mbr_lm_scale_0.5", "lm_scale_0.5", "mbr_lm_scale_1.0",
                                    "lm_scale_1.0"]
    plain = {r.key: r for r in get_method("whole-lattice-rescoring")(inputs, res, ctc)}
    for r in out:
        _check_records(r.hyps, words=True)
        if not r.key.startswith("mbr"):
            assert r.words == plain[r.key].words
    # without the sweep: the configured scale only
    one = get_method("mbr")(inputs, res, MbrMethodConfig(mbr=MbrPart(rescore_with_g=True)))
    assert [r.key for r in one] == ["mbr_lm_scale_1.3", "lm_scale_1.3"]
    with pytest.raises(ValueError, match="needs the G graph"):
        get_method("mbr")(inputs, Resources(graphs={"HLG": HLG}),
                          MbrMethodConfig(mbr=MbrPart(rescore_with_g=True)))


def test_fast_beam_search_mbr_methods(tiny_LG, device):
    _, LG = tiny_LG
    model = random_model(vocab_size=5, seed=3, device=device)
    enc, lens = random_batch([6, 2, 5], seed=3, device=device)
    inputs = TransducerInputs(model, enc, lens)
    res = Resources(graphs={"LG": LG.to(device)})
    mbr, best = get_method("fast_beam_search_mbr")(inputs, res)
    assert (mbr.key, best.key) == ("fast_beam_search_mbr", "fast_beam_search")
    assert mbr.words is None and best.words is None
    plain = get_method("fast_beam_search")(inputs, res)[0]
    assert best.tokens == plain.tokens
    assert [r.token_frames for r in best.hyps] == [r.token_frames for r in plain.hyps]
    _check_records(mbr.hyps, words=False)
    _check_records(best.hyps, words=False)

    cfg = FastBeamSearchMbrLGConfig(mbr=MbrPart(am_posterior_scale=0.5))
    mbr, best = get_method("fast_beam_search_mbr_LG")(inputs, res, cfg)
    assert (mbr.key, best.key) == ("fast_beam_search_mbr_LG", "fast_beam_search_LG")
    plain = get_method("fast_beam_search_LG")(inputs, res)[0]
    assert best.words == plain.words and best.tokens == plain.tokens
    graph = res.scaled_graph("LG", cfg.graph.scale, "test")
    lattice = fast_beam_search(model, enc, lens, graph, cfg.search).lattice
    units, _ = lattice_timed_units(lattice, Topology.TRANSDUCER, cfg.mbr.config())
    assert mbr.words == units.ids.tolist()
    _check_records(mbr.hyps, words=True)
    _check_records(best.hyps, words=True)


def test_transducer_searches_carry_confidences(device):
    model = random_model(vocab_size=5, seed=4, device=device)
    enc, lens = random_batch([6, 2, 5], seed=4, device=device)
    inputs = TransducerInputs(model, enc, lens)
    for name in ("greedy_search", "modified_beam_search", "beam_search"):
        out = get_method(name)(inputs, Resources())[0]
        assert out.hyps[0].token_confidences is not None, name
        _check_records(out.hyps, words=False)
        want = token_confidences(model, enc, lens, out.tokens,
                                 [list(r.token_frames) for r in out.hyps])
        _same([list(r.token_confidences) for r in out.hyps], want.tolist())


def test_overrides_reach_the_mbr_parts():
    from k2dec.methods import override_config

    cfg = override_config(MbrMethodConfig(), ["lattice.output_beam=4", "graph.scale=0.4",
                                              "am_posterior_scale=0.5", "rescore_with_g=1"])
    assert cfg.lattice.output_beam == 4.0 and cfg.graph.scale == 0.4
    assert cfg.mbr.am_posterior_scale == 0.5 and cfg.mbr.rescore_with_g is True
    assert cfg.mbr.config().posterior == PosteriorConfig(0.5, 1.0)
    with pytest.raises(ValueError, match="no field"):
        override_config(MbrMethodConfig(), ["lattice.nope=1"])
