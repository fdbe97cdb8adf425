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
from typing import NamedTuple

import torch
from torch import nn

from k2dec.primitives.batch_search import num_active_per_frame
from k2dec.primitives.ragged import exclusive_cumsum
from k2dec.primitives.sizes import check_finite, check_int_range
from k2dec.transducer.common import (
    TransducerHypothesis,
    check_encoder_out,
    check_streams,
    log_probs_from_logits,
)
from k2dec.transducer.network import TransducerNet, decode_by_tables

logger = logging.getLogger(__name__)

__all__ = ["GreedySearch", "GreedySearchConfig", "GreedySearchStream", "greedy_search",
           "greedy_search_logits", "greedy_search_single"]


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
        check_int_range(self, "max_sym_per_frame", 1, 100)
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
      model: object with ``.decoder`` and ``.joiner`` (see :mod:`k2dec.transducer.network`).
      config: search options.
    """

    def __init__(self, model: nn.Module, config: GreedySearchConfig | None = None) -> None:
        if config is None:
            config = GreedySearchConfig()
        if not isinstance(config, GreedySearchConfig):
            raise TypeError(f"config must be a GreedySearchConfig, got {type(config).__name__}")
        self.config = config
        # the decoder as tables (k2dec's, or one laid out as icefall's) and the joiner's
        # linear layers as products with transposed weights: greedy decisions take maxima,
        # which float rounding of the network's outputs changes only at exact ties
        self.net = TransducerNet(model, equivalent_tables=True, equivalent_joiner=True)
        #: decide by the joiner's logits and record each decision's logit instead of its
        #: log-prob (icefall's ``greedy_search_batch``; see :func:`greedy_search_logits`)
        self.logit_decisions = False

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
        lens = check_encoder_out(encoder_out, encoder_out_lens, self.net)
        check_streams(streams, encoder_out.size(0), GreedySearchStream)
        self._decode(streams, encoder_out, lens)

    @torch.inference_mode()
    def _decode(
        self, streams: Sequence[GreedySearchStream], encoder_out: torch.Tensor, lens: torch.Tensor
    ) -> None:
        """:meth:`decode_chunk` on validated inputs (``lens``: int64 on the device).

        Two loops take the same decisions (those of the frame-by-frame reference, on the same
        joiner inputs) and differ only in cost: :meth:`_frame_loop` (one symbol per frame,
        when the joiner work per frame outweighs the per-iteration overhead of a loop step,
        see :func:`_frame_synchronous`) and :meth:`_window_loop` (otherwise, and for
        ``max_sym_per_frame > 1``). Both record each decision's symbol and log-prob; the
        symbols become token lists and the log-probs float64 scores (added one at a time in
        decision order, so the sum does not depend on the loop) once at the end.

        Runs under ``torch.inference_mode`` (no autograd bookkeeping on the loop's many small
        tensors: 5-7% faster than ``torch.no_grad`` on the shipped model); the streams'
        contexts are then inference tensors, only ever read by later calls."""
        n_utt, t_max = encoder_out.size(0), encoder_out.size(1)
        if n_utt == 0 or t_max == 0 or int(lens.max()) == 0:
            return
        device = encoder_out.device
        contexts = torch.stack([s.context.to(device) for s in streams])  # [N, c]
        if self.config.max_sym_per_frame == 1 and _frame_synchronous(
                int(torch.count_nonzero(lens)), self.net, encoder_out):
            chosen, rows, values = self._frame_loop(encoder_out, lens, contexts)
        else:
            chosen, rows, values = self._window_loop(encoder_out, lens, contexts)
        initial = torch.tensor([s.score for s in streams], dtype=torch.float64, device=device)
        score = _scores(initial, rows, values)
        _append_tokens(streams, chosen, lens, self.net.blank_id)
        score_list = score.tolist()
        for i, (s, n_frames) in enumerate(zip(streams, lens.tolist())):
            s.context = contexts[i]
            s.score = score_list[i]
            s.num_frames += n_frames

    def _frame_loop(self, encoder_out: torch.Tensor, lens: torch.Tensor, contexts: torch.Tensor
                    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One symbol per frame, frame after frame, as icefall's ``greedy_search_batch``: the
        utterances sorted by length, so that those still active on frame ``t`` are a prefix
        and their frames one slice of the time-major packed encoder output; one joiner call
        per frame, and the decoder only on the rows that emitted. No joiner work is wasted,
        at one loop step per frame.

        Returns :meth:`_window_loop`'s outputs; ``contexts`` (int64 ``[N, c]``) is updated in
        place."""
        net, blank_id = self.net, self.net.blank_id
        device = encoder_out.device
        lens_sorted, order = torch.sort(lens, descending=True, stable=True)
        num_active = num_active_per_frame(lens_sorted.tolist())
        # frame t holds rows 0 .. num_active[t] - 1 of `order` (time-major packing)
        enc, frame, row = net.project_time_major(encoder_out, order, lens_sorted)
        utt = order.index_select(0, row)
        ctx = contexts.index_select(0, order)
        dec = net.decoder_out(ctx)
        # the joiner's 4-D layout, as views: `dec` is updated in place
        enc4, dec4 = enc.unsqueeze(1).unsqueeze(1), dec.unsqueeze(1).unsqueeze(1)
        tokens = torch.empty(frame.numel(), dtype=torch.int64, device=device)
        values = torch.empty(frame.numel(), dtype=torch.float32, device=device)
        start = 0
        for n in num_active:
            end = start + n
            tok = tokens[start:end]
            torch.max(self._scored(net.logits4(enc4[start:end], dec4[:n])), dim=1,
                      out=(values[start:end], tok))
            emitted = torch.nonzero(tok if blank_id == 0 else tok != blank_id).squeeze(1)
            if emitted.numel() > 0:
                _advance(net, ctx, dec, emitted, tok.index_select(0, emitted).unsqueeze(1))
            start = end
        contexts.index_copy_(0, order, ctx)
        chosen = torch.empty_like(tokens)
        chosen[exclusive_cumsum(lens).index_select(0, utt) + frame] = tokens  # utterance-major
        return chosen.unsqueeze(1), utt, values

    def _window_loop(self, encoder_out: torch.Tensor, lens: torch.Tensor,
                     contexts: torch.Tensor
                     ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Each utterance moves through its frames at its own pace. While a row emits blanks
        its decoder output does not change, so one joiner call scores the next ``lookahead``
        frames of every active row with its current decoder output; the row takes the blank
        decisions up to its first non-blank symbol in that window and the symbol, and only the
        rows that emitted get a new context and decoder output: far fewer network calls and
        tensor ops per frame than a frame-by-frame loop, but the joiner work on frames after a
        row's first emission in its window is wasted.

        Returns:
          The symbols chosen on the valid frames packed utterance after utterance (int64
          ``[F, max_sym]``, blank where none), and every decision's utterance (int64 ``[D]``)
          and log-prob (float ``[D]``), in decision order within each utterance; ``contexts``
          (int64 ``[N, c]``) is updated in place."""
        device = encoder_out.device
        net, blank_id = self.net, self.net.blank_id
        max_sym = self.config.max_sym_per_frame
        first_frame, num_frames, enc = self._packed_frames(encoder_out, lens)
        windows: list[_Window] = []
        # State of the rows still decoding, compacted now and then: row id, its context and
        # decoder output, next packed frame, end of its frames, symbols already emitted on the
        # next frame (< max_sym).
        rows, ctx, dec, cur, end, nsym = _first_rows(net, contexts, lens, first_frame)
        n = rows.numel()
        width, window = _window(n, _LOOKAHEAD, device)
        dec_rows = dec.unsqueeze(1)  # [n, 1, J], a view: `dec` is updated in place
        while True:
            limit = end - cur  # frames of the window inside the row
            logits = net.grid_logits(
                enc.index_select(0, (cur.unsqueeze(1) + window).view(-1)).view(n, width, -1),
                dec_rows)
            best, tok = self._scored(logits).max(dim=1)  # [n * width] each
            tok = tok.view(n, width)
            has, first = (tok != blank_id).max(dim=1)  # first emission of each row (0 if none)
            has &= first < limit
            before = torch.where(has, first, width)
            slot = None if max_sym == 1 else torch.where(first == 0, nsym, 0)
            windows.append(_Window(rows, cur, best, limit, before, tok, slot))
            cur, nsym = _next_frames(cur, end, before, has, slot, nsym, max_sym)
            local = torch.nonzero(has).squeeze(1)
            if local.numel() > 0:
                _advance(net, ctx, dec, local,
                         tok.gather(1, first.unsqueeze(1)).index_select(0, local))
            # Finished rows stay (all frames invalid, nothing decided) until a quarter of the
            # rows are finished; then the state is compacted.
            num_left = int(torch.count_nonzero(cur < end))
            if num_left == 0:
                break
            if 4 * num_left <= 3 * n:
                contexts.index_copy_(0, rows, ctx)
                keep = torch.nonzero(cur < end).squeeze(1)
                rows, ctx, dec, cur, end, nsym = (x[keep] for x in (rows, ctx, dec, cur, end,
                                                                    nsym))
                dec_rows = dec.unsqueeze(1)
                n = rows.numel()
                width, window = _window(n, _LOOKAHEAD, device)
        contexts.index_copy_(0, rows, ctx)
        return _collect(windows, first_frame, num_frames, max_sym, blank_id)

    def _scored(self, logits: torch.Tensor) -> torch.Tensor:
        """What a decision takes the maximum of: the log-probs of joiner logits ``[M, V]``
        (blank's logit lowered by the blank penalty first), or with
        :attr:`logit_decisions` the logits so lowered."""
        penalty, blank_id = self.config.blank_penalty, self.net.blank_id
        if not self.logit_decisions:
            return log_probs_from_logits(logits, blank_id, 1.0, penalty)
        if penalty != 0.0:
            logits = logits.clone()
            logits[:, blank_id] -= penalty
        return logits

    def _packed_frames(self, encoder_out: torch.Tensor, lens: torch.Tensor
                       ) -> tuple[torch.Tensor, int, torch.Tensor]:
        """The valid frames of all utterances packed row after row, projected: ``(first_frame,
        F, enc)`` with utterance ``i``'s frames ``first_frame[i] .. first_frame[i + 1] - 1``
        (int64 ``[N + 1]``) of the ``F`` valid frames of ``enc`` (``[F + pad, J]``). A window
        reads up to ``_MAX_WINDOW`` frames past a row's last frame: the padding at the end
        (any frame; those frames are never decided)."""
        n_utt, t_max = encoder_out.size(0), encoder_out.size(1)
        first_frame = exclusive_cumsum(lens)
        packed = torch.nonzero(torch.arange(t_max, device=encoder_out.device)
                               < lens.unsqueeze(1))
        index = torch.cat([packed[:, 0] * t_max + packed[:, 1],
                           packed.new_zeros(max(_LOOKAHEAD, _MAX_WINDOW))])
        flat = encoder_out.reshape(n_utt * t_max, -1)
        return first_frame, packed.size(0), self.net.project_encoder(flat.index_select(0, index))

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
    lens = check_encoder_out(encoder_out, encoder_out_lens, search.net)
    contexts = search.net.initial_context(encoder_out.size(0), encoder_out.device)
    streams = [GreedySearchStream(c) for c in contexts.unbind(0)]
    search._decode(streams, encoder_out, lens)
    return [s.result() for s in streams]


def greedy_search_logits(
    model: nn.Module,
    encoder_out: torch.Tensor,
    encoder_out_lens: torch.Tensor,
    blank_penalty: float = 0.0,
) -> tuple[list[list[int]], list[list[int]], list[list[float]]]:
    """Greedy search of a padded batch, one symbol per frame, deciding as icefall's
    ``greedy_search_batch``: the argmax of the joiner's logits (blank's lowered by
    ``blank_penalty``), no log-softmax. The same loops as :func:`greedy_search` (which
    decides by the log-probs, equal but for ties to the last bits).

    Args:
      model: stateless transducer (``.decoder``, ``.joiner``).
      encoder_out: float ``[N, T, C]`` encoder output (not projected).
      encoder_out_lens: int ``[N]`` valid frames per utterance.
      blank_penalty: subtracted from blank's logit before the argmax.

    Returns:
      ``(tokens, timestamps, logits)``: per utterance in input order, the token ids, the
      frame of each and the joiner logit each was chosen with (Python lists).
    """
    search = GreedySearch(model, GreedySearchConfig(1, float(blank_penalty)))
    search.logit_decisions = True
    net = search.net
    lens = check_encoder_out(encoder_out, encoder_out_lens, net)
    n = encoder_out.size(0)
    if n == 0 or encoder_out.size(1) == 0 or int(lens.max()) == 0:
        return [[] for _ in range(n)], [[] for _ in range(n)], [[] for _ in range(n)]
    contexts = net.initial_context(n, encoder_out.device)
    with torch.inference_mode():
        if _frame_synchronous(int(torch.count_nonzero(lens)), net, encoder_out):
            chosen, rows, values = search._frame_loop(encoder_out, lens, contexts)
        else:
            chosen, rows, values = search._window_loop(encoder_out, lens, contexts)
        # one decision per frame: in decision order within each utterance, utterance-major
        # they are the packed frames of `chosen`
        per_frame = values.index_select(0, torch.sort(rows, stable=True)[1])
        emitted = chosen[:, 0] != net.blank_id
        logits = per_frame[emitted].tolist()
    streams = [GreedySearchStream(c) for c in contexts.unbind(0)]
    _append_tokens(streams, chosen, lens, net.blank_id)
    tokens = [s.tokens for s in streams]
    out, start = [], 0
    for toks in tokens:
        out.append(logits[start : start + len(toks)])
        start += len(toks)
    return tokens, [s.timestamps for s in streams], out


#: frames of the first window :func:`greedy_search_single` joins after a symbol (doubled on
#: every all-blank window up to :data:`SINGLE_WINDOW_MAX`)
SINGLE_WINDOW_MIN = 2
SINGLE_WINDOW_MAX = 32


def greedy_search_single(
    model: nn.Module,
    encoder_out: torch.Tensor,
    config: GreedySearchConfig | None = None,
    max_symbols: int | None = None,
) -> tuple[list[int], list[int]]:
    """Greedy search of one utterance with little per-frame work: the tokens and the frame
    of each.

    The frames after the last symbol share its decoder output, so the joiner runs on a
    window of them at once (:data:`SINGLE_WINDOW_MIN` frames after a symbol, twice as many
    after every window without one, at most :data:`SINGLE_WINDOW_MAX`) and the search goes
    on from the first frame whose best symbol is not blank; a frame that reached
    ``config.max_sym_per_frame`` symbols is left without a blank (icefall's rule). The
    decoder runs once per distinct context of the utterance, as tables where they give its
    outputs (:func:`~k2dec.transducer.network.cached_equivalent_tables`, built once per
    decoder): the joiner's maxima are those of the module's outputs unless two symbols tie
    to the last bits.

    Args:
      model: stateless transducer (``.decoder``, ``.joiner``).
      encoder_out: float ``[1, T, C]`` encoder output (not projected), all frames valid.
      config: options; defaults to ``GreedySearchConfig()``.
      max_symbols: stop after this many symbols (icefall's one-utterance search stops at
        1000); None: no bound.

    Returns:
      (token ids, frame of each token), lists of Python ints.
    """
    config = config or GreedySearchConfig()
    net = TransducerNet(model, equivalent_tables=True, equivalent_joiner=True)
    enc = _single_frames(net, encoder_out)
    ctx = net.initial_context(1, encoder_out.device)
    tables = net.decoder_tables()
    dec = _single_decoder_out(net, ctx, tables)
    history = tuple(ctx[0].tolist())
    decoded = {history: dec}  # projected decoder outputs by context, for this utterance
    limit = max_symbols if max_symbols is not None else -1
    tokens: list[int] = []
    frames: list[int] = []
    t, on_frame, width = 0, 0, SINGLE_WINDOW_MIN
    while t < enc.size(0) and len(tokens) != limit:
        best = _window_best(net, enc[t : t + width], dec, config.blank_penalty)
        k = next((i for i, y in enumerate(best) if y != net.blank_id), -1)
        if k < 0:
            t, on_frame, width = t + len(best), 0, min(2 * width, SINGLE_WINDOW_MAX)
            continue
        t, on_frame = t + k, (0 if k else on_frame) + 1
        tokens.append(best[k])
        frames.append(t)
        history = history[1:] + (best[k],)
        dec = decoded.get(history)
        if dec is None:
            dec = decoded[history] = _single_decoder_out(net, ctx.new_tensor([history]),
                                                         tables)
        width = SINGLE_WINDOW_MIN
        if on_frame >= config.max_sym_per_frame:
            t, on_frame = t + 1, 0
    return tokens, frames


def _single_frames(net: TransducerNet, encoder_out: torch.Tensor) -> torch.Tensor:
    """The projected frames ``[T, J]`` of one utterance ``[1, T, C]`` (checked)."""
    if not isinstance(encoder_out, torch.Tensor) or encoder_out.dim() != 3 or (
            encoder_out.size(0) != 1):
        raise ValueError(f"encoder_out must hold one utterance [1, T, C], got "
                         f"{tuple(getattr(encoder_out, 'shape', ()))}")
    check_encoder_out(encoder_out, torch.tensor([encoder_out.size(1)]), net)
    return net.project_encoder(encoder_out[0])


def _single_decoder_out(net: TransducerNet, ctx: torch.Tensor,
                        tables: torch.Tensor | None) -> torch.Tensor:
    """Projected decoder output ``[1, 1, 1, J]`` of one context ``[1, c]`` (from the
    decoder's tables if given)."""
    if tables is None:
        out = net._decoder_module(ctx)
    else:
        out = decode_by_tables(tables, ctx)
    return net.project_decoder(out).reshape(1, 1, 1, -1)


def _window_best(net: TransducerNet, enc: torch.Tensor, dec: torch.Tensor,
                 blank_penalty: float) -> list[int]:
    """The best symbol of each frame of a window ``enc`` ``[w, J]`` with one decoder output
    ``[1, 1, 1, J]`` (blank's logit lowered by ``blank_penalty``)."""
    logits = net.logits4(enc.unsqueeze(1).unsqueeze(1), dec)
    if blank_penalty != 0.0:
        logits[:, net.blank_id] -= blank_penalty
    return logits.argmax(dim=-1).tolist()


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


#: frames of the look-ahead window (fewer network calls vs joiner work wasted after a row's
#: first emission in its window; 4 was fastest on the shipped model)
_LOOKAHEAD = 4
#: the look-ahead window grows up to this many frames when few rows are left (the joiner
#: call then costs little more for a wider window, and the rows need fewer iterations)
_MAX_WINDOW = 8
#: rows x window frames aimed at per joiner call when widening the window
_WINDOW_ROWS = 64


#: joiner work per frame (active utterances x joiner dimension x vocabulary size) from which
#: the frame-synchronous loop is used (with one symbol per frame): below it the look-ahead
#: windows' fewer loop steps win, above it their wasted joiner work costs more (CPU time,
#: 40 utterances: the shipped model, 40 x 256 x 256, windows 7% faster; icefall's sizes,
#: 40 x 512 x 500, the frame loop 14% faster)
_FRAME_LOOP_WORK = 4_000_000


def _frame_synchronous(num_utts: int, net: TransducerNet, encoder_out: torch.Tensor) -> bool:
    """Whether the frame-synchronous loop is the cheaper one for ``num_utts`` utterances."""
    return num_utts * net.joiner_dim(encoder_out) * net.vocab_size >= _FRAME_LOOP_WORK


class _Window(NamedTuple):
    """What one look-ahead window of the greedy loop decided (``n`` rows, ``w`` frames)."""

    rows: torch.Tensor  # int64 [n], row ids
    start: torch.Tensor  # int64 [n], packed index of the window's first frame
    best: torch.Tensor  # float [n * w], log-prob of the best symbol on each frame
    limit: torch.Tensor  # int64 [n], frames of the window inside the row (<= 0: none)
    before: torch.Tensor  # int64 [n], offset of the first emission (w if none)
    tok: torch.Tensor  # int64 [n, w], best symbol on each frame
    slot: torch.Tensor | None  # int64 [n], symbol slot of the emission (max_sym > 1)


def _window(n: int, k: int, device: torch.device) -> tuple[int, torch.Tensor]:
    """Window width for ``n`` rows (``k``, wider when few rows are left) and its frame
    offsets ``[width]``."""
    width = max(k, min(_MAX_WINDOW, _WINDOW_ROWS // max(1, n)))
    return width, torch.arange(width, device=device)


def _first_rows(net: TransducerNet, contexts: torch.Tensor, lens: torch.Tensor,
                first_frame: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The window loop's state of the utterances with frames: ``(rows, ctx, dec, cur, end,
    nsym)``, their ids, contexts, decoder outputs, first and end packed frames, and symbols
    emitted on the current frame (0)."""
    rows = torch.nonzero(lens > 0).squeeze(1)
    ctx = contexts.index_select(0, rows)
    cur = first_frame.index_select(0, rows)
    return (rows, ctx, net.decoder_out(ctx), cur, first_frame[1:].index_select(0, rows),
            torch.zeros_like(cur))


def _next_frames(cur: torch.Tensor, end: torch.Tensor, before: torch.Tensor, has: torch.Tensor,
                 slot: torch.Tensor | None, nsym: torch.Tensor, max_sym: int
                 ) -> tuple[torch.Tensor, torch.Tensor]:
    """Each row's next packed frame and symbols emitted on it after a window: past the
    ``before`` blank frames, and past the frame of the emitted symbol (rows ``has``) unless
    fewer than ``max_sym`` symbols were emitted on it (``slot``: those before, or ``None``
    when ``max_sym`` is 1)."""
    if max_sym == 1:
        return torch.minimum(cur + before + has, end), nsym
    stay = has & (slot + 1 < max_sym)  # the max_sym-th symbol moves on to the next frame
    return torch.minimum(cur + before + (has & ~stay), end), torch.where(stay, slot + 1, 0)


def _advance(net: TransducerNet, ctx: torch.Tensor, dec: torch.Tensor, rows: torch.Tensor,
             tokens: torch.Tensor) -> None:
    """Rows ``rows`` (int64 ``[m]``) emitted ``tokens`` (int64 ``[m, 1]``): their contexts
    (``ctx``, int64 ``[n, c]``) shift the tokens in and their decoder outputs (``dec``,
    ``[n, J]``) are recomputed, both in place."""
    new_ctx = torch.cat([ctx.index_select(0, rows)[:, 1:], tokens], dim=1)
    ctx.index_copy_(0, rows, new_ctx)
    dec.index_copy_(0, rows, net.decoder_out(new_ctx))


def _collect(windows: list[_Window], first_frame: torch.Tensor, num_frames: int,
             max_sym: int, blank_id: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The symbols chosen on the ``num_frames`` packed frames (int64 ``[num_frames,
    max_sym]``, blank where none; utterance ``i``'s frames start at ``first_frame[i]``), and
    the utterance and log-prob of every decision (the valid frames of each window up to its
    first emission), in decision order within each utterance."""
    device = first_frame.device
    chosen = torch.full((num_frames, max_sym), blank_id, dtype=torch.int64, device=device)
    rows, values = [], []
    i = 0
    while i < len(windows):  # windows of equal width together
        width = windows[i].tok.size(1)
        j = i
        while j < len(windows) and windows[j].tok.size(1) == width:
            j += 1
        group = _Window(*(None if xs[0] is None else torch.cat(xs)
                          for xs in zip(*windows[i:j])))
        i = j
        before = group.before
        offsets = torch.arange(width, device=device)
        taken = (offsets <= before.unsqueeze(1)) & (offsets < group.limit.unsqueeze(1))
        values.append(group.best.view(-1, width)[taken])
        rows.append(group.rows.unsqueeze(1).expand_as(taken)[taken])
        has = torch.nonzero(before < width).squeeze(1)
        at = before.index_select(0, has)
        tok = group.tok.view(-1).index_select(0, has * width + at)
        frame = group.start.index_select(0, has) + at
        slot = 0 if group.slot is None else group.slot.index_select(0, has)
        chosen[frame, slot] = tok
    return chosen, torch.cat(rows), torch.cat(values)


def _scores(initial: torch.Tensor, rows: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """Each utterance's score: ``initial`` (float64 ``[N]``) plus the log-probs ``values`` of
    its decisions (``rows``: the utterance of each, in decision order within an utterance)
    added one at a time in decision order, so the sum does not depend on how the decisions
    were batched."""
    device = initial.device
    row, order = torch.sort(rows, stable=True)
    value = values[order]
    counts = torch.bincount(row, minlength=initial.numel())
    column = torch.arange(row.numel(), device=device) - exclusive_cumsum(counts)[row]
    width = int(counts.max()) if counts.numel() else 0
    table = torch.zeros(initial.numel(), width + 1, dtype=torch.float64, device=device)
    table[:, 0] = initial
    table[row, column + 1] = value.to(torch.float64)
    return table.cumsum(dim=1)[:, -1]  # sequential on CPU; trailing zeros add nothing
