"""icefall TorchScript exports (``export.py --jit 1``) behind :class:`AcousticModel`.

Three layouts are recognised by what the scripted module has:

- **transducer / CTC** (``zipformer``, ``pruned_transducer_stateless*``, ``conformer_ctc2``,
  ...: ``jit_script.pt``): ``module.encoder(features, feature_lengths) -> (encoder_out,
  encoder_out_lens)``; a stateless transducer when it has ``module.decoder`` (``blank_id``,
  ``context_size``, ``vocab_size``; ``decoder(y, need_pad=False)``) and ``module.joiner``
  (``joiner(encoder_out, decoder_out, project_input=...)``, ``encoder_proj``,
  ``decoder_proj``); a CTC head when it has ``module.ctc_output(encoder_out) -> log_probs``.
  The module itself is :attr:`~IcefallTorchScriptModel.transducer`: k2dec's searches drive
  its decoder and joiner as they are.
- **streaming transducer** (causal zipformer: ``jit_script_chunk_{C}_left_{L}.pt``):
  ``module.encoder(features, feature_lengths, states)`` and
  ``module.encoder.get_init_states(batch_size, device)``; see
  :mod:`k2dec.model.streaming`. Offline :meth:`encode` runs it chunk by chunk too.
- **conformer_ctc** (``cpu_jit.pt``): ``module(features, supervisions) -> (nnet_output
  [N, T, V] log-probs, memory [T, N, C], memory_key_padding_mask [N, T])`` and an attention
  decoder (``decoder_embed``, ``decoder_pos``, ``decoder``, ``decoder_output_layer``,
  ``decoder_nll``), driven here as a :class:`k2dec.aed.AttentionDecoder`.
"""

from __future__ import annotations

import logging
from typing import Any

import k2
import torch

from ..data.features import FeatureConfig
from .interface import AcousticModel, EncoderOutput, normalized_log_probs, token_vocab_size
from .streaming import TorchScriptStreamingEncoder

__all__ = ["IcefallAttentionDecoder", "IcefallTorchScriptModel"]

logger = logging.getLogger(__name__)


def _member(module: Any, name: str) -> Any:
    """``module.name`` or ``None`` (a scripted module may hold ``None`` attributes)."""
    try:
        return getattr(module, name)
    except (AttributeError, RuntimeError):
        return None


def _has_method(module: Any, name: str) -> bool:
    try:
        module._c._get_method(name)
        return True
    except (AttributeError, RuntimeError):
        return callable(_member(module, name)) and not isinstance(_member(module, name),
                                                                  torch.nn.Module)


class IcefallAttentionDecoder:
    """The attention decoder of an icefall ``conformer_ctc`` TorchScript export as a
    :class:`k2dec.aed.AttentionDecoder`.

    Every call runs the scripted decoder on whole prefixes (the export has no incremental
    state), with icefall's masks: causal self-attention, memory padding from the encoder.

    Args:
      module: the scripted ``Conformer`` (``decoder_embed``, ``decoder_pos``, ``decoder``,
        ``decoder_output_layer``).
      sos_id, eos_id: icefall's ``<sos/eos>`` id (the same for both).
    """

    def __init__(self, module: Any, vocab_size: int, sos_id: int, eos_id: int) -> None:
        self.module = module
        self.vocab_size = vocab_size
        self.sos_id = sos_id
        self.eos_id = eos_id

    def _forward(self, tokens: torch.Tensor, memory: torch.Tensor,
                 memory_padding_mask: torch.Tensor, token_padding_mask: torch.Tensor
                 ) -> torch.Tensor:
        """log-probs ``[M, U, V]`` after each position of ``tokens`` ``[M, U]``."""
        u = tokens.size(1)
        causal = torch.triu(torch.full((u, u), float("-inf"), device=tokens.device),
                            diagonal=1)
        x = self.module.decoder_pos(self.module.decoder_embed(tokens)).permute(1, 0, 2)
        out = self.module.decoder(tgt=x, memory=memory.permute(1, 0, 2), tgt_mask=causal,
                                  tgt_key_padding_mask=token_padding_mask,
                                  memory_key_padding_mask=memory_padding_mask)
        logits = self.module.decoder_output_layer(out.permute(1, 0, 2))
        return logits.float().log_softmax(dim=-1)

    def step(self, tokens: torch.Tensor, memory: torch.Tensor,
             memory_padding_mask: torch.Tensor, state: Any
             ) -> tuple[torch.Tensor, None, int]:
        """See :meth:`k2dec.aed.AttentionDecoder.step` (no attention weights: ``None``)."""
        pad = torch.zeros(tokens.shape, dtype=torch.bool, device=tokens.device)
        log_probs = self._forward(tokens.to(torch.int64), memory, memory_padding_mask, pad)
        return log_probs[:, -1], None, tokens.size(1)

    def select_state(self, state: Any, index: torch.Tensor) -> Any:
        return state

    def score_sequences(self, memory: torch.Tensor, memory_lens: torch.Tensor,
                        tokens: k2.RaggedTensor, seq_to_utt: torch.Tensor) -> k2.RaggedTensor:
        """See :meth:`k2dec.aed.AttentionDecoder.score_sequences`; the same numbers as
        icefall's ``decoder_nll`` (negated), which pads with ``eos`` and masks it."""
        if tokens.num_axes != 2:
            raise ValueError(f"tokens must have 2 axes [seq][token], got {tokens.num_axes}")
        device = memory.device
        num_seqs = tokens.dim0
        row_splits = tokens.shape.row_splits(1).to(device=device, dtype=torch.int64)
        lens = row_splits[1:] - row_splits[:-1]
        if num_seqs == 0:
            return k2.RaggedTensor(k2.ragged.create_ragged_shape2(
                torch.zeros(1, dtype=torch.int32, device=device), None, 0),
                torch.zeros(0, device=device))
        width = int(lens.max()) + 1
        padded = tokens.to(device).pad(mode="constant", padding_value=self.eos_id)
        padded = padded.to(torch.int64).reshape(num_seqs, -1)[:, : width - 1]
        ys_in = torch.cat([torch.full((num_seqs, 1), self.sos_id, dtype=torch.int64,
                                      device=device), padded], dim=1)
        pos = torch.arange(width, device=device).unsqueeze(0)
        token_mask = pos > lens.unsqueeze(1)
        targets = torch.where(pos < lens.unsqueeze(1), ys_in.roll(-1, dims=1),
                              torch.full_like(ys_in, self.eos_id))
        seq_to_utt = seq_to_utt.to(device=device, dtype=torch.int64)
        mem = memory.index_select(0, seq_to_utt)
        frames = torch.arange(memory.size(1), device=device).unsqueeze(0)
        mem_mask = frames >= memory_lens.to(device).index_select(0, seq_to_utt).unsqueeze(1)
        log_probs = self._forward(ys_in, mem, mem_mask, token_mask)
        tok = log_probs.gather(2, targets.unsqueeze(2)).squeeze(2)
        keep = ~token_mask
        splits = (row_splits + torch.arange(num_seqs + 1, device=device)).to(torch.int32)
        shape = k2.ragged.create_ragged_shape2(splits, None, int(splits[-1]))
        return k2.RaggedTensor(shape, tok[keep].contiguous())


class IcefallTorchScriptModel(AcousticModel):
    """An icefall TorchScript export (see the module docstring for the layouts).

    Args:
      module: the loaded ``torch.jit.ScriptModule``.
      tokens: the model's token table (for ``<sos/eos>`` and the vocabulary size).
      feature_config: the features it was trained on (default: icefall's).
    """

    kind = "icefall-torchscript"

    def __init__(self, module: Any, tokens: k2.SymbolTable | None = None,
                 feature_config: FeatureConfig | None = None) -> None:
        self.module = module.eval()
        self.tokens = tokens
        if feature_config is not None:
            self.set_feature_config(feature_config)
        encoder = _member(module, "encoder")
        self.conformer_ctc = _has_method(module, "decoder_nll")
        self.streaming = encoder is not None and _has_method(encoder, "get_init_states")
        self._decoder = _member(module, "decoder")
        self._joiner = _member(module, "joiner")
        self._ctc_output = _member(module, "ctc_output")
        if self.conformer_ctc:
            self.subsampling_factor = 4
            self.min_input_frames = 7  # ((T - 1) // 2 - 1) // 2 >= 1
            vocab = int(_member(module, "decoder_num_class") or 0) or _output_dim(
                module, "encoder_output_layer", tokens)
            sos = _sos_eos(tokens, vocab)
            self._attention = IcefallAttentionDecoder(module, vocab, sos, sos)
            self.vocab_size = vocab
            return
        if encoder is None:
            raise ValueError("the TorchScript module has no .encoder and no decoder_nll: not "
                             "an icefall export k2dec knows (transducer, CTC, conformer_ctc)")
        self._attention = None
        is_transducer = self._decoder is not None and self._joiner is not None
        if not is_transducer and self._ctc_output is None:
            raise ValueError("the TorchScript module has an encoder but neither a decoder + "
                             "joiner (transducer) nor a ctc_output (CTC) head")
        self.vocab_size = (int(self._decoder.vocab_size) if is_transducer else
                           _output_dim(module, "ctc_output", tokens))
        self.subsampling_factor = 4
        self.min_input_frames = 9  # zipformer's Conv2dSubsampling: ((T - 7) // 2 + 1) // 2
        if self.streaming:
            self.streaming_encoder = TorchScriptStreamingEncoder(encoder)
            self.min_input_frames = 1

    @property
    def has_ctc(self) -> bool:
        return self.conformer_ctc or self._ctc_output is not None

    @property
    def transducer(self) -> Any:
        if self._decoder is None or self._joiner is None or self.conformer_ctc:
            return None
        return self.module

    @property
    def attention_decoder(self) -> IcefallAttentionDecoder | None:
        return self._attention

    @property
    def device(self) -> torch.device:
        for p in self.module.parameters():
            return p.device
        return torch.device("cpu")

    def to(self, device: torch.device | str) -> IcefallTorchScriptModel:
        self.module.to(torch.device(device))
        return self

    def _encode(self, features: torch.Tensor, feature_lens: torch.Tensor) -> EncoderOutput:
        if self.conformer_ctc:
            return self._encode_conformer_ctc(features, feature_lens)
        if self.streaming:
            enc, enc_lens = self.streaming_encoder.encode_offline(features, feature_lens)
        else:
            enc, enc_lens = self.module.encoder(features, feature_lens)
        enc_lens = enc_lens.to(torch.int64)
        ctc = None
        if self._ctc_output is not None:
            ctc = normalized_log_probs(self.module.ctc_output(enc))
        return EncoderOutput(enc, enc_lens, ctc_log_probs=ctc)

    def _encode_conformer_ctc(self, features: torch.Tensor, feature_lens: torch.Tensor
                              ) -> EncoderOutput:
        n = features.size(0)
        sup = {
            "sequence_idx": torch.arange(n, dtype=torch.int32, device=features.device),
            "start_frame": torch.zeros(n, dtype=torch.int32, device=features.device),
            "num_frames": feature_lens.to(torch.int32),
        }
        nnet_output, memory, mask = self.module(features, sup)
        t = nnet_output.size(1)
        # icefall's decode.py: supervision num_frames // 4, truncated to the output length
        # (k2.DenseFsaVec's allow_truncate)
        lens = torch.clamp(feature_lens // self.subsampling_factor, max=t)
        memory = memory.permute(1, 0, 2)
        memory_lens = (~mask).sum(dim=1).to(torch.int64)
        return EncoderOutput(memory, lens, ctc_log_probs=normalized_log_probs(nnet_output),
                             memory=memory, memory_lens=memory_lens)


def _output_dim(module: Any, head: str, tokens: k2.SymbolTable | None) -> int:
    """The output size of ``module.<head>`` (icefall: ``Sequential(Dropout, Linear(C, V),
    ...)``: its last parameter is the Linear's bias ``[V]``), else the token table's size
    without disambiguation symbols, else 0 (unknown)."""
    layer = _member(module, head)
    params = list(layer.parameters()) if isinstance(layer, torch.nn.Module) else []
    if params and params[-1].dim() in (1, 2):
        return int(params[-1].shape[0])
    return token_vocab_size(tokens) or 0


def _sos_eos(tokens: k2.SymbolTable | None, vocab_size: int) -> int:
    if tokens is not None and "<sos/eos>" in tokens:
        return int(tokens["<sos/eos>"])
    logger.warning("no <sos/eos> in the token table; using the last id (%d) as sos/eos",
                   vocab_size - 1)
    return vocab_size - 1


def is_torchscript_archive(path: Any) -> bool:
    """True if ``path`` is a TorchScript zip archive (``torch.jit.save``), not a pickle
    written by ``torch.save``."""
    import zipfile

    if not zipfile.is_zipfile(path):
        return False
    with zipfile.ZipFile(path) as z:
        return any(n.endswith("/constants.pkl") or "/code/" in n for n in z.namelist())
