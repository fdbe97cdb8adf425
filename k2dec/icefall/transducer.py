"""icefall's transducer searches (``egs/librispeech/ASR/zipformer/beam_search.py``) without
an external LM, under icefall's names, parameters, defaults and return types, run by k2dec's
searches (:mod:`k2dec.transducer`, :mod:`k2dec.nbest`) with icefall's choices.

``model`` is any transducer with icefall's interface: ``model.decoder`` (``context_size``,
``blank_id``, ``vocab_size``, ``decoder(y, need_pad=False)``) and ``model.joiner``
(``joiner(encoder_out, decoder_out, project_input=...)``, ``encoder_proj``,
``decoder_proj``): an icefall ``Transducer`` / ``AsrModel``, its TorchScript export, or a
k2dec :class:`~k2dec.transducer.Transducer`. ``encoder_out`` is float ``(N, T, C)`` (not
projected), ``encoder_out_lens`` int ``(N,)``. Token ids are returned as lists.
"""

from __future__ import annotations

import k2
import torch
from torch import nn

from ..nbest import DedupKey, intersected
from ..scorers import WeightedScorer
from ..transducer import (
    GreedySearchConfig,
    ModifiedBeamSearchConfig,
    TransducerBeamSearchConfig,
    greedy_search_logits,
)
from ..transducer import beam_search as k2dec_beam_search
from ..transducer import modified_beam_search as k2dec_modified_beam_search
from ..transducer.greedy import greedy_search_single
from .common import (
    check_model,
    check_single,
    compat,
    fbs_lattice,
    oracle_pick,
    pick,
    sample,
)
from .results import DecodingResults, index_paths, paths_result, results_or_hyps
from .state_scorers import context_scorer

__all__ = [
    "beam_search",
    "fast_beam_search",
    "fast_beam_search_nbest",
    "fast_beam_search_nbest_LG",
    "fast_beam_search_nbest_oracle",
    "fast_beam_search_one_best",
    "greedy_search",
    "greedy_search_batch",
    "modified_beam_search",
]


#: icefall's one-utterance greedy_search stops after this many symbols
MAX_SYM_PER_UTT = 1000

#: ``beam_search``'s default bound on a frame's expansions: the most k2dec's config allows,
#: so that the drop-in gives icefall's (unbounded) hypotheses wherever a frame needs fewer
#: (k2dec's own ``beam_search`` method stops at 32)
ICEFALL_MAX_EXPANSIONS = 1000


def greedy_search(
    model: nn.Module,
    encoder_out: torch.Tensor,
    max_sym_per_frame: int,
    blank_penalty: float = 0.0,
    return_timestamps: bool = False,
) -> list[int] | DecodingResults:
    """Greedy search of one utterance (``encoder_out`` ``(1, T, C)``), at most
    ``max_sym_per_frame`` symbols per frame and :data:`MAX_SYM_PER_UTT` in all, as icefall;
    the token ids, or with ``return_timestamps`` a :class:`DecodingResults` of one
    hypothesis. (icefall's version pads later contexts with blanks instead of ``-1``, the
    same for ``context_size`` 2, icefall's models.) The joiner runs on windows of frames
    (:func:`k2dec.transducer.greedy_search_single`)."""
    check_model(model, "greedy_search")
    check_single(encoder_out, "greedy_search")
    cfg = GreedySearchConfig(max_sym_per_frame=int(max_sym_per_frame),
                             blank_penalty=float(blank_penalty))
    tokens, frames = greedy_search_single(model, encoder_out, cfg, MAX_SYM_PER_UTT)
    if not return_timestamps:
        return tokens
    return DecodingResults(timestamps=[frames], hyps=[tokens])


def greedy_search_batch(
    model: nn.Module,
    encoder_out: torch.Tensor,
    encoder_out_lens: torch.Tensor,
    blank_penalty: float = 0,
    return_timestamps: bool = False,
) -> list[list[int]] | DecodingResults:
    """Greedy search of a batch, one symbol per frame, by the argmax of the joiner's logits
    as icefall (:func:`k2dec.transducer.greedy_search_logits`); with ``return_timestamps`` a
    :class:`DecodingResults` whose ``scores`` are the joiner logits of the tokens."""
    check_model(model, "greedy_search_batch")
    hyps, times, logits = greedy_search_logits(model, encoder_out, encoder_out_lens,
                                               float(blank_penalty))
    if not return_timestamps:
        return hyps
    return DecodingResults(timestamps=times, hyps=hyps, scores=logits)


def modified_beam_search(
    model: nn.Module,
    encoder_out: torch.Tensor,
    encoder_out_lens: torch.Tensor,
    context_graph=None,
    beam: int = 4,
    temperature: float = 1.0,
    blank_penalty: float = 0.0,
    return_timestamps: bool = False,
) -> list[list[int]] | DecodingResults:
    """Modified beam search (one symbol per frame, ``beam`` hypotheses per utterance, float32
    scores as icefall); ``context_graph``: hotwords, a k2dec
    :class:`~k2dec.scorers.ContextGraph` or an icefall ``ContextGraph``."""
    check_model(model, "modified_beam_search")
    cfg = compat(ModifiedBeamSearchConfig(beam_size=int(beam), temperature=float(temperature),
                                          blank_penalty=float(blank_penalty)))
    scorers = []
    if context_graph is not None:
        vocab = int(model.decoder.vocab_size)
        scorers = [WeightedScorer(context_scorer(context_graph, vocab, False,
                                                 encoder_out.device), 1.0)]
    out = k2dec_modified_beam_search(model, encoder_out, encoder_out_lens, cfg,
                                     scorers=scorers)
    return results_or_hyps([list(h.tokens) for h in out], [list(h.timestamps) for h in out],
                           return_timestamps)


def beam_search(
    model: nn.Module,
    encoder_out: torch.Tensor,
    beam: int = 4,
    temperature: float = 1.0,
    blank_penalty: float = 0.0,
    return_timestamps: bool = False,
    max_expansions_per_frame: int = ICEFALL_MAX_EXPANSIONS,
) -> list[int] | DecodingResults:
    """The classic transducer beam search (Graves 2012) of one utterance (``encoder_out``
    ``(1, T, C)``), any number of symbols per frame; the best hypothesis by log-prob per
    ``context_size + tokens``.

    A frame is expanded at most ``max_expansions_per_frame`` times (default
    :data:`ICEFALL_MAX_EXPANSIONS`, 1000, the most
    :class:`~k2dec.transducer.TransducerBeamSearchConfig` allows), which bounds time and
    memory. icefall's loop has no bound and can run for minutes on a frame; only where it
    expands a frame more often than the bound may the hypotheses differ. k2dec's own
    ``beam_search`` method stops at 32, much faster where a frame needs many expansions:
    pass ``max_expansions_per_frame=32`` for that."""
    check_model(model, "beam_search")
    lens = check_single(encoder_out, "beam_search")
    cfg = TransducerBeamSearchConfig(beam_size=int(beam), temperature=float(temperature),
                                     blank_penalty=float(blank_penalty),
                                     max_expansions_per_frame=max_expansions_per_frame)
    [hyps] = k2dec_beam_search(model, encoder_out, lens, cfg)
    best = hyps[0]
    if not return_timestamps:
        return list(best.tokens)
    return DecodingResults(timestamps=[list(best.timestamps)], hyps=[list(best.tokens)])


def fast_beam_search(
    model: nn.Module,
    decoding_graph: k2.Fsa,
    encoder_out: torch.Tensor,
    encoder_out_lens: torch.Tensor,
    beam: float,
    max_states: int,
    max_contexts: int,
    temperature: float = 1.0,
    subtract_ilme: bool = False,
    ilme_scale: float = 0.1,
    allow_partial: bool = False,
    blank_penalty: float = 0.0,
) -> k2.Fsa:
    """The lattice FsaVec ``[utt][state][arc]`` of k2's RNN-T decoding streams through
    ``decoding_graph`` (``k2.trivial_graph(vocab_size - 1)`` or LG); as icefall, the last
    frame only decides which states are final and ``ilme_scale`` (default 0.1) times the
    joiner's log-probs on a zero encoder frame is subtracted (``subtract_ilme`` is unused,
    as in icefall)."""
    check_model(model, "fast_beam_search")
    return fbs_lattice(model, decoding_graph, encoder_out, encoder_out_lens, beam, max_states,
                    max_contexts, temperature, ilme_scale, allow_partial, blank_penalty)


def fast_beam_search_one_best(
    model: nn.Module,
    decoding_graph: k2.Fsa,
    encoder_out: torch.Tensor,
    encoder_out_lens: torch.Tensor,
    beam: float,
    max_states: int,
    max_contexts: int,
    temperature: float = 1.0,
    ilme_scale: float = 0.0,
    blank_penalty: float = 0.0,
    return_timestamps: bool = False,
    allow_partial: bool = False,
) -> list[list[int]] | DecodingResults:
    """:func:`fast_beam_search`, then the best path: its ``aux_labels`` (tokens through the
    trivial graph, words through LG)."""
    check_model(model, "fast_beam_search_one_best")
    lattice = fbs_lattice(model, decoding_graph, encoder_out, encoder_out_lens, beam,
                       max_states, max_contexts, temperature, ilme_scale, allow_partial,
                       blank_penalty)
    return paths_result(k2.shortest_path(lattice, use_double_scores=True), return_timestamps)


def fast_beam_search_nbest(
    model: nn.Module,
    decoding_graph: k2.Fsa,
    encoder_out: torch.Tensor,
    encoder_out_lens: torch.Tensor,
    beam: float,
    max_states: int,
    max_contexts: int,
    num_paths: int,
    nbest_scale: float = 0.5,
    use_double_scores: bool = True,
    temperature: float = 1.0,
    blank_penalty: float = 0.0,
    return_timestamps: bool = False,
    allow_partial: bool = False,
) -> list[list[int]] | DecodingResults:
    """:func:`fast_beam_search` (with icefall's hidden ``ilme_scale`` 0.1), ``num_paths``
    paths sampled from its lattice, one per token sequence; the sequence whose best
    alignment scores highest wins."""
    check_model(model, "fast_beam_search_nbest")
    lattice = fbs_lattice(model, decoding_graph, encoder_out, encoder_out_lens, beam,
                       max_states, max_contexts, temperature, 0.1, allow_partial,
                       blank_penalty)
    nbest, cfg = sample(lattice, num_paths, nbest_scale, use_double_scores, DedupKey.TOKENS)
    nbest = intersected(nbest, cfg)
    best = pick(nbest, nbest.tot_scores().values)
    return paths_result(index_paths(nbest.fsa, best), return_timestamps)


def fast_beam_search_nbest_LG(
    model: nn.Module,
    decoding_graph: k2.Fsa,
    encoder_out: torch.Tensor,
    encoder_out_lens: torch.Tensor,
    beam: float,
    max_states: int,
    max_contexts: int,
    num_paths: int,
    nbest_scale: float = 0.5,
    use_double_scores: bool = True,
    temperature: float = 1.0,
    blank_penalty: float = 0.0,
    ilme_scale: float = 0.0,
    return_timestamps: bool = False,
    allow_partial: bool = False,
) -> list[list[int]] | DecodingResults:
    """:func:`fast_beam_search` through LG, ``num_paths`` sampled paths, one per word
    sequence; the word sequence with the largest log-sum over all its alignments in the
    lattice wins: its word ids (and the frames of their arcs on the sampled path)."""
    check_model(model, "fast_beam_search_nbest_LG")
    lattice = fbs_lattice(model, decoding_graph, encoder_out, encoder_out_lens, beam,
                       max_states, max_contexts, temperature, ilme_scale, allow_partial,
                       blank_penalty)
    nbest, cfg = sample(lattice, num_paths, nbest_scale, use_double_scores, DedupKey.WORDS)
    totals = torch.zeros(0, dtype=torch.float64)
    if nbest.num_paths:  # (every lattice empty: no paths)
        totals = nbest.total_scores_in(log_semiring=True,
                                       max_arcs=cfg.max_intersect_arcs).values
    return paths_result(index_paths(nbest.fsa, pick(nbest, totals)), return_timestamps)


def fast_beam_search_nbest_oracle(
    model: nn.Module,
    decoding_graph: k2.Fsa,
    encoder_out: torch.Tensor,
    encoder_out_lens: torch.Tensor,
    beam: float,
    max_states: int,
    max_contexts: int,
    num_paths: int,
    ref_texts: list[list[int]],
    use_double_scores: bool = True,
    nbest_scale: float = 0.5,
    temperature: float = 1.0,
    blank_penalty: float = 0.0,
    return_timestamps: bool = False,
    allow_partial: bool = False,
) -> list[list[int]] | DecodingResults:
    """:func:`fast_beam_search` (hidden ``ilme_scale`` 0.1), ``num_paths`` sampled paths;
    the sampled path closest (edit distance) to ``ref_texts[i]`` (token ids through the
    trivial graph) wins; among paths at the same distance icefall's choice, by the float32
    scores of ``k2.levenshtein_alignment`` (:func:`k2dec.icefall.common.oracle_pick`)."""
    check_model(model, "fast_beam_search_nbest_oracle")
    lattice = fbs_lattice(model, decoding_graph, encoder_out, encoder_out_lens, beam,
                       max_states, max_contexts, temperature, 0.1, allow_partial,
                       blank_penalty)
    nbest, _ = sample(lattice, num_paths, nbest_scale, use_double_scores, DedupKey.TOKENS)
    refs = [[int(x) for x in r] for r in ref_texts]
    if len(refs) != nbest.num_utts:
        raise ValueError(f"ref_texts has {len(refs)} references for {nbest.num_utts} "
                         "utterances")
    return paths_result(index_paths(nbest.fsa, oracle_pick(nbest, refs)), return_timestamps)
