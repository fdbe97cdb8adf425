"""The one neural LM interface of k2dec, :class:`NeuralLM`, and what every neural token LM
shares: input checks, whole-sequence scoring of ragged batches (n-best rescoring), the
incremental ``step`` and the row-wise ``start`` / ``advance`` of shallow fusion.

Every search and rescorer that uses a neural LM takes a :class:`NeuralLM` (the attention beam
search too, as a :class:`~k2dec.scorers.NeuralLmScorer`); an LM of one's own is a subclass
that implements the methods below, and icefall's ``LmScorer`` wraps one
(:class:`k2dec.icefall.LmScorer`).

Token convention (icefall BPE): ``<blk>`` = 0, ``<sos/eos>`` = 1 (start and end of sentence share
one id), ``<unk>`` = 2. A sentence ``w_1 .. w_n`` is scored as
``log p(w_1 | sos) + ... + log p(w_n | sos w_1 .. w_{n-1}) + log p(eos | sos w_1 .. w_n)``.

Subclasses implement :meth:`NeuralLM._run` (log-probs of the next token at every position of a
block of new positions, given the state that covers the positions before it) and
:meth:`NeuralLM.select_state`; everything else lives here, so both models validate and score the
same way.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import k2
import torch
from torch import nn

__all__ = [
    "NeuralLM",
    "SequenceScores",
    "check_dropout",
    "check_positive_ints",
    "check_row_index",
    "check_token_ids",
    "length_batches",
    "pad_with_sos_eos",
]


class SequenceScores(NamedTuple):
    """Result of :meth:`NeuralLM.score_sequences`.

    Attributes:
      token_log_probs: float ``k2.RaggedTensor`` with axes ``[seq][token]`` (the token axis is
        ragged) and ``len(seq) + 1`` entries per sequence: ``log p`` of each token given its
        prefix, then of ``eos``. On the model's device, in the model's dtype.
      totals: float ``[num_seqs]``, the per-sequence sums of ``token_log_probs``.
    """

    token_log_probs: k2.RaggedTensor
    totals: torch.Tensor


def check_positive_ints(config: Any, names: tuple[str, ...]) -> None:
    """Raise ``ValueError`` unless each field ``names`` of ``config`` (an LM's or its
    training's config dataclass) is an int ``>= 1``, naming the field and its value."""
    for name in names:
        value = getattr(config, name)
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"config.{name} must be a positive int, got {value!r}")


def check_dropout(config: Any) -> None:
    """Raise ``ValueError`` unless ``config.dropout`` is in ``[0, 1)``."""
    if not 0.0 <= config.dropout < 1.0:
        raise ValueError(f"config.dropout must be in [0, 1), got {config.dropout}")


def check_token_ids(name: str, values: torch.Tensor, vocab_size: int) -> None:
    """Raise ``ValueError`` unless every element of ``values`` is in ``[0, vocab_size)``."""
    if values.numel() == 0:
        return
    lo, hi = int(values.min()), int(values.max())
    if lo < 0 or hi >= vocab_size:
        bad = lo if lo < 0 else hi
        raise ValueError(
            f"{name} must hold token ids in [0, {vocab_size}) (vocab_size={vocab_size}), "
            f"got {bad}"
        )


class NeuralLM(nn.Module):
    """The neural LM interface (the one LM protocol of k2dec) and base class of
    :class:`~k2dec.lm.RnnLM` and :class:`~k2dec.lm.TransformerLM`: whole-sequence scoring
    (:meth:`score_sequences`), incremental scoring of whole prefixes (:meth:`step`) and
    row-wise shallow fusion (:meth:`start`, :meth:`advance`, :meth:`select_state`,
    :meth:`cat_states`, what :class:`~k2dec.scorers.NeuralLmScorer` calls in every
    token-level search, the attention beam search included).

    A subclass implements :meth:`_run`, :meth:`num_consumed`, :meth:`num_rows`,
    :meth:`select_state`, :meth:`_advance_rows` and :meth:`cat_states`.

    Attributes:
      vocab_size: ``V``, the size of the output distribution (including ``<blk>``).
      sos_id, eos_id: the start/end-of-sentence ids (both 1 with icefall's BPE models).
      config: the frozen config dataclass the model was built from (saved in checkpoints).
      model_type: the key of the model class in checkpoints (``"rnn"`` or ``"transformer"``).

    The model is scored as it is: call ``.eval()`` first for deterministic scores (dropout off),
    and wrap inference in ``torch.no_grad()``.
    """

    model_type: str = ""

    def __init__(self, vocab_size: int, sos_id: int, eos_id: int) -> None:
        super().__init__()
        if not isinstance(vocab_size, int) or isinstance(vocab_size, bool) or vocab_size < 2:
            raise ValueError(f"vocab_size must be an int >= 2, got {vocab_size!r}")
        for name, value in (("sos_id", sos_id), ("eos_id", eos_id)):
            if not isinstance(value, int) or not 0 <= value < vocab_size:
                raise ValueError(f"{name} must be an int in [0, {vocab_size}), got {value!r}")
        self.vocab_size = vocab_size
        self.sos_id = sos_id
        self.eos_id = eos_id

    # ----- to implement -------------------------------------------------------------------

    def _run(self, tokens: torch.Tensor, state: Any) -> tuple[torch.Tensor, Any]:
        """Log-probs of the token after each of ``tokens`` (int64 ``[M, u]``), which continue the
        ``num_consumed(state)`` positions ``state`` covers (``state`` is None: start at 0).

        Returns float ``[M, u, V]`` log-probs and the state covering all positions."""
        raise NotImplementedError

    def num_consumed(self, state: Any) -> int:
        """How many positions (including ``sos``) ``state`` covers; 0 for ``None``."""
        raise NotImplementedError

    def num_rows(self, state: Any) -> int:
        """``M``, the number of rows (hypotheses) of a non-``None`` state."""
        raise NotImplementedError

    def select_state(self, state: Any, index: torch.Tensor) -> Any:
        """Return the state of rows ``index`` (int64 ``[M']``, values in ``[0, M)``), in order."""
        raise NotImplementedError

    def _advance_rows(self, state: Any, tokens: torch.Tensor,
                      rows: torch.Tensor) -> tuple[torch.Tensor, Any]:
        """:meth:`advance` of a validated call (``rows`` int64 ``[R]``, distinct)."""
        raise NotImplementedError

    def cat_states(self, states: list[Any]) -> Any:
        """The rows of several states (e.g. of streams decoded together), in order."""
        raise NotImplementedError

    # ----- shared --------------------------------------------------------------------------

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Teacher-forced log-probs.

        Args:
          tokens: int64 ``[N, U]`` (normally starting with ``sos_id``); positions after a
            sequence's end may hold anything (the models are causal).

        Returns:
          float ``[N, U, V]``: ``out[n, u]`` is the log-distribution of the token after
          ``tokens[n, :u + 1]``.
        """
        self._check_tokens(tokens, "tokens")
        log_probs, _ = self._run(tokens, None)
        return log_probs

    def step(self, tokens: torch.Tensor, state: Any) -> tuple[torch.Tensor, Any]:
        """Score the next token of every prefix (shallow fusion).

        Args:
          tokens: int64 ``[M, u]``, ``u >= 1``: the whole prefix of each row, ``tokens[:, 0] ==
            sos_id``. Only the positions the state does not cover yet are run (normally the last
            one).
          state: ``None`` on the first call (the whole prefix is run), otherwise the state this
            method returned on the same rows' shorter prefixes (after :meth:`select_state`).

        Returns:
          ``(log_probs, state)``: ``log_probs`` float ``[M, V]``, the normalized log-distribution
          of the token after each prefix; the state covering all ``u`` positions.
        """
        self._check_tokens(tokens, "tokens")
        consumed = self.num_consumed(state)
        if tokens.size(1) <= consumed:
            raise ValueError(
                f"tokens has {tokens.size(1)} positions but the state already covers {consumed}; "
                "pass the whole prefix extended by at least one token"
            )
        if state is None:
            first = tokens[:, 0]
            bad = first[first != self.sos_id]
            if bad.numel() > 0:
                raise ValueError(
                    f"tokens[:, 0] must be sos_id={self.sos_id} on the first step, got "
                    f"{bad.unique().tolist()[:10]}"
                )
        elif self.num_rows(state) != tokens.size(0):
            raise ValueError(
                f"tokens has {tokens.size(0)} rows but the state has {self.num_rows(state)}; "
                "reorder the state with select_state when rows change"
            )
        log_probs, state = self._run(tokens[:, consumed:], state)
        return log_probs[:, -1], state

    def start(self, num_rows: int, device: torch.device) -> tuple[torch.Tensor, Any]:
        """Row-wise fusion: ``num_rows`` prefixes holding only ``sos``.

        Returns:
          ``(log_probs, state)``: float ``[num_rows, V]``, the distribution of the first token,
          and a state for :meth:`advance`.
        """
        sos = torch.full((num_rows, 1), self.sos_id, dtype=torch.int64, device=device)
        log_probs, state = self._run(sos, None)
        return log_probs[:, -1], state

    def advance(
        self, state: Any, tokens: torch.Tensor, rows: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, Any]:
        """Row-wise fusion: rows ``rows`` of ``state`` consume one token each; the other rows
        are unchanged. Unlike :meth:`step`, rows may hold prefixes of different lengths (a
        transducer or CTC search extends some hypotheses and not others).

        Args:
          state: from :meth:`start` or :meth:`advance` (after :meth:`select_state`).
          tokens: int64 ``[R]``, the token each row consumes.
          rows: int64 ``[R]``, distinct rows of ``state``; None: every row (``R = M``).

        Returns:
          ``(log_probs, state)``: float ``[R, V]``, the distribution of the token after each
          advanced row's new prefix, and the state of all ``M`` rows. A state that went
          through :meth:`advance` serves :meth:`advance` only (not :meth:`step`).
        """
        num_rows = self.num_rows(state)
        if rows is None:
            rows = torch.arange(num_rows, device=tokens.device)
        rows = check_row_index(rows, num_rows, tokens.device)
        if not isinstance(tokens, torch.Tensor) or tokens.dtype != torch.int64 or (
                tokens.shape != rows.shape):
            raise ValueError(f"tokens must be int64 of shape {tuple(rows.shape)}, got "
                             f"{getattr(tokens, 'dtype', type(tokens))} {tuple(tokens.shape)}")
        check_token_ids("tokens", tokens, self.vocab_size)
        if rows.numel() == 0:
            return torch.zeros(0, self.vocab_size, device=tokens.device,
                               dtype=self._float_dtype()), state
        return self._advance_rows(state, tokens, rows)

    def score_sequences(
        self, tokens: k2.RaggedTensor, batch_size: int | None = None,
        max_tokens: int | None = None,
    ) -> SequenceScores:
        """Score whole token sequences with teacher forcing (e.g. n-best rescoring).

        Args:
          tokens: int32 ``k2.RaggedTensor`` with axes ``[seq][token]`` (ragged token axis),
            token ids in ``[0, V)`` without ``sos``/``eos``; sequences may be empty. Any device
            (moved to the model's device).
          batch_size: ``None`` (default): all sequences in one padded forward pass. Otherwise
            at most this many sequences per pass, grouped by length (longest first) so that
            little padding is computed; bounds memory at ``batch_size * max_len * V`` floats.
            The scores do not depend on it (up to float rounding).
          max_tokens: ``None`` (default): no bound. Otherwise a pass also holds at most this
            many padded positions, its sequences times its longest one's ``len + 1`` (a
            pass's memory grows with them: ~9 KB each for a 2-layer LSTM of 256 units and
            256 tokens, activations and log-probs), but at least one sequence; with
            ``batch_size``, both bound a pass. The scores do not depend on it (up to float
            rounding).

        Returns:
          :class:`SequenceScores`: per-token log-probs, ragged ``[seq][token]`` with
          ``len + 1`` entries per sequence (the last is ``eos``; an empty sequence has only the
          ``eos`` score), and float ``[num_seqs]`` totals, both on the model's device and in
          the order of ``tokens``.
        """
        _check_sequence_args(tokens, batch_size, max_tokens)
        device = self.device
        tokens = tokens.to(device)
        check_token_ids("tokens", tokens.values, self.vocab_size)
        num_seqs = tokens.dim0
        if num_seqs == 0:
            empty = torch.zeros(0, dtype=self._float_dtype(), device=device)
            return SequenceScores(k2.RaggedTensor(tokens.shape, empty), empty)
        splits = tokens.shape.row_splits(1).to(torch.int64)
        lens = splits[1:] - splits[:-1]
        if (batch_size is None or num_seqs <= batch_size) and (
                max_tokens is None or num_seqs * (int(lens.max()) + 1) <= max_tokens):
            return self._score_padded(tokens)
        order = torch.argsort(lens, descending=True)
        totals = torch.empty(num_seqs, dtype=self._float_dtype(), device=device)
        pieces = []
        for start, end in length_batches(lens[order], batch_size or num_seqs, max_tokens):
            rows = order[start:end]
            chunk, _ = tokens.index(rows.to(torch.int32), axis=0)
            scores = self._score_padded(chunk)
            totals[rows] = scores.totals
            pieces.append(scores.token_log_probs)
        inverse = torch.empty_like(order)
        inverse[order] = torch.arange(num_seqs, device=device)
        ragged, _ = k2.ragged.cat(pieces, axis=0).index(inverse.to(torch.int32), axis=0)
        return SequenceScores(ragged, totals)

    def _score_padded(self, tokens: k2.RaggedTensor) -> SequenceScores:
        """:meth:`score_sequences` of a validated non-empty batch, in one forward pass."""
        device = tokens.device
        inputs, targets, lens = pad_with_sos_eos(tokens, self.sos_id, self.eos_id)
        log_probs, _ = self._run(inputs, None)  # [S, L + 1, V]
        token_lp = log_probs.gather(2, targets.unsqueeze(2)).squeeze(2)  # [S, L + 1]
        num_seqs, width = token_lp.shape
        keep = torch.arange(width, device=device).unsqueeze(0) <= lens.unsqueeze(1)
        out_splits = tokens.shape.row_splits(1) + torch.arange(
            num_seqs + 1, device=device, dtype=torch.int32
        )
        shape = k2.ragged.create_ragged_shape2(out_splits, None, int(out_splits[-1]))
        ragged = k2.RaggedTensor(shape, token_lp[keep].contiguous())
        totals = token_lp.masked_fill(~keep, 0.0).sum(dim=1)
        return SequenceScores(ragged, totals)

    def _float_dtype(self) -> torch.dtype:
        return next(p.dtype for p in self.parameters() if p.is_floating_point())

    def _check_tokens(self, tokens: torch.Tensor, name: str) -> None:
        if not isinstance(tokens, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(tokens).__name__}")
        if tokens.dtype != torch.int64:
            raise TypeError(f"{name} must be int64, got {tokens.dtype}")
        if tokens.dim() != 2 or tokens.size(1) < 1:
            raise ValueError(
                f"{name} must have shape [M, u] with u >= 1, got {tuple(tokens.shape)}"
            )
        check_token_ids(name, tokens, self.vocab_size)


def check_row_index(index: torch.Tensor, num_rows: int, device: torch.device) -> torch.Tensor:
    """Validate ``index``, a row selection of a state with ``num_rows`` rows; return it on
    ``device``."""
    if not isinstance(index, torch.Tensor):
        raise TypeError(f"index must be a torch.Tensor, got {type(index).__name__}")
    if index.dtype != torch.int64 or index.dim() != 1:
        raise TypeError(
            f"index must be a 1-D int64 tensor, got dtype {index.dtype} and shape "
            f"{tuple(index.shape)}"
        )
    if index.numel() > 0:
        lo, hi = int(index.min()), int(index.max())
        if lo < 0 or hi >= num_rows:
            raise ValueError(f"index values must be in [0, {num_rows}), got {lo if lo < 0 else hi}")
    return index.to(device)


def pad_with_sos_eos(
    tokens: k2.RaggedTensor, sos_id: int, eos_id: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Padded model inputs and targets of a ragged batch of token sequences.

    Args:
      tokens: int32 ragged ``[seq][token]`` without ``sos``/``eos``.

    Returns:
      ``(inputs, targets, lens)``: int64 ``[S, L + 1]`` with ``L`` the longest length:
      ``inputs[s] = sos w_1 .. w_n`` then ``eos`` padding; ``targets[s] = w_1 .. w_n eos`` then
      ``eos`` padding; int64 ``[S]`` lengths ``n``. All on ``tokens.device``.
    """
    device = tokens.device
    row_splits = tokens.shape.row_splits(1).to(torch.int64)
    lens = row_splits[1:] - row_splits[:-1]
    num_seqs = lens.numel()
    max_len = int(lens.max()) if num_seqs > 0 else 0
    values = tokens.values.to(torch.int64)
    row_ids = tokens.shape.row_ids(1).to(torch.int64)
    pos = torch.arange(values.numel(), device=device) - row_splits[row_ids]
    targets = torch.full((num_seqs, max_len + 1), eos_id, dtype=torch.int64, device=device)
    targets[row_ids, pos] = values
    inputs = torch.full((num_seqs, max_len + 1), eos_id, dtype=torch.int64, device=device)
    inputs[:, 0] = sos_id
    inputs[:, 1:] = targets[:, :-1]
    return inputs, targets, lens


def _check_sequence_args(tokens: k2.RaggedTensor, batch_size: int | None,
                         max_tokens: int | None) -> None:
    """The argument checks of :meth:`NeuralLM.score_sequences`."""
    if not isinstance(tokens, k2.RaggedTensor):
        raise TypeError(f"tokens must be a k2.RaggedTensor, got {type(tokens).__name__}")
    if tokens.num_axes != 2:
        raise ValueError(f"tokens must have 2 axes [seq][token], got {tokens.num_axes} axes")
    if tokens.dtype != torch.int32:
        raise TypeError(f"tokens must be an int32 ragged tensor, got {tokens.dtype}")
    for name, value in (("batch_size", batch_size), ("max_tokens", max_tokens)):
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)
                                  or value < 1):
            raise ValueError(f"{name} must be a positive int or None, got {value!r}")


def length_batches(lens: torch.Tensor, max_count: int, max_tokens: int | None = None
                   ) -> list[tuple[int, int]]:
    """``(start, end)`` ranges covering ``0 .. len(lens)`` in order for sequences sorted
    longest first (``lens``: int ``[n]``, non-increasing): each of at most ``max_count``
    sequences whose count times the first's ``len + 1`` (the padded positions of a pass) is
    at most ``max_tokens`` (``None``: no bound), and at least one sequence."""
    firsts = (lens.to("cpu", torch.int64) + 1).tolist()
    out, start = [], 0
    while start < len(firsts):
        fit = max_count if max_tokens is None else max(1, max_tokens // firsts[start])
        end = min(len(firsts), start + min(max_count, fit))
        out.append((start, end))
        start = end
    return out
