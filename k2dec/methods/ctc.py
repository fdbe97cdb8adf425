"""CTC/HMM methods (icefall's names): greedy, H / HLG one-best, n-best, n-gram, attention
and neural-LM rescoring, oracle and multi-pass rescoring, all on lattices from
:func:`k2dec.lattice.get_lattice`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import k2
import torch

from ..lattice import (
    AuxLabels,
    LatticeConfig,
    LatticeResult,
    Topology,
    ctc_greedy_search,
    ctc_greedy_token_confidences,
    one_best_decoding,
    viterbi_one_best,
)
from ..lattice.groups import MAX_GROUP_ARCS, lattice_groups
from ..lattice.rescore import (
    RescoreConfig,
    RescoreStatus,
    rescore_with_whole_lattice,
    search_and_rescore_whole_lattices,
)
from ..nbest import (
    SCALE_GRID,
    DedupKey,
    MultiPassConfig,
    Nbest,
    NbestConfig,
    best_paths_by_score,
    intersected,
    lm_path_scorer,
    multi_pass_rescore,
    rescore_with_attention_decoder,
    rescore_with_lm,
    rescore_with_ngram,
)
from ..primitives.hypothesis import HypothesisRecord, joined_notes
from ..primitives.sizes import check_int_range, check_positive
from .checks import check_finite
from .hotword_biasing import (
    WordHotwordConfig,
    word_biased_graph,
)
from .parts import LM_BATCH_SIZE, GraphConfig, RescorePart, WholeLatticePart
from .records import (
    EMPTY_LATTICE,
    from_lattice,
    from_nbest,
    lattice_failures,
    lattice_notes,
    oracle_records,
    rescore_failures,
    with_lattice_notes,
)
from .registry import Family, MethodResult, Setting, register
from .resources import CtcInputs, Resources
from .scales import grid_settings, weight_points

__all__ = [
    "HLG_ATTENTION_CHUNK_CELLS",
    "RNN_LM_SCALE",
    "AttentionRescoringConfig",
    "CtcGreedyConfig",
    "CtcGreedySearchConfig",
    "CtcLatticeConfig",
    "HlgConfig",
    "HlgGraphConfig",
    "HlgNbestConfig",
    "MultiPassMethodConfig",
    "NbestRescoringConfig",
    "OneBestSearchConfig",
    "RnnLmRescoringConfig",
    "WholeLatticeRescoringConfig",
]

#: Default weight of the neural LM in ``rnn-lm`` and ``multi-pass``.
RNN_LM_SCALE = 0.5


def _ctc_lattice() -> LatticeConfig:
    """``output_beam=4`` (see :class:`CtcLatticeConfig`), ``LatticeConfig``'s other defaults."""
    return LatticeConfig(output_beam=4.0)


def _multi_pass() -> MultiPassConfig:
    """``MultiPassConfig`` with the LM weighted like ``rnn-lm``'s default."""
    return MultiPassConfig(lm_scale=RNN_LM_SCALE)



def _hlg_nbest() -> NbestConfig:
    """icefall's n-best sampling, searched, sampled and rescored in groups of at most
    :data:`~k2dec.lattice.groups.MAX_GROUP_ARCS` lattice arcs (``nbest.max_group_arcs``)."""
    return NbestConfig(max_group_arcs=MAX_GROUP_ARCS)


def _hlg_graph() -> GraphConfig:
    """HLG's scores times 0.6 (icefall's ``--hlg-scale``)."""
    return GraphConfig(scale=0.6)


def _check_scale(name: str, value: float, positive: bool = False) -> None:
    """Raise ``ValueError`` unless ``value`` is a finite number (``positive``: also > 0)."""
    (check_positive if positive else check_finite)(name, value)


@dataclass(frozen=True)
class CtcGreedySearchConfig:
    """The search of ``ctc-greedy-search`` (:func:`k2dec.lattice.ctc_greedy_search`).

    Attributes:
      subsampling_factor: of ``log_probs`` relative to the graph's frame rate (1: none).
    """

    subsampling_factor: int = 1

    def __post_init__(self) -> None:
        check_int_range(self, "subsampling_factor", 1, 16)


@dataclass(frozen=True)
class CtcGreedyConfig:
    """``ctc-greedy-search``: its search (``search.subsampling_factor``)."""

    search: CtcGreedySearchConfig = field(default_factory=CtcGreedySearchConfig)


@dataclass(frozen=True)
class CtcLatticeConfig:
    """``ctc-decoding``: a lattice search (through H).

    Attributes:
      lattice: pruning of ``k2.intersect_dense_pruned`` and ``subsampling_factor`` (of
        ``log_probs`` relative to the graph's frame rate, 1: none): icefall's defaults except
        ``output_beam`` 4 instead of 8. Lattices of a weak acoustic model are dense: at 8,
        the shipped model's whole-lattice rescoring with its 4-gram ran slower than real time
        and took several GB, at 4 many times faster in a fraction of the memory (figures:
        the README's defaults table). The 1best path is the same at any ``output_beam``.
    """

    lattice: LatticeConfig = field(default_factory=_ctc_lattice)


@dataclass(frozen=True)
class HlgGraphConfig(CtcLatticeConfig):
    """What every HLG method has: a lattice search through HLG (scaled), with hotword
    biasing when given.

    Attributes:
      graph: ``graph.scale`` multiplies HLG's scores (the LM part of the first pass) in
        every HLG method; 0.6 is the default of icefall's current CTC decoding script
        (``--hlg-scale``; its older conformer_ctc script had none, i.e. 1.0).
      word_hotwords: the hotword bonus per word
        (:class:`~k2dec.methods.hotword_biasing.WordHotwordConfig`).
    """

    graph: GraphConfig = field(default_factory=_hlg_graph)
    word_hotwords: WordHotwordConfig = field(default_factory=WordHotwordConfig)

    def __post_init__(self) -> None:
        check_positive("graph.scale", self.graph.scale)


@dataclass(frozen=True)
class OneBestSearchConfig:
    """How ``1best`` finds the best path.

    Attributes:
      lattice_free: ``False`` (default): ``k2.intersect_dense_pruned`` builds a pruned
        lattice and ``k2.shortest_path`` reads its best path
        (:func:`k2dec.lattice.one_best_decoding`). ``True``: a batched token-passing Viterbi
        beam search that builds no lattice (:func:`k2dec.lattice.viterbi_one_best`); it reads
        ``lattice.search_beam``, ``lattice.max_active_states`` (per utterance and frame, the
        best are kept), the retries and the approximations, not ``output_beam`` or
        ``min_active_states``. Graphs too large for in-graph hotword biasing take the lattice
        search either way.
    """

    lattice_free: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.lattice_free, bool):
            raise TypeError(f"search.lattice_free must be true or false, got "
                            f"{self.lattice_free!r}")


@dataclass(frozen=True)
class HlgConfig(HlgGraphConfig):
    """``1best``: HLG's best path (a lattice search by default), with hotword biasing when
    given.

    Attributes:
      search: the search (:class:`OneBestSearchConfig`: ``search.lattice_free``).
    """

    search: OneBestSearchConfig = field(default_factory=OneBestSearchConfig)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.search.lattice_free and self.lattice.allow_partial:
            raise ValueError("lattice.allow_partial=true needs the lattice search: the "
                             "lattice-free one (search.lattice_free=true) has no partial paths")


@dataclass(frozen=True)
class HlgNbestConfig(HlgGraphConfig):
    """``nbest`` and ``nbest-oracle``: paths sampled from the HLG lattice.

    Attributes:
      nbest: n-best sampling (``num_paths``, ``nbest_scale``; icefall's 100 paths, scale
        0.5); ``max_group_arcs``: the batch is searched, sampled and rescored in groups of
        utterances whose lattices hold at most this many arcs together (memory bound; the
        results do not depend on it).
    """

    nbest: NbestConfig = field(default_factory=_hlg_nbest)


def _ngram_rescore() -> RescorePart:
    """G's weight 1.3 as in icefall's ``pretrained.py``, icefall's grid."""
    return RescorePart(ngram_lm_scale=1.3, ngram_lm_scales=SCALE_GRID)


#: ``attention-decoder``'s attention chunk (a quarter of
#: :data:`k2dec.nbest.ATTENTION_CHUNK_CELLS`, ~80 MB): with its n-best decoded group by group,
#: a 60-minute recording's long segments fill fuller chunks than a 1-minute one's short ones
#: (2^23 cells: 1293 MB at 60 minutes, 1004-1021 MB at 1 minute, when the decoder still copied
#: the encoder output per path). Since the decoder shares it, what a 60-minute recording adds
#: is mostly the heap's fragments: 2^20 cells changed neither peak (1 minute 701-703 MB
#: against 689-718, 60 minutes 836 against 816), glibc's mmap threshold fixed at 1 MiB did
#: (1 / 10 minutes: 640 / 666 MB against 701 / 804).
HLG_ATTENTION_CHUNK_CELLS = 1 << 21


def _attention_rescore() -> RescorePart:
    """G's and the attention decoder's weights 1.3 and 1.2 as in icefall's ``pretrained.py``
    (``--attention-decoder-scale``), icefall's grids; attention chunks of
    :data:`HLG_ATTENTION_CHUNK_CELLS`."""
    return RescorePart(ngram_lm_scale=1.3, ngram_lm_scales=SCALE_GRID, attention_scale=1.2,
                       attention_scales=SCALE_GRID,
                       attention_chunk_cells=HLG_ATTENTION_CHUNK_CELLS)


def _lm_rescore() -> RescorePart:
    """The neural LM's weight :data:`RNN_LM_SCALE`, icefall's grid."""
    return RescorePart(lm_scale=RNN_LM_SCALE, lm_scales=SCALE_GRID, lm_batch_size=LM_BATCH_SIZE)


def _whole_lattice_rescore() -> RescorePart:
    """G's weight 1.3 as in icefall's ``pretrained.py``, icefall's whole-lattice grid."""
    return RescorePart(ngram_lm_scale=1.3, ngram_lm_scales=RescoreConfig().lm_scales)


@dataclass(frozen=True)
class NbestRescoringConfig(HlgNbestConfig):
    """``nbest-rescoring``: the n-best rescored with G: ``am + ngram_lm_scale * ngram``.

    Methods that weigh scores by scales report ONE setting by default: the configured
    scales (the ``hyp`` of a results line). With ``rescore.sweep=true`` they also report every
    point of the scale grids, as icefall's decode scripts do; ``k2dec tune`` sweeps on a dev
    set and writes the best scales to a file that ``k2dec decode --config`` reads.

    Attributes:
      rescore: ``ngram_lm_scale`` (1.3 as in icefall's ``pretrained.py``) and its grid
        (:class:`~k2dec.methods.parts.RescorePart`).
    """

    rescore: RescorePart = field(default_factory=_ngram_rescore)


@dataclass(frozen=True)
class AttentionRescoringConfig(NbestRescoringConfig):
    """``attention-decoder``: the n-best rescored with the n-gram (G, else HLG's LM scores)
    and the attention decoder: ``am + ngram_lm_scale * ngram + attention_scale *
    attention``; with ``rescore.sweep``, every pair of the two grids.

    Attributes:
      rescore: ``ngram_lm_scale`` 1.3 and ``attention_scale`` 1.2 (icefall's
        ``pretrained.py``) with their grids; ``attention_chunk_cells``: paths are scored in
        chunks of at most this many (token, encoder frame) cells (memory bound, ~40 bytes
        per cell with k2dec's decoder; :data:`HLG_ATTENTION_CHUNK_CELLS` by default).
    """

    rescore: RescorePart = field(default_factory=_attention_rescore)


@dataclass(frozen=True)
class RnnLmRescoringConfig(HlgNbestConfig):
    """``rnn-lm``: the n-best rescored with a neural LM (RNN or Transformer):
    ``am + lm_scale * nnlm``.

    Attributes:
      rescore: ``lm_scale``, the neural LM's weight (icefall only sweeps it; 0.5 is the
        middle of its grid, :data:`k2dec.nbest.NNLM_SCALES`), and its grid;
        ``lm_batch_size``: sequences per neural LM call.
    """

    rescore: RescorePart = field(default_factory=_lm_rescore)


@dataclass(frozen=True)
class MultiPassMethodConfig(HlgNbestConfig):
    """``multi-pass``: the ``multi_pass.top_k`` paths of the n-best rescored with a neural LM
    in passes.

    Attributes:
      multi_pass: settings of the passes; its ``lm_scale`` (the LM's weight) defaults to
        ``rnn-lm``'s ``rescore.lm_scale``; ``top_k``: paths kept for the passes;
        ``lm_batch_size``: sequences per neural LM call.
    """

    multi_pass: MultiPassConfig = field(default_factory=_multi_pass)


@dataclass(frozen=True)
class WholeLatticeRescoringConfig(HlgGraphConfig):
    """``whole-lattice-rescoring`` (and the first pass of ``mbr``): HLG lattices rescored
    with G as a whole.

    Attributes:
      rescore: ``ngram_lm_scale`` ``s``: paths are scored by ``am / s + lm`` (icefall's
        convention, which ranks paths as ``am + s * lm``); 1.3 as in icefall's
        ``pretrained.py``; and its grid (all > 0).
      whole_lattice: memory back-off.
    """

    rescore: RescorePart = field(default_factory=_whole_lattice_rescore)
    whole_lattice: WholeLatticePart = field(default_factory=WholeLatticePart)

    def __post_init__(self) -> None:
        super().__post_init__()
        check_positive("rescore.ngram_lm_scale", self.rescore.ngram_lm_scale)
        self.whole_lattice.config(self.rescore.ngram_lm_scales)  # its checks


def _ngram_settings(cfg: NbestRescoringConfig) -> list[Setting]:
    return grid_settings(
        {"ngram_lm_scale": weight_points(cfg.rescore, "ngram_lm_scale")},
        {"ngram_lm_scale": "rescore.ngram_lm_scale"})


def _attention_settings(cfg: AttentionRescoringConfig) -> list[Setting]:
    return grid_settings(
        {"ngram_lm_scale": weight_points(cfg.rescore, "ngram_lm_scale"),
         "attention_scale": weight_points(cfg.rescore, "attention_scale")},
        {"ngram_lm_scale": "rescore.ngram_lm_scale",
         "attention_scale": "rescore.attention_scale"})


def _rnn_lm_settings(cfg: RnnLmRescoringConfig) -> list[Setting]:
    return grid_settings(
        {"rnn_lm_scale": weight_points(cfg.rescore, "lm_scale")},
        {"rnn_lm_scale": "rescore.lm_scale"})


def _whole_lattice_settings(cfg: WholeLatticeRescoringConfig) -> list[Setting]:
    return grid_settings(
        {"lm_scale": weight_points(cfg.rescore, "ngram_lm_scale")},
        {"lm_scale": "rescore.ngram_lm_scale"})


def _lattice(inputs: CtcInputs, graph: k2.Fsa, cfg: CtcLatticeConfig) -> LatticeResult:
    return inputs.get_lattice(graph, cfg.lattice, cfg.lattice.subsampling_factor)


def hlg_graph(res: Resources, method: str, cfg: HlgGraphConfig,
              lm_scores: bool = False) -> k2.Fsa:
    """HLG with its scores times ``cfg.graph.scale`` (see :meth:`Resources.scaled_graph`),
    biased towards ``Resources.hotword_words`` when given (``cfg.word_hotwords``:
    :func:`k2dec.methods.hotword_biasing.word_biased_graph`)."""
    graph = res.scaled_graph("HLG", cfg.graph.scale, method, lm_scores=lm_scores)
    hot = cfg.word_hotwords
    return word_biased_graph(res, graph, hot.word_score, hot.max_arcs)


@register("ctc-greedy-search", Family.CTC, CtcGreedyConfig)
def _greedy(inputs: CtcInputs, res: Resources, cfg: CtcGreedyConfig):
    """Per-frame argmax, repeats merged, blanks removed: token ids (each token's confidence:
    its largest frame posterior over its run)."""
    factor = cfg.search.subsampling_factor
    hyps = ctc_greedy_search(inputs.log_probs, inputs.log_probs_lens,
                             subsampling_factor=factor)
    conf = ctc_greedy_token_confidences(inputs.log_probs, inputs.log_probs_lens,
                                        subsampling_factor=factor)
    records = from_lattice(hyps, words=False, failed=[""] * len(hyps),
                           token_confidences=conf.tolist())
    return [MethodResult("ctc-greedy-search", records, cfg)]


@register("ctc-decoding", Family.CTC, CtcLatticeConfig, requires=("H",))
def _ctc_decoding(inputs: CtcInputs, res: Resources, cfg: CtcLatticeConfig):
    """1best through the CTC topology H: token ids."""
    hyps = one_best_decoding(inputs.log_probs, inputs.log_probs_lens,
                             res.graph("H", "ctc-decoding"), cfg.lattice, AuxLabels.TOKENS,
                             cfg.lattice.subsampling_factor)
    return [MethodResult("ctc-decoding", from_lattice(hyps, words=False), cfg)]


@register("1best", Family.CTC, HlgConfig, requires=("HLG",), hotwords=True)
def _one_best(inputs: CtcInputs, res: Resources, cfg: HlgConfig):
    """1best through HLG (or HCLG): word ids (hotword biasing in the graph when
    Resources.hotword_words are given, as in every HLG method); with
    search.lattice_free=true by a Viterbi beam search that builds no lattice."""
    graph = hlg_graph(res, "1best", cfg)
    lattice_free = cfg.search.lattice_free
    if "hotword_lattice_bias" in dict(graph.named_non_tensor_attr()):
        lattice_free = False  # only the lattice search applies that bonus
    search = viterbi_one_best if lattice_free else one_best_decoding
    hyps = search(inputs.log_probs, inputs.log_probs_lens, graph, cfg.lattice,
                  AuxLabels.WORDS, cfg.lattice.subsampling_factor)
    return [MethodResult("1best", from_lattice(hyps, words=True), cfg)]


@register("whole-lattice-rescoring", Family.CTC, WholeLatticeRescoringConfig, requires=("HLG", "G"),
          settings=_whole_lattice_settings, hotwords=True)
def _whole_lattice(inputs: CtcInputs, res: Resources, cfg: WholeLatticeRescoringConfig):
    """HLG lattices rescored with a bigger G (4-gram) as a whole: am / ngram_lm_scale + lm."""
    graph = hlg_graph(res, "whole-lattice-rescoring", cfg, lm_scores=True)
    G = res.graph("G", "whole-lattice-rescoring")
    settings = _whole_lattice_settings(cfg)
    scales = weight_points(cfg.rescore, "ngram_lm_scale")
    config = cfg.whole_lattice.config(tuple(scales))
    if inputs.lattices is None:  # search and rescore in groups: the batch's lattices never held
        reports, out = search_and_rescore_whole_lattices(
            inputs.log_probs, inputs.log_probs_lens, graph, G, cfg.lattice, config,
            cfg.lattice.subsampling_factor)
    else:  # the job's other methods share the batch's lattice (a bounded cache)
        result = _lattice(inputs, graph, cfg)
        reports, out = result.reports, rescore_with_whole_lattice(result, G, config)
    failed = rescore_failures(lattice_failures(reports), out.utterances)
    notes = [joined_notes(u.reason if u.status is RescoreStatus.PRUNED else "", partial)
             for u, partial in zip(out.utterances, lattice_notes(reports), strict=True)]
    if out.status is RescoreStatus.FAILED:
        hyps = tuple(HypothesisRecord.failure(f, tokens=True, words=True) for f in failed)
        return [MethodResult(s.key, hyps, cfg) for s in settings]
    return [MethodResult(s.key, from_lattice(r.hypotheses, True, failed, notes), cfg)
            for s, r in zip(settings, out.per_scale, strict=True)]


#: Decodes one group of a batch: ``(the group's inputs, its lattices) -> the method's
#: results for the group's utterances`` (see :func:`decode_lattice_groups`).
GroupDecoder = Callable[[CtcInputs, LatticeResult], list[MethodResult]]


def _noting_partial_paths(decode: GroupDecoder) -> GroupDecoder:
    """``decode`` whose results note the utterances whose lattice is a best partial path."""
    def noted(group: CtcInputs, result: LatticeResult) -> list[MethodResult]:
        return with_lattice_notes(decode(group, result), result.reports)
    return noted


def decode_lattice_groups(inputs: CtcInputs, graph: k2.Fsa, cfg: CtcLatticeConfig,
                          max_group_arcs: int | None, decode: GroupDecoder
                          ) -> list[MethodResult]:
    """``decode`` on the lattices of ``inputs`` through ``graph`` (``cfg.lattice``), in the
    groups of :func:`k2dec.lattice.groups.lattice_groups` (at most ``max_group_arcs``
    lattice arcs each; the whole batch on GPU) when the method searches its own lattices
    (``inputs.lattices`` is None) and ``max_group_arcs`` is not None, so that one group's
    lattices and what ``decode`` makes of them are held at a time; else once on the whole
    batch. Each group's results are joined in the caller's order (``decode`` gives each
    utterance the same result in any batch, so they are those of the whole batch)."""
    decode = _noting_partial_paths(decode)
    if inputs.lattices is not None or max_group_arcs is None:
        return decode(inputs, _lattice(inputs, graph, cfg))
    parts = []
    for utts, result in lattice_groups(inputs.log_probs, inputs.log_probs_lens, graph,
                                       cfg.lattice, cfg.lattice.subsampling_factor,
                                       max_group_arcs):
        parts.append((utts.tolist(), decode(_group_inputs(inputs, utts), result)))
        del result  # not held while the next group is searched
    if not parts:  # no utterance
        return decode(inputs, _lattice(inputs, graph, cfg))
    return _joined_results(parts, inputs.log_probs.shape[0])


def _group_inputs(inputs: CtcInputs, utts: torch.Tensor) -> CtcInputs:
    """The inputs of the caller's utterances ``utts`` (int64 CPU), in that order."""
    if torch.equal(utts, torch.arange(inputs.log_probs.shape[0])):
        return inputs
    def rows(x: torch.Tensor | None) -> torch.Tensor | None:
        return None if x is None else x[utts.to(x.device)]

    refs = inputs.ref_words
    return CtcInputs(rows(inputs.log_probs), rows(inputs.log_probs_lens),
                     ref_words=None if refs is None else [refs[u] for u in utts.tolist()],
                     memory=rows(inputs.memory), memory_lens=rows(inputs.memory_lens))


def _joined_results(parts: list[tuple[list[int], list[MethodResult]]], n: int
                    ) -> list[MethodResult]:
    """The results of ``n`` utterances decoded in ``parts`` (each with the caller's indexes
    of its utterances and its results, the same settings in the same order) in the caller's
    order."""
    out = []
    for k, first in enumerate(parts[0][1]):
        hyps: list[HypothesisRecord] = [None] * n  # type: ignore[list-item]
        for utts, results in parts:
            if results[k].key != first.key:
                raise RuntimeError(f"a group's result {k} is {results[k].key!r}, another's "
                                   f"{first.key!r}")
            for u, h in zip(utts, results[k].hyps, strict=True):
                hyps[u] = h
        out.append(MethodResult(first.key, tuple(hyps), first.config))
    return out


#: Decodes one group's n-best: ``(the group's inputs, its intersected n-best, per utterance
#: the lattice's failure reason or "") -> the method's results`` (see
#: :func:`decode_nbest_groups`).
NbestDecoder = Callable[[CtcInputs, Nbest, list[str]], list[MethodResult]]


def decode_nbest_groups(inputs: CtcInputs, graph: k2.Fsa, cfg: CtcLatticeConfig,
                        decode: NbestDecoder) -> list[MethodResult]:
    """The lattices of ``inputs`` through ``graph``, their n-best (``cfg.nbest``, keyed by the
    lattices' aux_labels) with each path's best alignment, and ``decode`` of it, group by
    group (``cfg.nbest.max_group_arcs``, see :func:`decode_lattice_groups`)."""
    nbest_config = cfg.nbest  # type: ignore[attr-defined]

    def decode_group(group: CtcInputs, result: LatticeResult) -> list[MethodResult]:
        nbest = intersected(Nbest.from_config(result.lattice, nbest_config, DedupKey.WORDS),
                            nbest_config)
        return decode(group, nbest, lattice_failures(result.reports))

    return decode_lattice_groups(inputs, graph, cfg, nbest_config.max_group_arcs,
                                 decode_group)


def _nbest_groups(inputs: CtcInputs, res: Resources, cfg: HlgNbestConfig, method: str,
                  decode: NbestDecoder, lm_scores: bool = False) -> list[MethodResult]:
    """:func:`decode_nbest_groups` through HLG (``lm_scores``: with its LM scores)."""
    return decode_nbest_groups(inputs, hlg_graph(res, method, cfg, lm_scores=lm_scores), cfg,
                               decode)


def _sweep_results(results, settings: list[Setting], failed: list[str], cfg: HlgNbestConfig,
                   nbest: Nbest, res: Resources) -> list[MethodResult]:
    """The rescoring results (by :func:`k2dec.nbest.scale_key`) in the order of
    ``settings``, with word frames and n-best confidences."""
    chosen = [(results[s.key].best, results[s.key].scores, results[s.key].path_scores)
              for s in settings]
    records = from_nbest(nbest, chosen, True, Topology.CTC, failed, res.word_start,
                         cfg.nbest.posterior_scale)
    return [MethodResult(s.key, r, cfg) for s, r in zip(settings, records, strict=True)]


@register("nbest", Family.CTC, HlgNbestConfig, requires=("HLG",), hotwords=True)
def _nbest_decoding(inputs: CtcInputs, res: Resources, cfg: HlgNbestConfig):
    """HLG lattice, num_paths sampled word sequences, the best alignment score wins."""
    def decode(group: CtcInputs, nbest: Nbest, failed: list[str]) -> list[MethodResult]:
        totals = nbest.tot_scores().values
        best, scores = best_paths_by_score(nbest, totals, cfg.nbest.tie_break)
        [hyps] = from_nbest(nbest, [(best, scores, totals)], True, Topology.CTC, failed,
                            res.word_start, cfg.nbest.posterior_scale)
        return [MethodResult("nbest", hyps, cfg)]

    return _nbest_groups(inputs, res, cfg, "nbest", decode)


@register("nbest-rescoring", Family.CTC, NbestRescoringConfig, requires=("HLG", "G"),
          settings=_ngram_settings, hotwords=True)
def _nbest_rescoring(inputs: CtcInputs, res: Resources, cfg: NbestRescoringConfig):
    """n-best from HLG rescored with a bigger n-gram G: am + ngram_lm_scale * G."""
    G = res.graph("G", "nbest-rescoring")
    scales = weight_points(cfg.rescore, "ngram_lm_scale")
    settings = _ngram_settings(cfg)

    def decode(group: CtcInputs, nbest: Nbest, failed: list[str]) -> list[MethodResult]:
        return _sweep_results(rescore_with_ngram(nbest, G, scales), settings, failed, cfg,
                              nbest, res)

    return _nbest_groups(inputs, res, cfg, "nbest-rescoring", decode, lm_scores=True)


@register("nbest-oracle", Family.CTC, HlgNbestConfig, requires=("HLG",), needs_references=True,
          hotwords=True)
def _nbest_oracle(inputs: CtcInputs, res: Resources, cfg: HlgNbestConfig):
    """The n-best path closest to the reference words (an upper bound on n-best methods)."""
    if inputs.ref_words is None:
        raise ValueError("nbest-oracle needs reference word ids (CtcInputs.ref_words)")

    def decode(group: CtcInputs, nbest: Nbest, failed: list[str]) -> list[MethodResult]:
        [hyps] = oracle_records(nbest, group.ref_words, True, Topology.CTC, failed,
                                res.word_start, cfg.nbest.posterior_scale, cfg.nbest.tie_break)
        return [MethodResult("nbest-oracle", hyps, cfg)]

    return _nbest_groups(inputs, res, cfg, "nbest-oracle", decode)


@register("attention-decoder", Family.CTC, AttentionRescoringConfig,
          requires=("HLG", "attention_decoder"),
          settings=_attention_settings, hotwords=True)
def _attention(inputs: CtcInputs, res: Resources, cfg: AttentionRescoringConfig):
    """n-best from HLG rescored with the attention decoder: am + s1 * ngram + s2 * attention
    (the ngram is G when given, else HLG's own LM scores)."""
    if res.attention_decoder is None:
        raise ValueError("attention-decoder needs Resources.attention_decoder")
    if inputs.memory is None or inputs.memory_lens is None:
        raise ValueError("attention-decoder needs the encoder output (CtcInputs.memory, "
                         "memory_lens)")

    ngram_scales = weight_points(cfg.rescore, "ngram_lm_scale")
    attention_scales = weight_points(cfg.rescore, "attention_scale")
    settings = _attention_settings(cfg)

    def decode(group: CtcInputs, nbest: Nbest, failed: list[str]) -> list[MethodResult]:
        with torch.no_grad():
            sweep = rescore_with_attention_decoder(
                nbest, res.attention_decoder, group.memory, group.memory_lens,
                ngram_scales, attention_scales, res.graphs.get("G"),
                max_chunk_cells=cfg.rescore.attention_chunk())
        return _sweep_results(sweep, settings, failed, cfg, nbest, res)

    return _nbest_groups(inputs, res, cfg, "attention-decoder", decode, lm_scores=True)


@register("rnn-lm", Family.CTC, RnnLmRescoringConfig, requires=("HLG", "lm"),
          settings=_rnn_lm_settings,
          hotwords=True)
def _rnn_lm(inputs: CtcInputs, res: Resources, cfg: RnnLmRescoringConfig):
    """n-best from HLG rescored with a neural LM (RNN or Transformer): am + lm_scale * nnlm."""
    _, lm = res.neural_lm("rnn-lm")
    scorer = lm_path_scorer(lm, cfg.rescore.lm_batch())
    scales = weight_points(cfg.rescore, "lm_scale")
    settings = _rnn_lm_settings(cfg)

    def decode(group: CtcInputs, nbest: Nbest, failed: list[str]) -> list[MethodResult]:
        sweep = rescore_with_lm(nbest, scorer, scales, scale_name="rnn_lm_scale")
        return _sweep_results(sweep, settings, failed, cfg, nbest, res)

    return _nbest_groups(inputs, res, cfg, "rnn-lm", decode, lm_scores=True)


@register("multi-pass", Family.CTC, MultiPassMethodConfig, requires=("HLG", "lm"),
          hotwords=True)
def _multi_pass(inputs: CtcInputs, res: Resources, cfg: MultiPassMethodConfig):
    """top_k n-best rescored with a neural LM in passes, evaluating only paths that may win
    (k2.get_best_matching_stats predictions)."""
    _, lm = res.neural_lm("multi-pass")

    def decode(group: CtcInputs, nbest: Nbest, failed: list[str]) -> list[MethodResult]:
        return [MethodResult("multi-pass", _multi_pass_records(nbest, failed, lm, res, cfg),
                             cfg)]

    return _nbest_groups(inputs, res, cfg, "multi-pass", decode, lm_scores=True)


def _multi_pass_records(nbest: Nbest, failed: list[str], lm, res: Resources,
                        cfg: MultiPassMethodConfig) -> tuple[HypothesisRecord, ...]:
    """``multi-pass``'s hypotheses of an intersected n-best (``failed``: per utterance the
    lattice's failure reason or ``""``)."""
    counts = nbest.shape.row_splits(1)
    has = (counts[1:] - counts[:-1]) > 0
    hyps = [HypothesisRecord(words=(), error=err or EMPTY_LATTICE, notes=note)
            for err, note in zip(failed, nbest.notes())]
    # utterances without paths cannot enter top_k: decode the others
    keep = torch.nonzero(has).flatten().tolist()
    if keep:
        sub = nbest if len(keep) == nbest.num_utts else _select_utts(nbest, keep)
        top = sub.top_k(cfg.multi_pass.top_k)
        out = multi_pass_rescore(top, top.nbest.am_scores().values,
                                 lm_path_scorer(lm, cfg.multi_pass.lm_batch_size), cfg.multi_pass)
        # confidences: posteriors among the paths the passes rescored (the others have no
        # total and could not be chosen)
        [records] = from_nbest(top.nbest, [(out.best, out.scores, out.path_scores)], True,
                               Topology.CTC, [failed[u] for u in keep], res.word_start,
                               cfg.nbest.posterior_scale)
        for u, rec in zip(keep, records):
            hyps[u] = rec
    return tuple(hyps)


def _select_utts(nbest: Nbest, utts: list[int]) -> Nbest:
    splits = nbest.shape.row_splits(1).tolist()
    idx = [p for u in utts for p in range(splits[u], splits[u + 1])]
    index = torch.tensor(idx, dtype=torch.int32, device=nbest.device)
    fsa = k2.index_fsa(nbest.fsa, index)
    key_seqs, _ = nbest.key_seqs.index(index, axis=0)
    counts = [splits[u + 1] - splits[u] for u in utts]
    row_splits = torch.tensor([0] + list(torch.tensor(counts).cumsum(0).tolist()),
                              dtype=torch.int32, device=nbest.device)
    shape = k2.ragged.create_ragged_shape2(row_splits, None, len(idx))
    reports = tuple(nbest.lattice_reports[u] for u in utts) if nbest.lattice_reports else ()
    return Nbest(fsa=fsa, shape=shape, key=nbest.key, key_seqs=key_seqs,
                 lattice_reports=reports)
