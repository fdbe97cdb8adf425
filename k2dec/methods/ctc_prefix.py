"""CTC methods without a lexicon or n-gram graph (icefall's ``zipformer/ctc_decode.py``):
``ctc-prefix-beam-search`` (hotwords when given), ``ctc-prefix-beam-search-shallow-fussion``
(neural LM, LODR, hotwords; icefall's spelling), ``ctc-prefix-beam-search-attention-decoder-
rescoring`` and ``attention-decoder-rescoring-no-ngram`` (n-best from the CTC topology H
rescored with the attention decoder)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import k2
import torch

from ..lattice import Topology
from ..lattice.ctc_prefix_beam_search import CtcPrefixBeamSearchConfig, ctc_prefix_beam_search
from ..lattice.groups import MAX_GROUP_ARCS
from ..nbest import ATTENTION_CHUNK_CELLS, Nbest, NbestConfig, combine_scores
from .ctc import CtcLatticeConfig, decode_nbest_groups
from .fusion import build_scorers
from .hotword_biasing import HotwordConfig
from .lists import HypothesisLists, attention_scores, sweep
from .parts import ConfidencePart, FusionConfig, RescorePart
from .records import from_nbest
from .registry import Family, MethodResult, Setting, register
from .resources import CtcInputs, Resources
from .scales import LM_SCALE, grid_settings, weight_points

__all__ = [
    "ATTENTION_SCALE",
    "ATTENTION_SCALES",
    "CtcPrefixAttentionConfig",
    "CtcPrefixConfig",
    "CtcPrefixFusionConfig",
    "NO_NGRAM_ATTENTION_CHUNK_CELLS",
    "NoNgramAttentionConfig",
]

#: The attention decoder's weight in the CTC attention-rescoring methods: icefall's
#: ``--attention-decoder-scale`` (``conformer_ctc/pretrained.py``; its decode scripts only
#: sweep :data:`ATTENTION_SCALES`).
ATTENTION_SCALE = 1.2
#: icefall's attention-scale sweep of the CTC attention-rescoring methods.
ATTENTION_SCALES = (0.01, 0.05, 0.08, 0.1, 0.3, 0.5, 0.6, 0.7, 0.9, 1.0, 1.1, 1.2, 1.3, 1.5,
                    1.7, 1.9, 2.0, 2.1, 2.2, 2.3, 2.5, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0)


@dataclass(frozen=True)
class CtcPrefixConfig:
    """``ctc-prefix-beam-search``: beam 4, and hotwords when given (icefall's CTC biasing is
    the strict Aho-Corasick match). Token confidences: list posteriors of the final prefixes'
    scores times ``confidence.posterior_scale`` (:mod:`k2dec.nbest.list_confidences`)."""

    search: CtcPrefixBeamSearchConfig = field(default_factory=CtcPrefixBeamSearchConfig)
    hotwords: HotwordConfig = field(default_factory=HotwordConfig)
    confidence: ConfidencePart = field(default_factory=ConfidencePart)


def _lm_fusion() -> FusionConfig:
    """icefall's ``--lm-scale`` of shallow fusion (:data:`LM_SCALE`), no LODR."""
    return FusionConfig(lm_scale=LM_SCALE)


@dataclass(frozen=True)
class CtcPrefixFusionConfig:
    """``ctc-prefix-beam-search-shallow-fussion``: ``fusion.lm_scale`` times a neural LM on
    every new token, ``fusion.lodr_scale`` times LODR's token n-gram (0: off; < 0 subtracts
    it) and hotwords when given (token confidences as in :class:`CtcPrefixConfig`)."""

    search: CtcPrefixBeamSearchConfig = field(default_factory=CtcPrefixBeamSearchConfig)
    fusion: FusionConfig = field(default_factory=_lm_fusion)
    hotwords: HotwordConfig = field(default_factory=HotwordConfig)
    confidence: ConfidencePart = field(default_factory=ConfidencePart)


def _prefix8() -> CtcPrefixBeamSearchConfig:
    """icefall's ``ctc_prefix_beam_search_attention_decoder_rescoring`` keeps 8 prefixes."""
    return CtcPrefixBeamSearchConfig(beam_size=8)


def _attention_rescore() -> RescorePart:
    """The attention decoder's weight :data:`ATTENTION_SCALE` with icefall's grid; the
    hypotheses are scored in chunks of at most ``attention_chunk_cells`` (token, frame) cells."""
    return RescorePart(attention_scale=ATTENTION_SCALE, attention_scales=ATTENTION_SCALES,
                       attention_chunk_cells=ATTENTION_CHUNK_CELLS)


@dataclass(frozen=True)
class CtcPrefixAttentionConfig:
    """``ctc-prefix-beam-search-attention-decoder-rescoring``: the ``beam_size`` prefixes of
    each utterance rescored as ``ctc + attention_scale * attention`` (the ``rescore`` part;
    token confidences: list posteriors of those scores times
    ``confidence.posterior_scale``); with ``rescore.sweep``, also for every other ``s`` of
    ``rescore.attention_scales`` (icefall's grid)."""

    search: CtcPrefixBeamSearchConfig = field(default_factory=_prefix8)
    rescore: RescorePart = field(default_factory=_attention_rescore)
    confidence: ConfidencePart = field(default_factory=ConfidencePart)


def _no_ngram_nbest() -> NbestConfig:
    """icefall's ``ctc_decode.py``: 100 paths, lattice scores not scaled; searched, sampled
    and rescored in groups of at most :data:`~k2dec.lattice.groups.MAX_GROUP_ARCS` lattice
    arcs (``nbest.max_group_arcs``)."""
    return NbestConfig(num_paths=100, nbest_scale=1.0, max_group_arcs=MAX_GROUP_ARCS)


#: ``attention-decoder-rescoring-no-ngram``'s attention chunk (an eighth of
#: :data:`k2dec.nbest.ATTENTION_CHUNK_CELLS`, ~40 MB): its 100 paths per segment fill a chunk
#: of 2^23 cells on a 30 s batch, and the fullest chunk sets its peak RSS (a 60-minute
#: recording's batches meet fuller ones than a 1-minute one's). ``attention-decoder`` has its
#: own (:data:`k2dec.methods.ctc.HLG_ATTENTION_CHUNK_CELLS`, 2^21); the list methods keep
#: 2^23 (their chunks did not set their peak).
NO_NGRAM_ATTENTION_CHUNK_CELLS = 1 << 20


def _no_ngram_rescore() -> RescorePart:
    """:func:`_attention_rescore` in chunks of :data:`NO_NGRAM_ATTENTION_CHUNK_CELLS`."""
    return replace(_attention_rescore(), attention_chunk_cells=NO_NGRAM_ATTENTION_CHUNK_CELLS)


@dataclass(frozen=True)
class NoNgramAttentionConfig(CtcLatticeConfig):
    """``attention-decoder-rescoring-no-ngram``: the lattice search through H, then
    ``nbest.num_paths`` token sequences sampled from it, rescored as ``am + attention_scale *
    attention`` (the ``rescore`` part; the paths scored in chunks of
    ``rescore.attention_chunk_cells``, :data:`NO_NGRAM_ATTENTION_CHUNK_CELLS` by default); with
    ``rescore.sweep``, also for every other ``s`` of ``rescore.attention_scales`` (icefall's
    grid). ``nbest.max_group_arcs``: the batch is searched, sampled and rescored in groups of
    utterances whose lattices hold at most this many arcs together (memory bound; the results
    do not depend on it; ``None``: the whole batch at once)."""

    nbest: NbestConfig = field(default_factory=_no_ngram_nbest)
    rescore: RescorePart = field(default_factory=_no_ngram_rescore)


def _prefix_attention_settings(cfg: CtcPrefixAttentionConfig) -> list[Setting]:
    return grid_settings(
        {"att": weight_points(cfg.rescore, "attention_scale")},
        {"att": "rescore.attention_scale"}, key=lambda p: f"attention_scale_{p['att']}")


def _no_ngram_settings(cfg: NoNgramAttentionConfig) -> list[Setting]:
    return grid_settings(
        {"attention_scale": weight_points(cfg.rescore, "attention_scale")},
        {"attention_scale": "rescore.attention_scale"})


def _records(lists: HypothesisLists, hyps, key: str, cfg) -> list[MethodResult]:
    scores = torch.tensor([h.score for hs in hyps for h in hs], dtype=torch.float64,
                          device=lists.utt.device)
    out = sweep(lists, scores, {}, {}, lambda b, c, s: b, lambda s: key,
                cfg.confidence.posterior_scale)
    return [MethodResult(key, out[key], cfg)]


def _search(inputs: CtcInputs, cfg: CtcPrefixBeamSearchConfig, scorers) -> list:
    return ctc_prefix_beam_search(inputs.log_probs, inputs.log_probs_lens, cfg, scorers)


@register("ctc-prefix-beam-search", Family.CTC, CtcPrefixConfig, hotwords=True)
def _prefix(inputs: CtcInputs, res: Resources, cfg: CtcPrefixConfig):
    """CTC prefix beam search (beam 4) on the CTC output, no graph: token ids; hotword
    biasing when Resources.hotwords are given."""
    scorers = build_scorers(res, "ctc-prefix-beam-search", None, inputs.log_probs.size(2),
                            inputs.log_probs.device, cfg.hotwords, strict_hotwords=True)
    hyps = _search(inputs, cfg.search, scorers)
    lists = HypothesisLists.from_lists(hyps, inputs.log_probs.device)
    return _records(lists, hyps, "ctc-prefix-beam-search", cfg)


@register("ctc-prefix-beam-search-shallow-fussion", Family.CTC, CtcPrefixFusionConfig,
          requires=("lm",), hotwords=True)
def _prefix_fusion(inputs: CtcInputs, res: Resources, cfg: CtcPrefixFusionConfig):
    """CTC prefix beam search + lm_scale * neural LM (+ lodr_scale * token n-gram, hotwords)
    on every new token."""
    method = "ctc-prefix-beam-search-shallow-fussion"
    device, vocab = inputs.log_probs.device, inputs.log_probs.size(2)
    scorers = build_scorers(res, method, cfg.fusion, vocab, device, cfg.hotwords,
                            strict_hotwords=True)
    hyps = _search(inputs, cfg.search, scorers)
    lists = HypothesisLists.from_lists(hyps, device)
    return _records(lists, hyps, method, cfg)


def _memory(inputs: CtcInputs, res: Resources, method: str) -> None:
    if res.attention_decoder is None:
        raise ValueError(f"{method} needs Resources.attention_decoder")
    if inputs.memory is None or inputs.memory_lens is None:
        raise ValueError(f"{method} needs the encoder output (CtcInputs.memory, memory_lens)")


@register("ctc-prefix-beam-search-attention-decoder-rescoring", Family.CTC,
          CtcPrefixAttentionConfig, requires=("attention_decoder",),
          settings=_prefix_attention_settings)
def _prefix_attention(inputs: CtcInputs, res: Resources, cfg: CtcPrefixAttentionConfig):
    """The prefixes of CTC prefix beam search (beam 8) rescored with the attention decoder:
    ctc + attention_scale * attention."""
    _memory(inputs, res, "ctc-prefix-beam-search-attention-decoder-rescoring")
    hyps = _search(inputs, cfg.search, ())
    lists = HypothesisLists.from_lists(hyps, inputs.log_probs.device)
    ctc = torch.tensor([h.ctc_score for hs in hyps for h in hs], dtype=torch.float64,
                       device=lists.utt.device)
    att = attention_scores(res.attention_decoder, inputs.memory, inputs.memory_lens, lists,
                           max_cells=cfg.rescore.attention_chunk())
    grid = {"att": weight_points(cfg.rescore, "attention_scale")}
    out = sweep(lists, ctc, {"att": att}, grid,
                lambda b, c, s: b + s["att"] * c["att"], lambda s: f"attention_scale_{s['att']}",
                cfg.confidence.posterior_scale)
    return [MethodResult(k, v, cfg) for k, v in out.items()]


@register("attention-decoder-rescoring-no-ngram", Family.CTC, NoNgramAttentionConfig,
          requires=("H", "attention_decoder"), settings=_no_ngram_settings)
def _no_ngram(inputs: CtcInputs, res: Resources, cfg: NoNgramAttentionConfig):
    """n-best token sequences from the lattice through H rescored with the attention decoder:
    am + attention_scale * attention (searched, sampled and rescored group by group,
    nbest.max_group_arcs)."""
    method = "attention-decoder-rescoring-no-ngram"
    _memory(inputs, res, method)
    grid = {"attention_scale": weight_points(cfg.rescore, "attention_scale")}

    def decode(group: CtcInputs, nbest: Nbest, failed: list[str]) -> list[MethodResult]:
        device = group.log_probs.device
        lists = HypothesisLists(nbest.key_seqs.to(device),
                                nbest.path_to_utt().to(device=device, dtype=torch.int64),
                                nbest.num_utts, [[] for _ in range(nbest.num_paths)])
        att = attention_scores(res.attention_decoder, group.memory, group.memory_lens, lists,
                               max_cells=cfg.rescore.attention_chunk())
        comps = {"am": nbest.tot_scores(),
                 "attention": k2.RaggedTensor(nbest.shape, att.to(nbest.device))}
        out = combine_scores(comps, grid, nbest=nbest)
        # frames from each chosen path's alignment in the H lattice
        records = from_nbest(nbest, [(r.best, r.scores, r.path_scores) for r in out.values()],
                             False, Topology.CTC, failed,
                             posterior_scale=cfg.nbest.posterior_scale)
        return [MethodResult(key, recs, cfg) for key, recs in zip(out, records, strict=True)]

    # the n-best of H's lattices: its aux_labels, the keys, are the tokens
    return decode_nbest_groups(inputs, res.graph("H", method), cfg, decode)
