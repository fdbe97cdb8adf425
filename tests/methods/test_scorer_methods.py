"""The methods built on scorers: transducer beam_search / LM fusion / LODR / LM rescoring /
hotwords, CTC prefix beam search and its attention rescoring, attention rescoring of the H
n-best; each against its definition recomputed here from per-hypothesis references."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from k2dec.methods import Resources, get_method
from k2dec.methods.ctc_prefix import CtcPrefixAttentionConfig, NoNgramAttentionConfig
from k2dec.methods.parts import RescorePart
from k2dec.methods.transducer_beam_search import LmRescoreConfig, LmRescoreLodrConfig
from k2dec.scorers import NeuralLmScorer, WeightedScorer
from k2dec.transducer import ModifiedBeamSearch, ModifiedBeamSearchConfig, modified_beam_search
from tests.methods.scorer_inputs import ctc_inputs, transducer_inputs
from tests.reference import nbest_confidence as ref_conf
from tests.reference.scorers import RefNeuralLm, RefNgram

TRANSDUCER = ["beam_search", "modified_beam_search", "modified_beam_search_LODR",
              "modified_beam_search_lm_rescore", "modified_beam_search_lm_rescore_LODR",
              "modified_beam_search_lm_shallow_fusion"]
CTC = ["attention-decoder-rescoring-no-ngram", "ctc-prefix-beam-search",
       "ctc-prefix-beam-search-attention-decoder-rescoring",
       "ctc-prefix-beam-search-shallow-fussion"]








@pytest.mark.parametrize("name", TRANSDUCER + CTC)
def test_runs_passes_config_and_needs_its_resources(resources, name):
    res, _ = resources
    method = get_method(name)
    inputs = transducer_inputs() if name in TRANSDUCER else ctc_inputs()
    cfg = method.default_config()
    out = method(inputs, res, cfg)
    assert out and all(r.config is cfg and len(r.hyps) == 3 for r in out)
    # at its defaults a method reports its configured setting only (grids: rescore.sweep)
    assert [r.key for r in out] == [s.key for s in method.settings(cfg)] == [out[0].key]
    assert res.missing(method.requires) == ()
    assert Resources().missing(method.requires) == tuple(method.requires)


def test_shallow_fusion_and_lodr_compose_the_documented_scorers(resources):
    res, _ = resources
    inputs = transducer_inputs(2)
    lm = res.lms["rnn_lm"]
    got = get_method("modified_beam_search_LODR")(inputs, Resources(
        lms=res.lms, lodr=res.lodr), None)[0]
    want = modified_beam_search(
        inputs.model, inputs.encoder_out, inputs.encoder_out_lens, ModifiedBeamSearchConfig(),
        scorers=[WeightedScorer(NeuralLmScorer(lm, score_eos=False), 0.42),
                 WeightedScorer(res.lodr, -0.24)])
    assert got.tokens == [h.tokens for h in want]
    for name in ("modified_beam_search", "fast_beam_search", "beam_search"):
        plain = get_method(name)(inputs, Resources(), None)[0]
        biased = get_method(name)(inputs, Resources(hotwords=res.hotwords), None)[0]
        assert [h.score for h in plain.hyps] != [h.score for h in biased.hyps], name


@pytest.mark.parametrize("lodr", [False, True])
def test_lm_rescore_picks_the_best_combined_score(resources, lodr):
    res, arpa = resources
    inputs = transducer_inputs(3)
    search = ModifiedBeamSearch(inputs.model, ModifiedBeamSearchConfig())
    streams = [search.new_stream("cpu", i) for i in range(3)]
    search.decode_chunk(streams, inputs.encoder_out, inputs.encoder_out_lens)
    nbests = search.hypotheses(streams)
    ref_lm, ref_ng = RefNeuralLm(res.lms["rnn_lm"]), RefNgram(arpa)

    def total(ref, tokens):
        state, acc = ref.start(0), 0.0
        for t in tokens:
            s, state = ref.step(state, t)
            acc += s
        return acc + ref.final(state)

    if lodr:
        # LODR's weight is added: -0.3 subtracts, icefall's "lodr_scale_0.30"
        cfg = LmRescoreLodrConfig(rescore=RescorePart(
            lm_scale=0.2, lodr_scale=-0.3, lm_scales=(0.2, 0.6), lodr_scales=(-0.3, -0.9),
            sweep=True))
        method = get_method("modified_beam_search_lm_rescore_LODR")
        points = [(f"nnlm_scale_{s:.2f}_lodr_scale_{-lo:.2f}", s, lo)
                  for s in cfg.rescore.lm_scales for lo in cfg.rescore.lodr_scales]
    else:
        cfg = LmRescoreConfig(rescore=RescorePart(lm_scale=0.1, lm_scales=(0.1, 0.9),
                                                  sweep=True))
        method = get_method("modified_beam_search_lm_rescore")
        points = [(f"nnlm_scale_{s:.2f}", s, None) for s in cfg.rescore.lm_scales]
    out = method(inputs, res, cfg)
    by_key = {r.key: r for r in out}
    assert list(by_key) == [p[0] for p in points] == [s.key for s in method.settings(cfg)]
    # the configured setting alone without the sweep
    alone = method(inputs, res, replace(cfg, rescore=replace(cfg.rescore, sweep=False)))
    assert [r.key for r in alone] == [points[0][0]] and alone[0].hyps == out[0].hyps
    for key, s, lo in points:
        for u, hyps in enumerate(nbests):
            def combined(h, s=s, lo=lo):
                lm = total(ref_lm, h.tokens)
                if lo is None:
                    return h.score + s * lm
                return h.score / s + lm + lo * total(ref_ng, h.tokens)
            best = max(hyps, key=combined)
            assert list(by_key[key].hyps[u].tokens) == best.tokens, (key, u)
            # confidences: the n-best posteriors under this point's combined scores
            want = ref_conf.nbest_confidences([[h.tokens for h in hyps]],
                                              [[combined(h) for h in hyps]],
                                              [hyps.index(best)])[0]
            got = by_key[key].hyps[u].token_confidences
            assert list(got) == pytest.approx(want, abs=1e-6), (key, u)


def test_ctc_attention_rescoring_picks_the_best_combined_score(resources):
    res, _ = resources
    inputs = ctc_inputs(4)
    cfg = CtcPrefixAttentionConfig(rescore=RescorePart(
        attention_scale=0.1, attention_scales=(0.1, 2.0), sweep=True))
    out = get_method("ctc-prefix-beam-search-attention-decoder-rescoring")(inputs, res, cfg)
    assert [r.key for r in out] == ["attention_scale_0.1", "attention_scale_2.0"]
    from k2dec.lattice.ctc_prefix_beam_search import ctc_prefix_beam_search

    hyps = ctc_prefix_beam_search(inputs.log_probs, inputs.log_probs_lens, cfg.search)
    dec = res.attention_decoder
    for r in out:
        s = float(r.key.rsplit("_", 1)[1])
        for u, hs in enumerate(hyps):
            mem = inputs.memory[u : u + 1, : int(inputs.log_probs_lens[u])]
            mask = torch.zeros(1, mem.size(1), dtype=torch.bool)

            def att(tokens, mem=mem, mask=mask):
                acc, prefix = 0.0, [dec.sos_id]
                for t in list(tokens) + [dec.eos_id]:
                    lp, _, _ = dec.step(torch.tensor([prefix]), mem, mask, None)
                    acc += float(lp[0, t])
                    prefix.append(t)
                return acc

            best = max(hs, key=lambda h, s=s: h.ctc_score + s * att(h.tokens))
            assert list(r.hyps[u].tokens) == best.tokens


def test_no_ngram_rescoring_keys(resources):
    res, _ = resources
    cfg = NoNgramAttentionConfig(rescore=RescorePart(
        attention_scale=0.7, attention_scales=(0.5, 0.7, 1.0), sweep=True))
    out = get_method("attention-decoder-rescoring-no-ngram")(ctc_inputs(5), res, cfg)
    assert [r.key for r in out] == ["attention_scale_0.7", "attention_scale_0.5",
                                    "attention_scale_1.0"]
    out = get_method("attention-decoder-rescoring-no-ngram")(
        ctc_inputs(5), res, NoNgramAttentionConfig())
    assert [r.key for r in out] == ["attention_scale_1.2"]
    assert all(h.tokens is not None and not h.error for r in out for h in r.hyps)


@pytest.mark.parametrize("name, config_cls", [
    ("attention-decoder-rescoring-no-ngram", NoNgramAttentionConfig),
    ("ctc-prefix-beam-search-attention-decoder-rescoring", CtcPrefixAttentionConfig)])
def test_attention_chunk_cells_bound_the_decoder_calls_not_the_results(
        resources, attention_call_sizes, name, config_cls):
    """``rescore.attention_chunk_cells`` reaches the attention decoder: at 1 cell every call
    scores one hypothesis; the words and scores are those of the default chunks."""
    res, _ = resources
    sizes = attention_call_sizes(res.attention_decoder)
    inputs = ctc_inputs(4)
    default = get_method(name)(inputs, res, config_cls())
    default_sizes, sizes[:] = list(sizes), []
    one = config_cls(rescore=replace(config_cls().rescore, attention_chunk_cells=1))
    small = get_method(name)(inputs, res, one)
    assert sizes and set(sizes) == {1} and len(sizes) == sum(default_sizes)
    assert max(default_sizes) > 1
    for a, b in zip(default, small, strict=True):
        assert [h.tokens for h in a.hyps] == [h.tokens for h in b.hyps]
        assert [h.score for h in a.hyps] == pytest.approx([h.score for h in b.hyps], abs=1e-4)
