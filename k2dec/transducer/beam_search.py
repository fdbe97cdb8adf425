"""The classic transducer beam search (Graves 2012, Algorithm 1; icefall's ``beam_search``),
batched over utterances, with any number of symbols per frame.

Per utterance and frame, ``A`` holds the hypotheses still to expand on this frame (at first
the ``beam`` survivors of the previous frame) and ``B`` those that consumed it. Each iteration
takes the best hypothesis ``y`` of ``A`` out of it, adds ``y + blank`` to ``B`` and
``y + k`` for each of the ``beam + 1`` most likely symbols ``k`` (blank skipped) back to
``A``; a hypothesis that is already in the set (same tokens) is merged by log-add. The frame
ends when ``B`` has ``beam`` hypotheses better than the best of ``A``, or after
``max_expansions_per_frame`` iterations (icefall has no such bound); the ``beam`` best of
``B`` go on to the next frame. Every utterance runs its own frame; one decoder and one joiner
call per iteration serve all utterances.

Scorers (:mod:`k2dec.scorers`) add ``sum_i w_i * score_i`` to each ``y + k`` (the ``beam + 1``
symbols are chosen by the transducer's log-probs), and their final scores to the result.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

from k2dec.primitives.batch_search import extend_hash
from k2dec.primitives.sizes import check_finite, check_int_range, check_positive
from k2dec.scorers.base import ScorerSet, WeightedScorer
from k2dec.transducer.beam_hyps import BeamHyps
from k2dec.transducer.common import (
    TransducerHypothesis,
    check_encoder_out,
    log_probs_from_logits,
)
from k2dec.transducer.network import TransducerNet

logger = logging.getLogger(__name__)

__all__ = ["TransducerBeamSearchConfig", "beam_search"]

_NEG_INF = float("-inf")


@dataclass(frozen=True)
class TransducerBeamSearchConfig:
    """Options of the classic transducer :func:`beam_search` (icefall's defaults).

    Attributes:
      beam_size: hypotheses kept per utterance after each frame (and ``beam_size + 1`` symbols tried
        per expansion).
      temperature: logits are divided by it before the log-softmax.
      blank_penalty: subtracted from the blank logit before the log-softmax.
      length_norm: pick the final hypothesis by ``log_prob / (context_size + num_tokens)``
        (icefall's ``get_most_probable(length_norm=True)``).
      max_expansions_per_frame: at most this many hypotheses are expanded per utterance and
        frame (bounds time and memory: ``A`` holds at most ``beam_size`` plus ``beam_size`` per
        expansion); the frame then ends with the ``beam_size`` best of ``B``.
    """

    beam_size: int = 4
    temperature: float = 1.0
    blank_penalty: float = 0.0
    length_norm: bool = True
    max_expansions_per_frame: int = 32

    def __post_init__(self) -> None:
        check_int_range(self, "beam_size", 1, 100)
        check_int_range(self, "max_expansions_per_frame", 1, 1000)
        check_positive("temperature", self.temperature)
        check_finite("blank_penalty", self.blank_penalty)
        if not isinstance(self.length_norm, bool):
            raise TypeError(f"length_norm must be a bool, got {self.length_norm!r}")


def beam_search(
    model: nn.Module,
    encoder_out: torch.Tensor,
    encoder_out_lens: torch.Tensor,
    config: TransducerBeamSearchConfig | None = None,
    scorers: Sequence[WeightedScorer] = (),
) -> list[list[TransducerHypothesis]]:
    """Classic transducer beam search over a padded batch (see the module docstring).

    Args:
      model: stateless transducer (``.decoder``, ``.joiner``).
      encoder_out: float ``[N, T, C]`` encoder output (not projected).
      encoder_out_lens: int ``[N]`` valid frames per utterance.
      config: options; default ``TransducerBeamSearchConfig()`` (beam 4).
      scorers: weighted scorers (utterance ``i`` is ``utt=i`` of per-utterance ones).

    Returns:
      ``[N][<= beam]`` the final hypotheses of each utterance, best first by the config's
      final-choice rule; scores include the scorers' final scores.
    """
    config = TransducerBeamSearchConfig() if config is None else config
    if not isinstance(config, TransducerBeamSearchConfig):
        raise TypeError(
            f"config must be a TransducerBeamSearchConfig, got {type(config).__name__}")
    net = TransducerNet(model)
    lens = check_encoder_out(encoder_out, encoder_out_lens, net)
    search = _ClassicSearch(net, config, ScorerSet(scorers, net.vocab_size))
    with torch.no_grad():
        return search.run(encoder_out, lens)


class _ClassicSearch:
    def __init__(self, net: TransducerNet, config: TransducerBeamSearchConfig,
                 scorers: ScorerSet) -> None:
        self.net, self.config, self.scorers = net, config, scorers

    def run(self, encoder_out: torch.Tensor,
            lens: torch.Tensor) -> list[list[TransducerHypothesis]]:
        n, device = encoder_out.size(0), encoder_out.device
        if n == 0:
            return []
        enc = self.net.project_encoder(encoder_out)
        start = BeamHyps.initial(self.net.initial_context(n, device), self.scorers,
                                 self.scorers.init(torch.arange(n, device=device)))
        start.decoder_out = self.net.decoder_out(start.context)
        a = _Sets(start, torch.arange(n, device=device), n)
        b = _Sets.empty_like(start, n)
        frame = torch.zeros(n, dtype=torch.int64, device=device)
        pops = torch.zeros(n, dtype=torch.int64, device=device)
        iterations = 0
        while True:
            act = (frame < lens).nonzero().squeeze(1)
            if act.numel() == 0:
                break
            iterations += 1
            a, b = self._expand(a, b, act, enc, frame)
            pops[act] += 1
            done = self._frame_done(a, b, act, pops)
            if done.numel():
                a, b = _next_frame(a, b, done, self.config.beam_size)
                frame[done] += 1
                pops[done] = 0
        logger.debug("transducer beam_search: %d utterances, %d iterations", n, iterations)
        return self._results(a)

    def _expand(self, a: _Sets, b: _Sets, act: torch.Tensor, enc: torch.Tensor,
                frame: torch.Tensor) -> tuple[_Sets, _Sets]:
        """Take the best hypothesis of ``A`` of every utterance in ``act`` and expand it."""
        net, cfg = self.net, self.config
        best = a.best_rows(act)
        y = a.hyps.select(best)
        a = a.without(best)
        logits = net.logits(enc[act, frame[act]], y.decoder_out)
        log_probs = log_probs_from_logits(logits, net.blank_id, cfg.temperature,
                                          cfg.blank_penalty).to(torch.float64)
        blank = y.select(torch.arange(act.numel(), device=act.device))
        blank.log_prob = y.log_prob + log_probs[:, net.blank_id]
        b = b.merge(blank, act)

        k = min(cfg.beam_size + 1, net.vocab_size)
        top_val, top_tok = log_probs.topk(k, dim=1)
        keep = (top_tok != net.blank_id).view(-1)
        rows = torch.arange(act.numel(), device=act.device).repeat_interleave(k)[keep]
        tok = top_tok.view(-1)[keep]
        score = y.log_prob[rows] + top_val.view(-1)[keep]
        if len(self.scorers):  # only the chosen (row, token) pairs
            extra, pending = self.scorers.score_tokens(y.states, rows, tok, torch.float64)
            score = score + extra
        ext = y.select(rows)
        ext.log_prob = score
        ext.length = ext.length + 1
        ext.hash = extend_hash(ext.hash, tok, torch.ones_like(keep[keep]))
        if len(self.scorers):
            ext.states = self.scorers.advance(y.states, pending, rows, tok)
        ext.append_tokens(torch.arange(rows.numel(), device=rows.device), tok,
                          frame[act][rows], net)
        return a.merge(ext, act[rows]), b

    def _frame_done(self, a: _Sets, b: _Sets, act: torch.Tensor,
                    pops: torch.Tensor) -> torch.Tensor:
        """The utterances of ``act`` whose frame ends now."""
        a_best = a.max_score(act)
        b_scores, b_valid = b.padded_scores(act)
        better = (b_valid & (b_scores > a_best.unsqueeze(1))).sum(dim=1)
        cfg = self.config
        done = (better >= cfg.beam_size) | (pops[act] >= cfg.max_expansions_per_frame)
        return act[done]

    def _results(self, a: _Sets) -> list[list[TransducerHypothesis]]:
        hyps = a.hyps
        scores = hyps.log_prob
        if len(self.scorers):
            finals = self.scorers.final(hyps.states)
            scores = scores + self.scorers.weighted(finals, range(len(finals)), torch.float64)
        utt, lengths = a.utt.tolist(), hyps.length.tolist()
        tokens, times, scores = hyps.tokens.tolist(), hyps.times.tolist(), scores.tolist()
        out: list[list[TransducerHypothesis]] = [[] for _ in range(a.num_utts)]
        for i, u in enumerate(utt):
            out[u].append(TransducerHypothesis(tokens[i][: lengths[i]], times[i][: lengths[i]],
                                               scores[i]))
        c = self.net.context_size
        for hs in out:
            if self.config.length_norm:
                hs.sort(key=lambda h: h.score / (c + len(h.tokens)), reverse=True)
            else:
                hs.sort(key=lambda h: h.score, reverse=True)
        return out


@dataclass
class _Sets:
    """One hypothesis set per utterance: ``hyps`` rows, ``utt`` (int64 ``[R]``) the utterance
    of each row, rows grouped by utterance in increasing order."""

    hyps: BeamHyps
    utt: torch.Tensor
    num_utts: int

    @staticmethod
    def empty_like(hyps: BeamHyps, num_utts: int) -> _Sets:
        none = torch.zeros(0, dtype=torch.int64, device=hyps.length.device)
        return _Sets(hyps.select(none), none, num_utts)

    def _padded(self, utts: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Row index ``[n, W]`` (-1: none) of the rows of each of ``utts``."""
        device = self.utt.device
        counts = torch.bincount(self.utt, minlength=self.num_utts)
        starts = torch.cumsum(counts, 0) - counts
        width = int(counts[utts].max()) if utts.numel() else 0
        pos = torch.arange(max(width, 1), device=device).unsqueeze(0)
        idx = starts[utts].unsqueeze(1) + pos
        return torch.where(pos < counts[utts].unsqueeze(1), idx, torch.full_like(idx, -1))

    def padded_scores(self, utts: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Scores ``[n, W]`` of the rows of each of ``utts`` (``-inf`` padding) and which
        entries are rows."""
        idx = self._padded(utts)
        valid = idx >= 0
        scores = torch.full(idx.shape, _NEG_INF, dtype=torch.float64, device=idx.device)
        scores[valid] = self.hyps.log_prob[idx[valid]]
        return scores, valid

    def max_score(self, utts: torch.Tensor) -> torch.Tensor:
        return self.padded_scores(utts)[0].max(dim=1).values

    def best_rows(self, utts: torch.Tensor) -> torch.Tensor:
        """The best row of each of ``utts`` (each must have one)."""
        idx = self._padded(utts)
        scores, _ = self.padded_scores(utts)
        return idx.gather(1, scores.argmax(dim=1, keepdim=True)).squeeze(1)

    def without(self, rows: torch.Tensor) -> _Sets:
        keep = torch.ones(self.utt.numel(), dtype=torch.bool, device=self.utt.device)
        keep[rows] = False
        idx = keep.nonzero().squeeze(1)
        return _Sets(self.hyps.select(idx), self.utt[idx], self.num_utts)

    def merge(self, new: BeamHyps, new_utt: torch.Tensor) -> _Sets:
        """Add rows ``new`` (of utterances ``new_utt``, no two equal): a row equal to one of
        its utterance's set (same tokens) is log-added to it, the others are appended."""
        hyps = self.hyps
        same = ((new_utt.unsqueeze(1) == self.utt.unsqueeze(0))
                & (new.hash.unsqueeze(1) == hyps.hash.unsqueeze(0))
                & (new.length.unsqueeze(1) == hyps.length.unsqueeze(0)))
        found = same.any(dim=1)
        if bool(found.any()):
            at = same.to(torch.int8).argmax(dim=1)[found]
            hyps.log_prob = hyps.log_prob.index_put(
                (at,), torch.logaddexp(hyps.log_prob[at], new.log_prob[found]))
        fresh = (~found).nonzero().squeeze(1)
        if fresh.numel() == 0:
            return _Sets(hyps, self.utt, self.num_utts)
        utt = torch.cat([self.utt, new_utt[fresh]])
        order = torch.sort(utt, stable=True).indices
        joined = BeamHyps.cat([hyps, new.select(fresh)]) if hyps.num_rows else new.select(fresh)
        return _Sets(joined.select(order), utt[order], self.num_utts)


def _next_frame(a: _Sets, b: _Sets, done: torch.Tensor, beam: int) -> tuple[_Sets, _Sets]:
    """For the utterances ``done``: ``A`` becomes the ``beam`` best of ``B`` (best first) and
    ``B`` empties."""
    idx = b._padded(done)
    scores, valid = b.padded_scores(done)
    k = min(beam, idx.size(1))
    top = scores.topk(k, dim=1).indices
    chosen = idx.gather(1, top)
    chosen = chosen[valid.gather(1, top)]
    is_done = torch.zeros(a.num_utts, dtype=torch.bool, device=done.device)
    is_done[done] = True
    keep_a = (~is_done[a.utt]).nonzero().squeeze(1)
    moved = b.hyps.select(chosen)
    rest = a.hyps.select(keep_a)
    utt = torch.cat([a.utt[keep_a], b.utt[chosen]])
    order = torch.sort(utt, stable=True).indices
    new_a = _Sets(BeamHyps.cat([rest, moved]).select(order), utt[order], a.num_utts)
    keep_b = (~is_done[b.utt]).nonzero().squeeze(1)
    return new_a, _Sets(b.hyps.select(keep_b), b.utt[keep_b], b.num_utts)
