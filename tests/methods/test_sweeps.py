"""Methods that weigh scores by scales report the configured scales (one setting) by default;
with ``sweep=True`` every point of their grids, configured first, in the order of
``Method.settings``; each point's assignments, applied without the sweep, reproduce it."""

from __future__ import annotations

import pytest

from k2dec.methods import get_method, list_methods, override_config
from k2dec.methods.ctc import CtcConfig
from k2dec.nbest import NbestConfig
from tests.methods.test_ctc_methods import _inputs

SWEEPING = ["attention-decoder", "nbest-rescoring", "rnn-lm", "whole-lattice-rescoring"]


def test_the_sweeping_methods_are_the_ones_with_scales():
    assert [m.name for m in list_methods() if m.sweeps] == SWEEPING
    assert get_method("nbest-rescoring").scale_fields() == {"ngram_lm_scale": 1.3}
    assert get_method("attention-decoder").scale_fields() == {"ngram_lm_scale": 1.3,
                                                              "attention_scale": 1.2}
    assert get_method("whole-lattice-rescoring").scale_fields() == {
        "whole_lattice_lm_scale": 1.3}
    assert get_method("1best").scale_fields() == {}
    assert [s.key for s in get_method("1best").settings()] == ["1best"]


def _config(**kw) -> CtcConfig:
    return CtcConfig(nbest=NbestConfig(num_paths=20), lm_scales=(0.3, 1.3, 2.0),
                     attention_scales=(0.5, 1.2), **kw)


@pytest.mark.parametrize("name", SWEEPING)
def test_default_is_one_setting_at_the_configured_scales(setup, name):
    lang, res = setup
    method = get_method(name)
    cfg = _config()
    out = method(_inputs(7, lang.max_token_id + 1), res, cfg)
    assert [r.key for r in out] == [s.key for s in method.settings(cfg)]
    assert len(out) == 1 and method.settings(cfg)[0].assignments == ()
    moved = override_config(cfg, [f"{k}={v + 0.25}" for k, v in method.scale_fields(cfg).items()])
    assert [r.key for r in method(_inputs(7, lang.max_token_id + 1), res, moved)] == \
        [s.key for s in method.settings(moved)] != [out[0].key]


@pytest.mark.parametrize("name", SWEEPING)
@pytest.mark.parametrize("seed", [8, 9])
def test_every_swept_setting_equals_decoding_at_that_setting(setup, name, seed):
    lang, res = setup
    method = get_method(name)
    cfg = _config(ngram_lm_scale=0.9, attention_scale=0.7, rnn_lm_scale=0.9,
                  whole_lattice_lm_scale=0.9, sweep=True)
    inputs = _inputs(seed, lang.max_token_id + 1)
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
