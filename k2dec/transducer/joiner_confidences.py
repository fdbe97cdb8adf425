"""Token confidences of transducer hypotheses from the joiner's distribution.

The confidence of a token is the probability the joiner gives it on the frame it was emitted
on, after the tokens before it (the decoder context the search used): NeMo's ``max_prob``
measure for the token the search chose. It is computed after the search from the hypothesis'
tokens and frames, in one batched decoder and joiner call over all tokens of all utterances,
so the searches need no change. For greedy search it is exactly the probability the search
took; for modified beam search and fast_beam_search it is that of the winning alignment (the
merged alternatives are not counted).
"""

from __future__ import annotations

from collections.abc import Sequence

import k2
import torch
from torch import nn

from k2dec.primitives.ragged import ragged_from_row_ids
from k2dec.transducer.common import check_encoder_out, log_probs_from_logits
from k2dec.transducer.network import TransducerNet

__all__ = ["token_confidences"]

ROWS_PER_CALL = 4096
"""Tokens scored per decoder/joiner call (bounds the ``[rows, V]`` joiner output)."""


def _ragged(x: k2.RaggedTensor | Sequence[Sequence[int]], name: str,
            device: torch.device) -> k2.RaggedTensor:
    if isinstance(x, k2.RaggedTensor):
        if x.num_axes != 2:
            raise ValueError(f"{name} must have 2 axes [utt][token], got {x.num_axes}")
        return x.to(device)
    rows = [list(r) for r in x]
    return k2.RaggedTensor(rows, dtype=torch.int32, device=device)


def _check_values(net: TransducerNet, ids: torch.Tensor, frames: torch.Tensor,
                  limit: torch.Tensor) -> None:
    """Non-blank token ids of the model, each on a frame below its utterance's ``limit``."""
    if not ids.numel():
        return
    if int(ids.min()) < 0 or int(ids.max()) >= net.vocab_size or bool(
            (ids == net.blank_id).any()):
        raise ValueError(f"tokens must be non-blank ids in [0, {net.vocab_size}), blank "
                         f"{net.blank_id}")
    if int(frames.min()) < 0 or bool((frames >= limit).any()):
        raise ValueError("timestamps must be frames within each utterance's encoder_out_lens")


def _contexts(net: TransducerNet, tok: k2.RaggedTensor, n: int) -> torch.Tensor:
    """int64 ``[tokens, c]``: the decoder context of every token of ``tok`` (``[utt][token]``,
    ``n`` utterances): the ``c`` tokens before it, after icefall's initial context, gathered
    from each utterance's tokens with the initial context in front."""
    device = tok.device
    row = tok.shape.row_ids(1).to(torch.int64)
    ids = tok.values.to(torch.int64)
    c = net.context_size
    splits = tok.shape.row_splits(1).to(torch.int64)
    pos = torch.arange(ids.numel(), device=device) - splits[row]
    ext_splits = torch.zeros(n + 1, dtype=torch.int64, device=device)
    ext_splits[1:] = torch.cumsum(c + splits[1:] - splits[:-1], 0)
    flat = torch.empty(int(ext_splits[-1]), dtype=torch.int64, device=device)
    cols = torch.arange(c, device=device)
    flat[ext_splits[:-1].unsqueeze(1) + cols] = net.initial_context(n, device)
    flat[ext_splits[row] + c + pos] = ids
    window = ext_splits[row].unsqueeze(1) + pos.unsqueeze(1) + cols
    return flat[window]


def token_confidences(
    model: nn.Module,
    encoder_out: torch.Tensor,
    encoder_out_lens: torch.Tensor,
    tokens: k2.RaggedTensor | Sequence[Sequence[int]],
    timestamps: k2.RaggedTensor | Sequence[Sequence[int]],
    temperature: float = 1.0,
    blank_penalty: float = 0.0,
    logits: bool = False,
) -> k2.RaggedTensor:
    """Probability of every token of transducer hypotheses on its frame.

    Args:
      model: the stateless transducer the hypotheses come from (``.decoder``, ``.joiner``).
      encoder_out: float ``[N, T, C]`` (not projected); encoder_out_lens: int ``[N]``.
      tokens: ``N`` non-blank token-id sequences (lists or an int32 ragged ``[utt][token]``).
      timestamps: the encoder frame of each token (same shape), as the searches return them.
      temperature, blank_penalty: as the search used them (they change the distribution).
      logits: give each token's raw joiner logit instead (what icefall's
        ``greedy_search_batch`` reports as its scores).

    Returns:
      float32 ``k2.RaggedTensor`` ``[utt][token]`` on ``encoder_out.device``.
    """
    net = TransducerNet(model)
    lens = check_encoder_out(encoder_out, encoder_out_lens, net)
    device = encoder_out.device
    tok = _ragged(tokens, "tokens", device)
    times = _ragged(timestamps, "timestamps", device)
    n = encoder_out.size(0)
    if tok.dim0 != n or times.dim0 != n:
        raise ValueError(f"tokens and timestamps must have N={n} rows, got {tok.dim0} and "
                         f"{times.dim0}")
    if not torch.equal(tok.shape.row_splits(1), times.shape.row_splits(1)):
        raise ValueError("tokens and timestamps must have the same number of entries per "
                         "utterance")
    row = tok.shape.row_ids(1).to(torch.int64)
    ids = tok.values.to(torch.int64)
    t = times.values.to(torch.int64)
    _check_values(net, ids, t, lens[row])
    contexts = _contexts(net, tok, n)
    enc = encoder_out
    probs = torch.empty(ids.numel(), dtype=torch.float32, device=device)
    with torch.no_grad():
        for lo in range(0, ids.numel(), ROWS_PER_CALL):
            hi = min(lo + ROWS_PER_CALL, ids.numel())
            e = net.project_encoder(enc[row[lo:hi], t[lo:hi]])
            d = net.decoder_out(contexts[lo:hi])
            raw = net.logits(e, d)
            if logits:
                probs[lo:hi] = raw.float().gather(1, ids[lo:hi].unsqueeze(1)).squeeze(1)
                continue
            lp = log_probs_from_logits(raw, net.blank_id, temperature, blank_penalty)
            probs[lo:hi] = lp.gather(1, ids[lo:hi].unsqueeze(1)).squeeze(1).exp()
    return ragged_from_row_ids(row, probs, n)
