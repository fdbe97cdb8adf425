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
   the CTC blank is masked when CTC is used.
3. ``s = (1 - ctc_weight) * a``, plus ``lm_weight * lm`` if ``lm_fusion == "full"``.
4. CTC (``ctc_weight > 0``): the ``ctc_pre_beam`` best tokens of ``s`` per hypothesis get
   ``+ ctc_weight * (log psi(g + c) - log psi(g))``; all other tokens become ``-inf`` (with
   ``ctc_weight == 1`` there is no attention score to pre-select by: all tokens are scored).
   With ``ctc_always_score_eos`` (the default, as in ESPnet) ``eos`` is scored this way on
   every hypothesis even when it is not among the pre-selected tokens (unless step 2 masked
   it), so ending always competes with the ``ctc_pre_beam`` best continuations. With
   ``ctc_window = W`` each token's first CTC frame must lie within ``W`` frames of the argmax
   of the attention returned with the step that proposed it.
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
from dataclasses import dataclass
from typing import Any

import torch

from k2dec.aed.config import BeamSearchConfig
from k2dec.aed.ctc_prefix import CtcPrefixScorer
from k2dec.aed.interface import AttentionDecoder, IncrementalLM
from k2dec.aed.scoring import end_detected, final_scores, token_mask

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
    """

    tokens: list[int]
    score: float
    raw_score: float
    token_scores: list[float]
    attention_score: float
    ctc_score: float
    lm_score: float


def _validate(
    decoder: Any,
    memory: torch.Tensor,
    memory_lens: torch.Tensor,
    config: BeamSearchConfig,
    ctc_log_probs: torch.Tensor | None,
    lm: Any,
) -> None:
    if not isinstance(config, BeamSearchConfig):
        raise TypeError(f"config must be a BeamSearchConfig, got {type(config).__name__}")
    for attr in ("vocab_size", "sos_id", "eos_id", "step", "select_state"):
        if not hasattr(decoder, attr):
            raise TypeError(f"decoder must implement AttentionDecoder; it has no {attr!r}")
    vocab = decoder.vocab_size
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
    for name in ("sos_id", "eos_id"):
        value = getattr(decoder, name)
        if not 0 <= value < vocab:
            raise ValueError(f"decoder.{name} must be in [0, {vocab}), got {value}")
    if config.ctc_weight > 0:
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
        if config.ctc_blank_id >= vocab or config.ctc_blank_id == decoder.eos_id:
            raise ValueError(
                f"ctc_blank_id must be in [0, {vocab}) and differ from eos_id "
                f"{decoder.eos_id}, got {config.ctc_blank_id}"
            )
    if config.lm_weight > 0:
        if lm is None:
            raise ValueError(f"lm_weight={config.lm_weight} needs an lm, got None")
        if not hasattr(lm, "step") or not hasattr(lm, "select_state"):
            raise TypeError("lm must implement IncrementalLM (step and select_state)")
        if lm.vocab_size != vocab:
            raise ValueError(
                f"lm.vocab_size ({lm.vocab_size}) must equal decoder.vocab_size ({vocab})"
            )


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


def beam_search(
    decoder: AttentionDecoder,
    memory: torch.Tensor,
    memory_lens: torch.Tensor,
    config: BeamSearchConfig | None = None,
    ctc_log_probs: torch.Tensor | None = None,
    lm: IncrementalLM | None = None,
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
        return _search(decoder, memory, memory_lens, config, ctc_log_probs, lm)


def _search(
    decoder: AttentionDecoder,
    memory: torch.Tensor,
    memory_lens: torch.Tensor,
    config: BeamSearchConfig,
    ctc_log_probs: torch.Tensor | None,
    lm: IncrementalLM | None,
) -> list[list[AedHypothesis]]:
    device = memory.device
    n, num_frames = memory.shape[:2]
    if n == 0:
        return []
    vocab, sos, eos = decoder.vocab_size, decoder.sos_id, decoder.eos_id
    beam = config.beam_size
    use_ctc = config.ctc_weight > 0
    use_lm = config.lm_weight > 0
    use_cov = config.coverage_penalty > 0
    memory_lens = memory_lens.to(device=device, dtype=torch.int64)
    max_len = (memory_lens.double() * config.max_len_ratio).floor().long().clamp(min=1)
    pad_mask = torch.arange(num_frames, device=device).unsqueeze(0) >= memory_lens.unsqueeze(1)
    scorer = None
    if use_ctc:
        scorer = CtcPrefixScorer(ctc_log_probs, memory_lens, config.ctc_blank_id, eos)

    # Live rows: utterance-major, `b_cur` slots per active utterance.
    active = torch.arange(n, device=device)
    row_utt = active
    b_cur = 1
    ys = torch.full((n, 1), sos, dtype=torch.int64, device=device)
    dtype = memory.dtype
    scores = torch.zeros(n, dtype=dtype, device=device)
    hist = torch.zeros(n, 0, dtype=dtype, device=device)
    att_sum = torch.zeros(n, dtype=dtype, device=device)
    ctc_sum = torch.zeros(n, dtype=dtype, device=device)
    lm_sum = torch.zeros(n, dtype=dtype, device=device)
    cov = torch.zeros(n, num_frames, dtype=dtype, device=device) if use_cov else None
    mem, mem_mask = memory, pad_mask
    dec_state: Any = None
    lm_state: Any = None
    ctc_state = scorer.initial_state(row_utt) if scorer is not None else None

    ended: list[_Ended] = []
    n_ended = torch.zeros(n, dtype=torch.int64, device=device)
    best_ended = torch.full((n,), _NEG_INF, dtype=dtype, device=device)
    best_by_len = torch.full((n, int(max_len.max()) + 1), _NEG_INF, dtype=dtype, device=device)
    u = -1
    while active.numel() > 0:
        u += 1
        num_rows = row_utt.numel()
        log_probs, att, dec_state = decoder.step(ys, mem, mem_mask, dec_state)
        if log_probs.shape != (num_rows, vocab):
            raise ValueError(
                f"decoder.step returned log_probs of shape {tuple(log_probs.shape)}, "
                f"expected {(num_rows, vocab)}"
            )
        if att is None and (use_cov or (use_ctc and config.ctc_window is not None)):
            raise ValueError(
                "coverage_penalty > 0 and ctc_window need a decoder that returns attention"
            )
        if bool(torch.isnan(log_probs).any()):
            raise ValueError(f"decoder.step returned NaN log-probs at output position {u}")
        log_probs = log_probs.to(dtype)
        if config.temperature != 1.0:
            log_probs = (log_probs / config.temperature).log_softmax(dim=-1)

        forced = max_len.index_select(0, row_utt) == u  # [M]
        mask = token_mask(log_probs, forced, u, sos, eos, config)

        s = log_probs * (1.0 - config.ctc_weight) if use_ctc else log_probs
        lm_lp = None
        if use_lm:
            lm_lp, lm_state = lm.step(ys, lm_state)
            if lm_lp.shape != (num_rows, vocab) or bool(torch.isnan(lm_lp).any()):
                raise ValueError(
                    f"lm.step returned log_probs of shape {tuple(lm_lp.shape)} (expected "
                    f"{(num_rows, vocab)}) or with NaN at output position {u}"
                )
            lm_lp = lm_lp.to(dtype)
            if config.lm_fusion == "full":
                s = s + config.lm_weight * lm_lp
        s = s.masked_fill(mask, _NEG_INF)

        ctc_delta = None
        if scorer is not None:
            # pure CTC (weight 1) has no attention score to pre-select with: score all tokens
            k = vocab if config.ctc_weight == 1.0 else min(config.pre_beam, vocab)
            cand = s.topk(k, dim=1).indices  # [M, K]
            window = None
            if config.ctc_window is not None:
                peak = att.argmax(dim=1)
                window = (peak - config.ctc_window, peak + config.ctc_window)
            log_psi, r_new = scorer.score(ctc_state, row_utt, cand, u, window)
            log_psi = log_psi.to(dtype)
            prev = ctc_state.log_psi.to(dtype).unsqueeze(1)
            dead = (log_psi == _NEG_INF) | (prev == _NEG_INF)
            delta = torch.where(dead, torch.full_like(log_psi, _NEG_INF), log_psi - prev)
            cand_scores = s.gather(1, cand) + config.ctc_weight * delta
            s_att = s
            s = torch.full_like(s, _NEG_INF).scatter(1, cand, cand_scores)
            ctc_delta = torch.zeros_like(s).scatter(1, cand, delta)
            if config.ctc_always_score_eos and k < vocab:
                # eos is a candidate of every row, pre-selected or not (the same numbers as
                # score() gives a pre-selected eos, so rows that have it are unchanged)
                eos_psi = scorer.full_log_prob(ctc_state, row_utt).to(dtype)
                prev_psi = prev.squeeze(1)
                eos_dead = (eos_psi == _NEG_INF) | (prev_psi == _NEG_INF)
                eos_delta = torch.where(eos_dead, torch.full_like(eos_psi, _NEG_INF),
                                        eos_psi - prev_psi)
                s[:, eos] = s_att[:, eos] + config.ctc_weight * eos_delta
                ctc_delta[:, eos] = eos_delta
            k_pos = torch.zeros(num_rows, vocab, dtype=torch.int64, device=device).scatter(
                1, cand, torch.arange(k, device=device).expand_as(cand).contiguous()
            )
        if use_lm and config.lm_fusion == "pruned":
            cand2 = s.topk(min(beam, vocab), dim=1).indices
            cand2_scores = s.gather(1, cand2) + config.lm_weight * lm_lp.gather(1, cand2)
            s = torch.full_like(s, _NEG_INF).scatter(1, cand2, cand2_scores)
        if config.length_bonus != 0.0:
            s = s + config.length_bonus

        # Top-B over B x V per utterance.
        n_act = active.numel()
        total = (scores.unsqueeze(1) + s).view(n_act, b_cur * vocab)
        k = min(beam, b_cur * vocab)
        top_scores, top_idx = total.topk(k, dim=1)
        src_row = (torch.arange(n_act, device=device).unsqueeze(1) * b_cur + top_idx // vocab)
        token = top_idx % vocab
        if k < beam:  # only possible on the first step with V < B: pad with dead slots
            fill = beam - k
            src_row = torch.cat([src_row, src_row[:, :1].expand(n_act, fill)], dim=1)
            token = torch.cat([token, token[:, :1].expand(n_act, fill)], dim=1)
            top_scores = torch.cat(
                [top_scores, top_scores.new_full((n_act, fill), _NEG_INF)], dim=1
            )
        src_row, token, new_scores = src_row.reshape(-1), token.reshape(-1), top_scores.reshape(-1)
        tok_score = s[src_row, token]
        ys = torch.cat([ys.index_select(0, src_row), token.unsqueeze(1)], dim=1)
        hist = torch.cat([hist.index_select(0, src_row), tok_score.unsqueeze(1)], dim=1)
        att_sum = att_sum.index_select(0, src_row) + log_probs[src_row, token]
        if ctc_delta is not None:
            ctc_sum = ctc_sum.index_select(0, src_row) + ctc_delta[src_row, token]
        else:
            ctc_sum = ctc_sum.index_select(0, src_row)
        if lm_lp is not None:
            lm_sum = lm_sum.index_select(0, src_row) + lm_lp[src_row, token]
        else:
            lm_sum = lm_sum.index_select(0, src_row)
        if cov is not None:
            cov = cov.index_select(0, src_row)
            cov[:, : att.size(1)] += att.to(dtype).index_select(0, src_row)
        new_row_utt = row_utt.index_select(0, src_row)

        # Ended hypotheses.
        is_eos = (token == eos) & (new_scores > _NEG_INF)
        if bool(is_eos.any()):
            idx = is_eos.nonzero().squeeze(1)
            utt = new_row_utt.index_select(0, idx)
            raw = new_scores.index_select(0, idx)
            final = final_scores(
                raw,
                u + 1,
                None if cov is None else cov.index_select(0, idx),
                pad_mask.index_select(0, utt),
                config,
            )
            ended.append(
                _Ended(
                    utt=utt,
                    score=final,
                    raw=raw,
                    tokens=ys.index_select(0, idx)[:, 1:-1],
                    token_scores=hist.index_select(0, idx),
                    att=att_sum.index_select(0, idx),
                    ctc=ctc_sum.index_select(0, idx),
                    lm=lm_sum.index_select(0, idx),
                )
            )
            n_ended.index_add_(0, utt, torch.ones_like(utt))
            per_utt = final.new_full((n, idx.numel()), _NEG_INF)
            per_utt[utt, torch.arange(idx.numel(), device=device)] = final
            best_by_len[:, u] = per_utt.max(dim=1).values
            best_ended = torch.maximum(best_ended, best_by_len[:, u])
            new_scores = new_scores.masked_fill(is_eos, _NEG_INF)

        # Which utterances are done.
        b_cur = beam
        done = ~(new_scores.view(n_act, beam) > _NEG_INF).any(dim=1)
        done |= max_len.index_select(0, active) <= u
        if config.max_ended is not None:
            done |= n_ended.index_select(0, active) >= config.max_ended
        if config.end_detect:
            done |= end_detected(best_by_len, best_ended, active, u, config)

        keep = None
        if bool(done.any()):
            keep_utt = ~done
            active = active[keep_utt]
            keep = keep_utt.repeat_interleave(beam).nonzero().squeeze(1)
        sel = src_row if keep is None else src_row.index_select(0, keep)
        if keep is not None:
            ys, hist = ys.index_select(0, keep), hist.index_select(0, keep)
            att_sum, ctc_sum = att_sum.index_select(0, keep), ctc_sum.index_select(0, keep)
            lm_sum, new_scores = lm_sum.index_select(0, keep), new_scores.index_select(0, keep)
            token = token.index_select(0, keep)
            if cov is not None:
                cov = cov.index_select(0, keep)
        if active.numel() == 0:
            break
        scores = new_scores
        prev_rows = row_utt.numel()
        row_utt = active.repeat_interleave(beam)
        if keep is not None or prev_rows != row_utt.numel():
            mem = memory.index_select(0, row_utt)
            mem_mask = pad_mask.index_select(0, row_utt)
        dec_state = decoder.select_state(dec_state, sel)
        if use_lm:
            lm_state = lm.select_state(lm_state, sel)
        if scorer is not None:
            ctc_state = CtcPrefixScorer.extend(r_new, log_psi, sel, k_pos[sel, token], token)
    logger.debug("aed beam search: %d utterances, %d steps", n, u + 1)
    return _collect(ended, n, config.nbest)


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
            )
        )
    return out
