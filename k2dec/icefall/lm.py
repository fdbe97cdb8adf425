"""icefall's neural LM objects behind k2dec's interfaces, and k2dec's LMs with icefall's.

icefall's functions take an ``LmScorer`` (``lm_scale``, ``lm_type``, ``sos_id``,
``score_token(x, x_lens, state)``, and ``.lm``, an ``RnnLmModel`` / ``TransformerLM`` whose
``forward(x, y, lengths)`` returns per-token negative log-likelihoods) or such a model alone.
Here:

- :class:`LmScorer`: a k2dec :class:`~k2dec.lm.NeuralLM` with the attributes icefall's
  functions read (``lm_scale``, ``lm_type``, ``sos_id``); pass it where icefall takes ``LM``.
- :class:`ScoreTokenScorer`: an icefall ``LmScorer`` as a k2dec
  :class:`~k2dec.scorers.Scorer` for shallow fusion (one ``score_token`` call per search step
  for the hypotheses that got a token, as icefall calls it).
- :class:`IcefallLm`: an icefall LM as a whole-sequence scorer (``score_sequences``, what
  k2dec's n-best and hypothesis-list rescoring call), from its ``forward(x, y, lengths)``
  with icefall's padding.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any, NamedTuple

import k2
import torch
from torch import nn

from ..lm.base import NeuralLM, SequenceScores, pad_with_sos_eos
from ..primitives.sizes import check_finite
from ..scorers import NeuralLmScorer, Scorer
from ..scorers.base import check_rows, emitting_rows

__all__ = ["IcefallLm", "LmScorer", "ScoreTokenScorer", "fusion_scorer", "sequence_lm",
           "sequence_lm_with_ids"]


class LmScorer:
    """A k2dec neural LM (:class:`~k2dec.lm.RnnLM`, :class:`~k2dec.lm.TransformerLM`) with
    the attributes of icefall's ``LmScorer`` that its decoding functions read.

    Args:
      lm: the LM, in eval mode, on the search's device, with the model's token ids.
      lm_scale: the weight of its log-probs in shallow fusion (icefall's default 0.3).

    Attributes:
      lm, lm_scale; lm_type: ``"rnn"`` or ``"transformer"``; sos_id: the LM's ``sos``.
    """

    def __init__(self, lm: NeuralLM, lm_scale: float = 0.3) -> None:
        if not isinstance(lm, NeuralLM):
            raise TypeError(f"lm must be a k2dec.lm.NeuralLM, got {type(lm).__name__}")
        check_finite("lm_scale", lm_scale)
        self.lm = lm
        self.lm_scale = float(lm_scale)
        self.lm_type = lm.model_type or "rnn"
        self.sos_id = lm.sos_id


def _device(module: Any) -> torch.device:
    try:
        return next(module.parameters()).device
    except (AttributeError, StopIteration):
        return torch.device("cpu")


class _TokenState(NamedTuple):
    """Rows of :class:`ScoreTokenScorer`: the LM state after each row's prefix (RNN: ``(h,
    c)``, each ``[layers, M, hidden]``; Transformer: the prefixes as tuples of ids) and the
    LM's log-probs of the next token, float ``[M, V]``."""

    lm_state: Any
    log_probs: torch.Tensor


class ScoreTokenScorer(Scorer):
    """Shallow fusion with an icefall ``LmScorer`` (anything with ``score_token(x, x_lens,
    state) -> (log_probs [B, V], state)``, ``lm_type`` and optionally ``sos_id``, default 1).

    An RNN LM (``lm_type == "rnn"``) consumes one token per call from the rows' ``(h, c)``
    states (``[layers, B, hidden]``); a Transformer LM gets each row's whole prefix
    (``sos`` + tokens, padded with 0, with lengths) and no state, as icefall calls them. The
    end of a sentence is not scored (icefall's searches never score it).
    """

    def __init__(self, lm: Any) -> None:
        if not callable(getattr(lm, "score_token", None)):
            raise TypeError(f"lm must have score_token(x, x_lens, state), got "
                            f"{type(lm).__name__}")
        self.lm = lm
        self.rnn = getattr(lm, "lm_type", "rnn") == "rnn"
        self.sos_id = int(getattr(lm, "sos_id", 1))
        self.device = _device(lm)
        with torch.no_grad():
            sos = torch.tensor([[self.sos_id]], dtype=torch.int64, device=self.device)
            log_probs, state = lm.score_token(sos, torch.ones(1, dtype=torch.int64,
                                                              device=self.device))
        self._start = (log_probs.reshape(1, -1), state)
        self.vocab_size = int(log_probs.shape[-1])

    def init_state(self, utt: torch.Tensor) -> _TokenState:
        m = utt.numel()
        log_probs, state = self._start
        if self.rnn:
            h, c = state
            lm_state = (h.expand(-1, m, -1).contiguous(), c.expand(-1, m, -1).contiguous())
        else:
            lm_state = [()] * m
        return _TokenState(lm_state, log_probs.expand(m, -1).contiguous())

    def score(self, state: _TokenState, cand: torch.Tensor | None = None
              ) -> tuple[torch.Tensor, None]:
        if cand is not None:
            raise ValueError("ScoreTokenScorer scores every token; cand must be None")
        return state.log_probs, None

    def _run(self, state: Any, tokens: list[int], rows: list[int]) -> tuple[torch.Tensor, Any]:
        """log-probs ``[len(rows), V]`` after rows ``rows`` of ``state`` consumed ``tokens``,
        and the new per-row LM states of those rows."""
        dev = self.device
        if self.rnn:
            idx = torch.tensor(rows, dtype=torch.int64, device=dev)
            h, c = (s.index_select(1, idx) for s in state)
            x = torch.tensor(tokens, dtype=torch.int64, device=dev).reshape(-1, 1)
            lens = torch.ones(len(rows), dtype=torch.int64, device=dev)
            return self.lm.score_token(x, lens, (h, c))
        prefixes = [state[r] + (t,) for r, t in zip(rows, tokens)]
        seqs = [torch.tensor((self.sos_id,) + p, dtype=torch.int64) for p in prefixes]
        x = torch.nn.utils.rnn.pad_sequence(seqs, batch_first=True, padding_value=0).to(dev)
        lens = torch.tensor([len(s) for s in seqs], dtype=torch.int64, device=dev)
        log_probs, _ = self.lm.score_token(x, lens, None)
        return log_probs, prefixes

    def advance(self, state: _TokenState, pending: None, rows: torch.Tensor,
                tokens: torch.Tensor, emit: torch.Tensor | None = None) -> _TokenState:
        new = self.select(state, rows)
        moved = emitting_rows(rows, emit)
        if moved.numel() == 0:
            return new
        with torch.no_grad():
            log_probs, lm_state = self._run(new.lm_state, tokens[moved].tolist(),
                                            moved.tolist())
        out = new.log_probs.index_copy(0, moved.to(new.log_probs.device),
                                       log_probs.to(new.log_probs))
        if self.rnn:
            idx = moved.to(self.device)
            merged = tuple(s.index_copy(1, idx, n) for s, n in zip(new.lm_state, lm_state))
        else:
            merged = list(new.lm_state)
            for i, p in zip(moved.tolist(), lm_state):
                merged[i] = p
        return _TokenState(merged, out)

    def select(self, state: _TokenState, index: torch.Tensor) -> _TokenState:
        check_rows("index", index, state.log_probs.size(0))
        if self.rnn:
            idx = index.to(self.device)
            lm_state = tuple(s.index_select(1, idx) for s in state.lm_state)
        else:
            lm_state = [state.lm_state[i] for i in index.tolist()]
        return _TokenState(lm_state, state.log_probs.index_select(0, index))

    def final_score(self, state: _TokenState) -> torch.Tensor:
        return torch.zeros(state.log_probs.size(0), dtype=state.log_probs.dtype,
                           device=state.log_probs.device)

    def num_rows(self, state: _TokenState) -> int:
        return state.log_probs.size(0)

    def cat(self, states: Sequence[_TokenState]) -> _TokenState:
        if self.rnn:
            lm_state = tuple(torch.cat([s.lm_state[k] for s in states], dim=1)
                             for k in range(2))
        else:
            lm_state = [p for s in states for p in s.lm_state]
        return _TokenState(lm_state, torch.cat([s.log_probs for s in states]))


class IcefallLm:
    """An icefall neural LM as a whole-sequence scorer: ``score_sequences`` as
    :meth:`k2dec.lm.NeuralLM.score_sequences` gives it, computed from the model's
    ``forward(x, y, lengths)`` (per-token negative log-likelihoods ``[B, L]``, 0 at padding)
    on icefall's inputs: ``x = sos + tokens``, ``y = tokens + eos``, both padded with
    ``blank_id``, ``lengths = len + 1``.

    Args:
      lm: an ``RnnLmModel`` / ``TransformerLM``, or an ``LmScorer`` (its ``.lm`` is used).
      sos_id, eos_id, blank_id: the ids icefall pads and delimits with.
    """

    def __init__(self, lm: Any, sos_id: int = 1, eos_id: int = 1, blank_id: int = 0) -> None:
        model = lm.lm if hasattr(lm, "lm_type") and isinstance(getattr(lm, "lm", None),
                                                               nn.Module) else lm
        if not callable(model):
            raise TypeError(f"lm must be callable as lm(x=, y=, lengths=), got "
                            f"{type(lm).__name__}")
        self.model = model
        self.sos_id, self.eos_id, self.blank_id = int(sos_id), int(eos_id), int(blank_id)

    def score_sequences(self, tokens: k2.RaggedTensor, batch_size: int | None = None
                        ) -> SequenceScores:
        """Per-token log-probs ``[seq][token + 1]`` (the last: ``eos``) and their totals
        ``[seq]`` (see :meth:`k2dec.lm.NeuralLM.score_sequences`), ``batch_size`` sequences
        per call (``None``: all at once)."""
        device = _device(self.model)
        tokens = tokens.to(device)
        num = tokens.dim0
        step = num if batch_size is None else max(1, int(batch_size))
        rows, totals = [], []
        for start in range(0, num, max(step, 1)):
            idx = torch.arange(start, min(start + step, num), dtype=torch.int32, device=device)
            part, _ = tokens.index(idx, axis=0)
            lp, keep = self._chunk(part)
            rows.append(lp[keep])
            totals.append(lp.masked_fill(~keep, 0.0).sum(dim=1))
        splits = tokens.shape.row_splits(1) + torch.arange(num + 1, dtype=torch.int32,
                                                           device=device)
        shape = k2.ragged.create_ragged_shape2(splits, None, int(splits[-1]))
        values = torch.cat(rows) if rows else torch.zeros(0, device=device)
        total = torch.cat(totals) if totals else torch.zeros(0, device=device)
        return SequenceScores(k2.RaggedTensor(shape, values.contiguous()), total)

    def _chunk(self, tokens: k2.RaggedTensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Log-probs ``[B, L + 1]`` of a chunk and the mask of its real positions."""
        x, y, lens = pad_with_sos_eos(tokens, self.sos_id, self.eos_id)
        pos = torch.arange(x.size(1), device=x.device).unsqueeze(0)
        keep = pos <= lens.unsqueeze(1)
        x = x.masked_fill(~keep, self.blank_id)
        y = y.masked_fill(~keep, self.blank_id)
        with torch.no_grad():
            nll = self.model(x=x, y=y, lengths=lens + 1)
        return -nll.reshape(x.shape), keep


def fusion_scorer(LM: Any, name: str = "LM") -> tuple[Scorer, float]:
    """The scorer and weight (``LM.lm_scale``) of an icefall ``LM`` argument: a k2dec
    :class:`LmScorer` (its LM through :class:`~k2dec.scorers.NeuralLmScorer`) or an icefall
    ``LmScorer`` (:class:`ScoreTokenScorer`)."""
    if isinstance(LM, NeuralLM):
        raise TypeError(f"{name}: icefall's functions read LM.lm_scale; wrap the k2dec LM as "
                        "k2dec.icefall.LmScorer(lm, lm_scale=0.3)")
    if isinstance(LM, LmScorer):
        return NeuralLmScorer(LM.lm, score_eos=False), LM.lm_scale
    if callable(getattr(LM, "score_token", None)) and hasattr(LM, "lm_scale"):
        return ScoreTokenScorer(LM), float(LM.lm_scale)
    raise TypeError(f"{name} must be a k2dec.icefall.LmScorer or an icefall LmScorer "
                    f"(score_token, lm_scale, lm_type), got {type(LM).__name__}")


def sequence_lm(LM: Any, sos_id: int = 1, eos_id: int = 1, blank_id: int = 0) -> Any:
    """What scores whole sequences for an icefall ``LM`` / ``rnn_lm_model`` argument: a k2dec
    LM (bare or in an :class:`LmScorer`) as it is, an icefall one through
    :class:`IcefallLm`."""
    if isinstance(LM, LmScorer):
        return LM.lm
    if isinstance(LM, NeuralLM):
        return LM
    return IcefallLm(LM, sos_id, eos_id, blank_id)


def sequence_lm_with_ids(LM: Any, sos_id: int, eos_id: int, blank_id: int = 0) -> Any:
    """As :func:`sequence_lm`, scoring with ``sos_id`` / ``eos_id`` whatever the LM's own: a
    k2dec LM (bare or in an :class:`LmScorer`) as itself or a shallow copy sharing its weights
    with the ids replaced (the caller's LM is not changed), an icefall one through
    :class:`IcefallLm`."""
    for name, value in (("sos_id", sos_id), ("eos_id", eos_id)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValueError(f"{name} must be a non-negative int, got {value!r}")
    lm = sequence_lm(LM, sos_id, eos_id, blank_id)
    if not isinstance(lm, NeuralLM):  # icefall's, through IcefallLm with the ids
        return lm
    for name, value in (("sos_id", sos_id), ("eos_id", eos_id)):
        if value >= lm.vocab_size:
            raise ValueError(f"{name}={value} is not a token of the LM (vocab_size "
                             f"{lm.vocab_size})")
    if (lm.sos_id, lm.eos_id) == (sos_id, eos_id):
        return lm
    out = copy.copy(lm)
    out.sos_id, out.eos_id = sos_id, eos_id
    return out
