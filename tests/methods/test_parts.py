"""Every method config has one shape (``search`` plus named parts), and every settings key has
one type and one meaning across all registered methods, by construction: each part name is one
class (:data:`k2dec.methods.PARTS`), no key is deeper than ``part.field``, and every field name
has one annotated type wherever it appears."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import fields, is_dataclass, replace

import pytest

from k2dec.methods import PARTS, config_keys, list_methods
from k2dec.methods.parts import ConfidencePart, FusionConfig, GraphConfig, MbrPart, RescorePart

METHODS = list_methods()


def _annotation(f) -> str:
    """A field's annotated type, optional or not (``int | None`` is an int setting)."""
    return str(f.type).replace(" | None", "")


@pytest.mark.parametrize("method", METHODS, ids=lambda m: m.name)
def test_every_part_is_the_one_class_of_its_name(method):
    config = method.default_config()
    for f in fields(config):
        value = getattr(config, f.name)
        if f.name == "search" or not is_dataclass(value):
            continue
        assert f.name in PARTS, f"{method.name}: {f.name} is not a registered part"
        assert type(value) is PARTS[f.name], (method.name, f.name, type(value))


@pytest.mark.parametrize("method", METHODS, ids=lambda m: m.name)
def test_no_key_is_deeper_than_part_dot_field(method):
    config = method.default_config()
    for f in fields(config):
        value = getattr(config, f.name)
        if is_dataclass(value):
            assert not any(is_dataclass(getattr(value, g.name)) for g in fields(value)), \
                (method.name, f.name)
    assert all(key.count(".") <= 1 for key in config_keys(config))


def test_every_field_name_has_one_type_across_all_methods():
    types: dict[str, set[str]] = defaultdict(set)
    where: dict[str, set[str]] = defaultdict(set)
    for method in METHODS:
        config = method.default_config()
        for f in fields(config):
            value = getattr(config, f.name)
            for g in fields(value) if is_dataclass(value) else [f]:
                types[g.name].add(_annotation(g))
                where[g.name].add(method.name)
    assert {n: t for n, t in types.items() if len(t) > 1} == {}
    # the names the review found with two meanings, each one kind now
    assert types["beam_size"] == {"int"} and types["beam"] == {"float"}
    assert "hotwords_score" not in types and "hlg_scale" not in types
    assert "rnn_lm_scale" not in types and "whole_lattice_lm_scale" not in types
    assert {"ngram_lm_scale", "lm_scale", "lodr_scale"} <= set(types)
    assert len(where["beam_size"]) > 5 and len(where["scale"]) > 5


def test_each_weight_name_lives_in_one_part_kind():
    """A weight's name says what it weighs: the LM weight is ``lm_scale`` in the fusion and
    rescore parts (and in multi_pass); G's weight in rescoring is
    ``rescore.ngram_lm_scale``; a graph's own weight inside a search is ``graph.scale``."""
    parts_of: dict[str, set[str]] = defaultdict(set)
    for method in METHODS:
        for key in config_keys(method.default_config()):
            part, _, name = key.rpartition(".")
            parts_of[name].add(part)
    assert parts_of["ngram_lm_scale"] == {"rescore"}
    assert parts_of["scale"] == {"graph"}
    assert parts_of["lodr_scale"] == {"fusion", "rescore"}
    assert parts_of["lm_scale"] == {"fusion", "rescore", "multi_pass"}
    assert parts_of["ctc_weight"] == {"fusion"}
    assert parts_of["token_score"] == {"hotwords"} and parts_of["word_score"] == {"word_hotwords"}


def test_lodr_weights_add_in_searches_and_rescoring_alike():
    """One sign convention: a LODR weight multiplies a log-score that is added (< 0
    subtracts), in modified_beam_search_LODR's fusion and in the LODR rescoring alike."""
    from k2dec.methods import get_method

    fusion = get_method("modified_beam_search_LODR").default_config().fusion
    rescore = get_method("modified_beam_search_lm_rescore_LODR").default_config().rescore
    assert fusion.lodr_scale < 0 and rescore.lodr_scale < 0
    assert all(s < 0 for s in rescore.lodr_scales)


@pytest.mark.parametrize("method, key", [
    ("modified_beam_search_LODR", "fusion.lodr_scale"),
    ("ctc-prefix-beam-search-shallow-fussion", "fusion.lodr_scale"),
    ("modified_beam_search_lm_rescore_LODR", "rescore.lodr_scale"),
    ("modified_beam_search_lm_rescore_LODR", "rescore.lodr_scales"),
])
def test_a_positive_lodr_weight_is_refused(method, key):
    """0.1's rescore.lodr_scale=0.5 was subtracted; the weight is added now, so a positive
    value (which would add LODR's scores) is refused naming the key, never silently used."""
    from k2dec.methods import get_method, override_config

    config = get_method(method).default_config()
    value = "-0.3,0.5" if key.endswith("s") else "0.5"
    with pytest.raises(ValueError, match=rf"{key} must be <= 0, got 0\.5: the LODR weight is "
                                         r"added to the score; give a negative value "
                                         r"\(e\.g\. -0\.5 for 0\.1's subtracted 0\.5\)$"):
        override_config(config, [f"{key}={value}"])
    negative = "-0.3,-0.5" if key.endswith("s") else "-0.5"
    for ok in (negative, "0.0" if not key.endswith("s") else "-0.1,0.0"):
        override_config(config, [f"{key}={ok}"])


def test_rescore_lists_only_the_weights_a_method_has():
    assert RescorePart(lm_scale=0.5, lm_scales=(0.5,)).settings_fields() == (
        "sweep", "lm_scale", "lm_scales")
    with pytest.raises(ValueError, match="attention_scales is a grid of attention_scale"):
        RescorePart(attention_scales=(1.0,))
    with pytest.raises(ValueError, match="lm_scales needs at least one scale"):
        RescorePart(lm_scale=0.5)
    with pytest.raises(TypeError, match="sweep must be a bool"):
        RescorePart(sweep=1)


@pytest.mark.parametrize("make, message", [
    (lambda: FusionConfig(lm_scale=float("nan")), "lm_scale"),
    (lambda: GraphConfig(scale=float("inf")), "scale"),
    (lambda: MbrPart(am_posterior_scale=0.0), "acoustic_scale must be positive"),
    (lambda: MbrPart(max_iterations=0), "max_iterations"),
    (lambda: ConfidencePart(posterior_scale=0.0), "confidence.posterior_scale"),
])
def test_parts_check_their_fields(make, message):
    with pytest.raises(ValueError, match=message):
        make()


@pytest.mark.parametrize("method", METHODS, ids=lambda m: m.name)
def test_no_method_config_has_a_plain_top_level_field(method):
    """Every field of every registered method's config is ``search`` or a part; no setting
    sits beside the parts (0.1's top-level ``subsampling_factor``, ``posterior_scale``,
    ``top_k`` and ``lm_batch_size`` are in ``lattice``, ``confidence`` and ``multi_pass``)."""
    config = method.default_config()
    plain = [f.name for f in fields(config) if f.name != "search" and f.name not in PARTS]
    assert plain == [], method.name
    assert all(is_dataclass(getattr(config, f.name)) for f in fields(config)), method.name
    assert all(key.count(".") == 1 for key in config_keys(config)), method.name


def test_moved_fields_live_in_the_part_that_owns_them():
    """A list-posterior scale is ``posterior_scale`` in the n-best part and in the confidence
    part of the methods without one; a subsampling factor is the lattice search's or the
    greedy search's own."""
    parts_of: dict[str, set[str]] = defaultdict(set)
    for method in METHODS:
        for key in config_keys(method.default_config()):
            part, _, name = key.rpartition(".")
            parts_of[name].add(part)
    assert parts_of["posterior_scale"] == {"nbest", "confidence"}
    assert parts_of["subsampling_factor"] == {"lattice", "search"}
    assert parts_of["top_k"] == {"multi_pass"}
    assert parts_of["lm_batch_size"] == {"rescore", "multi_pass"}


@pytest.mark.parametrize("method, key, path", [
    ("ctc-decoding", "subsampling_factor", "lattice.subsampling_factor"),
    ("nbest", "subsampling_factor", "lattice.subsampling_factor"),
    ("mbr", "subsampling_factor", "lattice.subsampling_factor"),
    ("attention-decoder-rescoring-no-ngram", "subsampling_factor",
     "lattice.subsampling_factor"),
    ("ctc-greedy-search", "subsampling_factor", "search.subsampling_factor"),
    ("multi-pass", "top_k", "multi_pass.top_k"),
    ("multi-pass", "lm_batch_size", "multi_pass.lm_batch_size"),
    ("rnn-lm", "lm_batch_size", "rescore.lm_batch_size"),
    ("ctc-prefix-beam-search", "posterior_scale", "confidence.posterior_scale"),
    ("ctc-prefix-beam-search-shallow-fussion", "posterior_scale", "confidence.posterior_scale"),
    ("ctc-prefix-beam-search-attention-decoder-rescoring", "posterior_scale",
     "confidence.posterior_scale"),
    ("modified_beam_search_lm_rescore", "posterior_scale", "confidence.posterior_scale"),
    ("modified_beam_search_lm_rescore_LODR", "posterior_scale", "confidence.posterior_scale"),
    ("nbest", "posterior_scale", "nbest.posterior_scale"),
])
def test_a_moved_field_keeps_its_bare_name(method, key, path):
    """``--set subsampling_factor=2`` (``top_k``, ``lm_batch_size``, ``posterior_scale``)
    still works: the bare name lands on the one part of the method that has it."""
    from k2dec.methods import get_method, override_config

    config = get_method(method).default_config()
    part, name = path.split(".")
    for k in (key, path):
        got = override_config(config, [f"{k}=2"])
        assert getattr(getattr(got, part), name) == 2
        assert got == replace(config, **{part: replace(getattr(config, part), **{name: 2})})


def test_the_lattice_part_carries_subsampling_factor_into_retries():
    from k2dec.lattice import LatticeConfig

    assert LatticeConfig(subsampling_factor=4).scaled(2.0).subsampling_factor == 4
    with pytest.raises(ValueError, match=r"LatticeConfig.subsampling_factor must be an int in "
                                         r"\[1, 16\], got 0"):
        LatticeConfig(subsampling_factor=0)
