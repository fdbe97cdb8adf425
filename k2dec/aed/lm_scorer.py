"""An :class:`~k2dec.aed.IncrementalLM` as a :class:`~k2dec.scorers.Scorer` of the attention
beam search: what :func:`k2dec.aed.beam_search` makes of its ``lm`` argument, so that the LM's
scores enter the search as every other scorer's do."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import torch

from k2dec.aed.interface import IncrementalLM
from k2dec.scorers.base import Scorer, check_rows

__all__ = ["IncrementalLmScorer", "IncrementalLmState"]


class IncrementalLmState(NamedTuple):
    """Rows of :class:`IncrementalLmScorer`.

    Attributes:
      ys: int64 ``[M, u + 1]``, ``sos`` and the tokens of every row (all rows equally long).
      lm_state: the LM's state after them.
      log_probs: float ``[M, V]``, the LM's distribution of the next token of every row.
    """

    ys: torch.Tensor
    lm_state: Any
    log_probs: torch.Tensor


class IncrementalLmScorer(Scorer):
    """Scores the next token with ``log p_LM(token | sos + prefix)`` through
    :meth:`IncrementalLM.step` (whole prefixes, one call per search step for all rows), and
    the end of a hypothesis with the LM's log-prob of ``eos_id``.

    Every row of a state holds a prefix of the same length and :meth:`advance` extends every
    row (``emit`` all True), as in the attention beam search; a search that extends some rows
    and not others uses :class:`~k2dec.scorers.NeuralLmScorer`.

    Args:
      lm: the :class:`~k2dec.aed.IncrementalLM`.
      sos_id: the token every prefix starts with (the attention decoder's).
      eos_id: the end-of-sentence id whose log-prob is :meth:`final_score` (the decoder's).
    """

    is_lm = True

    def __init__(self, lm: IncrementalLM, sos_id: int, eos_id: int) -> None:
        if not hasattr(lm, "step") or not hasattr(lm, "select_state"):
            raise TypeError("lm must implement IncrementalLM (step and select_state)")
        self.lm, self.sos_id, self.eos_id = lm, sos_id, eos_id
        self.vocab_size = lm.vocab_size

    def _step(self, ys: torch.Tensor, lm_state: Any) -> IncrementalLmState:
        log_probs, lm_state = self.lm.step(ys, lm_state)
        want = (ys.size(0), self.vocab_size)
        if tuple(log_probs.shape) != want or bool(torch.isnan(log_probs).any()):
            raise ValueError(f"lm.step returned log_probs of shape {tuple(log_probs.shape)} "
                             f"(expected {want}) or with NaN at output position "
                             f"{ys.size(1) - 1}")
        return IncrementalLmState(ys, lm_state, log_probs)

    def init_state(self, utt: torch.Tensor) -> IncrementalLmState:
        ys = torch.full((utt.numel(), 1), self.sos_id, dtype=torch.int64, device=utt.device)
        return self._step(ys, None)

    def score(self, state: IncrementalLmState,
              cand: torch.Tensor | None = None) -> tuple[torch.Tensor, None]:
        if cand is not None:
            raise ValueError("IncrementalLmScorer scores every token; cand must be None")
        return state.log_probs, None

    def advance(self, state: IncrementalLmState, pending: None, rows: torch.Tensor,
                tokens: torch.Tensor, emit: torch.Tensor | None = None) -> IncrementalLmState:
        if emit is not None and not bool(emit.all()):
            raise ValueError("IncrementalLmScorer extends every row (emit must be all True)")
        check_rows("rows", rows, state.ys.size(0))
        ys = torch.cat([state.ys.index_select(0, rows), tokens.unsqueeze(1)], dim=1)
        return self._step(ys, self.lm.select_state(state.lm_state, rows))

    def select(self, state: IncrementalLmState, index: torch.Tensor) -> IncrementalLmState:
        check_rows("index", index, state.ys.size(0))
        return IncrementalLmState(state.ys.index_select(0, index),
                                  self.lm.select_state(state.lm_state, index),
                                  state.log_probs.index_select(0, index))

    def final_score(self, state: IncrementalLmState) -> torch.Tensor:
        return state.log_probs[:, self.eos_id]

    def num_rows(self, state: IncrementalLmState) -> int:
        return state.ys.size(0)

    def cat(self, states: Sequence[IncrementalLmState]) -> IncrementalLmState:
        if len(states) == 1:
            return states[0]
        raise TypeError("an IncrementalLM has no way to join states; decode the rows together")
