"""The settings parser (k2dec.methods.settings): ``part.field`` keys, bare names where one part
has them, typed values, and keys of version 0.1 refused with their new name."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from k2dec.job import plan_methods
from k2dec.methods import (
    OLD_KEYS,
    config_field_path,
    config_keys,
    describe_settings,
    get_method,
    override_config,
)
from k2dec.methods.transducer import FastBeamSearchNbestLGConfig
from k2dec.nbest import NbestConfig


def test_keys_are_part_dot_field_and_bare_names_reach_the_one_field():
    cfg = FastBeamSearchNbestLGConfig()
    assert config_field_path(cfg, "num_paths") == ["nbest", "num_paths"]
    assert config_field_path(cfg, "beam") == ["search", "beam"]
    assert config_field_path(cfg, "scale") == ["graph", "scale"]
    assert config_field_path(cfg, "search.beam") == ["search", "beam"]
    assert config_field_path(cfg, "nope") is None
    assert config_field_path(cfg, "search.nope") is None
    assert config_field_path(cfg, "search.beam.x") is None
    new = override_config(cfg, ["num_paths=7", "beam=3", "nbest.nbest_scale=0.25"])
    assert (new.nbest.num_paths, new.search.beam, new.nbest.nbest_scale) == (7, 3.0, 0.25)
    assert cfg.nbest.num_paths == 200  # the input is not changed
    assert "graph.scale" in config_keys(cfg) and "scale" not in config_keys(cfg)


def test_a_bare_name_of_several_parts_is_an_error():
    @dataclass(frozen=True)
    class Two:
        a: NbestConfig = field(default_factory=NbestConfig)
        b: NbestConfig = field(default_factory=NbestConfig)

    with pytest.raises(ValueError, match="'num_paths' is a field of several parts of Two: say "
                                         "which one of a.num_paths, b.num_paths"):
        override_config(Two(), ["num_paths=3"])
    assert override_config(Two(), ["b.num_paths=3"]).b.num_paths == 3


@pytest.mark.parametrize("method, assignment, message", [
    ("multi-pass", "num_paths=2.7", "num_paths='2.7' does not fit the field's type \\(int\\)"),
    ("multi-pass", "num_paths=0", r"NbestConfig.num_paths must be an int in \[1, 10000\], got 0"),
    ("multi-pass", "nbest_scale=0", "nbest_scale must be > 0 and finite, got 0.0"),
    ("multi-pass", "nbest_scale=inf", "nbest_scale must be > 0 and finite"),
    ("rnn-lm", "rescore.lm_scales=", "lm_scales='' does not fit"),
    ("rnn-lm", "lm_scales=,", "lm_scales=',' does not fit"),
    ("multi-pass", "top_k=0", r"MultiPassConfig.top_k must be an int in \[1, 10000\], got 0"),
    ("multi-pass", "graph.scale=-1", "graph.scale must be > 0 and finite"),
    ("multi-pass", "lattice.search_beam=x", "search_beam='x' does not fit"),
    ("whole-lattice-rescoring", "rescore.ngram_lm_scale=0", "rescore.ngram_lm_scale must be > 0"),
    ("modified_beam_search_lm_rescore_LODR", "rescore.lm_scale=0", "divide the acoustic score"),
])
def test_bad_values_are_clear_errors(method, assignment, message):
    with pytest.raises(ValueError, match=message) as e:
        override_config(get_method(method).default_config(), [assignment])
    assert str(e.value).startswith(assignment)


#: (method, key of k2dec 0.1, what the error names)
OLD = [
    ("modified_beam_search", "beam=8", "search.beam_size"),
    ("ctc-prefix-beam-search", "search.beam=8", "search.beam_size"),
    ("beam_search", "beam=8", "search.beam_size"),
    ("nbest-rescoring", "lm_scales=0.5", "rescore.ngram_lm_scales"),
    ("rnn-lm", "rnn_lm_scale=0.3", "rescore.lm_scale"),
    ("whole-lattice-rescoring", "whole_lattice_lm_scale=0.4", "rescore.ngram_lm_scale"),
    ("multi-pass", "multi_pass.rnn_lm_scale=0.3", "multi_pass.lm_scale"),
    ("multi-pass", "multi_pass.nn_scale=0.3", "multi_pass.lm_scale"),
    ("1best", "hlg_scale=0.5", "graph.scale"),
    ("fast_beam_search_LG", "ngram_lm_scale=0.02", "graph.scale"),
    ("1best", "hotwords_score=1.0", "word_hotwords.word_score"),
    ("modified_beam_search", "hotwords_partial_share=1.0", "hotwords.partial_share"),
    ("attention-beam-search", "lm_weight=0.3", "fusion.lm_scale"),
    ("attention-beam-search", "search.lm_scale=0.3", "fusion.lm_scale"),
    ("attention-beam-search", "search.ctc_weight=0.5", "fusion.ctc_weight"),
    ("attention-beam-search", "nbest=2", "search.num_hyps"),
    ("mbr", "ctc.lattice.search_beam=15", "lattice.search_beam"),
    ("mbr", "ctc.whole_lattice_lm_scale=0.4", "rescore.ngram_lm_scale"),
    ("mbr", "rescore=1", "mbr.rescore_with_g"),
    ("mbr", "mbr.posterior.lm_scale=0.5", "mbr.lm_posterior_scale"),
    ("attention-decoder-rescoring-no-ngram", "ctc.lattice.output_beam=8",
     "lattice.output_beam"),
]


@pytest.mark.parametrize("method, assignment, new", OLD)
def test_an_old_key_is_a_one_line_error_naming_its_new_name(method, assignment, new):
    key = assignment.split("=")[0]
    with pytest.raises(ValueError) as e:
        override_config(get_method(method).default_config(), [assignment])
    said = str(e.value)
    assert "\n" not in said and f"{key!r} was renamed in k2dec 0.2: use" in said and new in said
    with pytest.raises(ValueError, match="was renamed in k2dec 0.2"):  # through the plan too
        plan_methods([method], [assignment])


def test_an_old_key_still_a_bare_name_of_one_meaning_works():
    """``ngram_lm_scale`` is G's weight in rescoring wherever it is a key (the LG methods'
    graph weight is graph.scale now), so a bare name reaches it."""
    cfg = override_config(get_method("nbest-rescoring").default_config(),
                          ["ngram_lm_scale=0.5"])
    assert cfg.rescore.ngram_lm_scale == 0.5
    assert set(OLD) and all(k.split("=")[0] in OLD_KEYS or k.startswith("ctc.")
                            for _, k, _ in OLD)


def test_one_key_applies_with_one_meaning_to_every_method_that_has_it():
    runs = plan_methods(["modified_beam_search", "beam_search", "fast_beam_search"],
                        ["beam_size=6", "fast_beam_search:beam=8", "temperature=1.5"])
    assert [r.config.search.temperature for r in runs] == [1.5] * 3
    assert [r.config.search.beam_size for r in runs[:2]] == [6, 6]
    assert runs[2].config.search.beam == 8.0
    # a plain key of 0.1 is refused for the methods where it is old, though others have it
    with pytest.raises(ValueError, match="'beam' was renamed .* \\(in modified_beam_search\\)"):
        plan_methods(["modified_beam_search", "fast_beam_search"], ["beam=8"])
    runs = plan_methods(["attention-beam-search", "modified_beam_search_lm_shallow_fusion",
                         "rnn-lm"], ["lm_scale=0.3"])
    assert (runs[0].config.fusion.lm_scale, runs[1].config.fusion.lm_scale,
            runs[2].config.rescore.lm_scale) == (0.3, 0.3, 0.3)


def test_describe_settings_groups_them_by_part():
    lines = describe_settings(get_method("modified_beam_search_LODR").default_config())
    assert [line.split(":")[0] for line in lines] == ["search", "fusion", "hotwords"]
    assert "beam_size=4" in lines[0] and "lodr_scale=-0.24" in lines[1]
    short = describe_settings(get_method("nbest-rescoring").default_config(), short=True)
    assert not any(line.startswith("settings:") for line in short)  # no top-level field
    assert any(line.startswith("lattice: ") and "subsampling_factor=1" in line
               for line in short)
    assert any(line.startswith("rescore: sweep=false ngram_lm_scale=1.3 ngram_lm_scales=")
               and "[" in line for line in short)


def test_the_shipped_settings_and_the_demos_tune_plan_use_the_current_keys():
    """decode.json's entries and the demo's tune grid each reach a field of their method (a
    0.1 key would be refused), and the tuned scales land where the demo's table reads them."""
    from k2dec.demo import SHIPPED_SETTINGS, TUNE_PLAN
    from k2dec.job import read_settings

    settings = read_settings(SHIPPED_SETTINGS)
    runs = {r.method.name: r.config
            for r in plan_methods(list(settings.methods), settings=settings)}
    assert runs["nbest-rescoring"].rescore.ngram_lm_scale == 0.5
    assert runs["whole-lattice-rescoring"].rescore.ngram_lm_scale == 0.4
    assert runs["rnn-lm"].rescore.lm_scale == 0.3 and runs["multi-pass"].multi_pass.lm_scale == 0.3
    assert runs["attention-beam-search"].fusion.ctc_weight == 0.5
    for method, grid in TUNE_PLAN.items():
        cfg = get_method(method).default_config()
        for item in grid:
            assert config_field_path(cfg, item.split("=")[0]) is not None, (method, item)


def test_none_turns_off_an_optional_field_whatever_its_default():
    """``KEY=none`` sets an Optional field to None even when its default is a number
    (attention-beam-search's repetition guard); a field that cannot be None refuses it."""
    from k2dec.methods import get_method, override_config

    cfg = get_method("attention-beam-search").default_config()
    assert cfg.search.max_repeats == 3
    assert override_config(cfg, ["search.max_repeats=none"]).search.max_repeats is None
    assert override_config(cfg, ["search.max_repeats=5"]).search.max_repeats == 5
    with pytest.raises(ValueError, match="beam_size='none' does not fit the field's type"):
        override_config(get_method("modified_beam_search").default_config(),
                        ["search.beam_size=none"])

