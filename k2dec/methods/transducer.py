"""Transducer methods: greedy, modified beam search and the fast_beam_search family.

The n-best variants compose :func:`k2dec.transducer.fast_beam_search` (which returns its
lattice) with :class:`k2dec.nbest.Nbest`; this is the only place the two meet.
"""

from __future__ import annotations

import k2
import torch

from ..nbest import DedupKey, Nbest, best_paths_by_score
from ..transducer import (
    FastBeamSearchConfig,
    GreedySearchConfig,
    ModifiedBeamSearchConfig,
    fast_beam_search,
    greedy_search,
    modified_beam_search,
)
from .registry import Family, MethodResult, Resources, TransducerInputs, register

__all__ = ["scaled_graph"]


def _tokens_result(name: str, hyps, config) -> list[MethodResult]:
    tokens = [list(h.tokens) for h in hyps]
    failed = ["" if h.score != float("-inf") else "empty lattice" for h in hyps]
    return [MethodResult(name, tokens, None, failed, config)]


@register("greedy_search", Family.TRANSDUCER, GreedySearchConfig)
def _greedy(inputs: TransducerInputs, res: Resources, cfg: GreedySearchConfig):
    """Greedy search (batched; max_sym_per_frame symbols per frame)."""
    hyps = greedy_search(inputs.model, inputs.encoder_out, inputs.encoder_out_lens, cfg)
    return _tokens_result("greedy_search", hyps, cfg)


@register("modified_beam_search", Family.TRANSDUCER, ModifiedBeamSearchConfig)
def _modified(inputs: TransducerInputs, res: Resources, cfg: ModifiedBeamSearchConfig):
    """Modified beam search (at most one symbol per frame, beam 4)."""
    hyps = modified_beam_search(inputs.model, inputs.encoder_out, inputs.encoder_out_lens, cfg)
    return _tokens_result("modified_beam_search", hyps, cfg)


@register("fast_beam_search", Family.TRANSDUCER, FastBeamSearchConfig)
def _fbs(inputs: TransducerInputs, res: Resources, cfg: FastBeamSearchConfig):
    """fast_beam_search with the trivial graph: one-best tokens."""
    out = fast_beam_search(inputs.model, inputs.encoder_out, inputs.encoder_out_lens, None, cfg)
    return _tokens_result("fast_beam_search", out.hyps, cfg)


def scaled_graph(res: Resources, name: str, scale: float, method: str) -> k2.Fsa:
    """``res.graphs[name]`` with scores (and ``lm_scores`` if any) times ``scale``; built once
    and kept in ``res.cache`` (the caller's graph is not modified)."""
    graph = res.graph(name, method)
    key = ("scaled", name, id(graph), float(scale))
    if key not in res.cache:
        g = graph.clone()
        g.scores = graph.scores * scale
        res.cache[key] = g
    return res.cache[key]


@register("fast_beam_search_LG", Family.TRANSDUCER, FastBeamSearchConfig, requires=("LG",))
def _fbs_lg(inputs: TransducerInputs, res: Resources, cfg: FastBeamSearchConfig):
    """fast_beam_search with LG (scores times ngram_lm_scale): one-best words."""
    graph = scaled_graph(res, "LG", cfg.ngram_lm_scale, "fast_beam_search_LG")
    out = fast_beam_search(inputs.model, inputs.encoder_out, inputs.encoder_out_lens, graph, cfg)
    words = _path_words(out.lattice)
    failed = ["" if h.score != float("-inf") else "empty lattice" for h in out.hyps]
    tokens = [list(h.tokens) for h in out.hyps]
    return [MethodResult("fast_beam_search_LG", tokens, words, failed, cfg)]


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


def _keys_and_failures(nbest: Nbest, best: torch.Tensor) -> tuple[list[list[int]], list[str]]:
    """Key sequences of the chosen paths; an utterance without paths (-1) failed."""
    return nbest.keys_at(best), ["" if b >= 0 else "empty lattice" for b in best.tolist()]


def _nbest_choice(nbest: Nbest, scores: k2.RaggedTensor) -> tuple[list[list[int]], list[str]]:
    best, _ = best_paths_by_score(nbest, scores.values)
    return _keys_and_failures(nbest, best)


@register("fast_beam_search_nbest", Family.TRANSDUCER, FastBeamSearchConfig)
def _fbs_nbest(inputs: TransducerInputs, res: Resources, cfg: FastBeamSearchConfig):
    """fast_beam_search, then num_paths sampled paths deduplicated by tokens; the best
    alignment score wins."""
    out = fast_beam_search(inputs.model, inputs.encoder_out, inputs.encoder_out_lens, None, cfg)
    nbest = Nbest.from_lattice(out.lattice, cfg.num_paths, cfg.nbest_scale, DedupKey.TOKENS)
    nbest = nbest.intersect(out.lattice)
    tokens, failed = _nbest_choice(nbest, nbest.tot_scores())
    return [MethodResult("fast_beam_search_nbest", tokens, None, failed, cfg)]


@register("fast_beam_search_nbest_LG", Family.TRANSDUCER, FastBeamSearchConfig,
          requires=("LG",))
def _fbs_nbest_lg(inputs: TransducerInputs, res: Resources, cfg: FastBeamSearchConfig):
    """fast_beam_search with LG, n-best by word sequence; the word sequence with the best
    log-sum over its alignments wins."""
    graph = scaled_graph(res, "LG", cfg.ngram_lm_scale, "fast_beam_search_nbest_LG")
    out = fast_beam_search(inputs.model, inputs.encoder_out, inputs.encoder_out_lens, graph, cfg)
    nbest = Nbest.from_lattice(out.lattice, cfg.num_paths, cfg.nbest_scale, DedupKey.WORDS)
    totals = nbest.total_scores_in(out.lattice, log_semiring=True)
    words, failed = _nbest_choice(nbest, totals)
    return [MethodResult("fast_beam_search_nbest_LG", None, words, failed, cfg)]


@register("fast_beam_search_nbest_oracle", Family.TRANSDUCER, FastBeamSearchConfig,
          needs_references=True)
def _fbs_oracle(inputs: TransducerInputs, res: Resources, cfg: FastBeamSearchConfig):
    """fast_beam_search n-best: the path closest to the reference tokens (an upper bound)."""
    if inputs.ref_tokens is None:
        raise ValueError("fast_beam_search_nbest_oracle needs reference token ids "
                         "(TransducerInputs.ref_tokens)")
    out = fast_beam_search(inputs.model, inputs.encoder_out, inputs.encoder_out_lens, None, cfg)
    nbest = Nbest.from_lattice(out.lattice, cfg.num_paths, cfg.nbest_scale, DedupKey.TOKENS)
    best, _ = nbest.oracle(inputs.ref_tokens)
    tokens, failed = _keys_and_failures(nbest, best)
    return [MethodResult("fast_beam_search_nbest_oracle", tokens, None, failed, cfg)]
