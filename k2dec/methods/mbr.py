"""Minimum Bayes risk decoding methods: the consensus of a lattice's sausages, with word
frames and confidences (:mod:`k2dec.lattice.mbr`), for HLG lattices (optionally rescored as a
whole with G) and fast_beam_search lattices.

Each method returns two settings from one lattice per batch: the MBR consensus and the
lattice's best path, both with per-word (or per-token) frames and confidences (the posterior
of the unit in its sausage bin, Kaldi's ``lattice-to-ctm-conf``), which the decode job writes
as CTM files.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import k2
import torch

from ..lattice import AuxLabels, LatticeResult, Topology, lattice_timed_units
from ..lattice.prune import prune_lattice
from ..lattice.rescore import RescoreStatus, rescore_with_whole_lattice
from ..primitives.best_paths import path_token_ids
from ..primitives.hypothesis import HypothesisRecord
from ..transducer import FastBeamSearchConfig
from .ctc import WholeLatticeRescoringConfig, decode_lattice_groups, hlg_graph
from .hotword_biasing import (
    HotwordConfig,
    hotword_fast_beam_search,
)
from .parts import GraphConfig, MbrPart
from .records import EMPTY_LATTICE, from_timed_units, lattice_failures, rescore_failures
from .registry import Family, MethodResult, register
from .resources import CtcInputs, Resources, TransducerInputs
from .scales import lg_graph, weight_points

__all__ = ["FastBeamSearchMbrConfig", "FastBeamSearchMbrLGConfig", "MbrMethodConfig"]


def _mbr_part() -> MbrPart:
    """MBR decoding of the HLG lattice as it is (``rescore_with_g`` false)."""
    return MbrPart(rescore_with_g=False)


@dataclass(frozen=True)
class MbrMethodConfig(WholeLatticeRescoringConfig):
    """``mbr``: HLG lattices (``lattice``, with its ``subsampling_factor``; ``graph``),
    rescored with G when ``mbr.rescore_with_g`` (``rescore.ngram_lm_scale``; with
    ``rescore.sweep`` also every scale of ``rescore.ngram_lm_scales``; ``whole_lattice``:
    memory back-off), then MBR decoding (``mbr``: posterior scales, iterations, memory budget).

    With ``mbr.rescore_with_g`` the scores at LM scale ``s`` are icefall's ``am / s + lm``,
    and the posteriors scale them as ``mbr`` says (its ``am_posterior_scale`` multiplies
    ``am / s``). A batch is searched, rescored and MBR-decoded in groups of utterances whose
    lattices hold at most ``whole_lattice.max_group_arcs`` arcs together (when the method
    searches its own lattices; the results do not depend on it)."""

    mbr: MbrPart = field(default_factory=_mbr_part)  # rescore_with_g None: false


def _units(lattice: k2.Fsa, topology: Topology, mbr: MbrPart, res: Resources,
           aux_labels: AuxLabels = AuxLabels.WORDS):
    """(best path, consensus) :class:`~k2dec.lattice.TimedUnits` of a batch of lattices, and
    per utterance a note when its lattice had more than ``mbr.max_lattice_arcs`` arcs and
    was pruned first (both come from the pruned lattice)."""
    lattice, reports = prune_lattice(lattice, mbr.max_lattice_arcs)
    best, _ = lattice_timed_units(lattice, topology, mbr.config(decode_mbr=False),
                                  word_start=res.word_start, aux_labels=aux_labels)
    consensus, _ = lattice_timed_units(lattice, topology, mbr.config(decode_mbr=True),
                                       word_start=res.word_start, aux_labels=aux_labels)
    return best, consensus, [r.describe() for r in reports], lattice


def _path_tokens(lattice: k2.Fsa, topology: Topology) -> list[list[int]]:
    """Token ids along the best path of each lattice."""
    best = k2.shortest_path(lattice, use_double_scores=True)
    if topology is Topology.CTC:
        return path_token_ids(best)[0].tolist()
    labels = k2.RaggedTensor(best.arcs.shape().remove_axis(1), best.labels.clone())
    return labels.remove_values_leq(0).tolist()


@register("mbr", Family.CTC, MbrMethodConfig, requires=("HLG",), hotwords=True)
def _mbr(inputs: CtcInputs, res: Resources, cfg: MbrMethodConfig):
    """HLG lattice (rescored with G when mbr.rescore_with_g=1), sausages: the MBR consensus and
    the best path, words with frames and confidences."""
    graph = hlg_graph(res, "mbr", cfg, lm_scores=True)
    G = res.graph("G", "mbr") if cfg.mbr.rescore_with_g else None

    def decode(group: CtcInputs, result: LatticeResult) -> list[MethodResult]:
        failed = lattice_failures(result.reports)
        if G is None:
            return _mbr_results(result.lattice, failed, res, cfg, "mbr", "1best")
        return _rescored_mbr(result, G, failed, res, cfg)

    return decode_lattice_groups(inputs, graph, cfg, cfg.whole_lattice.max_group_arcs, decode)


def _mbr_results(lattice: k2.Fsa, failed: list[str], res: Resources, cfg: MbrMethodConfig,
                 mbr_key: str, best_key: str) -> list[MethodResult]:
    """The MBR consensus and the best path of ``lattice``, words with frames and
    confidences."""
    best, consensus, notes, lat = _units(lattice, Topology.CTC, cfg.mbr, res)
    tokens = _path_tokens(lat, Topology.CTC)
    return [MethodResult(mbr_key, from_timed_units(consensus, True, failed, notes=notes), cfg),
            MethodResult(best_key, from_timed_units(best, True, failed, tokens, notes), cfg)]


def _rescored_mbr(result: LatticeResult, G: k2.Fsa, failed: list[str], res: Resources,
                  cfg: MbrMethodConfig) -> list[MethodResult]:
    """:func:`_mbr_results` of the lattices of ``result`` rescored with ``G`` at each scale
    (``mbr_lm_scale_<s>``, ``lm_scale_<s>``); an utterance whose rescoring failed gets the
    reason (the same records whether or not the batch's other utterances failed too)."""
    scales = weight_points(cfg.rescore, "ngram_lm_scale")
    out = rescore_with_whole_lattice(result, G, cfg.whole_lattice.config(tuple(scales)))
    failed = rescore_failures(failed, out.utterances)
    if out.status is RescoreStatus.FAILED:  # as _mbr_results gives failed utterances
        consensus, best = (tuple(HypothesisRecord.failure(f, tokens=t, words=True)
                                 for f in failed) for t in (False, True))
        return [MethodResult(f"{prefix}lm_scale_{s}", hyps, cfg)
                for s in scales for prefix, hyps in (("mbr_", consensus), ("", best))]
    rescored = out.lattice
    am = rescored.scores - rescored.lm_scores
    results = []
    for s in scales:
        lat = rescored.clone()
        lat.scores = am / s + rescored.lm_scores
        results += _mbr_results(lat, failed, res, cfg, f"mbr_lm_scale_{s}", f"lm_scale_{s}")
    return results


@dataclass(frozen=True)
class FastBeamSearchMbrConfig:
    """``fast_beam_search_mbr``: the search with the trivial graph (with hotwords: the
    hotword automaton, ``hotwords.token_score`` per token, as ``fast_beam_search``), then MBR over
    tokens (the consensus token sequence, its words read by the BPE model)."""

    search: FastBeamSearchConfig = field(default_factory=FastBeamSearchConfig)
    mbr: MbrPart = field(default_factory=MbrPart)
    hotwords: HotwordConfig = field(default_factory=HotwordConfig)


@dataclass(frozen=True)
class FastBeamSearchMbrLGConfig:
    """``fast_beam_search_mbr_LG``: the search through LG (scores times ``graph.scale``;
    with hotwords, LG intersected with the hotword automaton, or past
    :data:`~k2dec.methods.hotword_biasing.HOTWORD_LG_MAX_ARCS` the bonus put on the
    lattices, as in ``fast_beam_search_LG``), then MBR over words."""

    search: FastBeamSearchConfig = field(default_factory=FastBeamSearchConfig)
    mbr: MbrPart = field(default_factory=MbrPart)
    graph: GraphConfig = field(default_factory=lg_graph)
    hotwords: HotwordConfig = field(default_factory=HotwordConfig)


def _transducer_failures(lattice: k2.Fsa) -> list[str]:
    """``EMPTY_LATTICE`` for utterances whose lattice has no complete path."""
    tot = lattice.get_tot_scores(use_double_scores=True, log_semiring=False)
    return ["" if ok else EMPTY_LATTICE for ok in torch.isfinite(tot).tolist()]


@register("fast_beam_search_mbr", Family.TRANSDUCER, FastBeamSearchMbrConfig, hotwords=True)
def _fbs_mbr(inputs: TransducerInputs, res: Resources, cfg: FastBeamSearchMbrConfig):
    """fast_beam_search (trivial graph; the hotword graph when Resources.hotwords are given),
    sausages over tokens: the MBR consensus and the best path, tokens with frames and
    confidences."""
    out = hotword_fast_beam_search(inputs, res, cfg.hotwords, None, cfg.search)
    failed = _transducer_failures(out.lattice)
    best, consensus, notes, _ = _units(out.lattice, Topology.TRANSDUCER, cfg.mbr, res,
                                       AuxLabels.TOKENS)
    return [MethodResult("fast_beam_search_mbr",
                         from_timed_units(consensus, False, failed, notes=notes), cfg),
            MethodResult("fast_beam_search", from_timed_units(best, False, failed, notes=notes),
                         cfg)]


@register("fast_beam_search_mbr_LG", Family.TRANSDUCER, FastBeamSearchMbrLGConfig,
          requires=("LG",), hotwords=True)
def _fbs_mbr_lg(inputs: TransducerInputs, res: Resources, cfg: FastBeamSearchMbrLGConfig):
    """fast_beam_search through LG, sausages over words: the MBR consensus and the best path,
    words with frames and confidences (hotword biasing when Resources.hotwords are given)."""
    graph = res.scaled_graph("LG", cfg.graph.scale, "fast_beam_search_mbr_LG")
    out = hotword_fast_beam_search(inputs, res, cfg.hotwords, graph, cfg.search)
    failed = _transducer_failures(out.lattice)
    best, consensus, notes, lat = _units(out.lattice, Topology.TRANSDUCER, cfg.mbr, res)
    tokens = _path_tokens(lat, Topology.TRANSDUCER)
    return [MethodResult("fast_beam_search_mbr_LG",
                         from_timed_units(consensus, True, failed, notes=notes), cfg),
            MethodResult("fast_beam_search_LG",
                         from_timed_units(best, True, failed, tokens, notes), cfg)]

