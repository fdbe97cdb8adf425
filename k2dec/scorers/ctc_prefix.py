"""CTC prefix scoring vectorized over hypotheses x candidate tokens (joint CTC/attention search).

For a prefix ``g`` the CTC prefix probability is ``psi(g) = P(the CTC output starts with g)``,
summed over all alignments of the utterance's frames. The search adds
``log psi(g + c) - log psi(g)`` for each candidate token ``c`` (and, for ``c = eos``,
``log P_ctc(g) - log psi(g)``, the probability that the output is exactly ``g``).

The recursion keeps, per hypothesis, ``r[t, 0]`` / ``r[t, 1]``: the log-probability that frames
``0..t`` emit exactly ``g`` and frame ``t`` is a non-blank / blank. Padded frames (``t >= T_n``)
are handled by giving them blank log-prob 0 and non-blank log-prob -inf, which carries the
complete-prefix probability unchanged to the last padded frame and adds nothing to ``psi``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from k2dec.scorers.base import Scorer, check_rows

__all__ = ["CtcPrefixScorer", "CtcPrefixState", "CtcScorer", "CtcScorerState"]


@dataclass
class CtcPrefixState:
    """Per-hypothesis CTC prefix state (``M`` rows).

    Attributes:
      r: float ``[T', 2, M]`` (``T' <= T``, at least the rows' longest utterance): log-prob
        of having emitted exactly the prefix by frame ``t``,
        with frame ``t`` non-blank (``[:, 0]``) or blank (``[:, 1]``).
      log_psi: float ``[M]``: log prefix probability of each row's prefix.
      last: int64 ``[M]``: last token of the prefix, ``-1`` for the empty prefix.
    """

    r: torch.Tensor
    log_psi: torch.Tensor
    last: torch.Tensor

    def select(self, index: torch.Tensor) -> CtcPrefixState:
        """Rows ``index`` (int64 ``[M']``)."""
        return CtcPrefixState(
            self.r.index_select(2, index),
            self.log_psi.index_select(0, index),
            self.last.index_select(0, index),
        )


class CtcPrefixScorer:
    """CTC prefix scorer for a batch of utterances.

    Args:
      log_probs: float ``[N, T, V]`` CTC log-softmax output.
      log_probs_lens: int ``[N]`` valid frames of ``log_probs`` per utterance (after
        subsampling), each in ``[1, T]``.
      blank_id: the CTC blank; it is never a candidate.
      eos_id: the decoder's end-of-sentence id; its score is the full-sequence probability.
    """

    def __init__(
        self, log_probs: torch.Tensor, log_probs_lens: torch.Tensor, blank_id: int, eos_id: int
    ) -> None:
        if log_probs.dim() != 3:
            raise ValueError(
                f"log_probs must have shape [N, T, V], got {tuple(log_probs.shape)}"
            )
        if not log_probs.is_floating_point():
            raise TypeError(f"log_probs must be a float tensor, got {log_probs.dtype}")
        n, t, v = log_probs.shape
        if log_probs_lens.shape != (n,):
            raise ValueError(f"log_probs_lens must have shape ({n},), got "
                             f"{tuple(log_probs_lens.shape)}")
        if n > 0 and (int(log_probs_lens.min()) < 1 or int(log_probs_lens.max()) > t):
            raise ValueError(f"log_probs_lens must be in [1, {t}], got {log_probs_lens.tolist()}")
        if not 0 <= blank_id < v:
            raise ValueError(f"blank_id must be in [0, {v}), got {blank_id}")
        if not 0 <= eos_id < v:
            raise ValueError(f"eos_id must be in [0, {v}), got {eos_id}")
        if eos_id == blank_id:
            raise ValueError(f"eos_id and blank_id must differ, both are {eos_id}")
        if bool((torch.isnan(log_probs) | (log_probs == float("inf"))).any()):
            raise ValueError("log_probs contains NaN or +inf")
        self.blank_id = blank_id
        self.eos_id = eos_id
        self.vocab_size = v
        device = log_probs.device
        frames = torch.arange(t, device=device).unsqueeze(0)
        pad = frames >= log_probs_lens.to(device).unsqueeze(1)  # [N, T]
        x = log_probs.masked_fill(pad.unsqueeze(2), float("-inf"))
        x[..., blank_id] = x[..., blank_id].masked_fill(pad, 0.0)
        self.x = x.transpose(0, 1).contiguous()  # [T, N, V]
        self.lens = log_probs_lens.to(device=device, dtype=torch.int64)

    def initial_state(self, row_utt: torch.Tensor) -> CtcPrefixState:
        """State of the empty prefix for rows whose utterances are ``row_utt`` (int64 ``[M]``)."""
        xb = self.x[:, row_utt, self.blank_id]  # [T, M]
        r = torch.stack([torch.full_like(xb, float("-inf")), xb.cumsum(0)], dim=1)
        zeros = torch.zeros(row_utt.numel(), dtype=self.x.dtype, device=self.x.device)
        last = torch.full_like(row_utt, -1)
        return CtcPrefixState(r, zeros, last)

    def score(
        self,
        state: CtcPrefixState,
        row_utt: torch.Tensor,
        cand: torch.Tensor,
        prefix_len: int | torch.Tensor,
        window: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Prefix log-probs of every row's prefix extended by each candidate.

        Args:
          state: the rows' state (``M`` rows).
          row_utt: int64 ``[M]``, the utterance of each row.
          cand: int64 ``[M, K]`` candidate tokens.
          prefix_len: ``u``, the number of tokens in every row's prefix (an int when all rows
            are equal, else int64 ``[M]``).
          window: optional ``(first, last)``, int64 ``[M]`` each: the candidate token may only
            be first emitted at frames ``first <= t <= last`` of its row (a time window, e.g.
            around the decoder's attention peak). Earlier tokens keep the windows they had.

        Returns:
          ``(log_psi, r)``: float ``[M, K]`` log prefix probability of ``prefix + cand``
          (``-inf`` for the blank; for ``eos`` the probability that the output is exactly the
          prefix), and the extended rows' ``r``, float ``[T', 2, M, K]`` where ``T'`` is the
          longest of the rows' utterances (``<= T``; later frames are padding for all rows).
        """
        x = self.x
        num_frames = self._num_frames(row_utt)
        xc = x[:num_frames, row_utt.unsqueeze(1), cand]  # [T', M, K]
        xb = x[:num_frames, row_utt, self.blank_id].unsqueeze(2)  # [T', M, 1]
        enter, loop_start = _enter(state, cand, prefix_len, num_frames, window)
        r = torch.full((num_frames, 2) + tuple(cand.shape), float("-inf"), dtype=x.dtype,
                       device=x.device)
        r[0, 0] = enter[0] + xc[0]
        for t in range(loop_start, num_frames):
            r[t, 0] = torch.logaddexp(r[t - 1, 0], enter[t]) + xc[t]
            r[t, 1] = torch.logaddexp(r[t - 1, 0], r[t - 1, 1]) + xb[t]
        log_psi = torch.logsumexp(enter[loop_start:] + xc[loop_start:], dim=0)
        log_psi = torch.logaddexp(log_psi, r[0, 0])
        full = self._full(state, num_frames).unsqueeze(1).expand_as(log_psi)
        log_psi = torch.where(cand == self.eos_id, full, log_psi)
        log_psi = log_psi.masked_fill(cand == self.blank_id, float("-inf"))
        return log_psi, r

    def full_log_prob(self, state: CtcPrefixState, row_utt: torch.Tensor) -> torch.Tensor:
        """``log P_ctc(output == prefix)`` of every row, float ``[M]``: the score :meth:`score`
        gives the candidate ``eos`` (``row_utt``: int64 ``[M]``, the utterance of each row)."""
        return self._full(state, self._num_frames(row_utt))

    def _num_frames(self, row_utt: torch.Tensor) -> int:
        """Frames past the longest of these rows' utterances are padding for all of them."""
        return int(self.lens.index_select(0, row_utt).max()) if row_utt.numel() else 1

    @staticmethod
    def _full(state: CtcPrefixState, num_frames: int) -> torch.Tensor:
        last = state.r[num_frames - 1]  # [2, M]; padded frames carry it unchanged
        return torch.logaddexp(last[0], last[1])

    @staticmethod
    def extend(
        r: torch.Tensor,
        log_psi: torch.Tensor,
        row: torch.Tensor,
        k: torch.Tensor,
        token: torch.Tensor,
    ) -> CtcPrefixState:
        """State of the chosen extensions: candidate ``k[i]`` of row ``row[i]``, token ``token[i]``.

        ``r`` and ``log_psi`` are the outputs of :meth:`score`; all index tensors int64 ``[M']``.
        """
        return CtcPrefixState(r[:, :, row, k], log_psi[row, k], token)


@dataclass
class CtcScorerState:
    """Rows of :class:`CtcScorer`: the prefix state, each row's utterance and prefix length
    (int64 ``[M]`` each), and that length when all rows have it (``None`` when unknown: the
    recursion then starts at the shortest)."""

    prefix: CtcPrefixState
    utt: torch.Tensor
    length: torch.Tensor
    common_length: int | None = None


def _psi_delta(log_psi: torch.Tensor, prev: torch.Tensor) -> torch.Tensor:
    """``log_psi - prev``, ``-inf`` where either is ``-inf``."""
    dead = (log_psi == float("-inf")) | (prev == float("-inf"))
    return torch.where(dead, torch.full_like(log_psi, float("-inf")), log_psi - prev)


class CtcScorer(Scorer):
    """CTC prefix scores as a partial :class:`~k2dec.scorers.Scorer`: candidate ``c`` after
    prefix ``g`` scores ``log psi(g + c) - log psi(g)``, the end of the hypothesis (and the
    candidate ``eos``) ``log P_ctc(g) - log psi(g)``, so the scores of a complete hypothesis
    sum to its CTC log-probability.

    Args: as :class:`CtcPrefixScorer` (``log_probs`` float ``[N, T, V]``, ``lens`` int ``[N]``,
      ``blank_id``, ``eos_id``); rows of utterance ``n`` read ``log_probs[n]``.
    """

    partial = True

    def __init__(self, log_probs: torch.Tensor, lens: torch.Tensor, blank_id: int,
                 eos_id: int) -> None:
        self.ctc = CtcPrefixScorer(log_probs, lens, blank_id, eos_id)
        self.vocab_size = self.ctc.vocab_size

    def init_state(self, utt: torch.Tensor) -> CtcScorerState:
        utt = utt.to(device=self.ctc.x.device, dtype=torch.int64)
        return CtcScorerState(self.ctc.initial_state(utt), utt, torch.zeros_like(utt), 0)

    def score(self, state: CtcScorerState, cand: torch.Tensor | None = None,
              window: tuple[torch.Tensor, torch.Tensor] | None = None
              ) -> tuple[torch.Tensor, tuple]:
        """:meth:`Scorer.score` of the candidates ``cand``; ``window``: optional ``(first,
        last)``, int64 ``[M]`` each, the frames at which each row's candidate may be first
        emitted (:meth:`CtcPrefixScorer.score`; the attention search's ``ctc_window``)."""
        if cand is None:
            raise ValueError("CtcScorer is a partial scorer: give the candidates (cand)")
        length = state.length if state.common_length is None else state.common_length
        log_psi, r = self.ctc.score(state.prefix, state.utt, cand, length, window)
        delta = _psi_delta(log_psi, state.prefix.log_psi.unsqueeze(1))
        return delta, (log_psi, r, cand)

    def advance(self, state: CtcScorerState, pending: tuple, rows: torch.Tensor,
                tokens: torch.Tensor, emit: torch.Tensor | None = None) -> CtcScorerState:
        log_psi, r, cand = pending
        hit = cand.index_select(0, rows) == tokens.unsqueeze(1)
        ok = hit.any(dim=1) & (tokens != self.ctc.blank_id) & (tokens != self.ctc.eos_id)
        if not bool((ok if emit is None else ok | ~emit).all()):
            bad = ~ok if emit is None else ~ok & emit
            raise ValueError("CtcScorer.advance: a token that extends a prefix must be one of "
                             "its row's scored candidates, and not blank or eos (got "
                             f"{tokens[bad].unique().tolist()})")
        k = hit.to(torch.int8).argmax(dim=1)
        moved = CtcPrefixScorer.extend(r, log_psi, rows, k, tokens)
        if emit is None:
            common = None if state.common_length is None else state.common_length + 1
            return CtcScorerState(moved, state.utt.index_select(0, rows),
                                  state.length.index_select(0, rows) + 1, common)
        if not bool(emit.all()):
            kept = state.prefix.select(rows)
            frames = moved.r.size(0)  # later frames are padding for all these rows
            moved = CtcPrefixState(
                torch.where(emit.view(1, 1, -1), moved.r, kept.r[:frames]),
                torch.where(emit, moved.log_psi, kept.log_psi),
                torch.where(emit, moved.last, kept.last),
            )
        return CtcScorerState(moved, state.utt.index_select(0, rows),
                              state.length.index_select(0, rows) + emit.to(torch.int64))

    def select(self, state: CtcScorerState, index: torch.Tensor) -> CtcScorerState:
        check_rows("index", index, state.utt.numel())
        return CtcScorerState(state.prefix.select(index), state.utt.index_select(0, index),
                              state.length.index_select(0, index), state.common_length)

    def final_score(self, state: CtcScorerState) -> torch.Tensor:
        return _psi_delta(self.ctc.full_log_prob(state.prefix, state.utt), state.prefix.log_psi)

    def num_rows(self, state: CtcScorerState) -> int:
        return state.utt.numel()

    def cat(self, states: Sequence[CtcScorerState]) -> CtcScorerState:
        frames = max(s.prefix.r.size(0) for s in states)

        def padded(r: torch.Tensor) -> torch.Tensor:
            # frames past every row's utterance carry the last one unchanged
            return torch.cat([r, r[-1:].expand(frames - r.size(0), -1, -1)]) if (
                r.size(0) < frames) else r

        prefix = CtcPrefixState(torch.cat([padded(s.prefix.r) for s in states], dim=2),
                                torch.cat([s.prefix.log_psi for s in states]),
                                torch.cat([s.prefix.last for s in states]))
        common = {s.common_length for s in states}
        return CtcScorerState(prefix, torch.cat([s.utt for s in states]),
                              torch.cat([s.length for s in states]),
                              common.pop() if len(common) == 1 else None)


def _enter(state: CtcPrefixState, cand: torch.Tensor, prefix_len: int | torch.Tensor,
           num_frames: int, window: tuple[torch.Tensor, torch.Tensor] | None
           ) -> tuple[torch.Tensor, int]:
    """For :meth:`CtcPrefixScorer.score`: float ``[T', M, K]`` ``enter`` and the first frame
    of its recursion (the arguments are that method's)."""
    # enter[t]: log-prob of having emitted exactly the prefix by frame t - 1 and being
    # allowed to emit the candidate's first frame at t (a repeated token needs a blank).
    r_prev = state.r[:num_frames]
    phi = torch.logaddexp(r_prev[:, 0], r_prev[:, 1])
    same = (cand == state.last.unsqueeze(1)).unsqueeze(0)
    phi = torch.where(same, r_prev[:, 1].unsqueeze(2), phi.unsqueeze(2))  # [T', M, K]
    if isinstance(prefix_len, torch.Tensor):
        first = torch.where(prefix_len == 0, 0.0, float("-inf")).to(phi.dtype)
        first = first.view(1, -1, 1).expand_as(phi[:1])
        shortest = int(prefix_len.min()) if prefix_len.numel() else 0
    else:
        first = torch.full_like(phi[:1], 0.0 if prefix_len == 0 else float("-inf"))
        shortest = prefix_len
    enter = torch.cat([first, phi[:-1]], dim=0)
    loop_start = max(shortest, 1)
    if window is not None:
        frames = torch.arange(num_frames, device=phi.device).unsqueeze(1)
        inside = (frames >= window[0].unsqueeze(0)) & (frames <= window[1].unsqueeze(0))
        enter = enter.masked_fill(~inside.unsqueeze(2), float("-inf"))
        if cand.shape[0] > 0:
            loop_start = max(loop_start, int(window[0].min()))
    return enter, loop_start
