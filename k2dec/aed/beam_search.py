"""Attention encoder-decoder beam search, vectorized over utterances x beams.

All live hypotheses of all unfinished utterances form one ``[N_active * B]`` batch: one decoder
call per output position (and one LM call with fusion), one top-k over ``B * V`` per utterance,
back-pointers (``src_row``) to reorder prefixes and decoder/LM/CTC states. The first step has one
live hypothesis per utterance, later steps ``B`` slots (slots whose hypothesis ended or that had
no finite candidate stay in the grid with score ``-inf``). Utterances that are done are dropped
from the batch, so they stop costing compute.

Per step ``t = 1, 2, ...`` every live prefix has ``u = t - 1`` tokens after ``sos``. The score of
a candidate token ``c`` after prefix ``g`` is computed in this order:

1. ``a = log_softmax(decoder_log_probs / temperature)``.
2. Token rules (masked tokens get ``-inf``): ``eos`` is masked while ``u < min_len`` and, if
   ``eos_threshold = gamma > 0``, unless ``a[eos] >= log(gamma) + max_{c != eos} a[c]`` (i.e.
   ``p(eos) >= gamma * max_{c != eos} p(c)`` under the temperature-scaled decoder distribution).
   When ``u`` reaches the utterance's maximum length only ``eos`` is allowed (``min_len`` and
   the threshold do not apply then). ``sos`` (when it differs from ``eos``) is always masked, and
   the CTC blank is masked when CTC is used. With ``max_repeats = R``, a token that would
   make the prefix end with a span of ``p <= repeat_span`` tokens repeated ``R + 1`` times in
   a row is masked (``eos`` never is).
3. ``s = (1 - ctc_weight) * a``, plus ``lm_weight * lm`` if ``lm_fusion == "full"``, plus
   ``w_i * score_i`` of every full scorer of ``scorers`` (their ``eos`` column is their final
   score, e.g. an n-gram's ``log p(</s> | prefix)``).
4. CTC (``ctc_weight > 0``): the ``ctc_pre_beam`` best tokens of ``s`` per hypothesis get
   ``+ ctc_weight * (log psi(g + c) - log psi(g))``; all other tokens become ``-inf`` (with
   ``ctc_weight == 1`` there is no attention score to pre-select by: all tokens are scored).
   With ``ctc_always_score_eos`` (the default, as in ESPnet) ``eos`` is scored this way on
   every hypothesis even when it is not among the pre-selected tokens (unless step 2 masked
   it), so ending always competes with the ``ctc_pre_beam`` best continuations. With
   ``ctc_window = W`` each token's first CTC frame must lie within ``W`` frames of the argmax
   of the attention returned with the step that proposed it.
   Partial scorers of ``scorers`` then add ``w_i * score_i`` on the same candidates (the
   ``ctc_pre_beam`` best tokens of ``s``, also without CTC).
5. Pruned LM fusion (``lm_fusion == "pruned"``): the ``beam_size`` best tokens of ``s`` per
   hypothesis get ``+ lm_weight * lm``; all other tokens become ``-inf``.
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
from k2dec.aed.interface import AttentionDecoder, IncrementalLM
from k2dec.aed.scoring import end_detected, final_scores, token_mask
from k2dec.scorers.base import ScorerSet, WeightedScorer
from k2dec.scorers.ctc_prefix import CtcPrefixScorer, CtcPrefixState

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
      ctc_score: CTC log-probability of the tokens (0 without CTC).
      lm_score: sum of LM log-probs of the tokens and eos (0 without an LM).
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
    ctc_log_probs: torch.Tensor | None,
    lm: Any,
) -> None:
    """The inputs of :func:`beam_search`, checked before any decoding."""
    if not isinstance(config, BeamSearchConfig):
        raise TypeError(f"config must be a BeamSearchConfig, got {type(config).__name__}")
    for attr in ("vocab_size", "sos_id", "eos_id", "step", "select_state"):
        if not hasattr(decoder, attr):
            raise TypeError(f"decoder must implement AttentionDecoder; it has no {attr!r}")
    vocab = decoder.vocab_size
    _check_memory(memory, memory_lens)
    for name in ("sos_id", "eos_id"):
        value = getattr(decoder, name)
        if not 0 <= value < vocab:
            raise ValueError(f"decoder.{name} must be in [0, {vocab}), got {value}")
    if config.ctc_weight > 0:
        _check_ctc_log_probs(ctc_log_probs, config, memory, vocab, decoder.eos_id)
    if config.lm_weight > 0:
        if lm is None:
            raise ValueError(f"lm_weight={config.lm_weight} needs an lm, got None")
        if not hasattr(lm, "step") or not hasattr(lm, "select_state"):
            raise TypeError("lm must implement IncrementalLM (step and select_state)")
        if lm.vocab_size != vocab:
            raise ValueError(
                f"lm.vocab_size ({lm.vocab_size}) must equal decoder.vocab_size ({vocab})"
            )


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


def _check_ctc_log_probs(ctc_log_probs: torch.Tensor | None, config: BeamSearchConfig,
                         memory: torch.Tensor, vocab: int, eos_id: int) -> None:
    """The CTC log-probs that ``ctc_weight > 0`` needs, and the CTC blank."""
    n, t = memory.shape[:2]
    if ctc_log_probs is None:
        raise ValueError(f"ctc_weight={config.ctc_weight} needs ctc_log_probs, got None")
    if not isinstance(ctc_log_probs, torch.Tensor) or ctc_log_probs.device != memory.device:
        raise ValueError(
            f"ctc_log_probs must be a tensor on memory's device {memory.device}, got "
            f"{getattr(ctc_log_probs, 'device', type(ctc_log_probs))}"
        )
    if ctc_log_probs.dim() != 3 or tuple(ctc_log_probs.shape) != (n, t, vocab):
        raise ValueError(
            f"ctc_log_probs must have shape [N, T, V] = {(n, t, vocab)}, "
            f"got {tuple(ctc_log_probs.shape)}"
        )
    if not ctc_log_probs.is_floating_point():
        raise TypeError(f"ctc_log_probs must be a float tensor, got {ctc_log_probs.dtype}")
    if bool((torch.isnan(ctc_log_probs) | (ctc_log_probs == float("inf"))).any()):
        raise ValueError("ctc_log_probs contains NaN or +inf (pass log-softmax outputs)")
    if config.ctc_blank_id >= vocab or config.ctc_blank_id == eos_id:
        raise ValueError(
            f"ctc_blank_id must be in [0, {vocab}) and differ from eos_id "
            f"{eos_id}, got {config.ctc_blank_id}"
        )


def beam_search(
    decoder: AttentionDecoder,
    memory: torch.Tensor,
    memory_lens: torch.Tensor,
    config: BeamSearchConfig | None = None,
    ctc_log_probs: torch.Tensor | None = None,
    lm: IncrementalLM | None = None,
    scorers: Sequence[WeightedScorer] = (),
) -> list[list[AedHypothesis]]:
    """Batched attention beam search.

    Args:
      decoder: an :class:`~k2dec.aed.AttentionDecoder` (e.g. :class:`TransformerDecoder`), in
        eval mode.
      memory: float ``[N, T, C]`` encoder output (padded).
      memory_lens: int ``[N]`` valid frames per utterance, in ``[1, T]``.
      config: the search switches; default ``BeamSearchConfig()``.
      ctc_log_probs: float ``[N, T, V]`` CTC log-softmax output (same frames as ``memory``),
        needed when ``config.ctc_weight > 0``.
      lm: an :class:`~k2dec.aed.IncrementalLM`, needed when ``config.lm_weight > 0``.
      scorers: more weighted :class:`~k2dec.scorers.Scorer` s (e.g. a hotword list, a token
        n-gram, a :class:`~k2dec.scorers.NeuralLmScorer`, a :class:`~k2dec.scorers.CtcScorer`);
        utterance ``i`` is ``utt=i`` of per-utterance scorers.

    Returns:
      ``[N][<= nbest]`` hypotheses per utterance, best first (fewer than ``nbest``, possibly
      none, when fewer ended).
    """
    config = BeamSearchConfig() if config is None else config
    _validate(decoder, memory, memory_lens, config, ctc_log_probs, lm)
    for name, module in (("decoder", decoder), ("lm", lm)):
        if isinstance(module, torch.nn.Module) and module.training:
            logger.warning("%s is in training mode (dropout active); call .eval() first", name)
    with torch.no_grad():
        if memory.size(0) == 0:
            return []
        extra = ScorerSet(scorers, decoder.vocab_size, allow_partial=True)
        return _BeamSearch(decoder, memory, memory_lens, config, ctc_log_probs, lm,
                           extra).run()


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
    extra: torch.Tensor  # [E, S]


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
      parts: float ``[M, 3 + S]``, the attention, CTC, LM and each extra scorer's
        (unweighted) parts of the running scores.
      coverage: float ``[M, T]``, attention accumulated per frame (coverage penalty), or None.
      decoder_state, lm_state: the decoder's and the LM's state of the rows (None at first).
      ctc_state: the CTC prefix state of the rows (None without CTC).
      states: the extra scorers' states of the rows.
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
    lm_state: Any = None
    ctc_state: CtcPrefixState | None = None
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
        decoder / LM / CTC states are carried over; None for hypotheses that ended (no states).
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
            new.lm_state = step.select_lm(rows)
            if step.ctc is not None:
                new.ctc_state = CtcPrefixScorer.extend(
                    step.ctc.r, step.ctc.log_psi, rows, step.ctc.position[rows, token], token
                )
            if self.states:
                new.states = step.extra_set.advance(self.states, step.extra_pending, rows,
                                                    token, emit=token != step.eos)
        return new


@dataclass
class _CtcStep:
    """CTC prefix scores of one step's candidates (see :meth:`CtcPrefixScorer.score`).

    Attributes:
      delta: float ``[M, V]``, ``log psi(g + c) - log psi(g)`` (0 where not a candidate).
      log_psi: float ``[M, K]`` and r: float ``[T', 2, M, K]``, the scorer's output.
      position: int64 ``[M, V]``, the candidate index ``k`` of each token.
    """

    delta: torch.Tensor
    log_psi: torch.Tensor
    r: torch.Tensor
    position: torch.Tensor


@dataclass
class _Step:
    """What one step computed for the ``M`` rows of a :class:`_Beam`.

    Attributes:
      scores: float ``[M, V]``, the combined score of every token (``-inf``: no candidate).
      att: float ``[M, V]``, the temperature-scaled decoder log-probs.
      lm: float ``[M, V]``, the LM log-probs (None without an LM).
      ctc: the CTC part (None without CTC).
      attention: float ``[M, T]``, the step's cross-attention (None if the decoder has none).
      select_decoder, select_lm: reorder the decoder's / LM's new state by rows.
      extra: float ``[M, V]`` per extra scorer, its unweighted score of every token (0 where
        a partial scorer scored nothing); extra_pending: their ``pending``; extra_set: the
        scorers; eos: the eos id (extends no prefix).
    """

    scores: torch.Tensor
    att: torch.Tensor
    lm: torch.Tensor | None
    ctc: _CtcStep | None
    attention: torch.Tensor | None
    select_decoder: Callable[[torch.Tensor], Any]
    select_lm: Callable[[torch.Tensor], Any]
    extra: list[torch.Tensor]
    extra_pending: list[Any]
    extra_set: ScorerSet
    eos: int

    def token_parts(
        self, rows: torch.Tensor, token: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The combined score ``[K]`` and its attention / CTC / LM / extra scorer parts
        ``[K, 3 + S]`` of the candidates ``(rows[k], token[k])``."""
        att = self.att[rows, token]
        zero = torch.zeros_like(att)
        ctc = zero if self.ctc is None else self.ctc.delta[rows, token]
        lm = zero if self.lm is None else self.lm[rows, token]
        extra = [e[rows, token].to(att.dtype) for e in self.extra]
        return self.scores[rows, token], torch.stack([att, ctc, lm, *extra], dim=1)


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
        ctc_log_probs: torch.Tensor | None,
        lm: IncrementalLM | None,
        extra: ScorerSet,
    ) -> None:
        self.extra = extra
        self.decoder, self.lm, self.config = decoder, (lm if config.lm_weight > 0 else None), config
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
        self.ctc = None
        if config.ctc_weight > 0:
            self.ctc = CtcPrefixScorer(ctc_log_probs, memory_lens, config.ctc_blank_id, self.eos)
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
        return _collect(self.ended.chunks, self.n, self.config.nbest)

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
            parts=torch.zeros(n, 3 + len(self.extra), dtype=dtype, device=device),
            coverage=cov,
            ctc_state=None if self.ctc is None else self.ctc.initial_state(active),
            states=self.extra.init(active),
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

    def score(self, beam: _Beam, u: int) -> _Step:
        """Steps 1-6 of the module docstring for every row of ``beam`` (prefixes of ``u``
        tokens)."""
        config, vocab = self.config, self.vocab
        num_rows = beam.row_utt.numel()
        mem, mem_mask = self._memory_of(beam.row_utt)
        log_probs, att, dec_state = self.decoder.step(beam.ys, mem, mem_mask, beam.decoder_state)
        if log_probs.shape != (num_rows, vocab):
            raise ValueError(
                f"decoder.step returned log_probs of shape {tuple(log_probs.shape)}, "
                f"expected {(num_rows, vocab)}"
            )
        if att is None and (config.coverage_penalty > 0 or (
                self.ctc is not None and config.ctc_window is not None)):
            raise ValueError(
                "coverage_penalty > 0 and ctc_window need a decoder that returns attention"
            )
        if bool(torch.isnan(log_probs).any()):
            raise ValueError(f"decoder.step returned NaN log-probs at output position {u}")
        log_probs = log_probs.to(self.dtype)
        if config.temperature != 1.0:
            log_probs = (log_probs / config.temperature).log_softmax(dim=-1)

        forced = self.max_len.index_select(0, beam.row_utt) == u  # [M]
        mask = token_mask(log_probs, forced, u, self.sos, self.eos, config, beam.ys[:, 1:])
        s = log_probs * (1.0 - config.ctc_weight) if self.ctc is not None else log_probs
        lm_lp, lm_state = self._lm_step(beam, u)
        if lm_lp is not None and config.lm_fusion == "full":
            s = s + config.lm_weight * lm_lp
        extra, pending = self._extra_full(beam)
        if extra:
            s = s + self.extra.weighted(extra, self.extra.full, self.dtype)
        s = s.masked_fill(mask, _NEG_INF)
        ctc = None
        if self.ctc is not None:
            s, ctc = self._ctc_step(beam, s, att, u)
        if self.extra.partial:
            s = self._extra_partial(beam, s, extra, pending)
        if lm_lp is not None and config.lm_fusion == "pruned":
            cand = s.topk(min(config.beam_size, vocab), dim=1).indices
            cand_scores = s.gather(1, cand) + config.lm_weight * lm_lp.gather(1, cand)
            s = torch.full_like(s, _NEG_INF).scatter(1, cand, cand_scores)
        if config.length_bonus != 0.0:
            s = s + config.length_bonus
        lm = self.lm
        return _Step(
            scores=s,
            att=log_probs,
            lm=lm_lp,
            ctc=ctc,
            attention=att,
            select_decoder=lambda rows: self.decoder.select_state(dec_state, rows),
            select_lm=lambda rows: None if lm is None else lm.select_state(lm_state, rows),
            extra=extra,
            extra_pending=pending,
            extra_set=self.extra,
            eos=self.eos,
        )

    def _extra_full(self, beam: _Beam) -> tuple[list[torch.Tensor], list[Any]]:
        """Scores ``[M, V]`` of the full extra scorers, their ``eos`` column set to their final
        scores (zeros for the partial ones, filled by :meth:`_extra_partial`), and every
        scorer's ``pending``."""
        if not len(self.extra):
            return [], []
        full, pending = self.extra.score_full(beam.states)
        out = []
        for i, ws in enumerate(self.extra.scorers):
            if ws.scorer.partial:
                out.append(torch.zeros(beam.row_utt.numel(), self.vocab, dtype=self.dtype,
                                       device=self.device))
                continue
            sc = full[self.extra.full.index(i)].to(self.dtype).clone()
            sc[:, self.eos] = ws.scorer.final_score(beam.states[i]).to(self.dtype)
            out.append(sc)
        return out, pending

    def _extra_partial(self, beam: _Beam, s: torch.Tensor, extra: list[torch.Tensor],
                       pending: list[Any]) -> torch.Tensor:
        """Step 4 for the partial extra scorers: scores on the ``ctc_pre_beam`` best tokens of
        ``s`` (``extra`` and ``pending`` are filled in place); other tokens become ``-inf``."""
        cand = s.topk(min(self.config.pre_beam, self.vocab), dim=1).indices
        total = s.gather(1, cand)
        for i in self.extra.partial:
            ws = self.extra.scorers[i]
            sc, pending[i] = ws.scorer.score(beam.states[i], cand)
            sc = sc.to(self.dtype)
            extra[i] = extra[i].scatter(1, cand, sc)
            total = total + ws.weight * sc
        return torch.full_like(s, _NEG_INF).scatter(1, cand, total)

    def _lm_step(self, beam: _Beam, u: int) -> tuple[torch.Tensor | None, Any]:
        if self.lm is None:
            return None, None
        num_rows = beam.row_utt.numel()
        lm_lp, lm_state = self.lm.step(beam.ys, beam.lm_state)
        if lm_lp.shape != (num_rows, self.vocab) or bool(torch.isnan(lm_lp).any()):
            raise ValueError(
                f"lm.step returned log_probs of shape {tuple(lm_lp.shape)} (expected "
                f"{(num_rows, self.vocab)}) or with NaN at output position {u}"
            )
        return lm_lp.to(self.dtype), lm_state

    def _ctc_step(
        self, beam: _Beam, s: torch.Tensor, att: torch.Tensor | None, u: int
    ) -> tuple[torch.Tensor, _CtcStep]:
        """Step 4: CTC prefix scores on the pre-selected candidates of ``s``."""
        config, vocab, scorer, state = self.config, self.vocab, self.ctc, beam.ctc_state
        num_rows = s.size(0)
        # pure CTC (weight 1) has no attention score to pre-select with: score all tokens
        k = vocab if config.ctc_weight == 1.0 else min(config.pre_beam, vocab)
        cand = s.topk(k, dim=1).indices  # [M, K]
        window = None
        if config.ctc_window is not None:
            peak = att.argmax(dim=1)
            window = (peak - config.ctc_window, peak + config.ctc_window)
        log_psi, r_new = scorer.score(state, beam.row_utt, cand, u, window)
        prev = state.log_psi.to(self.dtype)
        delta = _psi_delta(log_psi.to(self.dtype), prev.unsqueeze(1))
        cand_scores = s.gather(1, cand) + config.ctc_weight * delta
        out = torch.full_like(s, _NEG_INF).scatter(1, cand, cand_scores)
        ctc_delta = torch.zeros_like(s).scatter(1, cand, delta)
        if config.ctc_always_score_eos and k < vocab:
            # eos is a candidate of every row, pre-selected or not (the same numbers as
            # score() gives a pre-selected eos, so rows that have it are unchanged)
            eos_psi = scorer.full_log_prob(state, beam.row_utt).to(self.dtype)
            eos_delta = _psi_delta(eos_psi, prev)
            out[:, self.eos] = s[:, self.eos] + config.ctc_weight * eos_delta
            ctc_delta[:, self.eos] = eos_delta
        position = torch.zeros(num_rows, vocab, dtype=torch.int64, device=self.device).scatter(
            1, cand, torch.arange(k, device=self.device).expand_as(cand).contiguous()
        )
        return out, _CtcStep(delta=ctc_delta, log_psi=log_psi, r=r_new, position=position)

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
        self.ended.add(
            _Ended(
                utt=utt,
                score=final,
                raw=raw,
                tokens=ended.ys[:, 1:-1],
                token_scores=ended.token_scores,
                att=ended.parts[:, 0],
                ctc=ended.parts[:, 1],
                lm=ended.parts[:, 2],
                extra=ended.parts[:, 3:],
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
        new = beam.select(rows, token, step, active, beam_size)
        new.scores = scores
        return new


def _psi_delta(log_psi: torch.Tensor, prev: torch.Tensor) -> torch.Tensor:
    """``log_psi - prev``, ``-inf`` where either is ``-inf``."""
    dead = (log_psi == _NEG_INF) | (prev == _NEG_INF)
    return torch.where(dead, torch.full_like(log_psi, _NEG_INF), log_psi - prev)


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
