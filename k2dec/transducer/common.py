"""Shared pieces of the transducer searches: input validation (encoder frames, streams), joiner
log-probs from logits and the result record. The network driver is in
:mod:`k2dec.transducer.network`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:  # network.py imports this module
    from .network import TransducerNet

__all__ = ["TransducerHypothesis", "all_finite", "check_encoder_out", "check_streams",
           "log_probs_from_logits"]


@dataclass(frozen=True)
class TransducerHypothesis:
    """One decoding result for one utterance.

    Attributes:
      tokens: the non-blank token ids, in order.
      timestamps: for each token, the (0-based) encoder frame on which it was emitted; same
        length as ``tokens``, non-decreasing (strictly increasing with one symbol per frame).
      score: total log-probability. Greedy search: sum of the log-probs of the decisions taken;
        modified beam search: log-sum over the merged alignments of ``tokens`` that survived
        the beam; fast_beam_search: score of the best path through the lattice (acoustic
        log-probs plus graph scores).
    """

    tokens: list[int]
    timestamps: list[int]
    score: float


def check_encoder_out(
    encoder_out: torch.Tensor, encoder_out_lens: torch.Tensor,
    net: TransducerNet | None = None,
) -> torch.Tensor:
    """Validate a padded batch of encoder frames (float ``[N, T, C]``; with ``net``, also
    of the joiner's dtype and input width, :meth:`TransducerNet.check_frames`); return the
    lengths as int64 on the device of ``encoder_out``."""
    if not isinstance(encoder_out, torch.Tensor):
        raise TypeError(f"encoder_out must be a torch.Tensor, got {type(encoder_out).__name__}")
    if encoder_out.dim() != 3:
        raise ValueError(
            f"encoder_out must have shape [N, T, C], got shape {tuple(encoder_out.shape)}"
        )
    if not encoder_out.is_floating_point():
        raise TypeError(f"encoder_out must be a float tensor, got dtype {encoder_out.dtype}")
    if not isinstance(encoder_out_lens, torch.Tensor):
        raise TypeError(
            f"encoder_out_lens must be a torch.Tensor, got {type(encoder_out_lens).__name__}"
        )
    if encoder_out_lens.dim() != 1 or encoder_out_lens.numel() != encoder_out.size(0):
        raise ValueError(
            f"encoder_out_lens must have shape [N] = [{encoder_out.size(0)}], "
            f"got shape {tuple(encoder_out_lens.shape)}"
        )
    if encoder_out_lens.is_floating_point() or encoder_out_lens.dtype == torch.bool:
        raise TypeError(
            f"encoder_out_lens must be an integer tensor, got dtype {encoder_out_lens.dtype}"
        )
    lens = encoder_out_lens.to(device=encoder_out.device, dtype=torch.int64)
    if lens.numel() > 0:
        lo, hi = int(lens.min()), int(lens.max())
        if lo < 0 or hi > encoder_out.size(1):
            raise ValueError(
                f"encoder_out_lens must be in [0, T={encoder_out.size(1)}], got values in "
                f"[{lo}, {hi}]"
            )
    if encoder_out.numel() > 0 and not all_finite(encoder_out):
        raise ValueError("encoder_out contains NaN or inf")
    if net is not None:
        net.check_frames(encoder_out)
    return lens


def all_finite(x: torch.Tensor) -> bool:
    """Whether every element of ``x`` is finite. A NaN or inf makes the sum non-finite, so a
    finite sum proves it in one cheap pass (much faster than ``isfinite(x).all()`` on CPU); only
    a non-finite sum (a bad element, or an overflow of finite ones) needs the exact test."""
    return bool(torch.isfinite(x.sum())) or bool(torch.isfinite(x).all())


def log_probs_from_logits(
    logits: torch.Tensor, blank_id: int, temperature: float, blank_penalty: float
) -> torch.Tensor:
    """``log_softmax((logits - blank_penalty * onehot(blank)) / temperature)`` in float32."""
    if logits.dtype != torch.float32:
        logits = logits.float()
    if blank_penalty != 0.0:
        logits = logits.clone()
        logits[:, blank_id] -= blank_penalty
    if temperature != 1.0:
        logits = logits / temperature
    return logits.log_softmax(dim=-1)


def check_streams(streams: Sequence, n: int, cls: type) -> None:
    """Raise ``ValueError``/``TypeError`` unless ``streams`` are ``n`` distinct ``cls``
    objects (one per row of a chunk)."""
    if len(streams) != n:
        raise ValueError(f"got {len(streams)} streams for a batch of {n} utterances")
    if len({id(s) for s in streams}) != len(streams):
        raise ValueError("streams must be distinct objects (the same stream was passed twice)")
    for i, s in enumerate(streams):
        if not isinstance(s, cls):
            raise TypeError(f"streams[{i}] must be a {cls.__name__}, got {type(s).__name__}")
