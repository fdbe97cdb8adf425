"""icefall's transducer searches with an external LM (``beam_search.py``): n-best rescoring of
fast_beam_search lattices with an n-gram G and a neural LM, shallow fusion, LODR, and
rescoring of modified beam search's final hypotheses; icefall's names, parameters, defaults
and return types (dicts keyed as icefall keys them), run by k2dec's searches.

LMs are taken as icefall passes them or as k2dec's: ``LM``: a :class:`k2dec.icefall.LmScorer`
(a k2dec LM with its ``lm_scale``) or an icefall ``LmScorer``; ``LODR_lm``: a k2dec
:class:`~k2dec.scorers.TokenNgramScorer` or an icefall ``NgramLm`` (fusion), a
``TokenNgramScorer`` or a kenlm-like model with ``score(sentence)`` in log10 (rescoring);
``rnn_lm_model``: a k2dec LM or an icefall ``RnnLmModel``; ``context_graph``: a k2dec or an
icefall ``ContextGraph``.
"""

from __future__ import annotations

import math
from typing import Any

import k2
import torch
from torch import nn

from ..methods.lists import HypothesisLists, lm_scores, scorer_scores, sweep
from ..methods.resources import TransducerInputs
from ..methods.transducer_beam_search import final_lists
from ..nbest import (
    DedupKey,
    Nbest,
    intersected,
    lm_path_scorer,
    neural_scores,
    word_sequence_scores,
)
from ..scorers import TokenNgramScorer, WeightedScorer
from ..transducer import ModifiedBeamSearchConfig
from ..transducer import modified_beam_search as k2dec_modified_beam_search
from .common import check_model, compat, fbs_lattice, pick, sample
from .lm import fusion_scorer, sequence_lm, sequence_lm_with_ids
from .results import DecodingResults, index_paths, paths_result, results_or_hyps
from .state_scorers import context_scorer, ngram_scorer

__all__ = [
    "fast_beam_search_with_nbest_rescoring",
    "fast_beam_search_with_nbest_rnn_rescoring",
    "modified_beam_search_LODR",
    "modified_beam_search_lm_rescore",
    "modified_beam_search_lm_rescore_LODR",
    "modified_beam_search_lm_shallow_fusion",
]

#: icefall's fixed LODR scale grid of ``modified_beam_search_lm_rescore_LODR``
LODR_SCALES = [0.05 * i for i in range(1, 20)]


def _token_nbest(model, decoding_graph, encoder_out, encoder_out_lens, beam, max_states,
                 max_contexts, num_paths, use_double_scores, nbest_scale, temperature
                 ) -> Nbest:
    """fast_beam_search as icefall's n-best rescoring runs it (its default ``ilme_scale``
    0.1), ``num_paths`` samples, one per token sequence, each its best alignment."""
    lattice = fbs_lattice(model, decoding_graph, encoder_out, encoder_out_lens, beam, max_states,
                       max_contexts, temperature, 0.1, False, 0.0)
    nbest, cfg = sample(lattice, num_paths, nbest_scale, use_double_scores, DedupKey.TOKENS)
    return intersected(nbest, cfg)


def _ngram_scores(nbest: Nbest, G: k2.Fsa, sp: Any, word_table: Any, oov_word: str
                  ) -> torch.Tensor:
    """float64 ``[paths]``: G's score of each path's words, read as icefall reads them:
    ``sp.decode`` of its tokens split at spaces, words outside ``word_table`` as
    ``oov_word``."""
    if not isinstance(oov_word, str) or oov_word not in word_table:
        raise ValueError(f"oov_word {oov_word!r} is not in word_table")
    oov = word_table[oov_word]
    if nbest.num_paths == 0:
        return torch.zeros(0, dtype=torch.float64, device=nbest.device)
    texts = sp.decode(nbest.token_seqs().tolist())
    words = [[word_table[w] if w in word_table else oov for w in text.split()]
             for text in texts]
    ragged = k2.RaggedTensor(words, dtype=torch.int32).to(G.device)
    return word_sequence_scores(ragged, G).to(nbest.device)


def _icefall_ids(sp: Any, sos_id: int | None, eos_id: int | None) -> tuple[int, int]:
    """``(sos_id, eos_id)``, each looked up as icefall does (``sp.piece_to_id("sos_id")`` /
    ``("eos_id")``) where it is ``None``."""
    if (sos_id is None or eos_id is None) and not callable(getattr(sp, "piece_to_id", None)):
        raise TypeError("sp must have piece_to_id (a sentencepiece.SentencePieceProcessor) "
                        f"unless sos_id and eos_id are given, got {type(sp).__name__}")
    return (sp.piece_to_id("sos_id") if sos_id is None else sos_id,
            sp.piece_to_id("eos_id") if eos_id is None else eos_id)


def _best_by(nbest: Nbest, totals: dict[str, torch.Tensor], return_timestamps: bool
             ) -> dict[str, list[list[int]] | DecodingResults]:
    return {key: paths_result(index_paths(nbest.fsa, pick(nbest, tot)), return_timestamps)
            for key, tot in totals.items()}


def fast_beam_search_with_nbest_rescoring(
    model: nn.Module,
    decoding_graph: k2.Fsa,
    encoder_out: torch.Tensor,
    encoder_out_lens: torch.Tensor,
    beam: float,
    max_states: int,
    max_contexts: int,
    ngram_lm_scale_list: list[float],
    num_paths: int,
    G: k2.Fsa,
    sp: Any,
    word_table: k2.SymbolTable,
    oov_word: str = "<UNK>",
    use_double_scores: bool = True,
    nbest_scale: float = 0.5,
    temperature: float = 1.0,
    return_timestamps: bool = False,
) -> dict[str, list[list[int]] | DecodingResults]:
    """fast_beam_search n-best (by token sequence, best alignments) rescored with the word
    n-gram G: ``am + s * ngram`` for each ``s`` of ``ngram_lm_scale_list``, keyed
    ``ngram_lm_scale_{s}``; the winners' token ids."""
    check_model(model, "fast_beam_search_with_nbest_rescoring")
    nbest = _token_nbest(model, decoding_graph, encoder_out, encoder_out_lens, beam,
                         max_states, max_contexts, num_paths, use_double_scores, nbest_scale,
                         temperature)
    am = nbest.tot_scores().values
    ngram = _ngram_scores(nbest, G, sp, word_table, oov_word)
    totals = {f"ngram_lm_scale_{s}": am + s * ngram for s in ngram_lm_scale_list}
    return _best_by(nbest, totals, return_timestamps)


def fast_beam_search_with_nbest_rnn_rescoring(
    model: nn.Module,
    decoding_graph: k2.Fsa,
    encoder_out: torch.Tensor,
    encoder_out_lens: torch.Tensor,
    beam: float,
    max_states: int,
    max_contexts: int,
    ngram_lm_scale_list: list[float],
    num_paths: int,
    G: k2.Fsa,
    sp: Any,
    word_table: k2.SymbolTable,
    rnn_lm_model: nn.Module,
    rnn_lm_scale_list: list[float],
    oov_word: str = "<UNK>",
    use_double_scores: bool = True,
    nbest_scale: float = 0.5,
    temperature: float = 1.0,
    return_timestamps: bool = False,
    sos_id: int | None = None,
    eos_id: int | None = None,
) -> dict[str, list[list[int]] | DecodingResults]:
    """As :func:`fast_beam_search_with_nbest_rescoring`, plus the neural LM's log-prob of
    each path's tokens: ``am + s1 * ngram + s2 * rnn`` keyed
    ``ngram_lm_scale_{s1}_rnn_lm_scale_{s2}``.

    The LM reads ``sos_id`` before the tokens and scores ``eos_id`` after them. ``None``
    (default): as icefall, ``sp.piece_to_id("sos_id")`` and ``sp.piece_to_id("eos_id")``,
    which for a BPE model without those pieces is the id of ``<unk>`` (2 for icefall's, not
    the ``<sos/eos>`` id 1 the LM was trained with); pass the LM's ids (e.g. ``sos_id=1,
    eos_id=1``, or ``lm.sos_id`` / ``lm.eos_id`` of a k2dec LM) to score as it was trained.
    The ids apply to a k2dec LM as to an icefall ``RnnLmModel``."""
    check_model(model, "fast_beam_search_with_nbest_rnn_rescoring")
    sos, eos = _icefall_ids(sp, sos_id, eos_id)
    lm = sequence_lm_with_ids(rnn_lm_model, sos, eos, int(model.decoder.blank_id))
    nbest = _token_nbest(model, decoding_graph, encoder_out, encoder_out_lens, beam,
                         max_states, max_contexts, num_paths, use_double_scores, nbest_scale,
                         temperature)
    am = nbest.tot_scores().values
    ngram = _ngram_scores(nbest, G, sp, word_table, oov_word)
    rnn = neural_scores(nbest, lm_path_scorer(lm)).values
    totals = {f"ngram_lm_scale_{s1}_rnn_lm_scale_{s2}": am + s1 * ngram + s2 * rnn
              for s1 in ngram_lm_scale_list for s2 in rnn_lm_scale_list}
    return _best_by(nbest, totals, return_timestamps)


def _fusion_search(model, encoder_out, encoder_out_lens, beam: int, scorers: list
                   ) -> list:
    cfg = compat(ModifiedBeamSearchConfig(beam_size=int(beam)))
    return k2dec_modified_beam_search(model, encoder_out, encoder_out_lens, cfg,
                                      scorers=scorers)


def modified_beam_search_lm_shallow_fusion(
    model: nn.Module,
    encoder_out: torch.Tensor,
    encoder_out_lens: torch.Tensor,
    LM: Any,
    beam: int = 4,
    return_timestamps: bool = False,
) -> list[list[int]] | DecodingResults:
    """Modified beam search adding ``LM.lm_scale`` times the LM's log-prob of every token
    (the end of the sentence is not scored)."""
    check_model(model, "modified_beam_search_lm_shallow_fusion")
    scorer, scale = fusion_scorer(LM)
    out = _fusion_search(model, encoder_out, encoder_out_lens, beam,
                         [WeightedScorer(scorer, scale)])
    return results_or_hyps([list(h.tokens) for h in out], [list(h.timestamps) for h in out],
                           return_timestamps)


def modified_beam_search_LODR(
    model: nn.Module,
    encoder_out: torch.Tensor,
    encoder_out_lens: torch.Tensor,
    LODR_lm: Any,
    LODR_lm_scale: float,
    LM: Any,
    beam: int = 4,
    context_graph: Any = None,
) -> list[list[int]]:
    """Modified beam search with LODR: every token adds ``LM.lm_scale`` times the neural LM's
    log-prob and ``LODR_lm_scale`` (negative: subtracts) times the token n-gram's, and the
    hotword bonus with a ``context_graph``."""
    check_model(model, "modified_beam_search_LODR")
    vocab = int(model.decoder.vocab_size)
    scorer, scale = fusion_scorer(LM)
    scorers = [WeightedScorer(scorer, scale),
               WeightedScorer(ngram_scorer(LODR_lm, vocab), float(LODR_lm_scale))]
    if context_graph is not None:
        scorers.append(WeightedScorer(context_scorer(context_graph, vocab, False,
                                                     encoder_out.device), 1.0))
    out = _fusion_search(model, encoder_out, encoder_out_lens, beam, scorers)
    return [list(h.tokens) for h in out]


def _final(model, encoder_out, encoder_out_lens, beam: int, temperature: float
           ) -> tuple[HypothesisLists, torch.Tensor]:
    """Every final hypothesis of modified beam search and its log-prob (float64 ``[H]``)."""
    cfg = compat(ModifiedBeamSearchConfig(beam_size=int(beam), temperature=float(temperature)))
    return final_lists(TransducerInputs(model, encoder_out, encoder_out_lens), cfg)


def _tokens_by_key(out: dict) -> dict[str, list[list[int]]]:
    return {key: [list(r.tokens or ()) for r in recs] for key, recs in out.items()}


def modified_beam_search_lm_rescore(
    model: nn.Module,
    encoder_out: torch.Tensor,
    encoder_out_lens: torch.Tensor,
    LM: Any,
    lm_scale_list: list[float],
    beam: int = 4,
    temperature: float = 1.0,
    return_timestamps: bool = False,
) -> dict[str, list[list[int]]]:
    """Every final hypothesis of modified beam search rescored as ``am + s * lm`` (the LM's
    log-prob with ``sos``/``eos``) for each ``s`` of ``lm_scale_list``, keyed
    ``nnlm_scale_{s:.2f}``; token ids (``return_timestamps`` is ignored, as in icefall)."""
    check_model(model, "modified_beam_search_lm_rescore")
    lists, am = _final(model, encoder_out, encoder_out_lens, beam, temperature)
    lm = lm_scores(sequence_lm(LM, blank_id=int(model.decoder.blank_id)), lists)
    out = sweep(lists, am, {"lm": lm}, {"lm": list(lm_scale_list)},
                lambda b, c, s: b + s["lm"] * c["lm"], lambda s: f"nnlm_scale_{s['lm']:.2f}")
    return _tokens_by_key(out)


def _lodr_scores(LODR_lm: Any, sp: Any, lists: HypothesisLists, vocab: int) -> torch.Tensor:
    """float64 ``[H]``: the token n-gram's natural-log score of each hypothesis with its end
    of sentence: a k2dec ``TokenNgramScorer``'s, or a kenlm-like ``score(pieces)`` (log10)
    of the hypothesis' pieces times ``ln 10``."""
    if isinstance(LODR_lm, TokenNgramScorer):
        return scorer_scores(ngram_scorer(LODR_lm, vocab), lists)
    if not callable(getattr(LODR_lm, "score", None)):
        raise TypeError("LODR_lm must be a k2dec.scorers.TokenNgramScorer or have "
                        f"score(sentence) (a kenlm model), got {type(LODR_lm).__name__}")
    seqs = lists.tokens.tolist()
    values = [LODR_lm.score(" ".join(sp.id_to_piece(seq))) * math.log(10) for seq in seqs]
    return torch.tensor(values, dtype=torch.float64, device=lists.utt.device)


def modified_beam_search_lm_rescore_LODR(
    model: nn.Module,
    encoder_out: torch.Tensor,
    encoder_out_lens: torch.Tensor,
    LM: Any,
    LODR_lm: Any,
    sp: Any,
    lm_scale_list: list[float],
    beam: int = 4,
    temperature: float = 1.0,
    return_timestamps: bool = False,
) -> dict[str, list[list[int]]]:
    """Every final hypothesis of modified beam search rescored as ``am / s + lm - l * lodr``
    for each ``s`` of ``lm_scale_list`` and icefall's fixed ``l`` in 0.05, 0.10, ..., 0.95,
    keyed ``nnlm_scale_{s:.2f}_lodr_scale_{l:.2f}``; token ids (``return_timestamps`` is
    ignored, as in icefall)."""
    check_model(model, "modified_beam_search_lm_rescore_LODR")
    if any(s == 0 for s in lm_scale_list):
        raise ValueError("lm_scale_list divides the acoustic score: 0 is not allowed")
    lists, am = _final(model, encoder_out, encoder_out_lens, beam, temperature)
    comps = {"lm": lm_scores(sequence_lm(LM, blank_id=int(model.decoder.blank_id)), lists),
             "lodr": _lodr_scores(LODR_lm, sp, lists, int(model.decoder.vocab_size))}
    out = sweep(lists, am, comps, {"lm": list(lm_scale_list), "lodr": LODR_SCALES},
                lambda b, c, s: b / s["lm"] + c["lm"] - s["lodr"] * c["lodr"],
                lambda s: f"nnlm_scale_{s['lm']:.2f}_lodr_scale_{s['lodr']:.2f}")
    return _tokens_by_key(out)
