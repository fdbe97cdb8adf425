"""Attention encoder-decoder beam search, vectorized over utterances x beams.

All live hypotheses of all unfinished utterances form one ``[N_active * B]`` batch: one decoder
call per output position (and one call of each scorer), one top-k over ``B * V`` per utterance,
back-pointers (``src_row``) to reorder prefixes and decoder / scorer states. The first step has
one live hypothesis per utterance, later steps ``B`` slots (slots whose hypothesis ended or that
had no finite candidate stay in the grid with score ``-inf``, holding a copy of a live
hypothesis of their utterance, so that every row's states describe a real prefix). Utterances
that are done are dropped from the batch, so they stop costing compute.

Everything added to the decoder's score is a weighted :class:`~k2dec.scorers.Scorer`, one list
as in the other token-level searches (``scorers``, the search's only way to take anything
besides the decoder; ``k2dec.methods.build_scorers`` builds it from a method's ``fusion``
part): the CTC prefix scores of joint CTC/attention decoding are a *partial* scorer
(:class:`~k2dec.scorers.CtcScorer`, scoring pre-selected candidates only), whose weight is
the CTC weight ``ctc_weight`` below, an LM is a scorer whose ``is_lm`` is set
(:class:`~k2dec.scorers.NeuralLmScorer` of a :class:`~k2dec.lm.NeuralLM`), hotword lists and
n-grams are full scorers.

Per step ``t = 1, 2, ...`` every live prefix has ``u = t - 1`` tokens after ``sos``. The score of
a candidate token ``c`` after prefix ``g`` is computed in this order:

1. ``a = log_softmax(decoder_log_probs / temperature)``.
2. Token rules (masked tokens get ``-inf``): ``eos`` is masked while ``u < min_len`` and, if
   ``eos_threshold = gamma > 0``, unless ``a[eos] >= log(gamma) + max_{c != eos} a[c]`` (i.e.
   ``p(eos) >= gamma * max_{c != eos} p(c)`` under the temperature-scaled decoder distribution).
   When ``u`` reaches the utterance's maximum length only ``eos`` is allowed (``min_len`` and
   the threshold do not apply then). ``sos`` (when it differs from ``eos``) is always masked, and
   the CTC blank ``ctc_blank_id`` is masked when there is a CTC scorer. With ``max_repeats = R``, a
   token that would make the prefix end with a span of ``p <= repeat_span`` tokens repeated
   ``R + 1`` times in a row is masked (``eos`` never is).
3. ``s = (1 - ctc_weight) * a`` (the decoder's weight in joint CTC/attention decoding, with
   ``ctc_weight`` the sum of the CTC scorers' weights, at most 1; ``a`` without one), plus
   ``w_i * score_i`` of every full scorer in list order (their ``eos`` column is their final
   score, e.g. an LM's or an n-gram's ``log p(</s> | prefix)``), except the LMs (``is_lm``)
   when ``lm_fusion == "pruned"``.
4. Partial scorers (CTC): the ``ctc_pre_beam`` best tokens of ``s`` per hypothesis (all tokens
   when ``ctc_weight == 1``: there is no attention score to pre-select by) get ``+ w_i *
   score_i`` of each partial scorer, e.g. ``ctc_weight * (log psi(g + c) - log psi(g))``; all
   other tokens become ``-inf``. With ``ctc_always_score_eos`` (the default, as in ESPnet)
   ``eos`` gets ``+ w_i * final_i`` (CTC: ``log P_ctc(g) - log psi(g)``) on every hypothesis
   even when it is not among the pre-selected tokens (unless step 2 masked it), so ending
   always competes with the ``ctc_pre_beam`` best continuations. With ``ctc_window = W`` each
   token's first CTC frame must lie within ``W`` frames of the argmax of the attention
   returned with the step that proposed it.
5. Pruned LM fusion (``lm_fusion == "pruned"``): the ``beam_size`` best tokens of ``s`` per
   hypothesis get ``+ w_i * score_i`` of the LMs; all other tokens become ``-inf``.
6. ``+ length_bonus`` (the additive length penalty, paid per token including ``eos``).

A hypothesis' running score is the sum of its token scores; the ``B`` best (hypothesis, token)
pairs of each utterance survive. Pairs ending in ``eos`` move to the utterance's ended set with
the final score (``|y|`` = number of tokens including ``eos``; ``c_j`` = attention accumulated
on frame ``j`` over all steps, floored at 1e-10)::

    score = raw / |y|                                   if length_norm
    score = raw / ((5 + |y|) / 6) ** gnmt_alpha         if gnmt_alpha > 0
    score += coverage_penalty * sum_{j < T_n} log(min(c_j, 1))

An utterance is done when it has no live hypothesis, after its maximum-length step
(``max(1, floor(max_len_ratio * T_n))`` tokens plus ``eos``), when it has ``max_ended`` ended
hypotheses, or (``end_detect``) when for each of the last ``end_detect_window`` lengths
``u, u-1, ...`` the best ended hypothesis of that length is more than ``end_detect_margin`` below
the best ended hypothesis so far (final scores; a length without ended hypotheses breaks the
condition, as in ESPnet's ``end_detect`` but with no lag: the lengths include this step's).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from k2dec.aed.config import BeamSearchConfig
from k2dec.aed.interface import AttentionDecoder
from k2dec.aed.scoring import end_detected, final_scores, token_mask
from k2dec.scorers.base import ScorerSet, WeightedScorer
from k2dec.scorers.ctc_prefix import CtcScorer

__all__ = ["AedHypothesis", "BeamSearchConfig", "beam_search"]

logger = logging.getLogger(__name__)

_NEG_INF = float("-inf")


@dataclass(frozen=True)
class AedHypothesis:
    """One ended hypothesis.

    Attributes:
      tokens: output token ids, without ``sos``/``eos``.
      score: the ranking score (length normalization/penalty and coverage applied).
      raw_score: sum of ``token_scores``.
      token_scores: ``len(tokens) + 1`` combined per-token scores, the last one for ``eos``.
      attention_score: sum of the (temperature-scaled) decoder log-probs of the tokens and eos.
      ctc_score: CTC log-probability of the tokens: the unweighted scores of the CTC scorers
        (:class:`~k2dec.scorers.CtcScorer`) over the tokens and eos (0 without CTC).
      lm_score: the unweighted scores of the LMs (``is_lm`` scorers) over the tokens and eos
        (0 without an LM).
      scorer_scores: the unweighted sum of each of ``scorers``' scores over the tokens and
        eos, in the order of ``scorers``.
    """

    tokens: list[int]
    score: float
    raw_score: float
    token_scores: list[float]
    attention_score: float
    ctc_score: float
    lm_score: float
    scorer_scores: tuple[float, ...] = ()


def _validate(
    decoder: Any,
    memory: torch.Tensor,
    memory_lens: torch.Tensor,
    config: BeamSearchConfig,
    scorers: Sequence[WeightedScorer],
) -> None:
    """The inputs of :func:`beam_search`, checked before any decoding."""
    if not isinstance(config, BeamSearchConfig):
        raise TypeError(f"config must be a BeamSearchConfig, got {type(config).__name__}")
    for attr in ("vocab_size", "sos_id", "eos_id", "step", "select_state"):
        if not hasattr(decoder, attr):
            raise TypeError(f"decoder must implement AttentionDecoder; it has no {attr!r}")
    vocab = decoder.vocab_size
    _check_memory(memory, memory_lens)
    _check_memory_fits(decoder, memory)
    for name in ("sos_id", "eos_id"):
        value = getattr(decoder, name)
        if not 0 <= value < vocab:
            raise ValueError(f"decoder.{name} must be in [0, {vocab}), got {value}")
    ScorerSet(scorers, vocab, allow_partial=True)  # their types and vocabularies
    ctc = [ws for ws in scorers if isinstance(ws.scorer, CtcScorer)]
    if ctc:
        _check_ctc_scorers(ctc, config, memory, decoder.eos_id)


def _check_memory(memory: torch.Tensor, memory_lens: torch.Tensor) -> None:
    """``memory`` is a finite float ``[N, T, C]`` tensor, ``memory_lens`` ints in ``[1, T]``."""
    if not isinstance(memory, torch.Tensor) or memory.dim() != 3:
        shape = tuple(memory.shape) if isinstance(memory, torch.Tensor) else type(memory)
        raise ValueError(f"memory must be a tensor of shape [N, T, C], got {shape}")
    if not memory.is_floating_point():
        raise TypeError(f"memory must be a float tensor, got {memory.dtype}")
    n, t = memory.shape[:2]
    if not isinstance(memory_lens, torch.Tensor) or memory_lens.shape != (n,):
        got = tuple(memory_lens.shape) if isinstance(memory_lens, torch.Tensor) else memory_lens
        raise ValueError(f"memory_lens must be a tensor of shape ({n},), got {got}")
    if memory_lens.is_floating_point() or memory_lens.dtype == torch.bool:
        raise TypeError(f"memory_lens must be an integer tensor, got {memory_lens.dtype}")
    if n > 0 and (int(memory_lens.min()) < 1 or int(memory_lens.max()) > t):
        raise ValueError(f"memory_lens must be in [1, {t}], got {memory_lens.tolist()}")
    if not bool(torch.isfinite(memory).all()):
        raise ValueError("memory contains NaN or inf")


def _check_memory_fits(decoder: Any, memory: torch.Tensor) -> None:
    """``memory`` has the dtype of a torch decoder's weights and the width ``C`` it takes
    (``memory_proj``'s input, else ``d_model``; where the decoder has them): otherwise the
    first matmul fails with torch's "mat1 and mat2" naming neither."""
    params = decoder.parameters if isinstance(decoder, torch.nn.Module) else None
    first = next((p for p in params() if p.is_floating_point()), None) if params else None
    if first is not None and memory.dtype != first.dtype:
        raise TypeError(f"memory has dtype {memory.dtype}, but the decoder computes in "
                        f"{first.dtype}: pass memory.to({first.dtype})")
    proj = getattr(decoder, "memory_proj", None)
    width = proj.in_features if isinstance(proj, torch.nn.Linear) else getattr(
        decoder, "d_model", None)
    if isinstance(width, int) and memory.size(-1) != width:
        raise ValueError(f"memory must have shape [N, T, C] with C = {width} (what the "
                         f"decoder takes), got shape {tuple(memory.shape)}: is it the output "
                         "of this model's encoder?")


def ctc_weight_of(scorers: Sequence[WeightedScorer]) -> float:
    """The CTC weight of joint CTC/attention decoding: the sum of the weights of the
    :class:`~k2dec.scorers.CtcScorer` s among ``scorers`` (0 without one)."""
    return sum(ws.weight for ws in scorers if isinstance(ws.scorer, CtcScorer))


def _check_ctc_scorers(ctc: Sequence[WeightedScorer], config: BeamSearchConfig,
                       memory: torch.Tensor, eos_id: int) -> None:
    """The CTC scorers of joint decoding read this batch's utterances (and frames), with the
    config's blank and the decoder's eos, and weigh at most 1 together (the decoder's
    weight is 1 minus theirs)."""
    n, t = memory.shape[:2]
    weight = ctc_weight_of(ctc)
    if not 0 < weight <= 1:
        raise ValueError(f"the CtcScorer weights in scorers (the CTC weight of joint "
                         f"CTC/attention decoding) must sum to a value in (0, 1], got {weight}")
    for ws in ctc:
        x = ws.scorer.ctc.x
        if x.device != memory.device:
            raise ValueError(f"a CtcScorer in scorers is on {x.device}, memory on "
                             f"{memory.device}")
        got = (x.size(1), ws.scorer.ctc.blank_id, ws.scorer.ctc.eos_id)
        if got != (n, config.ctc_blank_id, eos_id):
            raise ValueError(f"a CtcScorer in scorers has (utterances, blank_id, eos_id) = "
                             f"{got}; the search has {(n, config.ctc_blank_id, eos_id)} "
                             "(memory's utterances, ctc_blank_id, decoder.eos_id)")


def beam_search(
    decoder: AttentionDecoder,
    memory: torch.Tensor,
    memory_lens: torch.Tensor,
    config: BeamSearchConfig | None = None,
    scorers: Sequence[WeightedScorer] = (),
) -> list[list[AedHypothesis]]:
    """Batched attention beam search.

    Args:
      decoder: an :class:`~k2dec.aed.AttentionDecoder` (e.g. :class:`TransformerDecoder`), in
        eval mode.
      memory: float ``[N, T, C]`` encoder output (padded).
      memory_lens: int ``[N]`` valid frames per utterance, in ``[1, T]``.
      config: the search switches; default ``BeamSearchConfig()``.
      scorers: the weighted :class:`~k2dec.scorers.Scorer` s added to the decoder's score
        (the module docstring says how each kind enters), e.g. joint CTC/attention decoding's
        :class:`~k2dec.scorers.CtcScorer` of the batch's CTC log-probs (weighted by the CTC
        weight, in ``(0, 1]``), a :class:`~k2dec.scorers.NeuralLmScorer` (shallow fusion), a
        hotword list, a token n-gram; utterance ``i`` is ``utt=i`` of per-utterance scorers.
        :func:`k2dec.methods.build_scorers` builds them from a method's ``fusion`` part.

    Returns:
      ``[N][<= num_hyps]`` hypotheses per utterance, best first (fewer than ``num_hyps``, possibly
      none, when fewer ended).
    """
    config = BeamSearchConfig() if config is None else config
    scorers = tuple(scorers)
    _validate(decoder, memory, memory_lens, config, scorers)
    if isinstance(decoder, torch.nn.Module) and decoder.training:
        logger.warning("decoder is in training mode (dropout active); call .eval() first")
    with torch.no_grad():
        if memory.size(0) == 0:
            return []
        everything = ScorerSet(list(scorers), decoder.vocab_size, allow_partial=True)
        return _BeamSearch(decoder, memory, memory_lens, config, everything).run()


@dataclass
class _Ended:
    """The hypotheses that ended at one step (``E`` of them, all with ``length`` tokens)."""

    utt: torch.Tensor
    score: torch.Tensor
    raw: torch.Tensor
    tokens: torch.Tensor  # [E, length - 1]
    token_scores: torch.Tensor  # [E, length]
    att: torch.Tensor
    ctc: torch.Tensor
    lm: torch.Tensor
    extra: torch.Tensor  # [E, S] the caller's scorers


@dataclass
class _Beam:
    """The live hypotheses of the active utterances, utterance-major: ``width`` rows per active
    utterance (``M = len(active) * width``), each with ``u`` tokens after ``sos``. Every field
    has its ``M`` rows in the same order; :meth:`select` is the one place that reorders them.

    Attributes:
      active: int64 ``[A]``, the active utterances.
      width: rows per active utterance (1 on the first step, then ``beam_size``).
      row_utt: int64 ``[M]``, the utterance of each row.
      ys: int64 ``[M, u + 1]``, ``sos`` and the tokens.
      scores: float ``[M]``, the running scores (``-inf`` for dead slots).
      token_scores: float ``[M, u]``, the combined score of each token.
      parts: float ``[M, 1 + S]``, the attention and each scorer's (unweighted) parts of the
        running scores.
      coverage: float ``[M, T]``, attention accumulated per frame (coverage penalty), or None.
      decoder_state: the decoder's state of the rows (None at first).
      states: the scorers' states of the rows.
    """

    active: torch.Tensor
    width: int
    row_utt: torch.Tensor
    ys: torch.Tensor
    scores: torch.Tensor
    token_scores: torch.Tensor
    parts: torch.Tensor
    coverage: torch.Tensor | None
    decoder_state: Any = None
    states: tuple = ()

    def select(
        self,
        rows: torch.Tensor,
        token: torch.Tensor,
        step: _Step,
        active: torch.Tensor | None,
        width: int = 0,
    ) -> _Beam:
        """Rows ``rows`` (int64 ``[M']``, indexes into this beam) extended by ``token`` (int64
        ``[M']``) as scored by ``step``, with their running scores before the step (the caller
        sets the new ones).

        ``active``: the utterances the new beam holds (``width`` rows each, in order), whose
        decoder and scorer states are carried over (every row must extend a prefix: no
        ``eos``, every token scored by the partial scorers); None for hypotheses that ended
        (no states).
        """
        tok_score, parts = step.token_parts(rows, token)
        coverage = None
        if self.coverage is not None:
            coverage = self.coverage.index_select(0, rows)
            att = step.attention.to(coverage.dtype).index_select(0, rows)
            coverage[:, : att.size(1)] += att
        new = _Beam(
            active=active if active is not None else self.active,
            width=width,
            row_utt=self.row_utt.index_select(0, rows),
            ys=torch.cat([self.ys.index_select(0, rows), token.unsqueeze(1)], dim=1),
            scores=self.scores.index_select(0, rows),
            token_scores=torch.cat(
                [self.token_scores.index_select(0, rows), tok_score.unsqueeze(1)], dim=1
            ),
            parts=self.parts.index_select(0, rows) + parts,
            coverage=coverage,
        )
        if active is not None:
            new.decoder_state = step.select_decoder(rows)
            new.states = step.scorers.advance(self.states, step.pending, rows, token)
        return new


@dataclass
class _Step:
    """What one step computed for the ``M`` rows of a :class:`_Beam`.

    Attributes:
      scores: float ``[M, V]``, the combined score of every token (``-inf``: no candidate).
      att: float ``[M, V]``, the temperature-scaled decoder log-probs.
      attention: float ``[M, T]``, the step's cross-attention (None if the decoder has none).
      select_decoder: reorders the decoder's new state by rows.
      parts: float ``[M, V]`` per scorer, its unweighted score of every token (0 where a
        partial scorer scored nothing); pending: their ``pending``; scorers: the scorers.
    """

    scores: torch.Tensor
    att: torch.Tensor
    attention: torch.Tensor | None
    select_decoder: Callable[[torch.Tensor], Any]
    parts: list[torch.Tensor]
    pending: list[Any]
    scorers: ScorerSet

    def token_parts(
        self, rows: torch.Tensor, token: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The combined score ``[K]`` and its attention and scorer parts ``[K, 1 + S]`` of the
        candidates ``(rows[k], token[k])``."""
        att = self.att[rows, token]
        parts = [p[rows, token].to(att.dtype) for p in self.parts]
        return self.scores[rows, token], torch.stack([att, *parts], dim=1)


class _EndedSet:
    """The hypotheses that ended so far, and what end detection needs to know about them."""

    def __init__(self, n: int, max_len: int, dtype: torch.dtype, device: torch.device) -> None:
        self.chunks: list[_Ended] = []
        self.count = torch.zeros(n, dtype=torch.int64, device=device)
        self.best = torch.full((n,), _NEG_INF, dtype=dtype, device=device)
        self.best_by_len = torch.full((n, max_len + 1), _NEG_INF, dtype=dtype, device=device)

    def add(self, ended: _Ended, u: int) -> None:
        """Record hypotheses that ended at step ``u`` (with ``u + 1`` tokens including eos)."""
        n, e = self.count.numel(), ended.utt.numel()
        self.chunks.append(ended)
        self.count.index_add_(0, ended.utt, torch.ones_like(ended.utt))
        per_utt = ended.score.new_full((n, e), _NEG_INF)
        per_utt[ended.utt, torch.arange(e, device=ended.utt.device)] = ended.score
        self.best_by_len[:, u] = per_utt.max(dim=1).values
        self.best = torch.maximum(self.best, self.best_by_len[:, u])




class _BeamSearch:
    """One batched attention beam search (see the module docstring): fixed inputs, the
    per-step scoring, the top-``B`` choice and the end conditions."""

    def __init__(
        self,
        decoder: AttentionDecoder,
        memory: torch.Tensor,
        memory_lens: torch.Tensor,
        config: BeamSearchConfig,
        scorers: ScorerSet,
    ) -> None:
        self.decoder, self.config, self.scorers = decoder, config, scorers
        self.memory = memory
        self.device = memory.device
        self.dtype = memory.dtype
        self.n, self.num_frames = memory.shape[:2]
        self.vocab, self.sos, self.eos = decoder.vocab_size, decoder.sos_id, decoder.eos_id
        self.memory_lens = memory_lens.to(device=self.device, dtype=torch.int64)
        self.max_len = (
            (self.memory_lens.double() * config.max_len_ratio).floor().long().clamp(min=1)
        )
        frames = torch.arange(self.num_frames, device=self.device)
        self.pad_mask = frames.unsqueeze(0) >= self.memory_lens.unsqueeze(1)
        kinds = [ws.scorer for ws in scorers.scorers]
        self.ctc_weight = ctc_weight_of(scorers.scorers)
        self.ctc_parts = [1 + i for i, s in enumerate(kinds) if isinstance(s, CtcScorer)]
        lms = tuple(i for i, s in enumerate(kinds) if s.is_lm)
        self.lm_parts = [1 + i for i in lms]
        self.pruned = lms if config.lm_fusion == "pruned" else ()
        self.summed = tuple(i for i in scorers.full if i not in self.pruned)
        self.ended = _EndedSet(self.n, int(self.max_len.max()), self.dtype, self.device)
        self._rows_of_memory = torch.arange(self.n, device=self.device)
        self._mem, self._mem_mask = memory, self.pad_mask

    def run(self) -> list[list[AedHypothesis]]:
        beam: _Beam | None = self.initial_beam()
        u = -1
        while beam is not None:
            u += 1
            step = self.score(beam, u)
            rows, token, scores = self.top_candidates(beam, step)
            scores = self.take_ended(beam, step, rows, token, scores, u)
            beam = self.next_beam(beam, step, rows, token, scores, u)
        logger.debug("aed beam search: %d utterances, %d steps", self.n, u + 1)
        return _collect(self.ended.chunks, self.n, self.config.num_hyps)

    def initial_beam(self) -> _Beam:
        n, dtype, device = self.n, self.dtype, self.device
        active = torch.arange(n, device=device)
        zeros = torch.zeros(n, dtype=dtype, device=device)
        cov = None
        if self.config.coverage_penalty > 0:
            cov = torch.zeros(n, self.num_frames, dtype=dtype, device=device)
        return _Beam(
            active=active,
            width=1,
            row_utt=active,
            ys=torch.full((n, 1), self.sos, dtype=torch.int64, device=device),
            scores=zeros,
            token_scores=torch.zeros(n, 0, dtype=dtype, device=device),
            parts=torch.zeros(n, 1 + len(self.scorers), dtype=dtype, device=device),
            coverage=cov,
            states=self.scorers.init(active),
        )

    def _memory_of(self, row_utt: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Encoder output and padding mask of each row's utterance (reused while the rows'
        utterances do not change)."""
        same = row_utt.numel() == self._rows_of_memory.numel() and bool(
            (row_utt == self._rows_of_memory).all()
        )
        if not same:
            self._rows_of_memory = row_utt
            self._mem = self.memory.index_select(0, row_utt)
            self._mem_mask = self.pad_mask.index_select(0, row_utt)
        return self._mem, self._mem_mask

    def _decoder_step(self, beam: _Beam, u: int) -> tuple[torch.Tensor, Any, Any]:
        """Step 1 of the module docstring: the decoder's (temperature-scaled) log-probs
        ``[M, V]`` in the search's dtype, its attention and its new state."""
        config = self.config
        num_rows = beam.row_utt.numel()
        mem, mem_mask = self._memory_of(beam.row_utt)
        log_probs, att, dec_state = self.decoder.step(beam.ys, mem, mem_mask, beam.decoder_state)
        if log_probs.shape != (num_rows, self.vocab):
            raise ValueError(
                f"decoder.step returned log_probs of shape {tuple(log_probs.shape)}, "
                f"expected {(num_rows, self.vocab)}"
            )
        if att is None and (config.coverage_penalty > 0 or (
                self.ctc_parts and config.ctc_window is not None)):
            raise ValueError(
                "coverage_penalty > 0 and ctc_window need a decoder that returns attention"
            )
        if bool(torch.isnan(log_probs).any()):
            raise ValueError(f"decoder.step returned NaN log-probs at output position {u}")
        log_probs = log_probs.to(self.dtype)
        if config.temperature != 1.0:
            log_probs = (log_probs / config.temperature).log_softmax(dim=-1)
        return log_probs, att, dec_state

    def score(self, beam: _Beam, u: int) -> _Step:
        """Steps 1-6 of the module docstring for every row of ``beam`` (prefixes of ``u``
        tokens)."""
        config = self.config
        log_probs, att, dec_state = self._decoder_step(beam, u)
        forced = self.max_len.index_select(0, beam.row_utt) == u  # [M]
        mask = token_mask(log_probs, forced, u, self.sos, self.eos, config, beam.ys[:, 1:],
                          ctc=bool(self.ctc_parts))
        s = log_probs * (1.0 - self.ctc_weight) if self.ctc_parts else log_probs
        parts, pending = self._full_scores(beam)
        summed = self.scorers.weighted([parts[i] for i in self.summed], self.summed, self.dtype)
        if summed is not None:
            s = s + summed
        s = s.masked_fill(mask, _NEG_INF)
        if self.scorers.partial:
            s = self._partial_scores(beam, s, att, parts, pending)
        if self.pruned:
            cand = s.topk(min(config.beam_size, self.vocab), dim=1).indices
            lm = self.scorers.weighted([parts[i].gather(1, cand) for i in self.pruned],
                                       self.pruned, self.dtype)
            s = torch.full_like(s, _NEG_INF).scatter(1, cand, s.gather(1, cand) + lm)
        if config.length_bonus != 0.0:
            s = s + config.length_bonus
        return _Step(
            scores=s,
            att=log_probs,
            attention=att,
            select_decoder=lambda rows: self.decoder.select_state(dec_state, rows),
            parts=parts,
            pending=pending,
            scorers=self.scorers,
        )

    def _full_scores(self, beam: _Beam) -> tuple[list[torch.Tensor], list[Any]]:
        """Scores ``[M, V]`` of the full scorers, their ``eos`` column set to their final
        scores (zeros for the partial ones, filled by :meth:`_partial_scores`), and every
        scorer's ``pending``."""
        if not len(self.scorers):
            return [], []
        full, pending = self.scorers.score_full(beam.states)
        out = []
        for i, ws in enumerate(self.scorers.scorers):
            if ws.scorer.partial:
                out.append(torch.zeros(beam.row_utt.numel(), self.vocab, dtype=self.dtype,
                                       device=self.device))
                continue
            sc = full[self.scorers.full.index(i)].to(self.dtype).clone()
            sc[:, self.eos] = ws.scorer.final_score(beam.states[i]).to(self.dtype)
            out.append(sc)
        return out, pending

    def _partial_scores(self, beam: _Beam, s: torch.Tensor, att: torch.Tensor | None,
                        parts: list[torch.Tensor], pending: list[Any]) -> torch.Tensor:
        """Step 4: the partial scorers on the pre-selected candidates of ``s`` (``parts`` and
        ``pending`` are filled in place); other tokens become ``-inf``."""
        config, vocab, eos = self.config, self.vocab, self.eos
        # pure CTC (weight 1) has no attention score to pre-select with: score all tokens
        k = vocab if self.ctc_weight == 1.0 else min(config.pre_beam, vocab)
        cand = s.topk(k, dim=1).indices  # [M, K]
        window = None
        if config.ctc_window is not None and self.ctc_parts:
            peak = att.argmax(dim=1)
            window = (peak - config.ctc_window, peak + config.ctc_window)
        total = s.gather(1, cand)
        # eos is a candidate of every row, pre-selected or not (the same numbers as score()
        # gives a pre-selected eos, so rows that have it are unchanged)
        eos_total = s[:, eos] if config.ctc_always_score_eos and k < vocab else None
        for i in self.scorers.partial:
            scorer, weight = self.scorers.scorers[i].scorer, self.scorers.scorers[i].weight
            if window is not None and isinstance(scorer, CtcScorer):
                sc, pending[i] = scorer.score(beam.states[i], cand, window)
            else:
                sc, pending[i] = scorer.score(beam.states[i], cand)
            sc = sc.to(self.dtype)
            parts[i] = parts[i].scatter(1, cand, sc)
            total = total + weight * sc
            if eos_total is not None:
                final = scorer.final_score(beam.states[i]).to(self.dtype)
                parts[i][:, eos] = final
                eos_total = eos_total + weight * final
        out = torch.full_like(s, _NEG_INF).scatter(1, cand, total)
        if eos_total is not None:
            out[:, eos] = eos_total
        return out

    def top_candidates(
        self, beam: _Beam, step: _Step
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The ``B`` best (row, token) pairs of each active utterance over its ``width * V``
        candidates: int64 rows and tokens and float running scores, ``[A * B]`` each (padded
        with dead slots when there are fewer candidates than ``B``)."""
        beam_size, vocab = self.config.beam_size, self.vocab
        n_act = beam.active.numel()
        total = (beam.scores.unsqueeze(1) + step.scores).view(n_act, beam.width * vocab)
        k = min(beam_size, beam.width * vocab)
        top_scores, top_idx = total.topk(k, dim=1)
        rows = torch.arange(n_act, device=self.device).unsqueeze(1) * beam.width + top_idx // vocab
        token = top_idx % vocab
        if k < beam_size:  # only possible on the first step with V < B: pad with dead slots
            fill = beam_size - k
            rows = torch.cat([rows, rows[:, :1].expand(n_act, fill)], dim=1)
            token = torch.cat([token, token[:, :1].expand(n_act, fill)], dim=1)
            top_scores = torch.cat(
                [top_scores, top_scores.new_full((n_act, fill), _NEG_INF)], dim=1
            )
        return rows.reshape(-1), token.reshape(-1), top_scores.reshape(-1)

    def take_ended(
        self,
        beam: _Beam,
        step: _Step,
        rows: torch.Tensor,
        token: torch.Tensor,
        scores: torch.Tensor,
        u: int,
    ) -> torch.Tensor:
        """Move the chosen candidates that end in ``eos`` to the ended set; return ``scores``
        with those slots dead (``-inf``)."""
        is_eos = (token == self.eos) & (scores > _NEG_INF)
        if not bool(is_eos.any()):
            return scores
        idx = is_eos.nonzero().squeeze(1)
        ended = beam.select(rows.index_select(0, idx), token.index_select(0, idx), step, None)
        utt = ended.row_utt
        raw = scores.index_select(0, idx)
        final = final_scores(
            raw, u + 1, ended.coverage, self.pad_mask.index_select(0, utt), self.config
        )
        parts = ended.parts
        self.ended.add(
            _Ended(
                utt=utt,
                score=final,
                raw=raw,
                tokens=ended.ys[:, 1:-1],
                token_scores=ended.token_scores,
                att=parts[:, 0],
                ctc=_column_sum(parts, self.ctc_parts),
                lm=_column_sum(parts, self.lm_parts),
                extra=parts[:, 1:],
            ),
            u,
        )
        return scores.masked_fill(is_eos, _NEG_INF)

    def next_beam(
        self,
        beam: _Beam,
        step: _Step,
        rows: torch.Tensor,
        token: torch.Tensor,
        scores: torch.Tensor,
        u: int,
    ) -> _Beam | None:
        """The beam of the utterances that go on (None when all are done)."""
        config, beam_size = self.config, self.config.beam_size
        active = beam.active
        done = ~(scores.view(active.numel(), beam_size) > _NEG_INF).any(dim=1)
        done |= self.max_len.index_select(0, active) <= u
        if config.max_ended is not None:
            done |= self.ended.count.index_select(0, active) >= config.max_ended
        if config.end_detect:
            done |= end_detected(self.ended.best_by_len, self.ended.best, active, u, config)
        if bool(done.all()):
            return None
        if bool(done.any()):
            keep = (~done).repeat_interleave(beam_size).nonzero().squeeze(1)
            active = active[~done]
            rows, token, scores = rows[keep], token[keep], scores[keep]
        if len(self.scorers):  # (the decoder computes each row alone: dead rows do no harm)
            rows, token = _fill_dead_slots(rows, token, scores, beam_size)
        new = beam.select(rows, token, step, active, beam_size)
        new.scores = scores
        return new


def _column_sum(parts: torch.Tensor, columns: Sequence[int]) -> torch.Tensor:
    """``parts[:, columns].sum(dim=1)`` (float ``[E]``), without indexing when there are
    none or one."""
    if not columns:
        return parts.new_zeros(parts.size(0))
    if len(columns) == 1:
        return parts[:, columns[0]]
    return parts[:, list(columns)].sum(dim=1)


def _fill_dead_slots(rows: torch.Tensor, token: torch.Tensor, scores: torch.Tensor,
                     beam_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``rows`` and ``token`` (``[A * B]``) with every dead slot (score ``-inf``: an ended
    hypothesis or no candidate) holding the first live slot of its utterance (each has one),
    so that every row extends a real prefix and the scorers' states stay well-defined; the
    slots' scores stay ``-inf``."""
    alive = scores > _NEG_INF
    if bool(alive.all()):
        return rows, token
    slots = torch.arange(alive.numel(), device=alive.device)
    # argmax gives the first maximum: each utterance's first live slot
    first = alive.view(-1, beam_size).to(torch.int8).argmax(dim=1) + slots[::beam_size]
    pick = torch.where(alive, slots, first.repeat_interleave(beam_size))
    return rows.index_select(0, pick), token.index_select(0, pick)


def _collect(ended: list[_Ended], n: int, nbest: int) -> list[list[AedHypothesis]]:
    """Best ``nbest`` ended hypotheses of each utterance, best first."""
    out: list[list[AedHypothesis]] = [[] for _ in range(n)]
    if not ended:
        return out
    utt = torch.cat([e.utt for e in ended])
    score = torch.cat([e.score for e in ended])
    chunk = torch.cat([torch.full_like(e.utt, i) for i, e in enumerate(ended)])
    pos = torch.cat([torch.arange(e.utt.numel(), device=e.utt.device) for e in ended])
    order = score.argsort(descending=True, stable=True)
    order = order[utt[order].argsort(stable=True)]
    utt_sorted = utt[order]
    first = torch.searchsorted(utt_sorted, torch.arange(n, device=utt.device))
    rank = torch.arange(order.numel(), device=utt.device) - first[utt_sorted]
    picked = order[rank < nbest]
    picked_list = list(zip(utt[picked].tolist(), chunk[picked].tolist(), pos[picked].tolist()))
    for u_i, c_i, p_i in picked_list:
        e = ended[c_i]
        out[u_i].append(
            AedHypothesis(
                tokens=e.tokens[p_i].tolist(),
                score=float(e.score[p_i]),
                raw_score=float(e.raw[p_i]),
                token_scores=e.token_scores[p_i].tolist(),
                attention_score=float(e.att[p_i]),
                ctc_score=float(e.ctc[p_i]),
                lm_score=float(e.lm[p_i]),
                scorer_scores=tuple(e.extra[p_i].tolist()),
            )
        )
    return out
