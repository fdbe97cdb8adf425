"""Forced alignment of token sequences to CTC log-probs (``k2.ctc_graph`` +
``k2.intersect_dense``): the frames of each token of a hypothesis that has no frames of its
own, e.g. an attention decoder's output."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import k2
import torch

from k2dec.lattice.dense import make_dense_fsa_vec
from k2dec.primitives.best_paths import ctc_token_spans
from k2dec.primitives.ragged import ragged_select

__all__ = ["CtcAlignment", "ctc_forced_alignment"]

ALIGN_OUTPUT_BEAM = 8.0
"""``output_beam`` of ``k2.intersect_dense`` (only the best path is read)."""


@dataclass(frozen=True)
class CtcAlignment:
    """Frames of the tokens of ``N`` sequences.

    Attributes:
      begin, end: int32 ``k2.RaggedTensor`` ``[utt][token]``: token ``k`` covers frames
        ``begin <= f < end`` (its run of repeated frames on the best alignment); empty rows for
        sequences that cannot be aligned.
      aligned: bool ``(N,)``: False when no CTC path spells the sequence in the utterance's
        frames (too many tokens for the frames).
      score: float64 ``(N,)``: log-prob of the best alignment (``-inf`` if none).
    """

    begin: k2.RaggedTensor
    end: k2.RaggedTensor
    aligned: torch.Tensor
    score: torch.Tensor


def ctc_forced_alignment(
    log_probs: torch.Tensor,
    log_probs_lens: torch.Tensor,
    tokens: k2.RaggedTensor | Sequence[Sequence[int]],
    subsampling_factor: int = 1,
    allow_truncate: int = 0,
) -> CtcAlignment:
    """Best CTC alignment (standard topology, blank 0) of each token sequence.

    Args:
      log_probs: float32 ``(N, T, V)`` CTC log-probs (blank = 0).
      log_probs_lens: integer ``(N,)`` valid frames of ``log_probs`` (see
        :func:`~k2dec.lattice.dense.make_dense_fsa_vec`).
      tokens: ``N`` sequences of token ids in ``[1, V)`` (lists or int32 ragged
        ``[utt][token]``).
    """
    dense = make_dense_fsa_vec(log_probs, log_probs_lens, subsampling_factor, allow_truncate)
    device = log_probs.device
    n = log_probs.shape[0]
    if isinstance(tokens, k2.RaggedTensor):
        if tokens.num_axes != 2 or tokens.dim0 != n:
            raise ValueError(f"tokens must be a 2-axis ragged tensor with {n} rows")
        rows = tokens.tolist()
    else:
        rows = [list(t) for t in tokens]
        if len(rows) != n:
            raise ValueError(f"tokens has {len(rows)} sequences but log_probs has N={n}")
    v = log_probs.shape[2]
    for i, r in enumerate(rows):
        if any(not isinstance(x, int) or not 0 < x < v for x in r):
            raise ValueError(f"tokens[{i}] must hold ids in [1, {v}) (0 is the blank), got {r}")
    order = dense.order.tolist()
    graphs = k2.ctc_graph([rows[i] for i in order], modified=False, device=device)
    lattice = k2.intersect_dense(graphs, dense.dense_fsa_vec, output_beam=ALIGN_OUTPUT_BEAM)
    best = k2.shortest_path(lattice, use_double_scores=True)
    inverse = dense.inverse_order.to(device=device, dtype=torch.int32)
    best = k2.index_fsa(best, inverse)
    score = best.get_tot_scores(use_double_scores=True, log_semiring=False).to("cpu")
    labels = best.labels.new_empty(best.labels.shape)
    labels.copy_(best.labels)
    per_frame = k2.RaggedTensor(best.arcs.shape().remove_axis(1), labels)
    per_frame = ragged_select(per_frame, labels >= 0)
    _, begin, end = ctc_token_spans(per_frame)
    return CtcAlignment(begin=begin, end=end, aligned=torch.isfinite(score), score=score)
