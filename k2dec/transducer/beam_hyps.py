"""Hypotheses of the transducer beam searches as rows of tensors (:class:`BeamHyps`): tokens,
timestamps, scores, a rolling hash of the tokens (to find equal sequences), decoder inputs and
outputs, and the scorers' states, with one ``select`` / ``cat`` that keeps them together."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from k2dec.primitives.batch_search import column_capacity, grow_columns
from k2dec.scorers.base import ScorerSet
from k2dec.transducer.network import TransducerNet

__all__ = ["BeamHyps"]

@dataclass
class BeamHyps:
    """Hypotheses of a beam search as rows of tensors (the rows of one stream, or of a batch
    grouped by utterance).

    Attributes:
      tokens: int64 ``[R, W]``, the tokens of each row in its first ``length`` columns
        (``W >= max(length)``; the rest is padding).
      times: int64 ``[R, W]``, the frame of each token.
      length: int64 ``[R]``, number of tokens.
      log_prob: float64 ``[R]``, the score (log-sum over the merged alignments).
      hash: int64 ``[R]``, a rolling hash of the tokens (equal sequences, equal hashes).
      context: int64 ``[R, context_size]``, the decoder input.
      decoder_out: float ``[R, J]``, the projected decoder output of ``context``, or None
        when not computed yet.
      scorers: the search's scorers (they reorder ``states``).
      states: one state per scorer, ``R`` rows each.
    """

    tokens: torch.Tensor
    times: torch.Tensor
    length: torch.Tensor
    log_prob: torch.Tensor
    hash: torch.Tensor
    context: torch.Tensor
    decoder_out: torch.Tensor | None = None
    scorers: ScorerSet | None = None
    states: tuple = ()

    @classmethod
    def initial(cls, context: torch.Tensor, scorers: ScorerSet | None = None,
                states: tuple = ()) -> BeamHyps:
        """``R`` empty hypotheses (log-prob 0) with decoder inputs ``context`` (``[R, c]``) and
        scorer states ``states`` (none yet by default)."""
        device, r = context.device, context.size(0)
        return cls(
            tokens=torch.zeros(r, 0, dtype=torch.int64, device=device),
            times=torch.zeros(r, 0, dtype=torch.int64, device=device),
            length=torch.zeros(r, dtype=torch.int64, device=device),
            log_prob=torch.zeros(r, dtype=torch.float64, device=device),
            hash=torch.zeros(r, dtype=torch.int64, device=device),
            context=context,
            scorers=scorers,
            states=states,
        )

    @property
    def num_rows(self) -> int:
        return self.length.numel()

    def to(self, device: torch.device) -> BeamHyps:
        if device == self.length.device:
            return self
        if self.states:
            raise ValueError(f"hypotheses with scorer states are on {self.length.device}; "
                             f"decode them there, not on {device}")
        return BeamHyps(*(None if x is None else x.to(device) for x in self._fields()),
                        scorers=self.scorers)

    def _fields(self) -> tuple[torch.Tensor | None, ...]:
        return (self.tokens, self.times, self.length, self.log_prob, self.hash, self.context,
                self.decoder_out)

    def select(self, index: torch.Tensor, states: bool = True) -> BeamHyps:
        """Rows ``index`` (int64 ``[R']``), in order; without their scorer states when
        ``states`` is False (the caller sets them, e.g. from ``ScorerSet.advance``)."""
        picked = self.scorers.select(self.states, index) if self.states and states else ()
        return BeamHyps(*(None if x is None else x.index_select(0, index)
                          for x in self._fields()), scorers=self.scorers, states=picked)

    def rows(self, start: int, end: int) -> BeamHyps:
        """Rows ``start .. end - 1`` (views of the tensors; the scorer states are selected)."""
        states = ()
        if self.states:
            index = torch.arange(start, end, device=self.length.device)
            states = self.scorers.select(self.states, index)
        return BeamHyps(*(None if x is None else x[start:end] for x in self._fields()),
                        scorers=self.scorers, states=states)

    def trimmed(self) -> BeamHyps:
        """The same rows with ``tokens``/``times`` cut to the longest ``length``."""
        width = int(self.length.max()) if self.num_rows > 0 else 0
        return dataclasses.replace(self, tokens=self.tokens[:, :width],
                                   times=self.times[:, :width])

    @staticmethod
    def cat(parts: Sequence[BeamHyps]) -> BeamHyps:
        """The rows of ``parts`` in order (token columns padded to the widest part); parts
        without rows are skipped, and ``decoder_out`` is kept only if every part has it."""
        parts = [p for p in parts if p.num_rows > 0] or list(parts[:1])
        if len(parts) == 1:
            return parts[0]
        cap = max(p.tokens.size(1) for p in parts)
        fields = []
        for i, xs in enumerate(zip(*(p._fields() for p in parts))):
            if any(x is None for x in xs):
                fields.append(None)
            elif i < 2:  # tokens, times
                fields.append(torch.cat([x if x.size(1) == cap else grow_columns(x, cap)
                                         for x in xs]))
            else:
                fields.append(torch.cat(xs))
        scorers = parts[0].scorers
        states = scorers.cat([p.states for p in parts]) if parts[0].states else ()
        return BeamHyps(*fields, scorers=scorers, states=states)

    def append_tokens(
        self, rows: torch.Tensor, tokens: torch.Tensor, times: torch.Tensor, net: TransducerNet
    ) -> None:
        """Append ``tokens`` (emitted on frames ``times``) to rows ``rows`` (int64 ``[E]``
        each; their ``length`` already counts the new token), in place, and recompute those
        rows' decoder input and output."""
        if rows.numel() == 0:
            return
        pos = self.length[rows] - 1
        cap = self.tokens.size(1)
        need = int(pos.max()) + 1
        if need > cap:
            self.tokens = grow_columns(self.tokens, column_capacity(need))
            self.times = grow_columns(self.times, column_capacity(need))
        self.tokens[rows, pos] = tokens
        self.times[rows, pos] = times
        ctx = self.context
        ctx[rows] = torch.cat([ctx[rows, 1:], tokens.unsqueeze(1)], dim=1)
        self.decoder_out[rows] = net.decoder_out(ctx[rows])
