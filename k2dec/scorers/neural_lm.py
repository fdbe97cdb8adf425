"""Neural LM shallow fusion as a :class:`~k2dec.scorers.Scorer` (RNN or Transformer LM)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import torch

from k2dec.lm.base import NeuralLM
from k2dec.scorers.base import Scorer, check_rows, emitting_rows

__all__ = ["NeuralLmScorer", "NeuralLmScorerState"]


class NeuralLmScorerState(NamedTuple):
    """Rows of :class:`NeuralLmScorer`.

    Attributes:
      lm_state: the LM's state after each row's prefix (``sos`` + tokens).
      log_probs: float ``[M, V]``, the LM's distribution of the next token of each row.
    """

    lm_state: Any
    log_probs: torch.Tensor


class NeuralLmScorer(Scorer):
    """Scores the next token with ``log p_LM(token | sos + prefix)`` (icefall's
    ``LmScorer`` in shallow fusion).

    Each row's LM state advances only when its hypothesis gets a token, with one batched LM
    call per step for all such rows (:meth:`~k2dec.lm.NeuralLM.advance`), so rows may hold
    prefixes of different lengths.

    Args:
      lm: a :class:`~k2dec.lm.NeuralLM` (:class:`~k2dec.lm.RnnLM`,
        :class:`~k2dec.lm.TransformerLM`) in eval mode, on the search's device, with the
        search's token ids.
      score_eos: whether :meth:`final_score` is the LM's end-of-sentence log-prob (the
        attention beam search scores ``eos`` so); False gives 0, as icefall's transducer and
        CTC searches (which never score the end of the sentence) do.
    """

    is_lm = True

    def __init__(self, lm: NeuralLM, score_eos: bool = True) -> None:
        if not isinstance(lm, NeuralLM):
            raise TypeError(f"lm must be a k2dec.lm.NeuralLM, got {type(lm).__name__}")
        if not isinstance(score_eos, bool):
            raise TypeError(f"score_eos must be a bool, got {score_eos!r}")
        self.lm = lm
        self.vocab_size = lm.vocab_size
        self.score_eos = score_eos

    def init_state(self, utt: torch.Tensor) -> NeuralLmScorerState:
        log_probs, state = self.lm.start(utt.numel(), self.lm.device)
        return NeuralLmScorerState(state, log_probs)

    def score(self, state: NeuralLmScorerState,
              cand: torch.Tensor | None = None) -> tuple[torch.Tensor, None]:
        if cand is not None:
            raise ValueError("NeuralLmScorer scores every token; cand must be None")
        return state.log_probs, None

    def advance(self, state: NeuralLmScorerState, pending: None, rows: torch.Tensor,
                tokens: torch.Tensor, emit: torch.Tensor | None = None) -> NeuralLmScorerState:
        if emit is None:  # every row consumes its token: no copy of the rows' log-probs
            check_rows("rows", rows, state.log_probs.size(0))
            log_probs, lm_state = self.lm.advance(self.lm.select_state(state.lm_state, rows),
                                                  tokens)
            return NeuralLmScorerState(lm_state, log_probs)
        new = self.select(state, rows)
        moved = emitting_rows(rows, emit)
        if moved.numel() == 0:
            return new
        log_probs, lm_state = self.lm.advance(new.lm_state, tokens[moved], moved)
        return NeuralLmScorerState(lm_state, new.log_probs.index_copy(0, moved, log_probs))

    def select(self, state: NeuralLmScorerState, index: torch.Tensor) -> NeuralLmScorerState:
        check_rows("index", index, state.log_probs.size(0))
        return NeuralLmScorerState(self.lm.select_state(state.lm_state, index),
                                   state.log_probs.index_select(0, index))

    def final_score(self, state: NeuralLmScorerState) -> torch.Tensor:
        if self.score_eos:
            return state.log_probs[:, self.lm.eos_id]
        return state.log_probs.new_zeros(state.log_probs.size(0))

    def num_rows(self, state: NeuralLmScorerState) -> int:
        return state.log_probs.size(0)

    def cat(self, states: Sequence[NeuralLmScorerState]) -> NeuralLmScorerState:
        if len(states) == 1:
            return states[0]
        return NeuralLmScorerState(self.lm.cat_states([s.lm_state for s in states]),
                                   torch.cat([s.log_probs for s in states]))
