"""The transducer beam searches (icefall's names and defaults): ``modified_beam_search``, the
classic ``beam_search``, and modified beam search with a neural LM or LODR:
``modified_beam_search_lm_shallow_fusion``, ``modified_beam_search_LODR``,
``modified_beam_search_lm_rescore`` and ``..._LODR``; hotword biasing (``Resources.hotwords``)
in every one that searches with scorers and in ``modified_beam_search``.

Scores enter as icefall adds them: the ``beam_size`` best (hypothesis, symbol) pairs are chosen
by the transducer score, then the chosen tokens get ``fusion.lm_scale * log p_LM`` (no
end-of-sentence score), ``fusion.lodr_scale * log p_bigram`` (``lodr_scale`` < 0) and the
hotword bonus.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ..transducer import (
    ModifiedBeamSearchConfig,
    TransducerBeamSearchConfig,
    beam_search,
    modified_beam_search,
)
from ..transducer.modified_beam_search import ModifiedBeamSearch
from .fusion import ScorerRequest, build_scorers, lodr_scorer
from .hotword_biasing import HotwordConfig
from .lists import HypothesisLists, lm_scores, scorer_scores, sweep
from .parts import LM_BATCH_SIZE, ConfidencePart, FusionConfig, RescorePart
from .registry import Family, MethodResult, Setting, register
from .resources import Resources, TransducerInputs
from .scales import LM_SCALE, grid_settings, weight_points
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
#: The LODR scale of ``modified_beam_search_lm_rescore_LODR`` as icefall gives it (subtracted;
#: the config's ``rescore.lodr_scale`` is its negative): the middle of icefall's grid
#: (:data:`RESCORE_LODR_SCALES`, which is all its decode script has).
RESCORE_LODR_SCALE = 0.5
#: icefall's sweeps of ``modified_beam_search_lm_rescore`` and ``..._LODR``.
RESCORE_LM_SCALES = tuple(round(0.01 * i, 2) for i in range(10, 50))
RESCORE_LODR_LM_SCALES = tuple(round(0.02 * i, 2) for i in range(2, 30))
RESCORE_LODR_SCALES = tuple(round(0.05 * i, 2) for i in range(1, 20))


@dataclass(frozen=True)
class ModifiedBeamSearchMethodConfig:
    """``modified_beam_search``: the search, with hotword biasing when hotwords are given
    (``hotwords.token_score``: icefall's ``--context-score``)."""

    search: ModifiedBeamSearchConfig = field(default_factory=ModifiedBeamSearchConfig)
    hotwords: HotwordConfig = field(default_factory=HotwordConfig)


@dataclass(frozen=True)
class BeamSearchMethodConfig:
    """``beam_search`` (the classic transducer search), with hotword biasing when hotwords
    are given."""

    search: TransducerBeamSearchConfig = field(default_factory=TransducerBeamSearchConfig)
    hotwords: HotwordConfig = field(default_factory=HotwordConfig)


def _lm_fusion() -> FusionConfig:
    """icefall's ``--lm-scale`` of shallow fusion (:data:`LM_SCALE`)."""
    return FusionConfig(lm_scale=LM_SCALE)


def _lodr_fusion() -> FusionConfig:
    """icefall's LODR setting (:data:`LODR_LM_SCALE`, :data:`LODR_SCALE`)."""
    return FusionConfig(lm_scale=LODR_LM_SCALE, lodr_scale=LODR_SCALE)


@dataclass(frozen=True)
class LmShallowFusionConfig:
    """``modified_beam_search_lm_shallow_fusion``: ``fusion.lm_scale`` times the neural
    LM's log-probs on every token (and hotwords when given)."""

    search: ModifiedBeamSearchConfig = field(default_factory=ModifiedBeamSearchConfig)
    fusion: FusionConfig = field(default_factory=_lm_fusion)
    hotwords: HotwordConfig = field(default_factory=HotwordConfig)


@dataclass(frozen=True)
class LodrConfig:
    """``modified_beam_search_LODR``: shallow fusion with the neural LM plus a low-order
    token n-gram weighted ``fusion.lodr_scale`` (< 0 subtracts it), and hotwords when
    given."""

    search: ModifiedBeamSearchConfig = field(default_factory=ModifiedBeamSearchConfig)
    fusion: FusionConfig = field(default_factory=_lodr_fusion)
    hotwords: HotwordConfig = field(default_factory=HotwordConfig)


def _lm_rescore() -> RescorePart:
    """icefall's LM-rescoring setting and grid (:data:`RESCORE_LM_SCALE`)."""
    return RescorePart(lm_scale=RESCORE_LM_SCALE, lm_scales=RESCORE_LM_SCALES,
                       lm_batch_size=LM_BATCH_SIZE)


def _lodr_rescore() -> RescorePart:
    """icefall's LM scale and grid of LODR rescoring; its LODR grid, negated (LODR's weight
    is added: < 0 subtracts it)."""
    return RescorePart(lm_scale=RESCORE_LM_SCALE, lm_scales=RESCORE_LODR_LM_SCALES,
                       lodr_scale=-RESCORE_LODR_SCALE,
                       lodr_scales=tuple(-s for s in RESCORE_LODR_SCALES),
                       lm_batch_size=LM_BATCH_SIZE)


@dataclass(frozen=True)
class LmRescoreConfig:
    """``modified_beam_search_lm_rescore``: every final hypothesis rescored as
    ``am + lm_scale * lm`` (LM log-prob with ``eos``; the ``rescore`` part); with
    ``rescore.sweep``, also for every other ``s`` of ``rescore.lm_scales`` (icefall's grid).
    Token confidences are list posteriors of those scores times ``confidence.posterior_scale``
    (:mod:`k2dec.nbest.list_confidences`)."""

    search: ModifiedBeamSearchConfig = field(default_factory=ModifiedBeamSearchConfig)
    rescore: RescorePart = field(default_factory=_lm_rescore)
    confidence: ConfidencePart = field(default_factory=ConfidencePart)


@dataclass(frozen=True)
class LmRescoreLodrConfig(LmRescoreConfig):
    """``modified_beam_search_lm_rescore_LODR``: every final hypothesis rescored as
    ``am / s + lm + l * lodr`` (icefall's formula ``am / s + lm - |l| * lodr``; LM and n-gram
    log-probs with ``eos``) with ``s = rescore.lm_scale`` (the LM's weight relative to the
    acoustic score: the formula ranks as ``am + s * (lm + l * lodr)``) and ``l =
    rescore.lodr_scale`` (added, < 0 subtracts: -0.5 is icefall's ``0.5``); with
    ``rescore.sweep``, also for every other point of the two grids. Token confidences: list
    posteriors of those scores times ``confidence.posterior_scale``."""

    rescore: RescorePart = field(default_factory=_lodr_rescore)

    def __post_init__(self) -> None:
        if self.rescore.lm_scale == 0 or any(s == 0 for s in self.rescore.lm_scales):
            raise ValueError("rescore.lm_scale and rescore.lm_scales divide the acoustic "
                             "score: 0 is not allowed")


def _rescore_points(cfg: LmRescoreConfig | LmRescoreLodrConfig) -> dict[str, list[float]]:
    """The scale points a rescoring method reports (the configured one first)."""
    points = {"lm": weight_points(cfg.rescore, "lm_scale")}
    if isinstance(cfg, LmRescoreLodrConfig):
        points["lodr"] = weight_points(cfg.rescore, "lodr_scale")
    return points


def _two_places(value: float) -> str:
    """icefall's ``0.43`` / ``0.50``; a value with more places keeps them (a distinct key)."""
    return f"{value:.2f}" if round(value, 2) == value else f"{value:g}"


def _rescore_key(point: dict[str, float]) -> str:
    """icefall's result keys: ``nnlm_scale_0.43`` (``_lodr_scale_0.50`` with LODR: icefall
    names the subtracted weight, ``-lodr_scale``)."""
    key = f"nnlm_scale_{_two_places(point['lm'])}"
    return key + (f"_lodr_scale_{_two_places(0.0 - point['lodr'])}" if "lodr" in point
                  else "")


def _rescore_settings(cfg: LmRescoreConfig | LmRescoreLodrConfig) -> list[Setting]:
    return grid_settings(_rescore_points(cfg), {"lm": "rescore.lm_scale",
                                                "lodr": "rescore.lodr_scale"},
                         key=_rescore_key)


def _vocab(inputs: TransducerInputs) -> int:
    return int(inputs.model.decoder.vocab_size)


def _scorers(inputs: TransducerInputs, res: Resources, method: str, fusion: FusionConfig | None,
             hotwords: HotwordConfig) -> list:
    return build_scorers(res, method, fusion, _vocab(inputs), inputs.encoder_out.device,
                         hotwords)


def _mbs(inputs: TransducerInputs, cfg: ModifiedBeamSearchConfig, scorers) -> list:
    return modified_beam_search(inputs.model, inputs.encoder_out, inputs.encoder_out_lens, cfg,
                                scorers=scorers)


def _modified_streaming(model, res: Resources, cfg: ModifiedBeamSearchMethodConfig,
                        device: torch.device) -> StreamingSearch:
    scorers = build_scorers(res, "modified_beam_search", None, int(model.decoder.vocab_size),
                            device, cfg.hotwords)
    return StreamingSearch(ModifiedBeamSearch(model, cfg.search, scorers=scorers))


@register("modified_beam_search", Family.TRANSDUCER, ModifiedBeamSearchMethodConfig,
          hotwords=True, streaming=_modified_streaming)
def _modified(inputs: TransducerInputs, res: Resources, cfg: ModifiedBeamSearchMethodConfig):
    """Modified beam search (at most one symbol per frame, beam 4); hotword biasing when
    Resources.hotwords are given."""
    scorers = _scorers(inputs, res, "modified_beam_search", None, cfg.hotwords)
    hyps = _mbs(inputs, cfg.search, scorers)
    records = with_confidences(inputs, hyps, cfg.search.temperature, cfg.search.blank_penalty)
    return [MethodResult("modified_beam_search", records, cfg)]


@register("beam_search", Family.TRANSDUCER, BeamSearchMethodConfig, hotwords=True)
def _beam_search(inputs: TransducerInputs, res: Resources, cfg: BeamSearchMethodConfig):
    """The classic transducer beam search (any number of symbols per frame); hotword biasing
    when Resources.hotwords are given."""
    scorers = _scorers(inputs, res, "beam_search", None, cfg.hotwords)
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
    out = sweep(lists, am, {"lm": lm_scores(lm, lists, cfg.rescore.lm_batch())},
                _rescore_points(cfg), lambda b, c, s: b + s["lm"] * c["lm"], _rescore_key,
                cfg.confidence.posterior_scale)
    return [MethodResult(k, v, cfg) for k, v in out.items()]


@register("modified_beam_search_lm_rescore_LODR", Family.TRANSDUCER, LmRescoreLodrConfig,
          requires=("lm", "lodr"), settings=_rescore_settings)
def _lm_rescore_lodr(inputs: TransducerInputs, res: Resources, cfg: LmRescoreLodrConfig):
    """Every final hypothesis of modified beam search rescored: am / lm_scale + LM +
    lodr_scale * bigram (lodr_scale < 0)."""
    _, lm = res.neural_lm("modified_beam_search_lm_rescore_LODR")
    lodr = lodr_scorer(res, ScorerRequest("modified_beam_search_lm_rescore_LODR",
                                          _vocab(inputs), inputs.encoder_out.device))
    lists, am = final_lists(inputs, cfg.search)
    comps = {"lm": lm_scores(lm, lists, cfg.rescore.lm_batch()),
             "lodr": scorer_scores(lodr, lists)}
    out = sweep(lists, am, comps, _rescore_points(cfg),
                lambda b, c, s: b / s["lm"] + c["lm"] + s["lodr"] * c["lodr"], _rescore_key,
                cfg.confidence.posterior_scale)
    return [MethodResult(k, v, cfg) for k, v in out.items()]
