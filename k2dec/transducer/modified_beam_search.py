"""Modified beam search (at most one symbol per frame), batched over utterances and hypotheses.

On every frame each hypothesis is extended by every symbol (blank keeps the token sequence, a
token appends to it and consumes the frame), the ``beam`` best (hypothesis, symbol) pairs of each
utterance survive, and survivors with equal token sequences are merged by log-add. This is
icefall's ``modified_beam_search`` with every per-hypothesis Python loop replaced by tensor ops:

- hypotheses of all utterances live in flat tensors with ``row_splits`` over utterances (the
  ragged layout ``[utt][hyp]``); the per-utterance top-k is one ``topk`` over a padded
  ``[utt, beam * V]`` view;
- token sequences are compared through (length, 64-bit rolling hash); equal sequences are merged
  with a masked ``logsumexp`` over the ``[utt, beam, beam]`` equality matrix;
- decoder outputs are carried along with hypotheses and recomputed only for hypotheses that
  emitted a token on this frame.

The streaming protocol is the same as :class:`k2dec.transducer.GreedySearch`:
``new_stream`` / ``decode_chunk`` / ``results``; :func:`modified_beam_search` is one
``decode_chunk`` over the whole batch.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

from k2dec.transducer._common import (
    TransducerHypothesis,
    TransducerNet,
    check_encoder_out,
    check_finite,
    check_positive,
    log_probs_from_logits,
)
from k2dec.transducer.greedy import _check_streams, _num_active_per_frame

logger = logging.getLogger(__name__)

__all__ = [
    "ModifiedBeamSearch",
    "ModifiedBeamSearchConfig",
    "ModifiedBeamSearchStream",
    "modified_beam_search",
]

# Multiplier of the rolling hash of token sequences (odd, so multiplication is invertible
# modulo 2**64; int64 overflow wraps around).
_HASH_MULT = 0x9E3779B97F4A7C15 - (1 << 64)


_SCORE_DTYPES = {"float64": torch.float64, "float32": torch.float32}


@dataclass(frozen=True)
class ModifiedBeamSearchConfig:
    """Options of modified beam search (icefall's defaults).

    Attributes:
      beam: number of hypotheses kept per utterance after each frame.
      temperature: logits are divided by it before the log-softmax.
      blank_penalty: subtracted from the blank logit before the log-softmax.
      length_norm: pick the final hypothesis by ``log_prob / (context_size + num_tokens)``
        (icefall's ``get_most_probable(length_norm=True)``); the reported score is the
        un-normalized log-prob either way.
      score_dtype: ``"float64"`` (k2dec's default) or ``"float32"`` (icefall's): the dtype
        hypothesis log-probs are accumulated and merged in. k2dec accumulates in float64 so
        that scores of long utterances keep their precision and the beam's ranking does not
        depend on float32 rounding; ``"float32"`` reproduces icefall's ties and rankings.
    """

    beam: int = 4
    temperature: float = 1.0
    blank_penalty: float = 0.0
    length_norm: bool = True
    score_dtype: str = "float64"

    def __post_init__(self) -> None:
        if not isinstance(self.beam, int) or self.beam < 1:
            raise ValueError(f"beam must be an int >= 1, got {self.beam!r}")
        check_positive("temperature", self.temperature)
        check_finite("blank_penalty", self.blank_penalty)
        if not isinstance(self.length_norm, bool):
            raise TypeError(f"length_norm must be a bool, got {self.length_norm!r}")
        if self.score_dtype not in _SCORE_DTYPES:
            raise ValueError(f"score_dtype must be one of {sorted(_SCORE_DTYPES)}, got "
                             f"{self.score_dtype!r}")

    @property
    def torch_score_dtype(self) -> torch.dtype:
        return _SCORE_DTYPES[self.score_dtype]


class ModifiedBeamSearchStream:
    """Decoding state of one utterance: its hypotheses as tensors ``[hyp, ...]``.

    Attributes:
      num_frames: encoder frames consumed so far.
    """

    def __init__(self, state: dict[str, torch.Tensor]) -> None:
        self.state = state
        self.num_frames = 0

    @property
    def num_hyps(self) -> int:
        return int(self.state["log_prob"].numel())


class ModifiedBeamSearch:
    """Batched modified beam search over a stateless transducer.

    Args:
      model: object with ``.decoder`` and ``.joiner``.
      config: search options.
      decoder_cache_size: if > 0, decoder outputs are also cached by context across frames and
        streams (see :class:`k2dec.transducer.DecoderCache`); 0 (default) only reuses the
        outputs of hypotheses whose context did not change.
    """

    def __init__(
        self,
        model: nn.Module,
        config: ModifiedBeamSearchConfig | None = None,
        decoder_cache_size: int = 0,
    ) -> None:
        if config is None:
            config = ModifiedBeamSearchConfig()
        if not isinstance(config, ModifiedBeamSearchConfig):
            raise TypeError(
                f"config must be a ModifiedBeamSearchConfig, got {type(config).__name__}"
            )
        self.config = config
        self.net = TransducerNet(model, decoder_cache_size)

    def new_stream(self, device: torch.device | str = "cpu") -> ModifiedBeamSearchStream:
        """A fresh stream with one empty hypothesis (log-prob 0, icefall's initial context)."""
        device = torch.device(device)
        ctx = self.net.initial_context(1, device)
        state = {
            "tokens": torch.zeros(1, 0, dtype=torch.int64, device=device),
            "times": torch.zeros(1, 0, dtype=torch.int64, device=device),
            "length": torch.zeros(1, dtype=torch.int64, device=device),
            "log_prob": torch.zeros(1, dtype=self.config.torch_score_dtype, device=device),
            "hash": torch.zeros(1, dtype=torch.int64, device=device),
            "context": ctx,
        }
        return ModifiedBeamSearchStream(state)

    def decode_chunk(
        self,
        streams: Sequence[ModifiedBeamSearchStream],
        encoder_out: torch.Tensor,
        encoder_out_lens: torch.Tensor,
    ) -> None:
        """Advance each stream over its next frames.

        Args:
          streams: ``N`` distinct streams from :meth:`new_stream`.
          encoder_out: float ``[N, T, C]`` padded encoder frames of this chunk (not projected).
          encoder_out_lens: int ``[N]`` valid frames of each stream in this chunk.
        """
        lens = check_encoder_out(encoder_out, encoder_out_lens)
        _check_streams(streams, encoder_out.size(0), ModifiedBeamSearchStream)
        if encoder_out.size(0) == 0 or encoder_out.size(1) == 0 or int(lens.max()) == 0:
            return
        device = encoder_out.device
        net, cfg = self.net, self.config
        blank_id, vocab_size, beam = net.blank_id, net.vocab_size, cfg.beam

        lens_sorted, order = torch.sort(lens, descending=True, stable=True)
        ordered = [streams[i] for i in order.tolist()]
        enc = net.project_encoder(encoder_out.index_select(0, order))
        st = _stack_states(ordered, device)
        if "decoder_out" not in st:
            st["decoder_out"] = net.decoder_out(st["context"])
        counts = torch.tensor([s.num_hyps for s in ordered], dtype=torch.int64, device=device)
        offsets = torch.tensor([s.num_frames for s in ordered], dtype=torch.int64, device=device)
        num_active = _num_active_per_frame(lens_sorted.tolist())

        for t, n in enumerate(num_active):
            row_splits = _exclusive_cumsum(counts)
            num_rows = int(row_splits[n])
            utt_counts = counts[:n]
            utt_of_row = torch.repeat_interleave(torch.arange(n, device=device), utt_counts)
            local = torch.arange(num_rows, device=device) - row_splits[utt_of_row]

            logits = net.logits(enc[utt_of_row, t], st["decoder_out"][:num_rows])
            log_probs = log_probs_from_logits(logits, blank_id, cfg.temperature, cfg.blank_penalty)
            score_dtype = cfg.torch_score_dtype
            tot = st["log_prob"][:num_rows].unsqueeze(1) + log_probs.to(score_dtype)

            max_hyps = int(utt_counts.max())
            dense = torch.full(
                (n, max_hyps, vocab_size), float("-inf"), dtype=score_dtype, device=device
            )
            dense[utt_of_row, local] = tot
            k = min(beam, max_hyps * vocab_size)
            top_val, top_idx = dense.view(n, -1).topk(k, dim=1)  # sorted, best first
            src_local = torch.div(top_idx, vocab_size, rounding_mode="floor")
            tok = top_idx % vocab_size
            valid = src_local < utt_counts.unsqueeze(1)
            src_row = (row_splits[:n].unsqueeze(1) + src_local).clamp(max=max(num_rows - 1, 0))

            is_tok = tok != blank_id
            new_len = st["length"][src_row] + is_tok.to(torch.int64)
            old_hash = st["hash"][src_row]
            new_hash = torch.where(is_tok, old_hash * _HASH_MULT + tok + 1, old_hash)

            same = (
                (new_hash.unsqueeze(2) == new_hash.unsqueeze(1))
                & (new_len.unsqueeze(2) == new_len.unsqueeze(1))
                & valid.unsqueeze(2)
                & valid.unsqueeze(1)
            )  # [n, k, k]
            first = same.to(torch.int8).argmax(dim=2)  # first (= best) equal candidate
            is_rep = valid & (first == torch.arange(k, device=device))
            merged = torch.logsumexp(
                torch.where(same, top_val.unsqueeze(1), torch.tensor(float("-inf"), device=device)),
                dim=2,
            )

            keep = is_rep.view(-1)
            sel_row = src_row.view(-1)[keep]
            sel_tok = tok.view(-1)[keep]
            sel_is_tok = is_tok.view(-1)[keep]
            sel_utt = torch.arange(n, device=device).repeat_interleave(k)[keep]
            new_counts = is_rep.sum(dim=1)

            new = _gather_rows(st, sel_row)
            new["log_prob"] = merged.view(-1)[keep]
            new["hash"] = new_hash.view(-1)[keep]
            new["length"] = new_len.view(-1)[keep]
            emit_rows = torch.nonzero(sel_is_tok).squeeze(1)
            if emit_rows.numel() > 0:
                pos = new["length"][emit_rows] - 1
                cap = new["tokens"].size(1)
                need = int(pos.max()) + 1
                if need > cap:
                    new["tokens"] = _grow(new["tokens"], max(need, 2 * cap))
                    new["times"] = _grow(new["times"], max(need, 2 * cap))
                emit_tok = sel_tok[emit_rows]
                new["tokens"][emit_rows, pos] = emit_tok
                new["times"][emit_rows, pos] = offsets[sel_utt[emit_rows]] + t
                ctx = new["context"]
                ctx[emit_rows] = torch.cat([ctx[emit_rows, 1:], emit_tok.unsqueeze(1)], dim=1)
                new["decoder_out"][emit_rows] = net.decoder_out(ctx[emit_rows])
            st = _concat_states(new, st, num_rows)
            counts = torch.cat([new_counts, counts[n:]])

        _unstack_states(ordered, st, counts)
        for s, n_frames in zip(ordered, lens_sorted.tolist()):
            s.num_frames += n_frames

    def hypotheses(
        self, streams: Sequence[ModifiedBeamSearchStream]
    ) -> list[list[TransducerHypothesis]]:
        """All current hypotheses of each stream, best first (by the final-choice rule of the
        config, i.e. length-normalized when ``length_norm``)."""
        _check_streams(streams, len(streams), ModifiedBeamSearchStream)
        out = []
        for s in streams:
            st = s.state
            lengths = st["length"].tolist()
            scores = st["log_prob"].tolist()
            tokens = st["tokens"].tolist()
            times = st["times"].tolist()
            hyps = [
                TransducerHypothesis(tokens[i][:n], times[i][:n], scores[i])
                for i, n in enumerate(lengths)
            ]
            hyps.sort(key=self._rank_key, reverse=True)
            out.append(hyps)
        return out

    def results(self, streams: Sequence[ModifiedBeamSearchStream]) -> list[TransducerHypothesis]:
        """Current (partial or final) best hypothesis of each stream."""
        return [h[0] for h in self.hypotheses(streams)]

    def _rank_key(self, hyp: TransducerHypothesis) -> float:
        if self.config.length_norm:
            return hyp.score / (self.net.context_size + len(hyp.tokens))
        return hyp.score


def modified_beam_search(
    model: nn.Module,
    encoder_out: torch.Tensor,
    encoder_out_lens: torch.Tensor,
    config: ModifiedBeamSearchConfig | None = None,
) -> list[TransducerHypothesis]:
    """Modified beam search over a padded batch.

    Args:
      model: stateless transducer (``.decoder``, ``.joiner``).
      encoder_out: float ``[N, T, C]`` encoder output (not projected).
      encoder_out_lens: int ``[N]`` valid frames per utterance.
      config: options; defaults to ``ModifiedBeamSearchConfig()`` (beam 4).

    Returns:
      The best hypothesis of each utterance, in input order.
    """
    search = ModifiedBeamSearch(model, config)
    check_encoder_out(encoder_out, encoder_out_lens)
    streams = [search.new_stream(encoder_out.device) for _ in range(encoder_out.size(0))]
    search.decode_chunk(streams, encoder_out, encoder_out_lens)
    return search.results(streams)


_ROW_KEYS = ("tokens", "times", "length", "log_prob", "hash", "context", "decoder_out")


def _exclusive_cumsum(counts: torch.Tensor) -> torch.Tensor:
    out = torch.zeros(counts.numel() + 1, dtype=torch.int64, device=counts.device)
    out[1:] = torch.cumsum(counts, dim=0)
    return out


def _grow(x: torch.Tensor, cap: int) -> torch.Tensor:
    out = x.new_zeros((x.size(0), cap))
    out[:, : x.size(1)] = x
    return out


def _stack_states(
    streams: Sequence[ModifiedBeamSearchStream], device: torch.device
) -> dict[str, torch.Tensor]:
    """Concatenate the streams' hypotheses (rows grouped by stream, in order)."""
    cap = max(s.state["tokens"].size(1) for s in streams)
    out: dict[str, torch.Tensor] = {}
    for key in _ROW_KEYS:
        if key == "decoder_out" and not all(key in s.state for s in streams):
            continue
        parts = [s.state[key].to(device) for s in streams]
        if key in ("tokens", "times"):
            parts = [p if p.size(1) == cap else _grow(p, cap) for p in parts]
        out[key] = torch.cat(parts)
    return out


def _gather_rows(st: dict[str, torch.Tensor], rows: torch.Tensor) -> dict[str, torch.Tensor]:
    return {key: st[key].index_select(0, rows) for key in _ROW_KEYS}


def _concat_states(
    new: dict[str, torch.Tensor], old: dict[str, torch.Tensor], start: int
) -> dict[str, torch.Tensor]:
    """New rows of the active utterances followed by the untouched rows ``old[start:]``."""
    out = {}
    for key in _ROW_KEYS:
        a, b = new[key], old[key][start:]
        if key in ("tokens", "times") and a.size(1) != b.size(1):
            cap = max(a.size(1), b.size(1))
            a, b = _grow(a, cap), _grow(b, cap)
        out[key] = torch.cat([a, b]) if b.size(0) > 0 else a
    return out


def _unstack_states(
    streams: Sequence[ModifiedBeamSearchStream], st: dict[str, torch.Tensor], counts: torch.Tensor
) -> None:
    splits = _exclusive_cumsum(counts).tolist()
    for i, s in enumerate(streams):
        a, b = splits[i], splits[i + 1]
        state = {key: st[key][a:b] for key in _ROW_KEYS}
        width = int(state["length"].max()) if b > a else 0
        state["tokens"] = state["tokens"][:, :width]
        state["times"] = state["times"][:, :width]
        s.state = state
