"""Transducer methods: greedy and the fast_beam_search family (modified_beam_search and the
other beam searches are in :mod:`k2dec.methods.transducer_beam_search`).

The n-best variants compose :func:`k2dec.transducer.fast_beam_search` (which returns its
lattice) with :class:`k2dec.nbest.Nbest`; this is the only place the two meet, and their
configs compose the search's :class:`~k2dec.transducer.FastBeamSearchConfig` with
:class:`~k2dec.nbest.NbestConfig` and the LG scale.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import k2
import torch

from ..lattice import Topology
from ..nbest import (
    DedupKey,
    Nbest,
    NbestConfig,
    best_paths_by_score,
    combine_scores,
    intersected,
    lm_path_scorer,
    neural_scores,
    word_sequence_scores,
)
from ..transducer import (
    FastBeamSearch,
    FastBeamSearchConfig,
    GreedySearch,
    GreedySearchConfig,
    fast_beam_search_lattice,
    greedy_search,
)
from ..transducer.joiner_confidences import token_confidences
from .hotword_biasing import (
    HotwordConfig,
    LatticeBiasedSearch,
    hotword_fast_beam_search,
    hotword_fast_beam_search_lattice,
    token_biased_graph,
)
from .parts import LM_BATCH_SIZE, LM_BATCH_TOKENS, GraphConfig, RescorePart
from .records import from_nbest, from_transducer, oracle_records
from .registry import Family, MethodResult, Setting, register
from .resources import Resources, TransducerInputs
from .scales import NGRAM_LM_SCALE, grid_settings, lg_graph, weight_points
from .streaming import StreamingSearch

__all__ = [
    "NGRAM_LM_SCALE",
    "FastBeamSearchMethodConfig",
    "FastBeamSearchLGConfig",
    "FastBeamSearchNbestConfig",
    "FastBeamSearchNbestLGConfig",
    "FastBeamSearchNbestRescoringConfig",
    "FastBeamSearchNbestRnnRescoringConfig",
    "GreedySearchMethodConfig",
    "NBEST_RESCORING_SCALES",
]

#: The n-gram (and neural LM) scale of ``fast_beam_search_with_nbest_rescoring`` and
#: ``_rnn_rescoring``: the middle of icefall's grid (:data:`NBEST_RESCORING_SCALES`, which is
#: all its decode script has), as ``rnn-lm``'s ``rnn_lm_scale``.
NBEST_RESCORING_SCALE = 0.05
#: icefall's ``ngram_lm_scale_list`` of ``fast_beam_search_with_nbest_rescoring`` and
#: ``_rnn_rescoring`` (pruned_transducer_stateless3/decode.py); the RNN variant sweeps the
#: same list for the RNN LM scale.
NBEST_RESCORING_SCALES: tuple[float, ...] = (-0.5, -0.2, -0.1, -0.05, -0.02, 0.0, 0.01, 0.02,
                                             0.05, 0.1, 0.3, 0.5, 0.8, 1.0, 1.5, 2.5, 3.0)


def _transducer_nbest() -> NbestConfig:
    """icefall's transducer recipes sample 200 paths (``NbestConfig``'s other defaults)."""
    return NbestConfig(num_paths=200)


@dataclass(frozen=True)
class FastBeamSearchLGConfig:
    """``fast_beam_search_LG``: the search through LG with LG's scores times
    ``graph.scale``; when hotwords are given, through LG intersected with the hotword
    automaton (``hotwords.token_score`` per token, not scaled), or, for a list whose
    token graph would pass
    :data:`~k2dec.methods.hotword_biasing.HOTWORD_LG_MAX_ARCS` (about 1,600 phrases),
    through LG with the same bonus put on each lattice after the search
    (:class:`~k2dec.scorers.hotword_lattices.TokenLatticeHotwords`: the search itself is
    not biased)."""

    search: FastBeamSearchConfig = field(default_factory=FastBeamSearchConfig)
    graph: GraphConfig = field(default_factory=lg_graph)
    hotwords: HotwordConfig = field(default_factory=HotwordConfig)


@dataclass(frozen=True)
class FastBeamSearchNbestConfig:
    """``fast_beam_search_nbest`` and ``fast_beam_search_nbest_oracle``: the search, then
    ``nbest.num_paths`` paths sampled from its lattice; when hotwords are given, the search
    runs on the hotword automaton instead of the trivial graph (as ``fast_beam_search``:
    ``hotwords.token_score`` per token, part of every path's score)."""

    search: FastBeamSearchConfig = field(default_factory=FastBeamSearchConfig)
    nbest: NbestConfig = field(default_factory=_transducer_nbest)
    hotwords: HotwordConfig = field(default_factory=HotwordConfig)


@dataclass(frozen=True)
class FastBeamSearchNbestLGConfig:
    """``fast_beam_search_nbest_LG``: the search through LG (scores times
    ``graph.scale``; with hotwords, LG intersected with the hotword automaton, or past
    :data:`~k2dec.methods.hotword_biasing.HOTWORD_LG_MAX_ARCS` the bonus put on the
    lattices, as in ``fast_beam_search_LG``), then an n-best by word sequence."""

    search: FastBeamSearchConfig = field(default_factory=FastBeamSearchConfig)
    nbest: NbestConfig = field(default_factory=_transducer_nbest)
    graph: GraphConfig = field(default_factory=lg_graph)
    hotwords: HotwordConfig = field(default_factory=HotwordConfig)


def with_confidences(inputs: TransducerInputs, hyps, temperature: float,
                      blank_penalty: float) -> tuple:
    """Records of greedy / modified beam search hypotheses with each token's probability on
    its frame under the search's own softmax
    (:func:`k2dec.transducer.joiner_confidences.token_confidences`)."""
    conf = token_confidences(inputs.model, inputs.encoder_out, inputs.encoder_out_lens,
                             [h.tokens for h in hyps], [h.timestamps for h in hyps],
                             temperature=temperature, blank_penalty=blank_penalty)
    return from_transducer(hyps, token_confidences=conf.tolist())


@dataclass(frozen=True)
class GreedySearchMethodConfig:
    """``greedy_search``: the search (:class:`k2dec.transducer.GreedySearchConfig`:
    ``search.max_sym_per_frame``, ``search.blank_penalty``; icefall's defaults)."""

    search: GreedySearchConfig = field(default_factory=GreedySearchConfig)


def _greedy_streaming(model, res: Resources, cfg: GreedySearchMethodConfig,
                      device: torch.device) -> StreamingSearch:
    return StreamingSearch(GreedySearch(model, cfg.search))


@register("greedy_search", Family.TRANSDUCER, GreedySearchMethodConfig,
          streaming=_greedy_streaming)
def _greedy(inputs: TransducerInputs, res: Resources, cfg: GreedySearchMethodConfig):
    """Greedy search (batched; max_sym_per_frame symbols per frame)."""
    search = cfg.search
    hyps = greedy_search(inputs.model, inputs.encoder_out, inputs.encoder_out_lens, search)
    records = with_confidences(inputs, hyps, 1.0, search.blank_penalty)  # no temperature
    return [MethodResult("greedy_search", records, cfg)]


@dataclass(frozen=True)
class FastBeamSearchMethodConfig:
    """``fast_beam_search``: the search with the trivial graph, or, when hotwords are given,
    with the hotword automaton (:func:`k2dec.scorers.hotword_graph`, ``hotwords.token_score`` per
    token) as the decoding graph."""

    search: FastBeamSearchConfig = field(default_factory=FastBeamSearchConfig)
    hotwords: HotwordConfig = field(default_factory=HotwordConfig)


def _fbs_streaming(model, res: Resources, cfg: FastBeamSearchMethodConfig,
                   device: torch.device) -> StreamingSearch:
    graph = token_biased_graph(res, None, cfg.hotwords, int(model.decoder.vocab_size),
                               int(model.decoder.blank_id), device)
    if isinstance(graph, k2.Fsa) or graph is None:
        return StreamingSearch(FastBeamSearch(model, graph, cfg.search))
    return StreamingSearch(LatticeBiasedSearch(FastBeamSearch(model, None, cfg.search), graph))


@register("fast_beam_search", Family.TRANSDUCER, FastBeamSearchMethodConfig, hotwords=True,
          streaming=_fbs_streaming)
def _fbs(inputs: TransducerInputs, res: Resources, cfg: FastBeamSearchMethodConfig):
    """fast_beam_search with the trivial graph (the hotword graph when Resources.hotwords are
    given): one-best tokens."""
    out = hotword_fast_beam_search(inputs, res, cfg.hotwords, None, cfg.search)
    return [MethodResult("fast_beam_search", from_transducer(out.hyps), cfg)]


@register("fast_beam_search_LG", Family.TRANSDUCER, FastBeamSearchLGConfig, requires=("LG",),
          hotwords=True)
def _fbs_lg(inputs: TransducerInputs, res: Resources, cfg: FastBeamSearchLGConfig):
    """fast_beam_search with LG (scores times graph.scale; hotword biasing when
    Resources.hotwords are given): one-best words."""
    graph = res.scaled_graph("LG", cfg.graph.scale, "fast_beam_search_LG")
    out = hotword_fast_beam_search(inputs, res, cfg.hotwords, graph, cfg.search)
    hyps = from_transducer(out.hyps, words=_path_words(out.lattice))
    return [MethodResult("fast_beam_search_LG", hyps, cfg)]


def _path_words(lattice: k2.Fsa) -> list[list[int]]:
    """Word ids (aux_labels > 0) along the best path of each lattice."""
    best = k2.shortest_path(lattice, use_double_scores=True)
    aux = best.aux_labels
    per_arc = best.arcs.shape().remove_axis(1)  # [utt][arc]
    if isinstance(aux, torch.Tensor):
        words = k2.RaggedTensor(per_arc, aux.clone())
    else:  # ragged [arc][word] -> [utt][word]
        words = k2.RaggedTensor(per_arc.compose(aux.shape), aux.values).remove_axis(1)
    return words.remove_values_leq(0).tolist()


def _sample(inputs: TransducerInputs, cfg: FastBeamSearchNbestConfig | FastBeamSearchNbestLGConfig,
            graph: k2.Fsa | None, key: DedupKey, res: Resources | None = None,
            hotwords: HotwordConfig | None = None) -> tuple[k2.Fsa, Nbest]:
    """The search's lattice (biased by ``res.hotwords`` with ``hotwords`` when given:
    :func:`~k2dec.methods.hotword_biasing.hotword_fast_beam_search_lattice`) and
    ``cfg.nbest`` paths sampled from it, deduplicated by ``key``."""
    if res is not None and hotwords is not None:
        lattice = hotword_fast_beam_search_lattice(inputs, res, hotwords, graph, cfg.search)
    else:
        lattice = fast_beam_search_lattice(inputs.model, inputs.encoder_out,
                                           inputs.encoder_out_lens, graph, cfg.search)
    nbest = Nbest.from_config(lattice, cfg.nbest, key)
    return nbest.lattice, nbest


@register("fast_beam_search_nbest", Family.TRANSDUCER, FastBeamSearchNbestConfig,
          hotwords=True)
def _fbs_nbest(inputs: TransducerInputs, res: Resources, cfg: FastBeamSearchNbestConfig):
    """fast_beam_search, then num_paths sampled paths deduplicated by tokens; the best
    alignment score wins (hotword biasing when Resources.hotwords are given)."""
    _, nbest = _sample(inputs, cfg, None, DedupKey.TOKENS, res, cfg.hotwords)
    nbest = intersected(nbest, cfg.nbest)
    totals = nbest.tot_scores().values
    best, scores = best_paths_by_score(nbest, totals, cfg.nbest.tie_break)
    [hyps] = from_nbest(nbest, [(best, scores, totals)], False, Topology.TRANSDUCER,
                        word_start=res.word_start, posterior_scale=cfg.nbest.posterior_scale)
    return [MethodResult("fast_beam_search_nbest", hyps, cfg)]


@register("fast_beam_search_nbest_LG", Family.TRANSDUCER, FastBeamSearchNbestLGConfig,
          requires=("LG",), hotwords=True)
def _fbs_nbest_lg(inputs: TransducerInputs, res: Resources, cfg: FastBeamSearchNbestLGConfig):
    """fast_beam_search with LG, n-best by word sequence; the word sequence with the best
    log-sum over its alignments wins (hotword biasing when Resources.hotwords are given)."""
    graph = res.scaled_graph("LG", cfg.graph.scale, "fast_beam_search_nbest_LG")
    _, nbest = _sample(inputs, cfg, graph, DedupKey.WORDS, res, cfg.hotwords)
    totals = nbest.total_scores_in(log_semiring=True, max_arcs=cfg.nbest.max_intersect_arcs)
    best, scores = best_paths_by_score(nbest, totals.values, cfg.nbest.tie_break)
    [hyps] = from_nbest(nbest, [(best, scores, totals.values)], True, Topology.TRANSDUCER,
                        word_start=res.word_start, posterior_scale=cfg.nbest.posterior_scale)
    return [MethodResult("fast_beam_search_nbest_LG", hyps, cfg)]


@register("fast_beam_search_nbest_oracle", Family.TRANSDUCER, FastBeamSearchNbestConfig,
          needs_references=True, hotwords=True)
def _fbs_oracle(inputs: TransducerInputs, res: Resources, cfg: FastBeamSearchNbestConfig):
    """fast_beam_search n-best: the path closest to the reference tokens (an upper bound;
    of the biased lattice when Resources.hotwords are given)."""
    if inputs.ref_tokens is None:
        raise ValueError("fast_beam_search_nbest_oracle needs reference token ids "
                         "(TransducerInputs.ref_tokens)")
    _, nbest = _sample(inputs, cfg, None, DedupKey.TOKENS, res, cfg.hotwords)
    nbest = intersected(nbest, cfg.nbest)
    [hyps] = oracle_records(nbest, inputs.ref_tokens, False, Topology.TRANSDUCER,
                            word_start=res.word_start,
                            posterior_scale=cfg.nbest.posterior_scale,
                            tie_break=cfg.nbest.tie_break)
    return [MethodResult("fast_beam_search_nbest_oracle", hyps, cfg)]


def _ngram_rescore() -> RescorePart:
    """G's weight :data:`NBEST_RESCORING_SCALE` with icefall's grid."""
    return RescorePart(ngram_lm_scale=NBEST_RESCORING_SCALE,
                       ngram_lm_scales=NBEST_RESCORING_SCALES)


def _ngram_lm_rescore() -> RescorePart:
    """G's and the neural LM's weights :data:`NBEST_RESCORING_SCALE` with icefall's grid."""
    return RescorePart(ngram_lm_scale=NBEST_RESCORING_SCALE,
                       ngram_lm_scales=NBEST_RESCORING_SCALES, lm_scale=NBEST_RESCORING_SCALE,
                       lm_scales=NBEST_RESCORING_SCALES, lm_batch_size=LM_BATCH_SIZE,
                       lm_batch_tokens=LM_BATCH_TOKENS)


@dataclass(frozen=True)
class FastBeamSearchNbestRescoringConfig:
    """``fast_beam_search_with_nbest_rescoring``: the search with the trivial graph, an
    n-best by token sequence, each path's words (:class:`k2dec.lang.TokenWords`) scored with
    the rescoring G: ``am + ngram_lm_scale * ngram`` (the ``rescore`` part); with
    ``rescore.sweep``, also for every other ``s`` of ``rescore.ngram_lm_scales`` (icefall's
    grid)."""

    search: FastBeamSearchConfig = field(default_factory=FastBeamSearchConfig)
    nbest: NbestConfig = field(default_factory=_transducer_nbest)
    rescore: RescorePart = field(default_factory=_ngram_rescore)


@dataclass(frozen=True)
class FastBeamSearchNbestRnnRescoringConfig(FastBeamSearchNbestRescoringConfig):
    """``fast_beam_search_with_nbest_rnn_rescoring``: as
    :class:`FastBeamSearchNbestRescoringConfig`, plus each path's tokens scored with the
    neural LM: ``am + ngram_lm_scale * ngram + lm_scale * rnn_lm``; with ``rescore.sweep``,
    also every other pair of the two grids (at most ``rescore.lm_batch_size`` sequences and
    ``rescore.lm_batch_tokens`` padded token positions per LM call: its memory does not grow
    with the paths' length)."""

    rescore: RescorePart = field(default_factory=_ngram_lm_rescore)


def _rescoring_components(inputs: TransducerInputs, res: Resources,
                          cfg: FastBeamSearchNbestRescoringConfig, method: str
                          ) -> tuple[Nbest, dict[str, k2.RaggedTensor]]:
    """The intersected token n-best and its ``am`` and ``ngram_lm`` scores ``[utt][path]``."""
    G = res.graph("G", method)
    if res.token_words is None:
        raise ValueError(f"{method} needs Resources.token_words (a k2dec.lang.TokenWords of a "
                         "BPE lang dir) to read the words of token sequences")
    _, nbest = _sample(inputs, cfg, None, DedupKey.TOKENS)
    nbest = intersected(nbest, cfg.nbest)
    words = res.token_words(nbest.token_seqs()).to(G.device)
    ngram = word_sequence_scores(words, G).to(nbest.device)
    return nbest, {"am": nbest.tot_scores(), "ngram_lm": k2.RaggedTensor(nbest.shape, ngram)}


def _rescored(nbest: Nbest, components: dict[str, k2.RaggedTensor],
              grid: dict[str, tuple[float, ...]], cfg) -> list[MethodResult]:
    out = combine_scores(components, {k: list(v) for k, v in grid.items()}, nbest=nbest)
    records = from_nbest(nbest, [(r.best, r.scores, r.path_scores) for r in out.values()],
                         False, Topology.TRANSDUCER,
                         posterior_scale=cfg.nbest.posterior_scale)
    return [MethodResult(key, r, cfg) for key, r in zip(out, records, strict=True)]


def _rescoring_points(cfg: FastBeamSearchNbestRescoringConfig) -> dict[str, list[float]]:
    """The scale points the rescoring method reports (the configured one first)."""
    points = {"ngram_lm_scale": weight_points(cfg.rescore, "ngram_lm_scale")}
    if isinstance(cfg, FastBeamSearchNbestRnnRescoringConfig):
        points["rnn_lm_scale"] = weight_points(cfg.rescore, "lm_scale")
    return points


def _rescoring_settings(cfg: FastBeamSearchNbestRescoringConfig) -> list[Setting]:
    return grid_settings(_rescoring_points(cfg), {"ngram_lm_scale": "rescore.ngram_lm_scale",
                                                  "rnn_lm_scale": "rescore.lm_scale"})


@register("fast_beam_search_with_nbest_rescoring", Family.TRANSDUCER,
          FastBeamSearchNbestRescoringConfig, requires=("G", "token_words"),
          settings=_rescoring_settings)
def _fbs_nbest_rescoring(inputs: TransducerInputs, res: Resources,
                         cfg: FastBeamSearchNbestRescoringConfig):
    """fast_beam_search n-best (trivial graph) rescored with G on its words: am +
    ngram_lm_scale * ngram."""
    nbest, comps = _rescoring_components(inputs, res, cfg,
                                         "fast_beam_search_with_nbest_rescoring")
    return _rescored(nbest, comps, _rescoring_points(cfg), cfg)


@register("fast_beam_search_with_nbest_rnn_rescoring", Family.TRANSDUCER,
          FastBeamSearchNbestRnnRescoringConfig, requires=("G", "token_words", "lm"),
          settings=_rescoring_settings)
def _fbs_nbest_rnn_rescoring(inputs: TransducerInputs, res: Resources,
                             cfg: FastBeamSearchNbestRnnRescoringConfig):
    """fast_beam_search n-best (trivial graph) rescored with G and a neural LM:
    am + ngram_lm_scale * ngram + lm_scale * rnn_lm."""
    method = "fast_beam_search_with_nbest_rnn_rescoring"
    _, lm = res.neural_lm(method)
    nbest, comps = _rescoring_components(inputs, res, cfg, method)
    comps["rnn_lm"] = neural_scores(nbest, lm_path_scorer(lm, cfg.rescore.lm_batch(),
                                                          cfg.rescore.lm_tokens()))
    return _rescored(nbest, comps, _rescoring_points(cfg), cfg)
