"""The registry's config overrides and Resources: what a method lacks, scaled graphs."""

from __future__ import annotations

import warnings

import k2
import pytest
import torch

from k2dec.aed import BeamSearchConfig
from k2dec.job import plan_methods
from k2dec.lattice.rescore import RescoreConfig
from k2dec.methods import (
    Resources,
    config_field_path,
    config_keys,
    get_method,
    override_config,
    renamed_key,
)
from k2dec.methods.transducer import FastBeamSearchNbestLGConfig
from k2dec.nbest import MultiPassConfig, NbestConfig


def test_bare_names_reach_the_one_nested_field():
    cfg = FastBeamSearchNbestLGConfig()
    assert config_field_path(cfg, "num_paths") == ["nbest", "num_paths"]
    assert config_field_path(cfg, "beam") == ["search", "beam"]
    assert config_field_path(cfg, "ngram_lm_scale") == ["ngram_lm_scale"]
    assert config_field_path(cfg, "search.beam") == ["search", "beam"]
    assert config_field_path(cfg, "nope") is None
    assert config_field_path(cfg, "search.nope") is None
    new = override_config(cfg, ["num_paths=7", "beam=3", "nbest.nbest_scale=0.25"])
    assert (new.nbest.num_paths, new.search.beam, new.nbest.nbest_scale) == (7, 3.0, 0.25)
    assert cfg.nbest.num_paths == 200  # the input is not changed
    # a top-level field wins over a nested one of the same name
    from dataclasses import dataclass, field

    @dataclass(frozen=True)
    class Both:
        lm_scales: tuple[float, ...] = (1.0,)
        whole_lattice: RescoreConfig = field(default_factory=RescoreConfig)

    both = override_config(Both(), ["lm_scales=0.5"])
    assert both.lm_scales == (0.5,) and both.whole_lattice.lm_scales != (0.5,)


def test_ambiguous_bare_name_is_an_error():
    from dataclasses import dataclass, field

    @dataclass(frozen=True)
    class Two:
        a: NbestConfig = field(default_factory=NbestConfig)
        b: NbestConfig = field(default_factory=NbestConfig)

    with pytest.raises(ValueError, match="'num_paths' is ambiguous in Two: say which one of "
                                         "a.num_paths, b.num_paths"):
        override_config(Two(), ["num_paths=3"])
    assert override_config(Two(), ["b.num_paths=3"]).b.num_paths == 3


@pytest.mark.parametrize("assignment, message", [
    ("num_paths=2.7", "num_paths='2.7' does not fit the field's type \\(int\\)"),
    ("num_paths=0", r"NbestConfig.num_paths must be an int in \[1, 10000\], got 0"),
    ("nbest_scale=0", "nbest_scale must be > 0 and finite, got 0.0"),
    ("nbest_scale=inf", "nbest_scale must be > 0 and finite"),
    ("lm_scales=", "lm_scales='' does not fit"),
    ("lm_scales=,", "lm_scales=',' does not fit"),
    ("top_k=0", r"MultiPassMethodConfig.top_k must be an int in \[1, 10000\], got 0"),
    ("hlg_scale=-1", "hlg_scale must be > 0 and finite"),
    ("lattice.search_beam=x", "search_beam='x' does not fit"),
])
def test_bad_values_are_clear_errors(assignment, message):
    with pytest.raises(ValueError, match=message) as e:
        method = "nbest-rescoring" if assignment.startswith("lm_scales") else "multi-pass"
        override_config(get_method(method).default_config(), [assignment])
    assert str(e.value).startswith(assignment)


def test_resources_say_what_a_method_lacks():
    res = Resources(graphs={"HLG": k2.ctc_topo(3)})
    assert res.missing(get_method("1best").requires) == ()
    assert res.missing(get_method("nbest-rescoring").requires) == ("G",)
    assert res.missing(get_method("rnn-lm").requires) == ("lm",)
    assert res.missing(get_method("attention-decoder").requires) == ("attention_decoder",)
    assert res.missing(get_method("fast_beam_search_LG").requires) == ("LG",)
    assert res.missing(get_method("greedy_search").requires) == ()
    full = Resources(graphs={"HLG": k2.ctc_topo(3), "G": k2.ctc_topo(3)}, lms={"rnn_lm": 1},
                     attention_decoder=object())
    for name in ("nbest-rescoring", "rnn-lm", "attention-decoder"):
        assert full.missing(get_method(name).requires) == ()


def test_resources_hold_scorer_sources_by_name():
    """``sources`` is the one mapping; the former fields are constructor shorthands and
    read-only views of it."""
    lm, lodr, phrases, words = object(), object(), (((1, 2), None),), (((7,), 2.0),)
    old = Resources(lms={"rnn_lm": lm}, lodr=lodr, hotwords=phrases, hotword_words=words)
    assert old.sources == {"rnn_lm": lm, "lodr": lodr, "hotwords": phrases,
                           "hotword_words": words}
    new = Resources(sources=dict(old.sources))
    assert new == old
    assert dict(new.lms) == {"rnn_lm": lm} and new.lodr is lodr
    assert new.hotwords is phrases and new.hotword_words is words
    assert new.neural_lm("m") == ("rnn_lm", lm)
    empty = Resources()
    assert (dict(empty.lms), empty.lodr, empty.hotwords, empty.hotword_words) == (
        {}, None, (), ())
    with pytest.raises(AttributeError, match=r"Resources.lodr is read-only: set "
                                             r"Resources.sources\['lodr'\]"):
        empty.lodr = lodr
    with pytest.raises(TypeError):
        empty.lms["rnn_lm"] = lm  # a view: set Resources.sources["rnn_lm"]
    empty.sources["transformer_lm"] = lm
    assert dict(empty.lms) == {"transformer_lm": lm} and empty.missing(("lm",)) == ()
    with pytest.raises(ValueError, match="'lodr' is given twice"):
        Resources(sources={"lodr": lodr}, lodr=lodr)


def test_every_method_prefers_the_rnn_lm():
    rnn, transformer = object(), object()
    res = Resources(sources={"transformer_lm": transformer, "rnn_lm": rnn})
    assert res.neural_lm("m") == ("rnn_lm", rnn)
    assert Resources(lms={"transformer_lm": transformer}).neural_lm("m") == (
        "transformer_lm", transformer)
    with pytest.raises(ValueError, match=r"m needs a neural LM in Resources.sources"):
        Resources(sources={"my_lm": rnn}).neural_lm("m")
    assert Resources(sources={"my_lm": rnn}).missing(("lm",)) == ("lm",)


@pytest.mark.parametrize("with_lm_scores", [False, True])
def test_scaled_graph_scales_scores_and_lm_scores_once(with_lm_scores):
    graph = k2.arc_sort(k2.ctc_topo(3))
    graph.scores = torch.rand(graph.num_arcs)
    if with_lm_scores:
        graph.lm_scores = torch.rand(graph.num_arcs)
    before = graph.scores.clone()
    res = Resources(graphs={"G": graph})
    g = res.scaled_graph("G", 0.5, "m")
    assert torch.allclose(g.scores, before * 0.5)
    assert hasattr(g, "lm_scores") == with_lm_scores
    if with_lm_scores:
        assert torch.allclose(g.lm_scores, graph.lm_scores * 0.5)
    assert res.scaled_graph("G", 0.5, "m") is g and len(res.cache) == 1
    assert torch.equal(graph.scores, before)
    # lm_scores=True: the scaled scores are the LM part where the graph has none
    g2 = res.scaled_graph("G", 0.5, "m", lm_scores=True)
    want = graph.lm_scores * 0.5 if with_lm_scores else before * 0.5
    assert torch.allclose(g2.lm_scores, want)
    # nothing to change: the graph itself
    assert (res.scaled_graph("G", 1.0, "m") is graph)
    assert (res.scaled_graph("G", 1.0, "m", lm_scores=True) is graph) == with_lm_scores
    with pytest.raises(ValueError, match="method 'm' needs the LG graph"):
        res.scaled_graph("LG", 0.5, "m")


#: (method, old key, new key, field path, value): LM weights renamed to icefall's names
RENAMED = [
    ("attention-beam-search", "lm_weight", "lm_scale", ["search", "lm_scale"], 0.25),
    ("attention-beam-search", "search.lm_weight", "search.lm_scale", ["search", "lm_scale"],
     0.25),
    ("multi-pass", "nn_scale", "rnn_lm_scale", ["multi_pass", "rnn_lm_scale"], 0.7),
    ("multi-pass", "multi_pass.nn_scale", "multi_pass.rnn_lm_scale",
     ["multi_pass", "rnn_lm_scale"], 0.7),
]


@pytest.mark.parametrize("method, old, new, path, value", RENAMED)
def test_old_setting_names_are_deprecated_aliases(method, old, new, path, value):
    """An old key sets the renamed field (warning with its new name, as a FutureWarning that a
    command line shows); the method's keys list only the new name."""
    default = get_method(method).default_config()
    assert config_field_path(default, old) == config_field_path(default, new) == path
    assert renamed_key(default, old) == new and renamed_key(default, new) is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        want = override_config(default, [f"{new}={value}"])
    with pytest.warns(FutureWarning, match=rf"setting '{old}' of {type(default).__name__} is "
                                           rf"deprecated: it is now '{new}'"):
        got = override_config(default, [f"{old}={value}"])
    assert got == want and got != default
    keys = config_keys(default)
    assert path[-1] in keys and old.split(".")[-1] not in keys


def test_old_setting_names_keep_the_key_meaning_check():
    """A renamed key means what the new one means: the plan refuses a bare key of two meanings
    (the attention search's LM weight vs MBR's posterior LM scale) and applies one meaning to
    every method that has it."""
    with pytest.raises(ValueError, match="'lm_scale' means different things"):
        plan_methods(["attention-beam-search", "mbr"], ["lm_scale=0.3"])
    runs = plan_methods(["attention-beam-search", "modified_beam_search_lm_shallow_fusion"],
                        ["lm_scale=0.3"])
    assert [r.config.search.lm_scale if r.method.name == "attention-beam-search"
            else r.config.lm_scale for r in runs] == [0.3, 0.3]
    runs = plan_methods(["multi-pass", "rnn-lm"], ["rnn_lm_scale=0.4"])
    assert runs[0].config.multi_pass.rnn_lm_scale == runs[1].config.rnn_lm_scale == 0.4
    with pytest.warns(FutureWarning, match="'lm_weight'"):
        runs = plan_methods(["attention-beam-search", "mbr"], ["lm_weight=0.2"])
    assert runs[0].config.search.lm_scale == 0.2  # mbr has no lm_weight: untouched
    assert runs[1].config == get_method("mbr").default_config()


def test_renamed_config_fields_keep_their_old_keywords_and_attributes():
    with pytest.warns(DeprecationWarning, match=r"__init__\(lm_weight=...\) is deprecated: the "
                                                r"parameter is now lm_scale"):
        cfg = BeamSearchConfig(lm_weight=0.3)
    assert cfg == BeamSearchConfig(lm_scale=0.3) and cfg.lm_weight == 0.3
    with pytest.warns(DeprecationWarning, match="now rnn_lm_scale"):
        mp = MultiPassConfig(nn_scale=0.6)
    assert mp == MultiPassConfig(rnn_lm_scale=0.6) and mp.nn_scale == 0.6
    with pytest.raises(TypeError, match="got both lm_scale= and its old name lm_weight="):
        BeamSearchConfig(lm_weight=0.3, lm_scale=0.3)
    with pytest.raises(ValueError, match="lm_scale must be a finite number >= 0"):
        BeamSearchConfig(lm_scale=-1.0)
