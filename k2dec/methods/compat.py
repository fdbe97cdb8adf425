"""icefall compatibility: a method's config with icefall's choices where k2dec's defaults
differ, so that a user can reproduce icefall's numbers.

Each switch is a config field, documented next to k2dec's default and why k2dec differs:

====================================================  ===================  ==================
field                                                 k2dec                icefall
====================================================  ===================  ==================
``FastBeamSearchConfig.termination_frame``            True (every frame    False (the last
                                                      scored)              frame's emissions
                                                                           dropped; with
                                                                           ``allow_partial``
                                                                           a partial path's
                                                                           last token kept)
``FastBeamSearchConfig.ilme_scale`` in                0.0                  0.1 (the default of
``fast_beam_search_nbest``, ``_nbest_oracle``,                             its fast_beam_search,
``_with_nbest_rescoring`` and                                              which these four
``_with_nbest_rnn_rescoring``                                              wrappers do not pass)
``FastBeamSearchConfig.decoder_tables``               True (per-token      False (the decoder
                                                      tables, equal up to  module, bit for bit:
                                                      float rounding)      k2.random_paths'
                                                                           samples follow
                                                                           last-bit changes)
``NbestConfig.tie_break`` (n-best scores and the      "first"              "last" (k2's argmax;
oracles' edit distances)                                                   the oracles' float32
                                                                           Levenshtein scores)
``NbestConfig.sampler``                               "hashed" (samples    "k2"
                                                      independent of the   (``k2.random_paths``)
                                                      batch)
``ModifiedBeamSearchConfig.score_dtype``              "float64"            "float32"
``hotwords.partial_share`` (token-level hotword        0.5 (half of a       1.0 (all of it on
methods, :mod:`k2dec.methods.hotword_biasing`)               phrase's bonus on    the way)
                                                      the way, the rest
                                                      on completion)
``hotwords.whole_words`` (the same methods)           True (a phrase       False (on its last
                                                      completes at a word  token)
                                                      end)
``hotwords.token_score`` (the same methods)           1.0                  2.0
                                                                           (``--context-score``)
====================================================  ===================  ==================

:func:`icefall_compatible` switches every one of them that is still at k2dec's default
(``k2dec decode --icefall-compat``); a value set explicitly (``--set ilme_scale=0.2``) stays.
With ``sampler="k2"`` n-best lists are sampled as icefall samples them, path by path for
the same lattice (and, like icefall's, they change with the batch composition).
"""

from __future__ import annotations

from dataclasses import fields, is_dataclass, replace
from typing import Any

from ..nbest import NbestConfig
from ..transducer import FastBeamSearchConfig, ModifiedBeamSearchConfig
from .hotword_biasing import (
    HOTWORDS_PARTIAL_SHARE,
    HOTWORDS_SCORE,
    HOTWORDS_WHOLE_WORDS,
    ICEFALL_HOTWORDS_SCORE,
)
from .registry import Method, get_method

__all__ = ["ICEFALL_NBEST_ILME_SCALE", "icefall_compatible", "icefall_compatible_part"]

#: icefall's ``fast_beam_search`` default ``ilme_scale``, in effect in its
#: ``fast_beam_search_nbest``, ``_nbest_oracle``, ``_with_nbest_rescoring`` and
#: ``_with_nbest_rnn_rescoring`` (they do not pass one)
ICEFALL_NBEST_ILME_SCALE = 0.1

_HIDDEN_ILME = ("fast_beam_search_nbest", "fast_beam_search_nbest_oracle",
                "fast_beam_search_with_nbest_rescoring",
                "fast_beam_search_with_nbest_rnn_rescoring")


def _switch(config: Any, method: str) -> Any:
    if isinstance(config, FastBeamSearchConfig):
        default = FastBeamSearchConfig()
        changes: dict[str, Any] = {}
        if config.termination_frame == default.termination_frame:
            changes["termination_frame"] = False
        if config.decoder_tables == default.decoder_tables:
            changes["decoder_tables"] = False
        if method in _HIDDEN_ILME and config.ilme_scale == default.ilme_scale:
            changes["ilme_scale"] = ICEFALL_NBEST_ILME_SCALE
        return replace(config, **changes)
    if isinstance(config, NbestConfig):
        default = NbestConfig()
        changes = {}
        if config.tie_break == default.tie_break:
            changes["tie_break"] = "last"
        if config.sampler == default.sampler:
            changes["sampler"] = "k2"
        return replace(config, **changes) if changes else config
    if isinstance(config, ModifiedBeamSearchConfig):
        if config.score_dtype == ModifiedBeamSearchConfig().score_dtype:
            return replace(config, score_dtype="float32")
        return config
    if is_dataclass(config):
        changes = {}
        names = {f.name for f in fields(config)}
        if {"partial_share", "whole_words"} <= names:
            if config.partial_share == HOTWORDS_PARTIAL_SHARE:
                changes["partial_share"] = 1.0
            if config.whole_words == HOTWORDS_WHOLE_WORDS:
                changes["whole_words"] = False
            if config.token_score == HOTWORDS_SCORE:
                changes["token_score"] = ICEFALL_HOTWORDS_SCORE
        for f in fields(config):
            value = getattr(config, f.name)
            if is_dataclass(value):
                new = _switch(value, method)
                if new is not value:
                    changes[f.name] = new
        return replace(config, **changes) if changes else config
    return config


def icefall_compatible(method: str | Method, config: Any = None) -> Any:
    """``config`` (default: the method's defaults) with every icefall compatibility switch
    that is still at k2dec's default set to icefall's behaviour (see the module docstring);
    configs without such fields come back unchanged."""
    method = get_method(method) if isinstance(method, str) else method
    config = method.default_config() if config is None else config
    if not isinstance(config, method.config_cls):
        raise TypeError(f"method {method.name!r} takes a {method.config_cls.__name__}, got "
                        f"{type(config).__name__}")
    return _switch(config, method.name)


def icefall_compatible_part(config: Any) -> Any:
    """One config part (a :class:`~k2dec.transducer.FastBeamSearchConfig`,
    :class:`~k2dec.nbest.NbestConfig`, :class:`~k2dec.transducer.ModifiedBeamSearchConfig`,
    ...) with the switches of the table above that belong to it set to icefall's behaviour
    where still at k2dec's default; no method's hidden defaults (``ilme_scale``) are applied
    (what :mod:`k2dec.icefall` uses: its callers give every value as icefall's functions
    take them)."""
    return _switch(config, "")
