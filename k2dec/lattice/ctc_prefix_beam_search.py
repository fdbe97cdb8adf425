"""CTC prefix beam search (Graves 2006; icefall's ``ctc_prefix_beam_search`` and
``ctc_prefix_beam_search_shallow_fussion``), batched over utterances, with weighted scorers.

Each hypothesis is a prefix ``g`` (collapsed tokens) with ``p_b`` / ``p_nb``, the log-probs of
the frames so far emitting ``g`` and ending in blank / in ``g``'s last token, and ``lm``, the
sum of its scorers' weighted scores. On every frame only the ``beam`` most likely symbols of
the frame are tried (icefall's first-pass pruning). For symbol ``c`` with log-prob ``x``:

- blank: ``g`` gets ``p_b += log(e^p_b + e^p_nb) + x`` (log-added over all contributions);
- ``c`` equal to ``g``'s last token: ``g`` gets ``p_nb += p_nb(g) + x`` (a repeat), and
  ``g + c`` gets ``p_nb += p_b(g) + x`` (a new token after a blank);
- any other token: ``g + c`` gets ``p_nb += log(e^p_b + e^p_nb) + x``.

A new prefix ``g + c`` gets ``lm(g) + sum_i w_i * score_i(c | g)``. Contributions to the same
prefix are log-added (its ``lm`` and scorer states are those of its first contribution, in
the order hypothesis, symbol, same prefix before extension; equal prefixes have equal ``lm``).
The ``beam`` prefixes with the largest ``log(e^p_b + e^p_nb) + lm`` survive. At the end the
scorers' final scores (e.g. a hotword refund) are added. The best hypothesis is the one with
the largest total (icefall: no length normalization).
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from k2dec.lattice.dense import validate_log_probs
from k2dec.primitives.batch_search import (
    column_capacity,
    extend_hash,
    grow_columns,
    num_active_per_frame,
)
from k2dec.primitives.ragged import add_at, exclusive_cumsum
from k2dec.primitives.sizes import check_int_range
from k2dec.scorers.base import ScorerSet, WeightedScorer

logger = logging.getLogger(__name__)

__all__ = ["CtcPrefixBeamSearchConfig", "PrefixHypothesis", "ctc_prefix_beam_search"]

_NEG_INF = float("-inf")


@dataclass(frozen=True)
class CtcPrefixBeamSearchConfig:
    """Options of :func:`ctc_prefix_beam_search` (icefall's defaults).

    Attributes:
      beam_size: prefixes kept per utterance after each frame, and symbols tried per frame.
      blank_id: the CTC blank.
    """

    beam_size: int = 4
    blank_id: int = 0

    def __post_init__(self) -> None:
        check_int_range(self, "beam_size", 1, 256)  # candidates: 2 x beam_size^2 per utterance
        if not isinstance(self.blank_id, int) or self.blank_id < 0:
            raise ValueError(f"blank_id must be an int >= 0, got {self.blank_id!r}")


@dataclass(frozen=True)
class PrefixHypothesis:
    """One hypothesis of :func:`ctc_prefix_beam_search`.

    Attributes:
      tokens: the token ids.
      timestamps: the frame on which each token was first emitted (of the contribution that
        created the prefix first).
      score: ``ctc_score`` plus the scorers' weighted scores (including final scores).
      ctc_score: ``log P_ctc(tokens)`` over the surviving alignments (``log(e^p_b + e^p_nb)``).
    """

    tokens: list[int]
    timestamps: list[int]
    score: float
    ctc_score: float


@dataclass
class _Prefixes:
    """Hypotheses as rows, grouped by utterance (see the module docstring for the fields)."""

    tokens: torch.Tensor  # int64 [R, W]
    times: torch.Tensor  # int64 [R, W]
    length: torch.Tensor  # int64 [R]
    last: torch.Tensor  # int64 [R], -1 for the empty prefix
    hash: torch.Tensor  # int64 [R]
    pb: torch.Tensor  # float64 [R]
    pnb: torch.Tensor  # float64 [R]
    lm: torch.Tensor  # float64 [R]
    states: tuple

    def fields(self) -> tuple[torch.Tensor, ...]:
        return (self.tokens, self.times, self.length, self.last, self.hash, self.pb, self.pnb,
                self.lm)

    def rows(self, start: int, end: int, scorers: ScorerSet) -> _Prefixes:
        index = torch.arange(start, end, device=self.length.device)
        return _Prefixes(*(x[start:end] for x in self.fields()),
                         states=scorers.select(self.states, index))

    @staticmethod
    def cat(a: _Prefixes, b: _Prefixes, scorers: ScorerSet) -> _Prefixes:
        if b.length.numel() == 0:
            return a
        cap = max(a.tokens.size(1), b.tokens.size(1))
        fields = [torch.cat([grow_columns(x, cap), grow_columns(y, cap)]) if i < 2 else
                  torch.cat([x, y]) for i, (x, y) in enumerate(zip(a.fields(), b.fields()))]
        return _Prefixes(*fields, states=scorers.cat([a.states, b.states]))


def ctc_prefix_beam_search(
    log_probs: torch.Tensor,
    log_probs_lens: torch.Tensor,
    config: CtcPrefixBeamSearchConfig | None = None,
    scorers: Sequence[WeightedScorer] = (),
) -> list[list[PrefixHypothesis]]:
    """CTC prefix beam search over a padded batch (see the module docstring).

    Args:
      log_probs: float ``[N, T, V]`` CTC log-softmax outputs.
      log_probs_lens: int ``[N]`` valid frames of ``log_probs`` per utterance (after
        subsampling).
      config: options; default ``CtcPrefixBeamSearchConfig()`` (beam 4).
      scorers: weighted :class:`~k2dec.scorers.Scorer` s (neural LM, LODR n-gram, hotwords);
        utterance ``i`` is ``utt=i`` of per-utterance ones.

    Returns:
      ``[N][<= beam]`` hypotheses per utterance, best (largest ``score``) first.
    """
    config = CtcPrefixBeamSearchConfig() if config is None else config
    if not isinstance(config, CtcPrefixBeamSearchConfig):
        raise TypeError(
            f"config must be a CtcPrefixBeamSearchConfig, got {type(config).__name__}")
    num_frames = validate_log_probs(log_probs, log_probs_lens)
    n, _, vocab = log_probs.shape
    if config.blank_id >= vocab:
        raise ValueError(f"blank_id={config.blank_id} is not below V={vocab}")
    scorer_set = ScorerSet(scorers, vocab)
    if n == 0:
        return []
    with torch.no_grad():
        return _Search(log_probs, num_frames.to(log_probs.device), config, scorer_set).run()


class _Search:
    def __init__(self, log_probs: torch.Tensor, num_frames: torch.Tensor,
                 config: CtcPrefixBeamSearchConfig, scorers: ScorerSet) -> None:
        self.x = log_probs
        self.config, self.scorers = config, scorers
        self.lens_sorted, self.order = torch.sort(num_frames, descending=True, stable=True)
        self.device = log_probs.device

    def run(self) -> list[list[PrefixHypothesis]]:
        n, device = self.order.numel(), self.device
        zeros = torch.zeros(n, dtype=torch.int64, device=device)
        hyps = _Prefixes(
            tokens=torch.zeros(n, 0, dtype=torch.int64, device=device),
            times=torch.zeros(n, 0, dtype=torch.int64, device=device),
            length=zeros, last=zeros - 1, hash=zeros,
            pb=torch.zeros(n, dtype=torch.float64, device=device),
            pnb=torch.full((n,), _NEG_INF, dtype=torch.float64, device=device),
            lm=torch.zeros(n, dtype=torch.float64, device=device),
            states=self.scorers.init(self.order),
        )
        counts = torch.ones(n, dtype=torch.int64, device=device)
        for t, active in enumerate(num_active_per_frame(self.lens_sorted.tolist())):
            num_rows = int(counts[:active].sum())
            new, new_counts = self._frame(hyps.rows(0, num_rows, self.scorers),
                                          counts[:active], t)
            hyps = _Prefixes.cat(new, hyps.rows(num_rows, hyps.length.numel(), self.scorers),
                                 self.scorers)
            counts = torch.cat([new_counts, counts[active:]])
        return self._results(hyps, counts)

    def _frame(self, hyps: _Prefixes, counts: torch.Tensor,
               t: int) -> tuple[_Prefixes, torch.Tensor]:
        """One frame of the first ``len(counts)`` utterances (in length order)."""
        beam, blank = self.config.beam_size, self.config.blank_id
        device = self.device
        n = counts.numel()
        splits = exclusive_cumsum(counts)
        utt_of_row = torch.repeat_interleave(torch.arange(n, device=device), counts)
        frame = self.x[self.order[:n], t].to(torch.float64)  # [n, V]
        k = min(beam, frame.size(1))
        val, tok = frame.topk(k, dim=1)  # [n, K]
        val, tok = val[utt_of_row], tok[utt_of_row]  # [R, K]
        total = torch.logaddexp(hyps.pb, hyps.pnb).unsqueeze(1)
        is_blank = tok == blank
        repeat = tok == hyps.last.unsqueeze(1)
        # slot 0: the same prefix (blank or a repeat); slot 1: the prefix extended by tok
        same_pb = torch.where(is_blank, total + val, torch.full_like(val, _NEG_INF))
        same_pnb = torch.where(repeat & ~is_blank, hyps.pnb.unsqueeze(1) + val,
                               torch.full_like(val, _NEG_INF))
        ext_pnb = torch.where(repeat, hyps.pb.unsqueeze(1), total) + val
        ext_lm = hyps.lm.unsqueeze(1).expand_as(val)
        pending: list = []
        if len(self.scorers):  # only the (row, symbol) candidates, not all [R, V]
            rows = torch.arange(tok.size(0), device=device).repeat_interleave(tok.size(1))
            extra, pending = self.scorers.score_tokens(hyps.states, rows, tok.reshape(-1),
                                                       torch.float64)
            ext_lm = ext_lm + extra.view_as(tok)
        # candidates [R, K, 2] in icefall's order: row, symbol, same before extended
        cand_valid = torch.stack([is_blank | repeat, ~is_blank], dim=2)
        cand_pb = torch.stack([same_pb, torch.full_like(val, _NEG_INF)], dim=2)
        cand_pnb = torch.stack([same_pnb, ext_pnb], dim=2)
        cand_lm = torch.stack([hyps.lm.unsqueeze(1).expand_as(val), ext_lm], dim=2)
        length = hyps.length.unsqueeze(1).expand_as(tok)
        cand_len = torch.stack([length, length + 1], dim=2)
        cand_hash = torch.stack([hyps.hash.unsqueeze(1).expand_as(tok),
                                 extend_hash(hyps.hash.unsqueeze(1), tok, ~is_blank)], dim=2)
        grid = _Grid(counts, splits, utt_of_row, 2 * k)
        pb, pnb, lm, key_hash, key_len, valid = (
            grid.pad(x.reshape(x.size(0), -1), fill) for x, fill in (
                (cand_pb, _NEG_INF), (cand_pnb, _NEG_INF), (cand_lm, 0.0), (cand_hash, 0),
                (cand_len, 0), (cand_valid, False)))
        keep_first, pb, pnb = _merge(pb, pnb, key_hash, key_len, valid)
        score = torch.where(keep_first, torch.logaddexp(pb, pnb) + lm,
                            torch.tensor(_NEG_INF, dtype=torch.float64, device=device))
        top = score.topk(min(beam, score.size(1)), dim=1).indices  # [n, beam]
        chosen = keep_first.gather(1, top) & (score.gather(1, top) > _NEG_INF)
        flat = (top + torch.arange(n, device=device).unsqueeze(1) * score.size(1))[chosen]
        src = grid.source(flat)  # (row, symbol, slot) of every survivor
        return self._survivors(hyps, src, tok, pb.view(-1)[flat], pnb.view(-1)[flat],
                               lm.view(-1)[flat], pending, t), chosen.sum(dim=1)

    def _survivors(self, hyps: _Prefixes, src: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
                   tok: torch.Tensor, pb: torch.Tensor, pnb: torch.Tensor, lm: torch.Tensor,
                   pending: list, t: int) -> _Prefixes:
        row, sym, slot = src
        token = tok[row, sym]
        emit = slot == 1
        length = hyps.length[row] + emit.to(torch.int64)
        tokens, times = hyps.tokens[row], hyps.times[row]
        need = int(length.max()) if length.numel() else 0
        if need > tokens.size(1):
            tokens = grow_columns(tokens, column_capacity(need))
            times = grow_columns(times, tokens.size(1))
        at = emit.nonzero().squeeze(1)
        tokens[at, length[at] - 1] = token[at]
        times[at, length[at] - 1] = t
        states = hyps.states
        if len(self.scorers):
            states = self.scorers.advance(hyps.states, pending, row, token, emit)
        return _Prefixes(tokens, times, length,
                         torch.where(emit, token, hyps.last[row]),
                         extend_hash(hyps.hash[row], token, emit), pb, pnb, lm, states)

    def _results(self, hyps: _Prefixes, counts: torch.Tensor) -> list[list[PrefixHypothesis]]:
        ctc = torch.logaddexp(hyps.pb, hyps.pnb)
        score = ctc + hyps.lm
        if len(self.scorers):
            finals = self.scorers.final(hyps.states)
            score = score + self.scorers.weighted(finals, range(len(finals)), torch.float64)
        splits = exclusive_cumsum(counts).tolist()
        tokens, times, lengths = hyps.tokens.tolist(), hyps.times.tolist(), hyps.length.tolist()
        score_l, ctc_l = score.tolist(), ctc.tolist()
        out: list[list[PrefixHypothesis]] = [[] for _ in range(len(splits) - 1)]
        for i, u in enumerate(self.order.tolist()):
            hs = [PrefixHypothesis(tokens[r][: lengths[r]], times[r][: lengths[r]],
                                   score_l[r], ctc_l[r]) for r in range(splits[i], splits[i + 1])]
            hs.sort(key=lambda h: h.score, reverse=True)
            out[u] = hs
        return out


class _Grid:
    """The candidates of each utterance laid out in a padded ``[n, rows * per_row]`` grid:
    utterance ``u``'s row ``r`` (``counts[u]`` rows from ``splits[u]``) has ``per_row``
    candidates in columns ``local(r) * per_row ...``."""

    def __init__(self, counts: torch.Tensor, splits: torch.Tensor, utt_of_row: torch.Tensor,
                 per_row: int) -> None:
        self.per_row = per_row
        self.max_rows = int(counts.max())
        self.n = counts.numel()
        self.utt_of_row = utt_of_row
        self.local = torch.arange(utt_of_row.numel(), device=counts.device) - splits[utt_of_row]
        self.splits = splits

    def pad(self, x: torch.Tensor, fill) -> torch.Tensor:
        """``x`` ``[R, per_row]`` -> ``[n, max_rows * per_row]``."""
        out = torch.full((self.n, self.max_rows, self.per_row), fill, dtype=x.dtype,
                         device=x.device)
        out[self.utt_of_row, self.local] = x
        return out.view(self.n, -1)

    def source(self, flat: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(row, symbol index, slot) of flat grid positions."""
        width = self.max_rows * self.per_row
        utt, col = flat // width, flat % width
        row = self.splits[utt] + col // self.per_row
        within = col % self.per_row
        return row, within // 2, within % 2


def _merge(pb: torch.Tensor, pnb: torch.Tensor, key_hash: torch.Tensor, key_len: torch.Tensor,
           valid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Group the valid candidates of each utterance (``[n, C]``) with equal prefixes; return
    whether each is the first of its group and the group's log-added ``pb`` / ``pnb``.

    Groups are found by sorting each utterance's candidates by (validity, prefix hash, prefix
    length), stably, so a group's first sorted candidate is its first: memory ``O(n C)``
    rather than the ``[n, C, C]`` of comparing every pair (``C = 2 beam^2``: 3 GB at beam 100).
    """
    n, c = pb.shape
    order = torch.argsort(key_len, dim=1, stable=True)
    for key in (key_hash, ~valid):
        order = order.gather(1, torch.argsort(key.gather(1, order), dim=1, stable=True))
    ok, h, ln = (x.gather(1, order) for x in (valid, key_hash, key_len))
    start = torch.ones_like(ok)
    start[:, 1:] = (h[:, 1:] != h[:, :-1]) | (ln[:, 1:] != ln[:, :-1]) | ~ok[:, 1:]
    group = start.reshape(-1).cumsum(0) - 1  # a row's first candidate starts a group
    num_groups = int(group[-1]) + 1 if group.numel() else 0

    def log_added(x: torch.Tensor) -> torch.Tensor:
        x = x.gather(1, order).reshape(-1)
        top = torch.full((num_groups,), _NEG_INF, dtype=x.dtype, device=x.device)
        with warnings.catch_warnings():  # torch 1.13: "scatter_reduce() is in beta"
            warnings.simplefilter("ignore", UserWarning)
            top = top.scatter_reduce(0, group, x, reduce="amax")
        top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))  # all -inf: 0
        total = add_at(torch.zeros_like(top), group, torch.exp(x - top[group]))
        merged = (torch.log(total) + top)[group].view(n, c)
        out = torch.empty_like(merged).scatter_(1, order, merged)
        return torch.where(valid, out, torch.full_like(out, _NEG_INF))

    is_first = torch.zeros_like(valid).scatter_(1, order, start & ok)
    return is_first, log_added(pb), log_added(pnb)
