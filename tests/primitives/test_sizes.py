"""The one finite / positive number check (k2dec.primitives.sizes) and the configs and arguments
that use it: every one refuses bools, NaN, infinities and non-numbers with the field's name."""

from __future__ import annotations

import math
import re

import pytest

from k2dec.data.audio_io import AudioLimits
from k2dec.job import DecodeConfig
from k2dec.methods.ctc import HlgConfig, NbestRescoringConfig
from k2dec.methods.parts import GraphConfig, RescorePart
from k2dec.nbest import NbestConfig
from k2dec.primitives.sizes import check_finite, check_positive
from k2dec.results.ctm import frames_to_seconds
from k2dec.transducer.fast_beam_search import FastBeamSearchConfig
from k2dec.transducer.greedy import GreedySearchConfig

NOT_NUMBERS = [True, False, None, "1", [1.0], math.nan, math.inf, -math.inf]


@pytest.mark.parametrize("value", [0, -3, 2.5, -1e300, 0.0])
def test_check_finite_takes_finite_ints_and_floats(value):
    check_finite("x", value)


@pytest.mark.parametrize("value", NOT_NUMBERS)
def test_check_finite_refuses_the_rest_naming_field_and_value(value):
    with pytest.raises(ValueError, match=rf"^lm_scale must be a finite number, got "
                                         rf"{re.escape(repr(value))}$"):
        check_finite("lm_scale", value)


@pytest.mark.parametrize("value", [1, 0.5, 1e-300, 7e10])
def test_check_positive_takes_positive_numbers(value):
    check_positive("x", value)


@pytest.mark.parametrize("value", NOT_NUMBERS + [0, 0.0, -1, -0.5])
def test_check_positive_refuses_the_rest(value):
    with pytest.raises(ValueError, match=r"^scale must be > 0 and finite, got "):
        check_positive("scale", value)


@pytest.mark.parametrize("make, field", [
    (lambda v: NbestConfig(nbest_scale=v), "nbest_scale"),
    (lambda v: NbestConfig(posterior_scale=v), "posterior_scale"),
    (lambda v: FastBeamSearchConfig(temperature=v), "temperature"),
    (lambda v: DecodeConfig(frame_shift=v), "frame_shift"),
    (lambda v: AudioLimits(max_duration=v), "AudioLimits.max_duration"),
    (lambda v: frames_to_seconds(10, 4, v), "frame_shift"),
])
@pytest.mark.parametrize("value", [True, 0.0, -1.0, math.nan, math.inf])
def test_positive_fields_use_the_one_check(make, field, value):
    with pytest.raises(ValueError, match=rf"^{field} must be > 0 and finite, got "):
        make(value)


@pytest.mark.parametrize("value, message", [
    (0.0, "> 0 and finite"), (-1.0, "> 0 and finite"), (math.nan, "a finite number"),
    (math.inf, "a finite number"), (True, "a finite number")])
def test_the_hlg_scale_is_finite_and_positive(value, message):
    """graph.scale is any finite weight (LG's may be small or negative in a sweep); the HLG
    methods' must also be > 0 (a lattice search through HLG with its scores negated)."""
    with pytest.raises(ValueError, match=rf"^graph.scale must be {message}, got "):
        HlgConfig(graph=GraphConfig(value))


@pytest.mark.parametrize("make, field", [
    (lambda v: NbestRescoringConfig(rescore=RescorePart(ngram_lm_scale=v)), "ngram_lm_scale"),
    (lambda v: GraphConfig(v), "graph.scale"),
    (lambda v: GreedySearchConfig(blank_penalty=v), "blank_penalty"),
    (lambda v: FastBeamSearchConfig(ilme_scale=v), "ilme_scale"),
])
@pytest.mark.parametrize("value", [True, math.nan, -math.inf, "0.5"])
def test_finite_fields_use_the_one_check(make, field, value):
    with pytest.raises(ValueError, match=rf"^{field} must be a finite number, got "):
        make(value)
