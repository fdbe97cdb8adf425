"""LSTM language model over BPE tokens (the role of icefall's ``rnn_lm``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import nn

from .base import NeuralLM, check_dropout, check_positive_ints, check_row_index

__all__ = ["RnnLM", "RnnLmConfig", "RnnLmState"]


@dataclass(frozen=True)
class RnnLmConfig:
    """Sizes of an :class:`RnnLM`.

    Attributes:
      vocab_size: ``V`` (icefall's BPE-500 models: 500); :func:`~k2dec.train.train_lm` sets it from
        the BPE model.
      embedding_dim: token embedding size.
      hidden_dim: LSTM hidden size.
      num_layers: number of stacked LSTM layers.
      tie_weights: share the embedding and output matrices (needs
        ``embedding_dim == hidden_dim``).
      dropout: dropout on the embeddings, between LSTM layers and before the output layer.
      sos_id, eos_id: start/end-of-sentence id (icefall: ``<sos/eos>`` = 1 for both).
    """

    vocab_size: int = 500
    embedding_dim: int = 512
    hidden_dim: int = 512
    num_layers: int = 2
    tie_weights: bool = False
    dropout: float = 0.0
    sos_id: int = 1
    eos_id: int = 1


class RnnLmState(NamedTuple):
    """Incremental state of an :class:`RnnLM`.

    Attributes:
      h, c: float ``[num_layers, M, hidden_dim]``, the LSTM state after the consumed positions.
      num_tokens: number of positions (including ``sos``) consumed so far, the same for all rows;
        ``-1`` once :meth:`RnnLM.advance` advanced rows by different amounts (such a state
        serves ``advance`` only).
    """

    h: torch.Tensor
    c: torch.Tensor
    num_tokens: int


class RnnLM(NeuralLM):
    """Embedding -> ``num_layers`` LSTM -> linear -> log-softmax.

    The incremental state is the LSTM's ``(h, c)`` plus the number of consumed positions
    (:class:`RnnLmState`), so each :meth:`step` costs one LSTM step whatever the prefix length.
    """

    model_type = "rnn"

    def __init__(self, config: RnnLmConfig | None = None) -> None:
        config = RnnLmConfig() if config is None else config
        if not isinstance(config, RnnLmConfig):
            raise TypeError(f"config must be an RnnLmConfig, got {type(config).__name__}")
        super().__init__(config.vocab_size, config.sos_id, config.eos_id)
        check_positive_ints(config, ("embedding_dim", "hidden_dim", "num_layers"))
        check_dropout(config)
        if config.tie_weights and config.embedding_dim != config.hidden_dim:
            raise ValueError(
                "config.tie_weights needs embedding_dim == hidden_dim, got "
                f"{config.embedding_dim} and {config.hidden_dim}"
            )
        self.config = config
        self.embedding = nn.Embedding(config.vocab_size, config.embedding_dim)
        self.rnn = nn.LSTM(
            input_size=config.embedding_dim,
            hidden_size=config.hidden_dim,
            num_layers=config.num_layers,
            dropout=config.dropout if config.num_layers > 1 else 0.0,
            batch_first=True,
        )
        self.dropout = nn.Dropout(config.dropout)
        self.output = nn.Linear(config.hidden_dim, config.vocab_size)
        if config.tie_weights:
            self.output.weight = self.embedding.weight

    def _run(
        self, tokens: torch.Tensor, state: RnnLmState | None
    ) -> tuple[torch.Tensor, RnnLmState]:
        x = self.dropout(self.embedding(tokens))
        hc = None if state is None else (state.h, state.c)
        y, (h, c) = self.rnn(x, hc)
        logits = self.output(self.dropout(y))
        consumed = 0 if state is None else state.num_tokens
        return logits.log_softmax(dim=-1), RnnLmState(h, c, consumed + tokens.size(1))

    def num_consumed(self, state: RnnLmState | None) -> int:
        if state is None:
            return 0
        if not isinstance(state, RnnLmState):
            raise TypeError(f"state must be an RnnLmState or None, got {type(state).__name__}")
        if state.num_tokens < 0:
            raise ValueError("this state went through advance() (rows of different lengths); "
                             "continue it with advance(), not step()")
        return state.num_tokens

    def _advance_rows(self, state: RnnLmState, tokens: torch.Tensor,
                      rows: torch.Tensor) -> tuple[torch.Tensor, RnnLmState]:
        if not isinstance(state, RnnLmState):
            raise TypeError(f"state must be an RnnLmState, got {type(state).__name__}")
        sub = RnnLmState(state.h.index_select(1, rows), state.c.index_select(1, rows), 0)
        log_probs, new = self._run(tokens.unsqueeze(1), sub)
        every = rows.numel() == state.h.size(1)
        num_tokens = state.num_tokens + 1 if every and state.num_tokens >= 0 else -1
        return log_probs[:, -1], RnnLmState(state.h.index_copy(1, rows, new.h),
                                            state.c.index_copy(1, rows, new.c), num_tokens)

    def cat_states(self, states: list[RnnLmState]) -> RnnLmState:
        same = len({s.num_tokens for s in states}) == 1
        return RnnLmState(torch.cat([s.h for s in states], dim=1),
                          torch.cat([s.c for s in states], dim=1),
                          states[0].num_tokens if same else -1)

    def num_rows(self, state: RnnLmState) -> int:
        return state.h.size(1)

    def select_state(self, state: RnnLmState, index: torch.Tensor) -> RnnLmState:
        """Rows ``index`` (int64 ``[M']``, values in ``[0, M)``) of the state, in order."""
        if not isinstance(state, RnnLmState):
            raise TypeError(f"state must be an RnnLmState, got {type(state).__name__}")
        index = check_row_index(index, state.h.size(1), state.h.device)
        return RnnLmState(
            state.h.index_select(1, index), state.c.index_select(1, index), state.num_tokens
        )

