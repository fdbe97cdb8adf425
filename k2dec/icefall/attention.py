"""icefall's attention decoders behind k2dec's whole-sequence scoring (``score_sequences``,
what :func:`k2dec.nbest.rescore_with_attention_decoder` and the hypothesis-list rescoring
call).

icefall's models expose the decoder in two ways, both taken here as they are:

- ``conformer_ctc``'s ``Transformer``: ``model.decoder_nll(memory, memory_key_padding_mask,
  token_ids, sos_id, eos_id)`` with ``memory`` ``(T, N, C)``;
- ``zipformer``'s ``AttentionDecoderModel``: ``attention_decoder.nll(encoder_out,
  encoder_out_lens, token_ids)`` with ``encoder_out`` ``(N, T, C)``.

Both return per-token negative log-likelihoods ``[S, L + 1]`` (the last real one for
``eos``, 0 at padding). A k2dec decoder (anything with ``score_sequences``, e.g.
:class:`k2dec.aed.TransformerDecoder`) is used as it is.
"""

from __future__ import annotations

from typing import Any

import k2
import torch

__all__ = ["NllAttentionDecoder", "attention_decoder"]


class NllAttentionDecoder:
    """An icefall attention decoder (see the module docstring) as a k2dec sequence scorer.

    Args:
      model: has ``decoder_nll`` (then ``sos_id`` and ``eos_id`` are passed to it) or ``nll``.
      sos_id, eos_id: for ``decoder_nll``.
    """

    def __init__(self, model: Any, sos_id: int | None = None, eos_id: int | None = None
                 ) -> None:
        self.model = model
        self.conformer = callable(getattr(model, "decoder_nll", None))
        if not self.conformer and not callable(getattr(model, "nll", None)):
            raise TypeError("the attention decoder must have decoder_nll(...) (conformer_ctc) "
                            f"or nll(...) (zipformer), got {type(model).__name__}")
        if self.conformer and (sos_id is None or eos_id is None):
            raise ValueError("decoder_nll needs sos_id and eos_id")
        self.sos_id, self.eos_id = sos_id, eos_id

    def score_sequences(self, memory: torch.Tensor, memory_lens: torch.Tensor,
                        tokens: k2.RaggedTensor, seq_to_utt: torch.Tensor) -> k2.RaggedTensor:
        """Per-token log-probs ``[seq][token + 1]`` (the last: ``eos``) of ``tokens`` (int32
        ragged, no ``sos``/``eos``) given ``memory`` ``[N, T, C]`` (``memory_lens`` ``[N]``
        valid frames) of utterance ``seq_to_utt[s]``."""
        device = memory.device
        index = seq_to_utt.to(device=device, dtype=torch.int64)
        mem = memory.index_select(0, index)
        lens = memory_lens.to(device).index_select(0, index)
        token_ids = tokens.tolist()
        with torch.no_grad():
            if self.conformer:
                mask = torch.arange(mem.size(1), device=device).unsqueeze(0) >= lens.unsqueeze(1)
                nll = self.model.decoder_nll(memory=mem.permute(1, 0, 2),
                                             memory_key_padding_mask=mask,
                                             token_ids=token_ids, sos_id=self.sos_id,
                                             eos_id=self.eos_id)
            else:
                nll = self.model.nll(encoder_out=mem, encoder_out_lens=lens,
                                     token_ids=token_ids)
        splits = tokens.shape.row_splits(1).to(device=device, dtype=torch.int64)
        num = splits.numel() - 1
        keep = torch.arange(nll.size(1), device=device).unsqueeze(0) <= (
            splits[1:] - splits[:-1]).unsqueeze(1)
        out_splits = (splits + torch.arange(num + 1, device=device)).to(torch.int32)
        shape = k2.ragged.create_ragged_shape2(out_splits, None, int(out_splits[-1]))
        return k2.RaggedTensor(shape, (-nll)[keep].to(torch.float32).contiguous())


def attention_decoder(model: Any, sos_id: int | None = None, eos_id: int | None = None
                      ) -> Any:
    """A k2dec decoder (with ``score_sequences``) as it is; an icefall one through
    :class:`NllAttentionDecoder`."""
    if callable(getattr(model, "score_sequences", None)):
        return model
    return NllAttentionDecoder(model, sos_id, eos_id)
