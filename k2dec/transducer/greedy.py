"""Greedy search for stateless transducers, batched over utterances, streaming or offline.

Protocol (the offline :func:`greedy_search` is exactly this loop with a single chunk)::

    search = GreedySearch(model, GreedySearchConfig())
    streams = [search.new_stream() for _ in range(N)]
    for chunk, chunk_lens in chunks:          # chunk: [N, T_chunk, C], chunk_lens: [N]
        search.decode_chunk(streams, chunk, chunk_lens)
        partial = search.results(streams)     # usable at any time
    final = search.results(streams)

Streams may be decoded in different batches and chunk sizes from call to call; each stream only
remembers its own state.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

from k2dec.transducer.common import (
    TransducerHypothesis,
    TransducerNet,
    check_encoder_out,
    check_finite,
    check_streams,
    log_probs_from_logits,
)
from k2dec.utils import exclusive_cumsum

logger = logging.getLogger(__name__)

__all__ = ["GreedySearch", "GreedySearchConfig", "GreedySearchStream", "greedy_search"]


@dataclass(frozen=True)
class GreedySearchConfig:
    """Options of greedy search.

    Attributes:
      max_sym_per_frame: maximum number of non-blank symbols emitted on one frame; after that
        many the search moves to the next frame without a blank (icefall's rule). 1 gives the
        one-symbol-per-frame topology used by the beam searches.
      blank_penalty: subtracted from the blank logit before the argmax and the log-softmax.
    """

    max_sym_per_frame: int = 1
    blank_penalty: float = 0.0

    def __post_init__(self) -> None:
        if not isinstance(self.max_sym_per_frame, int) or self.max_sym_per_frame < 1:
            raise ValueError(
                f"max_sym_per_frame must be an int >= 1, got {self.max_sym_per_frame!r}"
            )
        check_finite("blank_penalty", self.blank_penalty)


class GreedySearchStream:
    """Decoding state of one utterance for :class:`GreedySearch` (create it with
    :meth:`GreedySearch.new_stream`).

    Attributes:
      tokens, timestamps: emitted token ids and their frames so far.
      score: sum of the log-probs of the decisions taken so far.
      num_frames: encoder frames consumed so far.
    """

    def __init__(self, context: torch.Tensor) -> None:
        self.context = context  # int64 [context_size], on the search device
        self.tokens: list[int] = []
        self.timestamps: list[int] = []
        self.score = 0.0
        self.num_frames = 0

    def result(self) -> TransducerHypothesis:
        return TransducerHypothesis(list(self.tokens), list(self.timestamps), float(self.score))


class GreedySearch:
    """Batched greedy search over a stateless transducer.

    Args:
      model: object with ``.decoder`` and ``.joiner`` (see :mod:`k2dec.transducer.model`).
      config: search options.
    """

    def __init__(self, model: nn.Module, config: GreedySearchConfig | None = None) -> None:
        if config is None:
            config = GreedySearchConfig()
        if not isinstance(config, GreedySearchConfig):
            raise TypeError(f"config must be a GreedySearchConfig, got {type(config).__name__}")
        self.config = config
        self.net = TransducerNet(model)
        import os
        self.lookahead = int(os.environ.get("K2DEC_LOOKAHEAD", "4"))

    def new_stream(self, device: torch.device | str = "cpu") -> GreedySearchStream:
        """A fresh stream whose initial context is ``[-1] * (context_size - 1) + [blank]``."""
        return GreedySearchStream(self.net.initial_context(1, torch.device(device))[0])

    def decode_chunk(
        self,
        streams: Sequence[GreedySearchStream],
        encoder_out: torch.Tensor,
        encoder_out_lens: torch.Tensor,
    ) -> None:
        """Advance each stream over its next frames.

        Args:
          streams: ``N`` streams from :meth:`new_stream` (distinct objects).
          encoder_out: float ``[N, T, C]``, padded encoder frames of this chunk (not projected).
          encoder_out_lens: int ``[N]``, the number of valid frames of each stream in this
            chunk, each in ``[0, T]``.
        """
        lens = check_encoder_out(encoder_out, encoder_out_lens)
        check_streams(streams, encoder_out.size(0), GreedySearchStream)
        self._decode(streams, encoder_out, lens)

    def _decode(
        self, streams: Sequence[GreedySearchStream], encoder_out: torch.Tensor, lens: torch.Tensor
    ) -> None:
        """:meth:`decode_chunk` on validated inputs (``lens``: int64 on the device).

        Each utterance moves through its frames at its own pace. While a row emits blanks its
        decoder output does not change, so one joiner call scores the next ``lookahead``
        frames of every active row with its current decoder output; the row takes the blank
        decisions up to its first non-blank symbol in that window and the symbol, and only the
        rows that emitted get a new context and decoder output. The decisions are those of the
        frame-by-frame loop (the same joiner inputs) with far fewer network calls and tensor
        ops per frame; the joiner work on frames after a row's first emission in its window is
        wasted. Symbols are recorded in an int64 buffer ``[T, max_sym, N]`` (blank where
        nothing was emitted) and the decisions' log-probs per window; both become token lists
        and float64 scores (summed in decision order) once at the end."""
        n_utt, t_max = encoder_out.size(0), encoder_out.size(1)
        if n_utt == 0 or t_max == 0 or int(lens.max()) == 0:
            return
        device = encoder_out.device
        net, blank_id = self.net, self.net.blank_id
        max_sym, blank_penalty = self.config.max_sym_per_frame, self.config.blank_penalty
        k = self.lookahead

        # The valid frames of all utterances, packed row after row ([F, J]); a row's frames
        # are first_frame[i] .. first_frame[i + 1] - 1.
        first_frame = exclusive_cumsum(lens)
        packed = torch.nonzero(torch.arange(t_max, device=device) < lens.unsqueeze(1))
        enc = net.project_encoder(encoder_out.reshape(n_utt * t_max, -1).index_select(
            0, packed[:, 0] * t_max + packed[:, 1]))
        ctx = torch.stack([s.context.to(device) for s in streams])  # [N, c]
        dec = net.decoder_out(ctx)  # [N, J]
        chosen = torch.full((enc.size(0), max_sym), blank_id, dtype=torch.int64, device=device)
        window = torch.arange(k, device=device)
        decided: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []

        # State of the rows still decoding (compacted now and then): row id, next packed
        # frame, last packed frame ([n, 1]), symbols already emitted on the next frame.
        rows = torch.nonzero(lens > 0).squeeze(1)
        cur = first_frame.index_select(0, rows)
        last = (first_frame[1:] - 1).index_select(0, rows).unsqueeze(1)
        nsym = torch.zeros_like(cur)
        rows_k = rows.repeat_interleave(k)
        while True:
            n = rows.numel()
            frames = cur.unsqueeze(1) + window  # [n, k]
            valid = frames <= last
            logits = net.logits(enc.index_select(0, torch.minimum(frames, last).view(-1)),
                                dec.index_select(0, rows_k))
            best, tok = log_probs_from_logits(logits, blank_id, 1.0, blank_penalty).max(dim=1)
            best = best.view(n, k)
            emit = (tok.view(n, k) != blank_id) & valid
            has, first = emit.max(dim=1)  # first emission of each row (0 if none)
            # decisions taken: the blanks before the first emission and the emission, else
            # every valid frame of the window
            decided.append(
                (rows, best, valid & (window <= torch.where(has, first, k).unsqueeze(1))))

            local = torch.nonzero(has).squeeze(1)
            nxt = cur + k
            if local.numel() > 0:
                offset = first.index_select(0, local)
                frame = cur.index_select(0, local) + offset
                new_tok = tok.index_select(0, local * k + offset)
                if max_sym == 1:
                    chosen.view(-1).index_copy_(0, frame, new_tok)
                    nxt.index_copy_(0, local, frame + 1)
                else:  # the max_sym-th symbol of a frame moves on to the next frame
                    slot = torch.where(offset == 0, nsym.index_select(0, local), 0)
                    chosen[frame, slot] = new_tok
                    stay = slot + 1 < max_sym
                    nxt.index_copy_(0, local, torch.where(stay, frame, frame + 1))
                    nsym = torch.zeros_like(nsym).index_copy_(
                        0, local, torch.where(stay, slot + 1, 0))
                emitters = rows.index_select(0, local)
                new_ctx = torch.cat([ctx.index_select(0, emitters)[:, 1:],
                                     new_tok.unsqueeze(1)], dim=1)
                ctx.index_copy_(0, emitters, new_ctx)
                dec.index_copy_(0, emitters, net.decoder_out(new_ctx))
            elif max_sym > 1:
                nsym = torch.zeros_like(nsym)
            cur = nxt
            # Finished rows stay (all frames invalid, nothing decided) until a quarter of the
            # rows are finished; then the state is compacted.
            done = cur > last.squeeze(1)
            num_done = int(done.sum())
            if num_done == n:
                break
            if 4 * num_done >= n:
                keep = torch.nonzero(~done).squeeze(1)
                rows, cur, last, nsym = rows[keep], cur[keep], last[keep], nsym[keep]
                rows_k = rows.repeat_interleave(k)

        _append_tokens(streams, chosen, lens, blank_id)
        score = _sum_in_order(
            torch.tensor([s.score for s in streams], dtype=torch.float64, device=device),
            decided)
        score_list = score.tolist()
        for i, (s, n_frames) in enumerate(zip(streams, lens.tolist())):
            s.context = ctx[i]
            s.score = score_list[i]
            s.num_frames += n_frames

    def results(self, streams: Sequence[GreedySearchStream]) -> list[TransducerHypothesis]:
        """Current (partial or final) hypothesis of each stream."""
        check_streams(streams, len(streams), GreedySearchStream)
        return [s.result() for s in streams]


def greedy_search(
    model: nn.Module,
    encoder_out: torch.Tensor,
    encoder_out_lens: torch.Tensor,
    config: GreedySearchConfig | None = None,
) -> list[TransducerHypothesis]:
    """Greedy search over a padded batch.

    Args:
      model: stateless transducer (``.decoder``, ``.joiner``).
      encoder_out: float ``[N, T, C]`` encoder output (not projected).
      encoder_out_lens: int ``[N]`` valid frames per utterance.
      config: options; defaults to ``GreedySearchConfig()``.

    Returns:
      ``N`` hypotheses, in input order.
    """
    search = GreedySearch(model, config)
    lens = check_encoder_out(encoder_out, encoder_out_lens)
    streams = [search.new_stream(encoder_out.device) for _ in range(encoder_out.size(0))]
    search._decode(streams, encoder_out, lens)
    return [s.result() for s in streams]


def _append_tokens(streams: Sequence[GreedySearchStream], chosen: torch.Tensor,
                   lens: torch.Tensor, blank_id: int) -> None:
    """Append the non-blank symbols of ``chosen`` (int64 ``[F, max_sym]``: the symbols chosen
    on the valid frames of all streams, packed stream after stream, ``lens[i]`` frames each)
    to the streams' ``tokens`` and their frames to ``timestamps`` (offset by each stream's
    ``num_frames``), in (frame, slot) order."""
    emitted = chosen != blank_id
    row_of_frame = torch.repeat_interleave(torch.arange(lens.numel(), device=lens.device), lens)
    frame_of = torch.arange(chosen.size(0), device=lens.device) - exclusive_cumsum(lens)[
        row_of_frame]
    at = torch.nonzero(emitted)[:, 0]
    counts = torch.bincount(row_of_frame.index_select(0, at), minlength=lens.numel()).tolist()
    tokens = chosen[emitted].tolist()
    frames = frame_of.index_select(0, at).tolist()
    start = 0
    for s, count in zip(streams, counts):
        if count:
            s.tokens.extend(tokens[start : start + count])
            s.timestamps.extend(s.num_frames + f for f in frames[start : start + count])
            start += count


def _sum_in_order(initial: torch.Tensor,
                  decided: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]) -> torch.Tensor:
    """``initial`` (float64 ``[N]``) plus, for each row, the log-probs of its decisions added
    one at a time in decision order (so the sum does not depend on how the decisions were
    batched).

    ``decided``: per window, (row ids ``[n]``, log-probs float ``[n, k]``, taken bool
    ``[n, k]``), in time order."""
    rows = torch.cat([r for r, _, _ in decided])
    taken = torch.cat([m for _, _, m in decided])
    values = torch.cat([b for _, b, _ in decided])[taken]
    row = rows.unsqueeze(1).expand_as(taken)[taken]
    row, order = torch.sort(row, stable=True)
    counts = torch.bincount(row, minlength=initial.numel())
    column = torch.arange(row.numel(), device=row.device) - exclusive_cumsum(counts)[row]
    width = int(counts.max()) if counts.numel() else 0
    table = torch.zeros(initial.numel(), width + 1, dtype=torch.float64, device=initial.device)
    table[:, 0] = initial
    table[row, column + 1] = values[order].to(torch.float64)
    return table.cumsum(dim=1)[:, -1]  # a sequential sum on CPU; trailing zeros add nothing
