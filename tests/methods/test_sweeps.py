"""Methods that weigh scores by scales report the configured scales (one setting) by default;
with ``rescore.sweep=true`` every point of their grids, configured first, in the order of
``Method.settings``; each point's assignments, applied without the sweep, reproduce it."""

from __future__ import annotations

import pytest

from k2dec.methods import TransducerInputs, get_method, list_methods, override_config
from k2dec.nbest import NbestConfig
from k2dec.testing.transducer import random_batch, random_model
from tests.methods import piece_lang, scorer_inputs
from tests.methods.conftest import method_config
from tests.methods.ctc_inputs import random_ctc_inputs

SWEEPING = ["attention-decoder", "nbest-rescoring", "rnn-lm", "whole-lattice-rescoring"]
#: the other methods that weigh scores by scales
OTHER_SWEEPING = ["attention-decoder-rescoring-no-ngram",
                  "ctc-prefix-beam-search-attention-decoder-rescoring",
                  "fast_beam_search_with_nbest_rescoring",
                  "fast_beam_search_with_nbest_rnn_rescoring",
                  "modified_beam_search_lm_rescore", "modified_beam_search_lm_rescore_LODR"]


def test_the_sweeping_methods_are_the_ones_with_scales():
    assert [m.name for m in list_methods() if m.sweeps] == sorted(SWEEPING + OTHER_SWEEPING)
    assert get_method("modified_beam_search_lm_rescore_LODR").scale_fields() == {
        "rescore.lm_scale": 0.43, "rescore.lodr_scale": -0.5}
    assert get_method("fast_beam_search_with_nbest_rnn_rescoring").scale_fields() == {
        "rescore.ngram_lm_scale": 0.05, "rescore.lm_scale": 0.05}
    assert get_method("attention-decoder-rescoring-no-ngram").scale_fields() == {
        "rescore.attention_scale": 1.2}
    assert get_method("nbest-rescoring").scale_fields() == {"rescore.ngram_lm_scale": 1.3}
    assert get_method("attention-decoder").scale_fields() == {
        "rescore.ngram_lm_scale": 1.3, "rescore.attention_scale": 1.2}
    assert get_method("whole-lattice-rescoring").scale_fields() == {
        "rescore.ngram_lm_scale": 1.3}
    assert get_method("1best").scale_fields() == {}
    assert [s.key for s in get_method("1best").settings()] == ["1best"]


def _config(name: str, **kw):
    grid = (0.3, 1.3, 2.0)
    return method_config(name, nbest=NbestConfig(num_paths=20), ngram_lm_scales=grid,
                         lm_scales=grid, attention_scales=(0.5, 1.2), **kw)


@pytest.mark.parametrize("name", SWEEPING)
def test_default_is_one_setting_at_the_configured_scales(setup, name):
    lang, res = setup
    method = get_method(name)
    cfg = _config(name)
    out = method(random_ctc_inputs(7, lang.max_token_id + 1), res, cfg)
    assert [r.key for r in out] == [s.key for s in method.settings(cfg)]
    assert len(out) == 1 and method.settings(cfg)[0].assignments == ()
    moved = override_config(cfg, [f"{k}={v + 0.25}" for k, v in method.scale_fields(cfg).items()])
    assert [r.key for r in method(random_ctc_inputs(7, lang.max_token_id + 1), res, moved)] == \
        [s.key for s in method.settings(moved)] != [out[0].key]


@pytest.mark.parametrize("name", SWEEPING)
@pytest.mark.parametrize("seed", [8, 9])
def test_every_swept_setting_equals_decoding_at_that_setting(setup, name, seed):
    lang, res = setup
    method = get_method(name)
    cfg = _config(name, ngram_lm_scale=0.9, attention_scale=0.7, lm_scale=0.9, sweep=True)
    inputs = random_ctc_inputs(seed, lang.max_token_id + 1)
    swept = method(inputs, res, cfg)
    settings = method.settings(cfg)
    assert [r.key for r in swept] == [s.key for s in settings]
    assert len(set(r.key for r in swept)) == len(swept) > 1
    assert swept[0].key == method.settings(override_config(cfg, ["sweep=false"]))[0].key
    for result, setting in zip(swept, settings):
        single = override_config(cfg, ["sweep=false", *setting.assignments])
        alone = method(inputs, res, single)
        assert [r.key for r in alone] == [setting.key]
        assert alone[0].words == result.words, setting


#: per method: small grids around a configured point that is not the grids' first
OTHER_GRIDS = {
    "attention-decoder-rescoring-no-ngram": ["attention_scale=0.7",
                                             "attention_scales=0.1,0.7,3.0"],
    "ctc-prefix-beam-search-attention-decoder-rescoring": ["attention_scale=0.7",
                                                           "attention_scales=0.1,3.0"],
    "fast_beam_search_with_nbest_rescoring": ["ngram_lm_scale=0.3",
                                              "ngram_lm_scales=-0.5,1.0,3.0", "num_paths=20"],
    "fast_beam_search_with_nbest_rnn_rescoring": [
        "ngram_lm_scale=0.3", "ngram_lm_scales=-0.5,3.0", "lm_scale=0.5",
        "lm_scales=0.0,2.0", "num_paths=20"],
    "modified_beam_search_lm_rescore": ["lm_scale=0.3", "lm_scales=0.1,0.9"],
    "modified_beam_search_lm_rescore_LODR": ["lm_scale=0.3", "lodr_scale=-0.2",
                                             "lm_scales=0.1,0.9", "lodr_scales=-0.2,-0.8"],
}


@pytest.mark.parametrize("name", OTHER_SWEEPING)
def test_other_methods_report_one_setting_and_each_swept_one_is_that_setting(
        name, resources, fbs_setup):
    """The beam-search-list and transducer n-best rescoring methods: one setting by default;
    with ``sweep=true`` every grid point, configured first, each the decode at its
    assignments."""
    method = get_method(name)
    if name.startswith("fast_beam_search"):
        res = fbs_setup[2]
        model = random_model(vocab_size=piece_lang.VOCAB, seed=3)
        enc, lens = random_batch([4, 3, 2], seed=3)
        inputs = TransducerInputs(model, enc, lens)
    else:
        res = resources[0]
        inputs = (scorer_inputs.transducer_inputs(3) if name.startswith("modified")
                  else scorer_inputs.ctc_inputs(3))
    cfg = override_config(method.default_config(), OTHER_GRIDS[name])
    alone = method(inputs, res, cfg)
    assert [r.key for r in alone] == [s.key for s in method.settings(cfg)]
    assert len(alone) == 1 and method.settings(cfg)[0].assignments == ()
    swept_cfg = override_config(cfg, ["sweep=true"])
    swept = method(inputs, res, swept_cfg)
    settings = method.settings(swept_cfg)
    assert [r.key for r in swept] == [s.key for s in settings]
    assert len({r.key for r in swept}) == len(swept) > 2
    assert swept[0].key == alone[0].key and swept[0].hyps == alone[0].hyps
    for result, setting in zip(swept, settings):
        single = override_config(cfg, list(setting.assignments))
        again = method(inputs, res, single)
        assert [r.key for r in again] == [setting.key]
        assert again[0].tokens == result.tokens, setting
