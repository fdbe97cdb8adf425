"""icefall's per-hypothesis Python state objects as k2dec scorers: its token n-gram
(``NgramLm``, a kaldifst FST with backoff arcs, for LODR) and its hotword ``ContextGraph``;
and the choice between those and k2dec's own (:class:`~k2dec.scorers.TokenNgramScorer`,
:class:`~k2dec.scorers.ContextGraph`).

Each row of such a scorer holds one Python object and advances by calling the icefall
object's own methods, so scores are icefall's; a step costs a Python call per (row, token)
the search asks about (k2dec's table scorers are two gathers).
"""

from __future__ import annotations

import math
from abc import abstractmethod
from collections.abc import Sequence
from typing import Any

import torch

from ..scorers import ContextGraph, HotwordScorer, Scorer, TokenNgramScorer
from ..scorers.base import check_rows

__all__ = ["ContextStateScorer", "FstNgramScorer", "context_scorer", "ngram_scorer"]


class _RowObjectScorer(Scorer):
    """A scorer whose rows are Python objects: subclasses give :meth:`_start`, :meth:`_step`
    (score and next object of a token) and :meth:`_final`."""

    def __init__(self, vocab_size: int) -> None:
        if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 1:
            raise ValueError(f"vocab_size must be an int >= 1, got {vocab_size!r}")
        self.vocab_size = vocab_size
        self.device = torch.device("cpu")

    @abstractmethod
    def _start(self) -> Any: ...

    @abstractmethod
    def _step(self, obj: Any, token: int) -> tuple[float, Any]: ...

    @abstractmethod
    def _final(self, obj: Any) -> float: ...

    def init_state(self, utt: torch.Tensor) -> list:
        self.device = utt.device  # where final scores go
        return [self._start()] * utt.numel()

    def score(self, state: list, cand: torch.Tensor | None = None) -> tuple[torch.Tensor, None]:
        if cand is not None:
            raise ValueError(f"{type(self).__name__} scores every token; cand must be None")
        scores = [[self._step(obj, v)[0] for v in range(self.vocab_size)] for obj in state]
        return torch.tensor(scores, dtype=torch.float64, device=self.device).reshape(
            len(state), -1), None

    def score_tokens(self, state: list, rows: torch.Tensor, tokens: torch.Tensor
                     ) -> tuple[torch.Tensor, None]:
        scores = [self._step(state[r], t)[0] for r, t in zip(rows.tolist(), tokens.tolist())]
        return torch.tensor(scores, dtype=torch.float64, device=rows.device), None

    def advance(self, state: list, pending: None, rows: torch.Tensor, tokens: torch.Tensor,
                emit: torch.Tensor | None = None) -> list:
        check_rows("rows", rows, len(state))
        moves = [True] * rows.numel() if emit is None else emit.tolist()
        return [self._step(state[r], t)[1] if m else state[r]
                for r, t, m in zip(rows.tolist(), tokens.tolist(), moves)]

    def select(self, state: list, index: torch.Tensor) -> list:
        check_rows("index", index, len(state))
        return [state[i] for i in index.tolist()]

    def final_score(self, state: list) -> torch.Tensor:
        return torch.tensor([self._final(obj) for obj in state], dtype=torch.float64,
                            device=self.device)

    def num_rows(self, state: list) -> int:
        return len(state)

    def cat(self, states: Sequence[list]) -> list:
        return [obj for s in states for obj in s]


class FstNgramScorer(_RowObjectScorer):
    """icefall's ``NgramLm`` (LODR's token n-gram: an FST, start state 0, with backoff arcs,
    queried through its own ``get_next_state_and_cost(state, label)``) scored as icefall's
    ``NgramLmStateCost`` does: a row holds the cost of every FST state its prefix reaches
    (following backoff arcs, keeping the cheapest), its score is minus the smallest, and a
    token scores the change of that score. The end of the sentence scores 0 (icefall's
    searches never score it).

    Args:
      ngram_lm: the icefall ``NgramLm``.
      vocab_size: ``V`` of the search (token ids are the FST's labels).
    """

    def __init__(self, ngram_lm: Any, vocab_size: int, cache_size: int = 100_000) -> None:
        super().__init__(vocab_size)
        if not callable(getattr(ngram_lm, "get_next_state_and_cost", None)):
            raise TypeError("ngram_lm must have get_next_state_and_cost(state, label) (an "
                            f"icefall NgramLm), got {type(ngram_lm).__name__}")
        self.ngram_lm = ngram_lm
        self.cache: dict[tuple, tuple[float, tuple]] = {}
        self.cache_size = cache_size

    def _start(self) -> tuple:
        return ((0, 0.0),)

    @staticmethod
    def _value(costs: tuple) -> float:
        return -min(c for _, c in costs) if costs else -math.inf

    def _step(self, obj: tuple, token: int) -> tuple[float, tuple]:
        key = (obj, token)
        if key not in self.cache:
            if len(self.cache) >= self.cache_size:
                self.cache.clear()
            nxt: dict[int, float] = {}
            for s, c in obj:
                states, costs = self.ngram_lm.get_next_state_and_cost(s, token)
                for ns, nc in zip(states, costs):
                    nxt[ns] = min(nxt.get(ns, math.inf), c + nc)
            new = tuple(sorted(nxt.items()))
            old_value = self._value(obj)
            score = self._value(new) - old_value if old_value > -math.inf else 0.0
            self.cache[key] = (score, new)
        return self.cache[key]

    def _final(self, obj: tuple) -> float:
        return 0.0


class ContextStateScorer(_RowObjectScorer):
    """icefall's hotword ``ContextGraph`` (``root``, ``forward_one_step(state, token,
    strict_mode)`` -> ``(score, next_state, matched)``, ``finalize(state)`` -> ``(score,
    state)``): each row holds a context state; a token scores what ``forward_one_step`` gives,
    the end of the hypothesis what ``finalize`` gives (the refund of an unfinished phrase).

    Args:
      graph: the icefall ``ContextGraph``.
      vocab_size: ``V`` of the search.
      strict: icefall's ``strict_mode`` (False in its transducer searches, True in CTC prefix
        beam search).
    """

    def __init__(self, graph: Any, vocab_size: int, strict: bool) -> None:
        super().__init__(vocab_size)
        self.graph = graph
        self.strict = bool(strict)

    def _start(self) -> Any:
        return self.graph.root

    def _step(self, obj: Any, token: int) -> tuple[float, Any]:
        score, nxt, _ = self.graph.forward_one_step(obj, token, strict_mode=self.strict)
        return float(score), nxt

    def _final(self, obj: Any) -> float:
        return float(self.graph.finalize(obj)[0])


def ngram_scorer(lm: Any, vocab_size: int, name: str = "LODR_lm") -> Scorer:
    """LODR's token n-gram for a search over ``vocab_size`` tokens: a k2dec
    :class:`~k2dec.scorers.TokenNgramScorer` as it is, an icefall ``NgramLm`` through
    :class:`FstNgramScorer`."""
    if isinstance(lm, TokenNgramScorer):
        if lm.vocab_size != vocab_size:
            raise ValueError(f"{name} scores {lm.vocab_size} tokens, the model has {vocab_size}")
        return lm
    if callable(getattr(lm, "get_next_state_and_cost", None)):
        return FstNgramScorer(lm, vocab_size)
    raise TypeError(f"{name} must be a k2dec.scorers.TokenNgramScorer or an icefall NgramLm, "
                    f"got {type(lm).__name__}")


def context_scorer(graph: Any, vocab_size: int, strict: bool, device: torch.device
                   ) -> Scorer:
    """The hotword scorer of a ``context_graph`` argument: a k2dec
    :class:`~k2dec.scorers.ContextGraph` through :class:`~k2dec.scorers.HotwordScorer` with
    icefall's rules (the whole bonus on the way, a phrase completes on its last token), an
    icefall ``ContextGraph`` through :class:`ContextStateScorer`."""
    if isinstance(graph, ContextGraph):
        return HotwordScorer(graph, vocab_size, strict=strict, device=device)
    if hasattr(graph, "root") and callable(getattr(graph, "forward_one_step", None)) and \
            callable(getattr(graph, "finalize", None)):
        return ContextStateScorer(graph, vocab_size, strict)
    raise TypeError("context_graph must be a k2dec.scorers.ContextGraph or an icefall "
                    f"ContextGraph, got {type(graph).__name__}")
