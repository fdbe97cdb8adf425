"""icefall's one-utterance ``greedy_search`` (``beam_search.py``) as a plain loop, written
from its algorithm: frame by frame, one joiner call on the frame with the current decoder
output, blank's logit lowered by ``blank_penalty``, the argmax; a symbol other than blank is
appended (its frame recorded), the decoder re-run on the last ``context_size`` symbols
(blanks fill the start), and the same frame is tried again until ``max_sym_per_frame``
symbols were emitted on it; a blank moves on; at most 1000 symbols."""

from __future__ import annotations

import torch


def greedy_search_icefall(model, encoder_out: torch.Tensor, max_sym_per_frame: int,
                          blank_penalty: float = 0.0) -> tuple[list[int], list[int]]:
    decoder, joiner = model.decoder, model.joiner
    blank, c = decoder.blank_id, decoder.context_size
    ctx = torch.tensor([[-1] * (c - 1) + [blank]])
    dec = joiner.decoder_proj(decoder(ctx, need_pad=False))
    enc = joiner.encoder_proj(encoder_out)
    hyp, frames = [blank] * c, []
    t, on_frame = 0, 0
    while t < enc.size(1) and len(frames) < 1000:
        if on_frame >= max_sym_per_frame:
            t, on_frame = t + 1, 0
            continue
        logits = joiner(enc[:, t : t + 1].unsqueeze(2), dec.unsqueeze(1), project_input=False)
        logits = logits.reshape(-1).clone()
        logits[blank] -= blank_penalty
        y = int(logits.argmax())
        if y == blank:
            t, on_frame = t + 1, 0
            continue
        hyp.append(y)
        frames.append(t)
        dec = joiner.decoder_proj(decoder(torch.tensor([hyp[-c:]]), need_pad=False))
        on_frame += 1
    return hyp[c:], frames


def greedy_search_batch_icefall(model, encoder_out: torch.Tensor, lens: list[int],
                                blank_penalty: float = 0.0
                                ) -> tuple[list[list[int]], list[list[int]], list[list[float]]]:
    """icefall's ``greedy_search_batch`` utterance by utterance as a plain loop: one symbol
    per frame, the argmax of the joiner's logits (blank's lowered by ``blank_penalty``), the
    decoder re-run after every symbol; per utterance the tokens, their frames and the logit
    each was chosen with."""
    decoder, joiner = model.decoder, model.joiner
    blank, c = decoder.blank_id, decoder.context_size
    tokens, frames, logits_of = [], [], []
    for i, n in enumerate(lens):
        hyp = [-1] * (c - 1) + [blank]
        toks, times, vals = [], [], []
        dec = joiner.decoder_proj(decoder(torch.tensor([hyp]), need_pad=False))
        enc = joiner.encoder_proj(encoder_out[i : i + 1, :n])
        for t in range(n):
            logits = joiner(enc[:, t : t + 1].unsqueeze(2), dec.unsqueeze(1), project_input=False)
            logits = logits.reshape(-1).clone()
            logits[blank] -= blank_penalty
            y = int(logits.argmax())
            if y == blank:
                continue
            toks.append(y)
            times.append(t)
            vals.append(float(logits[y]))
            hyp.append(y)
            dec = joiner.decoder_proj(decoder(torch.tensor([hyp[-c:]]), need_pad=False))
        tokens.append(toks)
        frames.append(times)
        logits_of.append(vals)
    return tokens, frames, logits_of
