"""The transducer beam searches (icefall's names and defaults): ``modified_beam_search``, the
classic ``beam_search``, and modified beam search with a neural LM or LODR:
``modified_beam_search_lm_shallow_fusion``, ``modified_beam_search_LODR``,
``modified_beam_search_lm_rescore`` and ``..._LODR``; hotword biasing (``Resources.hotwords``)
in every one that searches with scorers and in ``modified_beam_search``.

Scores enter as icefall adds them: the ``beam`` best (hypothesis, symbol) pairs are chosen by
the transducer score, then the chosen tokens get ``lm_scale * log p_LM`` (no end-of-sentence
score), ``lodr_scale * log p_bigram`` (``lodr_scale`` < 0) and the hotword bonus.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ..nbest import NbestConfig
from ..nbest.config import check_posterior_scale
from ..primitives.sizes import check_int_range
from ..transducer import (
    ModifiedBeamSearchConfig,
    TransducerBeamSearchConfig,
    beam_search,
    modified_beam_search,
)
from ..transducer.modified_beam_search import ModifiedBeamSearch
from .checks import check_finite, check_scale_grid, check_scales
from .fusion import Fusion, ScorerRequest, build_scorers, lodr_scorer
from .hotword_biasing import HotwordConfig
from .lists import HypothesisLists, lm_scores, scorer_scores, sweep
from .registry import Family, MethodResult, Resources, Setting, TransducerInputs, register
from .scales import LM_SCALE, grid_settings, scale_points
from .streaming import StreamingSearch
from .transducer import with_confidences

__all__ = [
    "BeamSearchMethodConfig",
    "LmRescoreConfig",
    "LmRescoreLodrConfig",
    "LmShallowFusionConfig",
    "LodrConfig",
    "ModifiedBeamSearchMethodConfig",
    "final_lists",
]

#: icefall's recommended LODR setting (its LODR documentation: ``--lm-scale 0.42
#: --ngram-lm-scale -0.24`` with a 2-gram over tokens).
LODR_LM_SCALE = 0.42
LODR_SCALE = -0.24
#: The LM scale of ``modified_beam_search_lm_rescore`` and ``..._LODR``: the one icefall's
#: LM-rescoring documentation decodes with (``--lm-scale 0.43``; its decode script sweeps).
RESCORE_LM_SCALE = 0.43
#: The LODR scale of ``modified_beam_search_lm_rescore_LODR``: the middle of icefall's grid
#: (:data:`RESCORE_LODR_SCALES`, which is all its decode script has).
RESCORE_LODR_SCALE = 0.5
#: icefall's sweeps of ``modified_beam_search_lm_rescore`` and ``..._LODR``.
RESCORE_LM_SCALES = tuple(round(0.01 * i, 2) for i in range(10, 50))
RESCORE_LODR_LM_SCALES = tuple(round(0.02 * i, 2) for i in range(2, 30))
RESCORE_LODR_SCALES = tuple(round(0.05 * i, 2) for i in range(1, 20))
#: What ``lodr_scale`` means in ``modified_beam_search_lm_rescore_LODR`` (field metadata, see
#: :func:`k2dec.methods.setting_meaning`): subtracted (> 0), not the LODR weight of the
#: searches (< 0 subtracts). Its ``lm_scale`` divides the acoustic score, which ranks as the
#: LM weight of the others does (``am / s + lm`` orders paths as ``am + s * lm``).
_SUBTRACTED = "l in am / lm_scale + lm - l * lodr"


@dataclass(frozen=True)
class ModifiedBeamSearchMethodConfig:
    """``modified_beam_search``: the search, with hotword biasing when hotwords are given
    (``hotwords_score``: icefall's ``--context-score``)."""

    search: ModifiedBeamSearchConfig = field(default_factory=ModifiedBeamSearchConfig)
    hotwords: HotwordConfig = field(default_factory=HotwordConfig)


@dataclass(frozen=True)
class BeamSearchMethodConfig:
    """``beam_search`` (the classic transducer search), with hotword biasing when hotwords
    are given."""

    search: TransducerBeamSearchConfig = field(default_factory=TransducerBeamSearchConfig)
    hotwords: HotwordConfig = field(default_factory=HotwordConfig)


@dataclass(frozen=True)
class LmShallowFusionConfig:
    """``modified_beam_search_lm_shallow_fusion``: ``lm_scale`` times the neural LM's
    log-probs on every token (and hotwords when given)."""

    search: ModifiedBeamSearchConfig = field(default_factory=ModifiedBeamSearchConfig)
    lm_scale: float = LM_SCALE
    hotwords: HotwordConfig = field(default_factory=HotwordConfig)

    def __post_init__(self) -> None:
        check_finite("lm_scale", self.lm_scale)

    @property
    def fusion(self) -> Fusion:
        """What the search adds (:func:`k2dec.methods.fusion.build_scorers`)."""
        return (("lm", self.lm_scale),)


@dataclass(frozen=True)
class LodrConfig:
    """``modified_beam_search_LODR``: shallow fusion with the neural LM minus a low-order
    token n-gram (``lodr_scale`` < 0 subtracts it), and hotwords when given."""

    search: ModifiedBeamSearchConfig = field(default_factory=ModifiedBeamSearchConfig)
    lm_scale: float = LODR_LM_SCALE
    lodr_scale: float = LODR_SCALE
    hotwords: HotwordConfig = field(default_factory=HotwordConfig)

    def __post_init__(self) -> None:
        for name in ("lm_scale", "lodr_scale"):
            check_finite(name, getattr(self, name))

    @property
    def fusion(self) -> Fusion:
        """What the search adds (:func:`k2dec.methods.fusion.build_scorers`)."""
        return (("lm", self.lm_scale), ("lodr", self.lodr_scale))


@dataclass(frozen=True)
class LmRescoreConfig:
    """``modified_beam_search_lm_rescore``: every final hypothesis rescored as
    ``am + lm_scale * lm`` (LM log-prob with ``eos``); with ``sweep``, also for every other
    ``s`` of ``lm_scales`` (icefall's grid). Token confidences are list posteriors of those
    scores times ``posterior_scale`` (:mod:`k2dec.nbest.list_confidences`)."""

    search: ModifiedBeamSearchConfig = field(default_factory=ModifiedBeamSearchConfig)
    lm_scale: float = RESCORE_LM_SCALE
    sweep: bool = False
    lm_scales: tuple[float, ...] = RESCORE_LM_SCALES
    lm_batch_size: int = 256
    posterior_scale: float = NbestConfig.posterior_scale

    def __post_init__(self) -> None:
        check_scale_grid(self, "lm_scale", "lm_scales")
        check_posterior_scale(self.posterior_scale)
        check_int_range(self, "lm_batch_size", 1, 4096)


@dataclass(frozen=True)
class LmRescoreLodrConfig:
    """``modified_beam_search_lm_rescore_LODR``: every final hypothesis rescored as
    ``am / s + lm - l * lodr`` (icefall's formula; LM and n-gram log-probs with ``eos``) with
    ``s = lm_scale`` and ``l = lodr_scale``; with ``sweep``, also for every other point of
    ``lm_scales`` x ``lodr_scales`` (icefall's grids). Token confidences: list posteriors
    of those scores times ``posterior_scale``."""

    search: ModifiedBeamSearchConfig = field(default_factory=ModifiedBeamSearchConfig)
    lm_scale: float = RESCORE_LM_SCALE
    lodr_scale: float = field(default=RESCORE_LODR_SCALE, metadata={"means": _SUBTRACTED})
    sweep: bool = False
    lm_scales: tuple[float, ...] = RESCORE_LODR_LM_SCALES
    lodr_scales: tuple[float, ...] = field(default=RESCORE_LODR_SCALES,
                                           metadata={"means": f"grid of {_SUBTRACTED}"})
    lm_batch_size: int = 256
    posterior_scale: float = NbestConfig.posterior_scale

    def __post_init__(self) -> None:
        check_finite("lodr_scale", self.lodr_scale)
        check_scale_grid(self, "lm_scale", "lm_scales")
        check_posterior_scale(self.posterior_scale)
        check_scales("lodr_scales", self.lodr_scales)
        if self.lm_scale == 0 or any(s == 0 for s in self.lm_scales):
            raise ValueError("lm_scale and lm_scales divide the acoustic score: 0 is not "
                             "allowed")
        check_int_range(self, "lm_batch_size", 1, 4096)


def _rescore_points(cfg: LmRescoreConfig | LmRescoreLodrConfig) -> dict[str, list[float]]:
    """The scale points a rescoring method reports (the configured one first)."""
    points = {"lm": scale_points(cfg.lm_scale, cfg.lm_scales, cfg.sweep)}
    if isinstance(cfg, LmRescoreLodrConfig):
        points["lodr"] = scale_points(cfg.lodr_scale, cfg.lodr_scales, cfg.sweep)
    return points


def _two_places(value: float) -> str:
    """icefall's ``0.43`` / ``0.50``; a value with more places keeps them (a distinct key)."""
    return f"{value:.2f}" if round(value, 2) == value else f"{value:g}"


def _rescore_key(point: dict[str, float]) -> str:
    """icefall's result keys: ``nnlm_scale_0.43`` (``_lodr_scale_0.50`` with LODR)."""
    key = f"nnlm_scale_{_two_places(point['lm'])}"
    return key + (f"_lodr_scale_{_two_places(point['lodr'])}" if "lodr" in point else "")


def _rescore_settings(cfg: LmRescoreConfig | LmRescoreLodrConfig) -> list[Setting]:
    return grid_settings(_rescore_points(cfg), {"lm": "lm_scale", "lodr": "lodr_scale"},
                         key=_rescore_key)


def _vocab(inputs: TransducerInputs) -> int:
    return int(inputs.model.decoder.vocab_size)


def _scorers(inputs: TransducerInputs, res: Resources, method: str, fusion: Fusion,
             hotwords: HotwordConfig) -> list:
    return build_scorers(res, method, fusion, _vocab(inputs), inputs.encoder_out.device,
                         hotwords)


def _mbs(inputs: TransducerInputs, cfg: ModifiedBeamSearchConfig, scorers) -> list:
    return modified_beam_search(inputs.model, inputs.encoder_out, inputs.encoder_out_lens, cfg,
                                scorers=scorers)


def _modified_streaming(model, res: Resources, cfg: ModifiedBeamSearchMethodConfig,
                        device: torch.device) -> StreamingSearch:
    scorers = build_scorers(res, "modified_beam_search", (), int(model.decoder.vocab_size),
                            device, cfg.hotwords)
    return StreamingSearch(ModifiedBeamSearch(model, cfg.search, scorers=scorers))


@register("modified_beam_search", Family.TRANSDUCER, ModifiedBeamSearchMethodConfig,
          hotwords=True, streaming=_modified_streaming)
def _modified(inputs: TransducerInputs, res: Resources, cfg: ModifiedBeamSearchMethodConfig):
    """Modified beam search (at most one symbol per frame, beam 4); hotword biasing when
    Resources.hotwords are given."""
    scorers = _scorers(inputs, res, "modified_beam_search", (), cfg.hotwords)
    hyps = _mbs(inputs, cfg.search, scorers)
    records = with_confidences(inputs, hyps, cfg.search.temperature, cfg.search.blank_penalty)
    return [MethodResult("modified_beam_search", records, cfg)]


@register("beam_search", Family.TRANSDUCER, BeamSearchMethodConfig, hotwords=True)
def _beam_search(inputs: TransducerInputs, res: Resources, cfg: BeamSearchMethodConfig):
    """The classic transducer beam search (any number of symbols per frame); hotword biasing
    when Resources.hotwords are given."""
    scorers = _scorers(inputs, res, "beam_search", (), cfg.hotwords)
    lists = beam_search(inputs.model, inputs.encoder_out, inputs.encoder_out_lens, cfg.search,
                        scorers=scorers)
    records = with_confidences(inputs, [hs[0] for hs in lists], cfg.search.temperature,
                               cfg.search.blank_penalty)
    return [MethodResult("beam_search", records, cfg)]


@register("modified_beam_search_lm_shallow_fusion", Family.TRANSDUCER, LmShallowFusionConfig,
          requires=("lm",), hotwords=True)
def _shallow_fusion(inputs: TransducerInputs, res: Resources, cfg: LmShallowFusionConfig):
    """Modified beam search plus lm_scale times a neural LM on every token (and hotwords)."""
    scorers = _scorers(inputs, res, "modified_beam_search_lm_shallow_fusion", cfg.fusion,
                       cfg.hotwords)
    hyps = _mbs(inputs, cfg.search, scorers)
    records = with_confidences(inputs, hyps, cfg.search.temperature, cfg.search.blank_penalty)
    return [MethodResult("modified_beam_search_lm_shallow_fusion", records, cfg)]


@register("modified_beam_search_LODR", Family.TRANSDUCER, LodrConfig, requires=("lm", "lodr"),
          hotwords=True)
def _lodr_fusion(inputs: TransducerInputs, res: Resources, cfg: LodrConfig):
    """Modified beam search with LODR: + lm_scale * neural LM + lodr_scale * token bigram
    (lodr_scale < 0), and hotwords."""
    scorers = _scorers(inputs, res, "modified_beam_search_LODR", cfg.fusion, cfg.hotwords)
    hyps = _mbs(inputs, cfg.search, scorers)
    records = with_confidences(inputs, hyps, cfg.search.temperature, cfg.search.blank_penalty)
    return [MethodResult("modified_beam_search_LODR", records, cfg)]


def final_lists(inputs: TransducerInputs,
                cfg: ModifiedBeamSearchConfig) -> tuple[HypothesisLists, torch.Tensor]:
    """Every final hypothesis of modified beam search and its score (float64 ``[H]``)."""
    search = ModifiedBeamSearch(inputs.model, cfg)
    device = inputs.encoder_out.device
    streams = [search.new_stream(device, i) for i in range(inputs.encoder_out.size(0))]
    search.decode_chunk(streams, inputs.encoder_out, inputs.encoder_out_lens)
    hyps = search.hypotheses(streams)
    lists = HypothesisLists.from_lists(hyps, device)
    return lists, torch.tensor([h.score for hs in hyps for h in hs], dtype=torch.float64,
                               device=device)


@register("modified_beam_search_lm_rescore", Family.TRANSDUCER, LmRescoreConfig,
          requires=("lm",), settings=_rescore_settings)
def _lm_rescore(inputs: TransducerInputs, res: Resources, cfg: LmRescoreConfig):
    """Every final hypothesis of modified beam search rescored: am + lm_scale * neural LM."""
    _, lm = res.neural_lm("modified_beam_search_lm_rescore")
    lists, am = final_lists(inputs, cfg.search)
    out = sweep(lists, am, {"lm": lm_scores(lm, lists, cfg.lm_batch_size)},
                _rescore_points(cfg), lambda b, c, s: b + s["lm"] * c["lm"], _rescore_key,
                cfg.posterior_scale)
    return [MethodResult(k, v, cfg) for k, v in out.items()]


@register("modified_beam_search_lm_rescore_LODR", Family.TRANSDUCER, LmRescoreLodrConfig,
          requires=("lm", "lodr"), settings=_rescore_settings)
def _lm_rescore_lodr(inputs: TransducerInputs, res: Resources, cfg: LmRescoreLodrConfig):
    """Every final hypothesis of modified beam search rescored: am / lm_scale + LM -
    lodr_scale * bigram."""
    _, lm = res.neural_lm("modified_beam_search_lm_rescore_LODR")
    lodr = lodr_scorer(res, ScorerRequest("modified_beam_search_lm_rescore_LODR",
                                          _vocab(inputs), inputs.encoder_out.device))
    lists, am = final_lists(inputs, cfg.search)
    comps = {"lm": lm_scores(lm, lists, cfg.lm_batch_size), "lodr": scorer_scores(lodr, lists)}
    out = sweep(lists, am, comps, _rescore_points(cfg),
                lambda b, c, s: b / s["lm"] + c["lm"] - s["lodr"] * c["lodr"], _rescore_key,
                cfg.posterior_scale)
    return [MethodResult(k, v, cfg) for k, v in out.items()]
