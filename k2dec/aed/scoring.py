"""Scoring rules of the attention beam search that do not depend on the models.

Token rules (``min_len``, the eos threshold, forced eos at the maximum length, forbidden
``sos``/blank, repeated spans), the final ranking score of an ended hypothesis (length
normalization, GNMT length penalty, coverage penalty) and end detection. The formulas are
spelled out in :mod:`k2dec.aed.beam_search`.
"""

from __future__ import annotations

import math

import torch

from k2dec.aed.config import BeamSearchConfig

__all__ = ["COVERAGE_FLOOR", "end_detected", "final_scores", "repeat_mask", "token_mask"]

_NEG_INF = float("-inf")
COVERAGE_FLOOR = 1e-10


def final_scores(
    raw: torch.Tensor,
    length: int,
    coverage: torch.Tensor | None,
    frame_mask: torch.Tensor | None,
    config: BeamSearchConfig,
) -> torch.Tensor:
    """Ranking scores of ``E`` ended hypotheses that all have ``length`` tokens (with ``eos``).

    Args:
      raw: float ``[E]``, sums of the token scores.
      length: ``|y|``, tokens including ``eos``.
      coverage: float ``[E, T]`` attention accumulated per frame, or None.
      frame_mask: bool ``[E, T]``, True at padded frames (excluded from the coverage sum).
      config: which of length normalization / GNMT / coverage penalty apply.

    Returns:
      float ``[E]``.
    """
    score = raw
    if config.length_norm:
        score = score / length
    elif config.gnmt_alpha > 0:
        score = score / ((5.0 + length) / 6.0) ** config.gnmt_alpha
    if config.coverage_penalty > 0 and coverage is not None:
        cov = coverage.clamp(min=COVERAGE_FLOOR, max=1.0).log().masked_fill(frame_mask, 0.0)
        score = score + config.coverage_penalty * cov.sum(dim=1)
    return score


def repeat_mask(tokens: torch.Tensor, vocab: int, config: BeamSearchConfig) -> torch.Tensor | None:
    """Bool ``[M, V]``, True for the token that would make a prefix end with a span of ``p``
    tokens (``1 <= p <= repeat_span``) repeated ``max_repeats + 1`` times in a row; None when
    :attr:`~BeamSearchConfig.max_repeats` is None or no prefix is long enough.

    Args:
      tokens: int64 ``[M, u]``, the prefixes (without ``sos``).
    """
    limit = config.max_repeats
    num_rows, u = tokens.shape
    if limit is None or u < limit:
        return None
    mask = torch.zeros(num_rows, vocab, dtype=torch.bool, device=tokens.device)
    for p in range(1, config.repeat_span + 1):
        need = (limit + 1) * p - 1  # prefix tokens that, with the new one, make limit+1 copies
        if u < need:
            break
        tail = tokens[:, u - need:]
        periodic = (tail[:, p:] == tail[:, : need - p]).all(dim=1)
        rows = periodic.nonzero().squeeze(1)
        mask[rows, tail[rows, need - p]] = True
    return mask


def token_mask(
    log_probs: torch.Tensor, forced: torch.Tensor, u: int, sos: int, eos: int,
    config: BeamSearchConfig, prefixes: torch.Tensor | None = None, ctc: bool = False,
) -> torch.Tensor:
    """Bool ``[M, V]``, True for tokens not allowed after a ``u``-token prefix (the token
    rules of the module docstring); ``forced`` (bool ``[M]``) marks rows at maximum length;
    ``prefixes`` (int64 ``[M, u]``, the tokens after ``sos``) are needed for
    :attr:`~BeamSearchConfig.max_repeats`; ``ctc``: the search has CTC prefix scores (the
    blank :attr:`~BeamSearchConfig.ctc_blank_id` is masked)."""
    num_rows, vocab = log_probs.shape
    eos_ok = torch.full((num_rows,), u >= config.min_len, dtype=torch.bool,
                        device=log_probs.device)
    if config.eos_threshold > 0:
        others = log_probs.clone()
        others[:, eos] = _NEG_INF
        best_other = others.max(dim=1).values
        eos_ok &= log_probs[:, eos] >= math.log(config.eos_threshold) + best_other
    eos_ok |= forced
    mask = forced.unsqueeze(1).expand(num_rows, vocab).clone()
    mask[:, eos] = ~eos_ok
    if sos != eos:
        mask[:, sos] = True
    if ctc:
        mask[:, config.ctc_blank_id] = True
    repeats = repeat_mask(prefixes, vocab, config) if prefixes is not None else None
    if repeats is not None:
        mask |= repeats
    return mask


def end_detected(
    best_by_len: torch.Tensor,
    best_ended: torch.Tensor,
    active: torch.Tensor,
    u: int,
    config: BeamSearchConfig,
) -> torch.Tensor:
    """Bool ``[N_active]``: for each of the lengths ``u, u-1, ..., u-M+1`` the best ended
    hypothesis (``best_by_len[n, length]``) exists and is more than ``D`` below the best ended
    hypothesis (``best_ended[n]``)."""
    window = config.end_detect_window
    if u + 1 < window:
        return torch.zeros_like(active, dtype=torch.bool)
    recent = best_by_len.index_select(0, active)[:, u - window + 1 : u + 1]  # [N_active, M]
    best = best_ended.index_select(0, active).unsqueeze(1)
    worse = (recent > _NEG_INF) & (recent < best - config.end_detect_margin)
    return worse.all(dim=1)
