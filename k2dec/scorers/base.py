"""The scorer protocol: everything a beam search adds to its own score, one object per source.

A :class:`Scorer` keeps a state for every live hypothesis ("row") of a batched search and
scores the candidate next tokens of all rows at once. The searches (transducer
``modified_beam_search`` and ``beam_search``, ``ctc_prefix_beam_search``, the attention beam
search) call, for a list of :class:`WeightedScorer`:

1. ``init_state(utt)`` once: the state of empty prefixes, one row per entry of ``utt`` (the
   utterance of each row, which per-utterance scorers such as hotword lists use).
2. per step, ``score(state)``: float ``[M, V]``, the log-score of every next token after every
   row's prefix (or, for a :attr:`~Scorer.partial` scorer, ``score(state, cand)`` on int64
   candidates ``[M, K]``). It returns a second value, ``pending``, whatever :meth:`advance`
   needs from this step (None for most scorers). A search that picks its (row, token)
   candidates first asks only for those: ``score_tokens(state, rows, tokens)``.
3. after pruning, ``advance(state, pending, rows, tokens, emit)``: the state of the surviving
   hypotheses, hypothesis ``i`` being row ``rows[i]`` extended by ``tokens[i]`` where
   ``emit[i]`` (a transducer blank or a CTC repeat keeps the prefix: ``emit[i]`` False).
   ``select(state, index)`` is the pure reordering (no token consumed).
4. at the end, ``final_score(state)``: float ``[M]``, the score of ending the hypothesis there
   (e.g. an LM's end-of-sentence score, or the refund of a hotword's partial match).

A search adds ``weight * score`` of each scorer; the scores of a token sequence do not depend
on the batch, the order of rows or how the search reached the sequence (a scorer's state is a
function of the prefix), so equal prefixes may be merged with either row's state.

States are opaque to the searches; ``cat(states)`` joins the rows of several states (streams
that are decoded together).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ..primitives.sizes import check_finite

__all__ = ["Scorer", "ScorerSet", "TableScorer", "WeightedScorer", "check_rows", "emitting_rows"]


class Scorer(ABC):
    """Base class of everything a search adds to a hypothesis' score (see the module docstring
    for the call order).

    Attributes:
      vocab_size: ``V``, the number of token ids scored (``[0, V)``).
      partial: True if the scorer scores only given candidate tokens (``score(state, cand)``,
        e.g. CTC prefix scores, too costly for all ``V``); such scorers run only in searches
        that pre-select candidates (the attention beam search).
      is_lm: True if the scores are a language model's log-probabilities
        (:class:`~k2dec.scorers.NeuralLmScorer`): the attention beam search reports their
        sum as ``lm_score`` and applies its ``lm_fusion`` to them; the other searches treat
        them as any scorer.
    """

    vocab_size: int
    partial: bool = False
    is_lm: bool = False

    @abstractmethod
    def init_state(self, utt: torch.Tensor) -> Any:
        """State of ``M`` empty prefixes; ``utt`` (int64 ``[M]``) is the utterance of each
        row (ignored by scorers that are the same for every utterance)."""

    @abstractmethod
    def score(self, state: Any, cand: torch.Tensor | None = None) -> tuple[torch.Tensor, Any]:
        """Log-scores of the next tokens of every row.

        Args:
          state: the rows' state (``M`` rows).
          cand: int64 ``[M, K]`` candidate tokens (partial scorers only; None otherwise).

        Returns:
          ``(scores, pending)``: float ``[M, V]`` (``[M, K]`` with ``cand``), and what
          :meth:`advance` needs from this call (None when nothing).
        """

    def score_tokens(self, state: Any, rows: torch.Tensor,
                     tokens: torch.Tensor) -> tuple[torch.Tensor, Any]:
        """The scores ``[R]`` of ``tokens[i]`` after row ``rows[i]`` (int64 ``[R]`` each) and
        the ``pending`` of :meth:`score`: what a search that picks its candidates before
        scoring them needs (the classic transducer beam search). The entries of
        :meth:`score`'s ``[M, V]``; table scorers gather them without building it."""
        scores, pending = self.score(state)
        return scores[rows, tokens], pending

    @abstractmethod
    def advance(
        self,
        state: Any,
        pending: Any,
        rows: torch.Tensor,
        tokens: torch.Tensor,
        emit: torch.Tensor | None = None,
    ) -> Any:
        """State of ``R`` new rows: row ``rows[i]`` (int64 ``[R]``, into ``state``) extended by
        ``tokens[i]`` (int64 ``[R]``) where ``emit[i]`` (bool ``[R]``; None: all True) and
        unchanged elsewhere. ``pending`` is what :meth:`score` returned for ``state`` (a
        partial scorer needs the tokens to be among the scored candidates)."""

    @abstractmethod
    def select(self, state: Any, index: torch.Tensor) -> Any:
        """Rows ``index`` (int64 ``[R]``, into ``state``) in order, prefixes unchanged."""

    @abstractmethod
    def final_score(self, state: Any) -> torch.Tensor:
        """Float ``[M]``: the score of ending each row's hypothesis (0 for scorers without an
        end-of-sentence notion)."""

    @abstractmethod
    def num_rows(self, state: Any) -> int:
        """``M``, the rows of ``state``."""

    @abstractmethod
    def cat(self, states: Sequence[Any]) -> Any:
        """The rows of ``states`` (one or more), in order."""


class TableScorer(Scorer):
    """A scorer whose state is a node of an automaton expanded into dense tables (token
    n-grams, hotword graphs): a row's state is its node id (int64 ``[M]``), one search step is
    two gathers. Subclasses set the tables and :meth:`init_state`.

    Attributes:
      score_table: float ``[S, V]``, the score of every token after every node.
      next_state: int64 ``[S, V]``, the node after it.
      final: float ``[S]``, the final score of every node.
    """

    score_table: torch.Tensor
    next_state: torch.Tensor
    final: torch.Tensor

    def score(self, state: torch.Tensor,
              cand: torch.Tensor | None = None) -> tuple[torch.Tensor, None]:
        if cand is not None:
            raise ValueError(f"{type(self).__name__} scores every token; cand must be None")
        return self.score_table.index_select(0, state), None

    def score_tokens(self, state: torch.Tensor, rows: torch.Tensor,
                     tokens: torch.Tensor) -> tuple[torch.Tensor, None]:
        return self.score_table[state.index_select(0, rows), tokens], None

    def advance(self, state: torch.Tensor, pending: None, rows: torch.Tensor,
                tokens: torch.Tensor, emit: torch.Tensor | None = None) -> torch.Tensor:
        new = self.select(state, rows)
        moved = self.next_state[new, tokens]
        return moved if emit is None else torch.where(emit, moved, new)

    def select(self, state: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        return state.index_select(0, index)  # raises IndexError on a bad index

    def final_score(self, state: torch.Tensor) -> torch.Tensor:
        return self.final.index_select(0, state)

    def num_rows(self, state: torch.Tensor) -> int:
        return state.numel()

    def cat(self, states: Sequence[torch.Tensor]) -> torch.Tensor:
        return torch.cat(list(states))


def emitting_rows(rows: torch.Tensor, emit: torch.Tensor | None) -> torch.Tensor:
    """The positions ``i`` of an :meth:`Scorer.advance` call whose hypothesis takes
    ``tokens[i]`` (int64 ``[M]``, on ``rows``' device): all of them when ``emit`` is ``None``,
    else those where ``emit`` (bool ``[R]``) is True."""
    moved = torch.arange(rows.numel(), device=rows.device)
    return moved if emit is None else moved[emit]


def check_rows(name: str, index: torch.Tensor, num_rows: int) -> None:
    """Raise unless ``index`` is a 1-D int64 tensor with values in ``[0, num_rows)``."""
    if not isinstance(index, torch.Tensor) or index.dtype != torch.int64 or index.dim() != 1:
        raise TypeError(f"{name} must be a 1-D int64 tensor, got {index!r:.80}")
    if index.numel() > 0:
        lo, hi = int(index.min()), int(index.max())
        if lo < 0 or hi >= num_rows:
            raise ValueError(f"{name} values must be in [0, {num_rows}), got "
                             f"{lo if lo < 0 else hi}")


@dataclass(frozen=True)
class WeightedScorer:
    """A scorer and the weight its scores get in a search (e.g. ``lm_scale``; negative for
    LODR's low-order n-gram)."""

    scorer: Scorer
    weight: float

    def __post_init__(self) -> None:
        if not isinstance(self.scorer, Scorer):
            raise TypeError(f"scorer must be a k2dec.scorers.Scorer, got "
                            f"{type(self.scorer).__name__}")
        check_finite("weight", self.weight)


class ScorerSet:
    """The weighted scorers of one search, driven together: one state tuple per batch of rows.

    Args:
      scorers: the weighted scorers (may be empty).
      vocab_size: the search's ``V``; every scorer must score the same ids.
      allow_partial: whether the search supports partial scorers.
    """

    def __init__(self, scorers: Sequence[WeightedScorer], vocab_size: int,
                 allow_partial: bool = False) -> None:
        scorers = tuple(scorers)
        for i, ws in enumerate(scorers):
            if not isinstance(ws, WeightedScorer):
                raise TypeError(f"scorers[{i}] must be a WeightedScorer, got "
                                f"{type(ws).__name__}")
            if ws.scorer.vocab_size != vocab_size:
                raise ValueError(f"scorers[{i}] ({type(ws.scorer).__name__}) scores "
                                 f"{ws.scorer.vocab_size} tokens, the search has {vocab_size}")
            if ws.scorer.partial and not allow_partial:
                raise ValueError(f"scorers[{i}] ({type(ws.scorer).__name__}) is a partial "
                                 "scorer; this search scores every token (only the attention "
                                 "beam search pre-selects candidates)")
        self.scorers = scorers
        self.full = tuple(i for i, ws in enumerate(scorers) if not ws.scorer.partial)
        self.partial = tuple(i for i, ws in enumerate(scorers) if ws.scorer.partial)

    def __len__(self) -> int:
        return len(self.scorers)

    def init(self, utt: torch.Tensor) -> tuple:
        return tuple(ws.scorer.init_state(utt) for ws in self.scorers)

    def score_full(self, states: tuple) -> tuple[list[torch.Tensor], list[Any]]:
        """Unweighted ``[M, V]`` scores of the full scorers (in ``self.full`` order) and every
        scorer's ``pending`` (None for the partial ones, filled by :meth:`score_partial`)."""
        scores, pending = [], [None] * len(self.scorers)
        for i in self.full:
            s, pending[i] = self.scorers[i].scorer.score(states[i])
            scores.append(s)
        return scores, pending

    def score_tokens(self, states: tuple, rows: torch.Tensor, tokens: torch.Tensor,
                     dtype: torch.dtype) -> tuple[torch.Tensor | None, list[Any]]:
        """``sum_i weight_i * score_i`` ``[R]`` of ``tokens[i]`` after row ``rows[i]`` over
        the full scorers (:meth:`Scorer.score_tokens`; None when there are none) and every
        scorer's ``pending``: the same numbers as :meth:`score_full` and :meth:`weighted`
        give at those entries."""
        scores, pending = [], [None] * len(self.scorers)
        for i in self.full:
            s, pending[i] = self.scorers[i].scorer.score_tokens(states[i], rows, tokens)
            scores.append(s)
        return self.weighted(scores, self.full, dtype), pending

    def weighted(self, scores: Sequence[torch.Tensor], which: Sequence[int],
                 dtype: torch.dtype) -> torch.Tensor | None:
        """``sum_i weight_i * scores[i]`` over the scorers ``which`` (None when empty)."""
        total = None
        for s, i in zip(scores, which):
            term = self.scorers[i].weight * s.to(dtype)
            total = term if total is None else total + term
        return total

    def advance(self, states: tuple, pending: Sequence[Any], rows: torch.Tensor,
                tokens: torch.Tensor, emit: torch.Tensor | None = None) -> tuple:
        return tuple(ws.scorer.advance(st, p, rows, tokens, emit)
                     for ws, st, p in zip(self.scorers, states, pending))

    def select(self, states: tuple, index: torch.Tensor) -> tuple:
        return tuple(ws.scorer.select(st, index) for ws, st in zip(self.scorers, states))

    def final(self, states: tuple) -> list[torch.Tensor]:
        """Unweighted final scores ``[M]`` of every scorer."""
        return [ws.scorer.final_score(st) for ws, st in zip(self.scorers, states)]

    def cat(self, parts: Sequence[tuple]) -> tuple:
        return tuple(ws.scorer.cat([p[i] for p in parts]) for i, ws in enumerate(self.scorers))
