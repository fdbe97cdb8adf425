"""Per-sequence, per-position LM scoring: the obviously-correct (quadratic) reference.

Each token's log-prob comes from a fresh ``lm.step`` on the single unpadded prefix with no state,
so neither padding, batching nor incremental state can influence it.
"""

from __future__ import annotations

import math

import torch


def score_sequence_by_prefixes(lm, seq: list[int]) -> list[float]:
    """``log p(w_j | sos w_1 .. w_{j-1})`` for each token of ``seq``, then ``log p(eos | ...)``."""
    device = next(lm.parameters()).device
    out = []
    targets = list(seq) + [lm.eos_id]
    for j, target in enumerate(targets):
        prefix = torch.tensor([[lm.sos_id] + list(seq[:j])], dtype=torch.int64, device=device)
        with torch.no_grad():
            log_probs, _ = lm.step(prefix, None)
        out.append(float(log_probs[0, target]))
    return out


def perplexity_by_hand(lm, seqs: list[list[int]]) -> float:
    """``exp(-sum of all log-probs / number of predicted tokens)`` (one ``eos`` per sequence)."""
    total = sum(sum(score_sequence_by_prefixes(lm, s)) for s in seqs)
    num_tokens = sum(len(s) + 1 for s in seqs)
    return math.exp(-total / num_tokens)
