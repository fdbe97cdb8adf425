"""Modified beam search (at most one symbol per frame), batched over utterances and hypotheses.

On every frame each hypothesis is extended by every symbol (blank keeps the token sequence, a
token appends to it and consumes the frame), the ``beam`` best (hypothesis, symbol) pairs of each
utterance survive, and survivors with equal token sequences are merged by log-add. This is
icefall's ``modified_beam_search`` with every per-hypothesis Python loop replaced by tensor ops:

- while a chunk is decoded, the hypotheses of all utterances live in ``beam`` slots per
  utterance (flat tensors of ``N * beam`` rows, a bool ``[N, beam]`` mask of the slots that
  hold one; empty slots score ``-inf``), so the per-utterance top-k is one ``topk`` over the
  ``[utt, beam * V]`` view of the scores and the joiner sees one encoder frame per utterance
  against its ``beam`` decoder outputs; between chunks each stream keeps only its hypotheses
  (a :class:`~k2dec.transducer.BeamHyps`, ragged over streams);
- token sequences are compared through (length, 64-bit rolling hash); equal sequences are merged
  with a masked ``logsumexp`` over the ``[utt, beam, beam]`` equality matrix;
- decoder outputs are carried along with hypotheses and recomputed only for hypotheses that
  emitted a token on this frame;
- scorers (:mod:`k2dec.scorers`: LM shallow fusion, LODR, hotwords) keep one state per
  hypothesis in :class:`~k2dec.transducer.BeamHyps` and add their scores to emitted tokens.

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

from k2dec.primitives.batch_search import extend_hash, num_active_per_frame
from k2dec.primitives.ragged import exclusive_cumsum
from k2dec.primitives.sizes import check_finite, check_int_range, check_positive
from k2dec.scorers.base import ScorerSet, WeightedScorer
from k2dec.transducer.beam_hyps import BeamHyps
from k2dec.transducer.common import (
    TransducerHypothesis,
    check_encoder_out,
    check_streams,
    log_probs_from_logits,
)
from k2dec.transducer.network import TransducerNet

logger = logging.getLogger(__name__)

__all__ = [
    "ModifiedBeamSearch",
    "ModifiedBeamSearchConfig",
    "ModifiedBeamSearchStream",
    "modified_beam_search",
]



_SCORE_DTYPES = {"float64": torch.float64, "float32": torch.float32}


@dataclass(frozen=True)
class ModifiedBeamSearchConfig:
    """Options of modified beam search (icefall's defaults).

    Attributes:
      beam_size: number of hypotheses kept per utterance after each frame.
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

    beam_size: int = 4
    temperature: float = 1.0
    blank_penalty: float = 0.0
    length_norm: bool = True
    score_dtype: str = "float64"

    def __post_init__(self) -> None:
        check_int_range(self, "beam_size", 1, 1000)
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
    """Decoding state of one utterance: its hypotheses (see :class:`BeamHyps`).

    Attributes:
      hyps: the current hypotheses, best first after each chunk (merged, at most ``beam``).
      num_frames: encoder frames consumed so far.
    """

    def __init__(self, hyps: BeamHyps) -> None:
        self.hyps = hyps
        self.num_frames = 0

    @property
    def num_hyps(self) -> int:
        return self.hyps.num_rows


class ModifiedBeamSearch:
    """Batched modified beam search over a stateless transducer.

    Args:
      model: object with ``.decoder`` and ``.joiner``.
      config: search options.
      decoder_cache_size: if > 0, decoder outputs are also cached by context across frames and
        streams (see :class:`k2dec.transducer.DecoderCache`); 0 (default) only reuses the
        outputs of hypotheses whose context did not change.
      scorers: weighted :class:`~k2dec.scorers.Scorer` s (neural LM, LODR n-gram, hotwords)
        whose scores every emitted token gets; each hypothesis' score also gets their final
        scores (e.g. the refund of an unfinished hotword) when results are taken. A
        hypothesis' score is the log-sum over its merged alignments of transducer plus scorer
        scores.
      score_before_topk: where the scorers' scores enter: False (icefall's
        ``modified_beam_search_lm_shallow_fusion``, ``_LODR`` and context biasing): the
        ``beam`` best (hypothesis, symbol) pairs are chosen by the transducer score, then the
        chosen tokens get the scorers' scores; True: every candidate gets them before the
        choice (the usual shallow fusion).
    """

    def __init__(
        self,
        model: nn.Module,
        config: ModifiedBeamSearchConfig | None = None,
        decoder_cache_size: int = 0,
        scorers: Sequence[WeightedScorer] = (),
        score_before_topk: bool = False,
    ) -> None:
        if config is None:
            config = ModifiedBeamSearchConfig()
        if not isinstance(config, ModifiedBeamSearchConfig):
            raise TypeError(
                f"config must be a ModifiedBeamSearchConfig, got {type(config).__name__}"
            )
        self.config = config
        self.net = TransducerNet(model, decoder_cache_size)
        self.scorers = ScorerSet(scorers, self.net.vocab_size)
        if not isinstance(score_before_topk, bool):
            raise TypeError(f"score_before_topk must be a bool, got {score_before_topk!r}")
        self.score_before_topk = score_before_topk

    def new_stream(self, device: torch.device | str = "cpu",
                   utt: int = 0) -> ModifiedBeamSearchStream:
        """A fresh stream with one empty hypothesis (log-prob 0, icefall's initial context).

        ``utt``: the stream's index for per-utterance scorers (e.g. a
        :class:`~k2dec.scorers.HotwordScorer` with one hotword list per utterance)."""
        device = torch.device(device)
        hyps = BeamHyps.initial(self.net.initial_context(1, device), self.scorers)
        hyps.states = self.scorers.init(torch.tensor([utt], device=device))
        return ModifiedBeamSearchStream(hyps)

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
        lens = check_encoder_out(encoder_out, encoder_out_lens, self.net)
        check_streams(streams, encoder_out.size(0), ModifiedBeamSearchStream)
        if encoder_out.size(0) == 0 or encoder_out.size(1) == 0 or int(lens.max()) == 0:
            return
        device = encoder_out.device
        beam = self.config.beam_size
        lens_sorted, order = torch.sort(lens, descending=True, stable=True)
        ordered = [streams[i] for i in order.tolist()]
        enc, _, _ = self.net.project_time_major(encoder_out, order, lens_sorted)
        offset = 0  # of frame t's rows in `enc`
        hyps, alive = self._to_slots([s.hyps.to(device) for s in ordered])
        frames = torch.tensor([s.num_frames for s in ordered], dtype=torch.int64,
                              device=device).repeat_interleave(beam)
        # The active utterances are a prefix of `ordered`; the slots of those that ran out of
        # frames are set aside (the last utterances first).
        done: list[tuple[BeamHyps, torch.Tensor]] = []
        active = len(ordered)
        for t, n in enumerate(num_active_per_frame(lens_sorted.tolist())):
            if n < active:
                done.append((hyps.rows(n * beam, active * beam), alive[n:active]))
                hyps, alive, active = hyps.rows(0, n * beam), alive[:n], n
            hyps, alive = self._frame(hyps, alive, enc[offset : offset + n],
                                      frames[: n * beam] + t)
            offset += n
        done.append((hyps, alive))
        hyps = BeamHyps.cat([h for h, _ in reversed(done)])
        alive = torch.cat([a for _, a in reversed(done)])
        splits = exclusive_cumsum(alive.sum(dim=1)).tolist()
        hyps = hyps.select(torch.nonzero(alive.view(-1)).squeeze(1))
        for i, (s, n_frames) in enumerate(zip(ordered, lens_sorted.tolist())):
            s.hyps = hyps.rows(splits[i], splits[i + 1]).trimmed()
            s.num_frames += n_frames

    def _to_slots(self, parts: Sequence[BeamHyps]) -> tuple[BeamHyps, torch.Tensor]:
        """The hypotheses of ``N`` streams (at most ``beam`` each) laid out in ``beam`` slots
        per stream: ``N * beam`` rows (stream after stream, its hypotheses in order, then copies
        of its last one) with decoder outputs, and which slots hold a hypothesis (bool
        ``[N, beam]``; the others have log-prob ``-inf``)."""
        hyps = BeamHyps.cat(parts)
        device = hyps.length.device
        if hyps.decoder_out is None:
            hyps.decoder_out = self.net.decoder_out(hyps.context)
        counts = torch.tensor([p.num_rows for p in parts], dtype=torch.int64, device=device)
        slot = torch.arange(self.config.beam_size, device=device)
        alive = slot < counts.unsqueeze(1)
        index = exclusive_cumsum(counts)[:-1].unsqueeze(1) + torch.minimum(
            slot, counts.unsqueeze(1) - 1)
        hyps = hyps.select(index.view(-1))
        hyps.log_prob = hyps.log_prob.masked_fill(~alive.view(-1), float("-inf"))
        return hyps, alive

    def _frame(
        self, hyps: BeamHyps, alive: torch.Tensor, enc_t: torch.Tensor, frame: torch.Tensor
    ) -> tuple[BeamHyps, torch.Tensor]:
        """One frame of ``n`` utterances.

        Args:
          hyps: their hypotheses in ``beam`` slots each (``n * beam`` rows, utterance after
            utterance; see :meth:`_to_slots`).
          alive: bool ``[n, beam]``, the slots that hold a hypothesis (the others have
            log-prob ``-inf``).
          enc_t: float ``[n, J]``, their projected encoder frame.
          frame: int64 ``[n * beam]``, the frame's index in the stream of each row (for
            timestamps).

        Returns:
          The surviving hypotheses in ``beam`` slots per utterance (merged, best first, the
          slots of merged-away candidates empty) and which slots hold one.
        """
        net = self.net
        n, beam = alive.shape
        top_val, src_slot, tok, pending = self._best_pairs(hyps, alive, enc_t)
        valid = alive.gather(1, src_slot)
        src = (src_slot + torch.arange(0, n * beam, beam, device=alive.device).unsqueeze(1)
               ).view(-1)
        if len(self.scorers) and not self.score_before_topk:
            # only the chosen (row, token) pairs: the entries of _scorer_scores' [R, V]
            chosen, pending = self.scorers.score_tokens(hyps.states, src, tok.view(-1),
                                                        torch.float64)
            chosen = chosen.masked_fill(tok.view(-1) == net.blank_id, 0.0)
            top_val = top_val + chosen.to(self.config.torch_score_dtype).view(n, beam)

        is_tok = tok != net.blank_id
        new_len = hyps.length.index_select(0, src).view(n, beam) + is_tok
        new_hash = extend_hash(hyps.hash.index_select(0, src).view(n, beam), tok, is_tok)
        keep, merged = _merge_equal(top_val, new_hash, new_len, valid)

        new = BeamHyps(
            tokens=hyps.tokens.index_select(0, src),
            times=hyps.times.index_select(0, src),
            length=new_len.view(-1),
            log_prob=merged.view(-1).masked_fill(~keep, float("-inf")),
            hash=new_hash.view(-1),
            context=hyps.context.index_select(0, src),
            decoder_out=hyps.decoder_out.index_select(0, src),
            scorers=hyps.scorers,
        )
        emit = is_tok.view(-1) & keep
        emit_rows = torch.nonzero(emit).squeeze(1)
        new.append_tokens(emit_rows, tok.view(-1).index_select(0, emit_rows),
                          frame.index_select(0, emit_rows), net)
        if len(self.scorers):
            new.states = self.scorers.advance(hyps.states, pending, src, tok.view(-1), emit)
        return new, keep.view(n, beam)

    def _best_pairs(self, hyps: BeamHyps, alive: torch.Tensor, enc_t: torch.Tensor
                    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, list]:
        """The ``beam`` best (slot, symbol) pairs of each of the ``n`` utterances of
        :meth:`_frame`, best first, by the hypothesis' log-prob plus the symbol's (plus the
        scorers' with ``score_before_topk``); pairs from empty slots (-inf) are chosen only
        when an utterance has fewer candidates. Returns their scores (``[n, beam]``, in the
        config's score dtype), source slots and symbols (int64 ``[n, beam]``) and the
        scorers' ``pending`` (``[]`` unless scored here)."""
        net, cfg = self.net, self.config
        n, beam = alive.shape
        vocab_size = net.vocab_size
        logits = net.grid_logits(enc_t.unsqueeze(1), hyps.decoder_out.view(n, beam, -1))
        log_probs = log_probs_from_logits(logits, net.blank_id, cfg.temperature,
                                          cfg.blank_penalty)
        dtype = cfg.torch_score_dtype
        tot = hyps.log_prob.to(dtype).unsqueeze(1) + log_probs.to(dtype)  # [n * beam, V]
        pending: list = []
        if len(self.scorers) and self.score_before_topk:
            extra, pending = self._scorer_scores(hyps)
            tot = tot + extra.to(dtype)
        top_val, top_idx = tot.view(n, beam * vocab_size).topk(beam, dim=1)
        src_slot = torch.div(top_idx, vocab_size, rounding_mode="floor")
        return top_val, src_slot, top_idx - src_slot * vocab_size, pending

    def _scorer_scores(self, hyps: BeamHyps) -> tuple[torch.Tensor | None, list]:
        """Weighted sum of the scorers' scores of every token after every row, float64
        ``[R, V]`` (0 for blank, which extends no prefix), and their ``pending``."""
        if not len(self.scorers):
            return None, []
        scores, pending = self.scorers.score_full(hyps.states)
        extra = self.scorers.weighted(scores, self.scorers.full, torch.float64)
        extra[:, self.net.blank_id] = 0.0
        return extra, pending

    def hypotheses(
        self, streams: Sequence[ModifiedBeamSearchStream]
    ) -> list[list[TransducerHypothesis]]:
        """All current hypotheses of each stream, best first (by the final-choice rule of the
        config, i.e. length-normalized when ``length_norm``)."""
        check_streams(streams, len(streams), ModifiedBeamSearchStream)
        out = []
        for s in streams:
            lengths = s.hyps.length.tolist()
            scores = s.hyps.log_prob
            if len(self.scorers):
                finals = self.scorers.final(s.hyps.states)
                scores = scores + self.scorers.weighted(finals, range(len(finals)),
                                                        torch.float64)
            scores = scores.tolist()
            tokens = s.hyps.tokens.tolist()
            times = s.hyps.times.tolist()
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
    scorers: Sequence[WeightedScorer] = (),
    score_before_topk: bool = False,
) -> list[TransducerHypothesis]:
    """Modified beam search over a padded batch.

    Args:
      model: stateless transducer (``.decoder``, ``.joiner``).
      encoder_out: float ``[N, T, C]`` encoder output (not projected).
      encoder_out_lens: int ``[N]`` valid frames per utterance.
      config: options; defaults to ``ModifiedBeamSearchConfig()`` (beam 4).
      scorers, score_before_topk: see :class:`ModifiedBeamSearch` (utterance ``i`` is
        ``utt=i`` of per-utterance scorers).

    Returns:
      The best hypothesis of each utterance, in input order.
    """
    search = ModifiedBeamSearch(model, config, scorers=scorers,
                                score_before_topk=score_before_topk)
    check_encoder_out(encoder_out, encoder_out_lens, search.net)
    streams = [search.new_stream(encoder_out.device, i) for i in range(encoder_out.size(0))]
    search.decode_chunk(streams, encoder_out, encoder_out_lens)
    return search.results(streams)


def _merge_equal(
    score: torch.Tensor, key: torch.Tensor, length: torch.Tensor, valid: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Merge the candidates of each utterance (``[n, k]`` each) that have the same token
    sequence (equal ``key`` and ``length``) by log-add.

    Returns:
      ``(keep, merged)``: bool ``[n * k]``, True on the first (best) candidate of each group
      of valid equal ones, and float ``[n, k]``, the log-sum of each candidate's group.
    """
    k = score.size(1)
    same = (
        (key.unsqueeze(2) == key.unsqueeze(1))
        & (length.unsqueeze(2) == length.unsqueeze(1))
        & valid.unsqueeze(2)
        & valid.unsqueeze(1)
    )  # [n, k, k]
    first = same.to(torch.int8).argmax(dim=2)  # first (= best) equal candidate
    is_rep = valid & (first == torch.arange(k, device=score.device))
    merged = torch.logsumexp(
        torch.where(same, score.unsqueeze(1), torch.tensor(float("-inf"), device=score.device)),
        dim=2,
    )
    return is_rep.view(-1), merged
