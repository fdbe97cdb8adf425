"""The swept-scale checks every method config with a ``rescore`` part shares (its weights,
``sweep`` and grids: :class:`k2dec.methods.parts.RescorePart`)."""

from __future__ import annotations

import dataclasses
import math

import pytest

from k2dec.methods.ctc import NbestRescoringConfig, RnnLmRescoringConfig
from k2dec.methods.ctc_prefix import CtcPrefixAttentionConfig, NoNgramAttentionConfig
from k2dec.methods.parts import RescorePart
from k2dec.methods.transducer import FastBeamSearchNbestRescoringConfig
from k2dec.methods.transducer_beam_search import LmRescoreConfig, LmRescoreLodrConfig

# (config class, its swept scale, the grid ``sweep`` tries)
SWEPT = [
    (NbestRescoringConfig, "ngram_lm_scale", "ngram_lm_scales"),
    (RnnLmRescoringConfig, "lm_scale", "lm_scales"),
    (CtcPrefixAttentionConfig, "attention_scale", "attention_scales"),
    (NoNgramAttentionConfig, "attention_scale", "attention_scales"),
    (FastBeamSearchNbestRescoringConfig, "ngram_lm_scale", "ngram_lm_scales"),
    (LmRescoreConfig, "lm_scale", "lm_scales"),
    (LmRescoreLodrConfig, "lm_scale", "lm_scales"),
]


@pytest.mark.parametrize(("cls", "scale", "scales"), SWEPT)
def test_swept_scale_checks(cls, scale, scales):
    cfg = cls()

    def replace(**changes):
        return dataclasses.replace(cfg, rescore=dataclasses.replace(cfg.rescore, **changes))

    assert isinstance(getattr(cfg.rescore, scale), float) and getattr(cfg.rescore, scales)
    ok = replace(**{scale: -0.5, "sweep": True, scales: (0.1, 2)})
    assert getattr(ok.rescore, scales) == (0.1, 2)
    with pytest.raises(ValueError, match=f"^{scale} must be a finite number, got nan"):
        replace(**{scale: math.nan})
    with pytest.raises(ValueError, match=f"^{scale} must be a finite number, got True"):
        replace(**{scale: True})
    with pytest.raises(TypeError, match="^sweep must be a bool, got 1"):
        replace(sweep=1)
    with pytest.raises(ValueError, match=f"^{scales} needs at least one scale, got \\(\\)"):
        replace(**{scales: ()})
    with pytest.raises(ValueError, match=f"^{scales} needs at least one scale, got \\[1.0\\]"):
        replace(**{scales: [1.0]})
    with pytest.raises(ValueError, match=f"^{scales} must be a finite number, got inf"):
        replace(**{scales: (1.0, math.inf)})
    # the scale is checked first, then sweep, then the grid
    with pytest.raises(ValueError, match=f"^{scale} "):
        replace(**{scale: math.inf, "sweep": "yes", scales: ()})
    with pytest.raises(TypeError, match="^sweep "):
        replace(**{"sweep": "yes", scales: ()})


def test_lodr_scale_checked_before_the_grid():
    with pytest.raises(ValueError, match="^lodr_scale must be a finite number, got nan"):
        LmRescoreLodrConfig(rescore=RescorePart(lm_scale=0.5, lm_scales=(0.5,),
                                                lodr_scale=math.nan, lodr_scales=(),
                                                sweep="yes"))
