"""The swept-scale checks every method config with a ``sweep`` grid shares."""

from __future__ import annotations

import dataclasses
import math

import pytest

from k2dec.methods.ctc import NbestRescoringConfig, RnnLmRescoringConfig
from k2dec.methods.ctc_prefix import CtcPrefixAttentionConfig, NoNgramAttentionConfig
from k2dec.methods.transducer import FastBeamSearchNbestRescoringConfig
from k2dec.methods.transducer_beam_search import LmRescoreConfig, LmRescoreLodrConfig

# (config class, its swept scale, the grid ``sweep`` tries)
SWEPT = [
    (NbestRescoringConfig, "ngram_lm_scale", "lm_scales"),
    (RnnLmRescoringConfig, "rnn_lm_scale", "lm_scales"),
    (CtcPrefixAttentionConfig, "attention_scale", "attention_scales"),
    (NoNgramAttentionConfig, "attention_scale", "attention_scales"),
    (FastBeamSearchNbestRescoringConfig, "ngram_lm_scale", "ngram_lm_scales"),
    (LmRescoreConfig, "lm_scale", "lm_scales"),
    (LmRescoreLodrConfig, "lm_scale", "lm_scales"),
]


@pytest.mark.parametrize(("cls", "scale", "scales"), SWEPT)
def test_swept_scale_checks(cls, scale, scales):
    cfg = cls()
    assert isinstance(getattr(cfg, scale), float) and getattr(cfg, scales)
    ok = dataclasses.replace(cfg, **{scale: -0.5, "sweep": True, scales: (0.1, 2)})
    assert getattr(ok, scales) == (0.1, 2)
    with pytest.raises(ValueError, match=f"^{scale} must be a finite number, got nan"):
        dataclasses.replace(cfg, **{scale: math.nan})
    with pytest.raises(ValueError, match=f"^{scale} must be a finite number, got True"):
        dataclasses.replace(cfg, **{scale: True})
    with pytest.raises(TypeError, match="^sweep must be a bool, got 1"):
        dataclasses.replace(cfg, sweep=1)
    with pytest.raises(ValueError, match=f"^{scales} needs at least one scale, got \\(\\)"):
        dataclasses.replace(cfg, **{scales: ()})
    with pytest.raises(ValueError, match=f"^{scales} needs at least one scale, got \\[1.0\\]"):
        dataclasses.replace(cfg, **{scales: [1.0]})
    with pytest.raises(ValueError, match=f"^{scales} must be a finite number, got inf"):
        dataclasses.replace(cfg, **{scales: (1.0, math.inf)})
    # the scale is checked first, then sweep, then the grid
    with pytest.raises(ValueError, match=f"^{scale} "):
        dataclasses.replace(cfg, **{scale: math.inf, "sweep": "yes", scales: ()})
    with pytest.raises(TypeError, match="^sweep "):
        dataclasses.replace(cfg, **{"sweep": "yes", scales: ()})


def test_lodr_scale_checked_before_the_grid():
    with pytest.raises(ValueError, match="^lodr_scale must be a finite number, got nan"):
        LmRescoreLodrConfig(lodr_scale=math.nan, sweep="yes")
