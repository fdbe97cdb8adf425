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

from k2dec.batch_search import num_active_per_frame
from k2dec.transducer.common import (
    TransducerHypothesis,
    TransducerNet,
    check_encoder_out,
    check_finite,
    check_streams,
    log_probs_from_logits,
)

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
        n_utt = encoder_out.size(0)
        if n_utt == 0 or encoder_out.size(1) == 0 or int(lens.max()) == 0:
            return
        device = encoder_out.device
        net, blank_id = self.net, self.net.blank_id
        max_sym, blank_penalty = self.config.max_sym_per_frame, self.config.blank_penalty

        # Longest first, so the utterances still active on frame t are a prefix.
        lens_sorted, order = torch.sort(lens, descending=True, stable=True)
        order_list = order.tolist()
        ordered = [streams[i] for i in order_list]
        enc = net.project_encoder(encoder_out.index_select(0, order))
        ctx = torch.stack([s.context.to(device) for s in ordered])  # [N, c]
        dec = net.decoder_out(ctx)  # [N, J]
        score = torch.tensor([s.score for s in ordered], dtype=torch.float64, device=device)
        num_active = num_active_per_frame(lens_sorted.tolist())

        rows: list[torch.Tensor] = []
        toks: list[torch.Tensor] = []
        frames: list[torch.Tensor] = []
        for t, n in enumerate(num_active):
            active = torch.arange(n, device=device)
            enc_t = enc[:n, t]
            for _ in range(max_sym):
                logits = net.logits(enc_t if active.numel() == n else enc[active, t], dec[active])
                log_probs = log_probs_from_logits(logits, blank_id, 1.0, blank_penalty)
                best, tok = log_probs.max(dim=1)
                score.index_add_(0, active, best.to(torch.float64))
                emit = tok != blank_id
                emitted = active[emit]
                if emitted.numel() == 0:
                    break
                new_tok = tok[emit]
                rows.append(emitted)
                toks.append(new_tok)
                frames.append(torch.full_like(emitted, t))
                ctx[emitted] = torch.cat([ctx[emitted, 1:], new_tok.unsqueeze(1)], dim=1)
                dec[emitted] = net.decoder_out(ctx[emitted])
                active = emitted

        _append_tokens(ordered, rows, toks, frames)
        score_list = score.tolist()
        for i, s in enumerate(ordered):
            s.context = ctx[i]
            s.score = score_list[i]
            s.num_frames += int(lens_sorted[i])

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
    check_encoder_out(encoder_out, encoder_out_lens)
    streams = [search.new_stream(encoder_out.device) for _ in range(encoder_out.size(0))]
    search.decode_chunk(streams, encoder_out, encoder_out_lens)
    return search.results(streams)


def _append_tokens(
    ordered: Sequence,
    rows: list[torch.Tensor],
    toks: list[torch.Tensor],
    frames: list[torch.Tensor],
) -> None:
    """Append emitted (row, token, frame) triples, recorded in time order, to the streams'
    ``tokens``/``timestamps`` lists (frames are offset by each stream's ``num_frames``)."""
    if not rows:
        return
    row = torch.cat(rows)
    order = torch.sort(row, stable=True)[1]
    row_l = row[order].tolist()
    tok_l = torch.cat(toks)[order].tolist()
    frame_l = torch.cat(frames)[order].tolist()
    for r, k, f in zip(row_l, tok_l, frame_l):
        s = ordered[r]
        s.tokens.append(k)
        s.timestamps.append(s.num_frames + f)
