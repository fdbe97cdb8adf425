"""icefall's CTC searches without a graph (``icefall/decode.py``): greedy search, CTC prefix
beam search, its shallow fusion (``..._shallow_fussion``, icefall's spelling) and its
attention-decoder rescoring; icefall's names, parameters, defaults and return types, run by
k2dec's batched searches (:mod:`k2dec.lattice`).

``ctc_output`` is float32 ``(N, T, V)`` CTC log-probs, ``encoder_out_lens`` int ``(N,)``
(frames after subsampling). icefall spreads prefix beam search over a process pool;
k2dec's is batched in the calling process, so ``process_pool`` is accepted and unused.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from ..lattice import ctc_greedy_search as k2dec_ctc_greedy_search
from ..lattice.ctc_prefix_beam_search import CtcPrefixBeamSearchConfig
from ..lattice.ctc_prefix_beam_search import ctc_prefix_beam_search as k2dec_prefix_search
from ..methods.lists import HypothesisLists, attention_scores, sweep
from ..scorers import WeightedScorer
from .attention import attention_decoder as as_decoder
from .decode import NO_NGRAM_ATTENTION_SCALES
from .lm import fusion_scorer
from .state_scorers import context_scorer, ngram_scorer

__all__ = [
    "CtcHypothesis",
    "HypothesisList",
    "ctc_greedy_search",
    "ctc_prefix_beam_search",
    "ctc_prefix_beam_search_attention_decoder_rescoring",
    "ctc_prefix_beam_search_shallow_fussion",
]


@dataclass
class CtcHypothesis:
    """A prefix of :func:`ctc_prefix_beam_search` with ``return_nbest=True``: the fields of
    icefall's ``Hypothesis`` that k2dec's search keeps (not the blank / non-blank split).

    Attributes:
      ys: the token ids; log_prob: float32 ``[1]``, ``log P_ctc(ys)`` over the surviving
      alignments; timestamp: the frame of each token; lm_score: float32 ``[1]``, what
      scorers added (0 without).
    """

    ys: list[int]
    log_prob: torch.Tensor
    timestamp: list[int]
    lm_score: torch.Tensor

    @property
    def tot_score(self) -> torch.Tensor:
        return self.log_prob + self.lm_score

    @property
    def key(self) -> tuple[int, ...]:
        return tuple(self.ys)


class HypothesisList:
    """The prefixes of one utterance, best first, with the read side of icefall's
    ``HypothesisList`` (iteration, ``len``, ``data``, ``in`` / ``[]`` by key,
    ``get_most_probable``)."""

    def __init__(self, hyps: list[CtcHypothesis]) -> None:
        self._data = {h.key: h for h in hyps}

    @property
    def data(self) -> dict[tuple[int, ...], CtcHypothesis]:
        return self._data

    def get_most_probable(self, length_norm: bool = False) -> CtcHypothesis:
        if length_norm:
            return max(self._data.values(), key=lambda h: h.tot_score / max(len(h.ys), 1))
        return max(self._data.values(), key=lambda h: h.tot_score)

    def __contains__(self, key: tuple[int, ...]) -> bool:
        return key in self._data

    def __getitem__(self, key: tuple[int, ...]) -> CtcHypothesis:
        return self._data[key]

    def __iter__(self):
        return iter(self._data.values())

    def __len__(self) -> int:
        return len(self._data)


def ctc_greedy_search(
    ctc_output: torch.Tensor,
    encoder_out_lens: torch.Tensor,
    blank_id: int = 0,
) -> list[list[int]]:
    """Per-frame argmax, repeats merged, blanks removed: the token ids."""
    hyps = k2dec_ctc_greedy_search(ctc_output, encoder_out_lens, blank_id=int(blank_id))
    return [list(h.tokens) for h in hyps]


def _search(ctc_output: torch.Tensor, encoder_out_lens: torch.Tensor, beam: int,
            blank_id: int, scorers: list) -> list:
    cfg = CtcPrefixBeamSearchConfig(beam_size=int(beam), blank_id=int(blank_id))
    return k2dec_prefix_search(ctc_output, encoder_out_lens, cfg, scorers)


def ctc_prefix_beam_search(
    ctc_output: torch.Tensor,
    encoder_out_lens: torch.Tensor,
    beam: int = 4,
    blank_id: int = 0,
    process_pool: Any = None,
    return_nbest: bool | None = False,
) -> list[list[int]] | list[HypothesisList]:
    """CTC prefix beam search (the ``beam`` best symbols of each frame tried, ``beam``
    prefixes kept): the best prefix of each utterance, or with ``return_nbest`` its
    :class:`HypothesisList`."""
    hyps = _search(ctc_output, encoder_out_lens, beam, blank_id, [])
    if not return_nbest:
        return [list(hs[0].tokens) if hs else [] for hs in hyps]
    return [HypothesisList([_hypothesis(h) for h in hs]) for hs in hyps]


def _hypothesis(h: Any) -> CtcHypothesis:
    return CtcHypothesis(ys=list(h.tokens),
                         log_prob=torch.tensor([h.ctc_score], dtype=torch.float32),
                         timestamp=list(h.timestamps),
                         lm_score=torch.tensor([h.score - h.ctc_score], dtype=torch.float32))


def ctc_prefix_beam_search_shallow_fussion(
    ctc_output: torch.Tensor,
    encoder_out_lens: torch.Tensor,
    beam: int = 4,
    blank_id: int = 0,
    LODR_lm: Any = None,
    LODR_lm_scale: float | None = 0,
    NNLM: Any = None,
    context_graph: Any = None,
) -> list[list[int]]:
    """CTC prefix beam search where every new token of a prefix adds ``NNLM.lm_scale`` times
    the neural LM's log-prob, ``LODR_lm_scale`` times LODR's token n-gram's and the hotword
    bonus of ``context_graph`` (strict matching, as icefall's CTC search): the best prefix
    of each utterance."""
    vocab, device = int(ctc_output.size(2)), ctc_output.device
    scorers = []
    if NNLM is not None:
        scorer, scale = fusion_scorer(NNLM, "NNLM")
        scorers.append(WeightedScorer(scorer, scale))
    if LODR_lm is not None:
        scorers.append(WeightedScorer(ngram_scorer(LODR_lm, vocab), float(LODR_lm_scale or 0)))
    if context_graph is not None:
        scorers.append(WeightedScorer(context_scorer(context_graph, vocab, True, device), 1.0))
    hyps = _search(ctc_output, encoder_out_lens, beam, blank_id, scorers)
    return [list(hs[0].tokens) if hs else [] for hs in hyps]


def ctc_prefix_beam_search_attention_decoder_rescoring(
    ctc_output: torch.Tensor,
    attention_decoder: Any,
    encoder_out: torch.Tensor,
    encoder_out_lens: torch.Tensor,
    beam: int = 8,
    blank_id: int = 0,
    attention_scale: float | None = None,
    process_pool: Any = None,
) -> dict[str, list[list[int]]]:
    """The ``beam`` prefixes of CTC prefix beam search rescored as ``ctc + a * attention``
    (``attention_decoder.nll`` on ``encoder_out`` ``(N, T, C)``) for ``a`` = the given scale
    or icefall's grid, keyed ``attention_scale_{a}``: token ids."""
    hyps = _search(ctc_output, encoder_out_lens, beam, blank_id, [])
    lists = HypothesisLists.from_lists(hyps, ctc_output.device)
    ctc = torch.tensor([h.ctc_score for hs in hyps for h in hs], dtype=torch.float64,
                       device=ctc_output.device)
    att = attention_scores(as_decoder(attention_decoder), encoder_out, encoder_out_lens, lists)
    scales = NO_NGRAM_ATTENTION_SCALES if attention_scale is None else [attention_scale]
    out = sweep(lists, ctc, {"att": att.to(ctc.device)}, {"att": scales},
                lambda b, c, s: b + s["att"] * c["att"], lambda s: f"attention_scale_{s['att']}")
    return {key: [list(r.tokens or ()) for r in recs] for key, recs in out.items()}
