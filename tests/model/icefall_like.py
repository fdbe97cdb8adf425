# ruff: noqa: UP006, UP007, B008  (icefall's TorchScript-friendly signatures, kept as they are)
"""Tiny models with exactly the interfaces and attribute names of icefall's exports, written
for the tests (no download is possible): a zipformer-like encoder (``encoder_embed`` with
zipformer's subsampling lengths ``((T - 7) // 2 + 1) // 2`` and an ``encoder`` taking ``(T, N,
C)`` and a padding mask, wrapped like ``export.py``'s ``EncoderModel``), the stateless
``Decoder``, the ``Joiner``, a ``ctc_output`` head, a conformer_ctc-like model (``forward(x,
supervisions) -> (nnet_output, memory, memory_mask)``, ``decoder_nll``) and a streaming
encoder (``forward(features, feature_lengths, states)``, ``get_init_states``). Builders
script them (``torch.jit.script``, as ``export.py --jit 1``) and export them to ONNX with the
names and metadata of ``export-onnx.py`` / ``export-onnx-ctc.py``.
"""

from __future__ import annotations

import inspect
import math
from pathlib import Path
from typing import Dict, List, Optional, Tuple  # noqa: UP035

import torch
import torch.nn.functional as F
from torch import Tensor, nn

FEATURES = 80


def make_pad_mask(lengths: Tensor, max_len: int = 0) -> Tensor:
    max_len = max(max_len, int(lengths.max()))
    seq = torch.arange(0, max_len, device=lengths.device)
    return seq.unsqueeze(0) >= lengths.unsqueeze(-1)


class Conv2dSubsampling(nn.Module):
    """Time subsampling with zipformer's output length ``((T - 7) // 2 + 1) // 2``."""

    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv1d(in_channels, out_channels, kernel_size=7, stride=2)
        self.conv2 = nn.Conv1d(out_channels, out_channels, kernel_size=2, stride=2)

    def forward(self, x: Tensor, x_lens: Tensor) -> Tuple[Tensor, Tensor]:
        y = torch.tanh(self.conv1(x.permute(0, 2, 1)))
        y = torch.tanh(self.conv2(y)).permute(0, 2, 1)
        return y, ((x_lens - 7) // 2 + 1) // 2


class Zipformer2(nn.Module):
    """(T, N, C) in and out, padded frames masked before a time convolution."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.linear = nn.Linear(dim, dim)
        self.conv = nn.Conv1d(dim, dim, kernel_size=3, padding=1, groups=dim)

    def forward(self, x: Tensor, x_lens: Tensor, src_key_padding_mask: Optional[Tensor] = None
                ) -> Tuple[Tensor, Tensor]:
        y = torch.tanh(self.linear(x))
        if src_key_padding_mask is not None:
            y = y.masked_fill(src_key_padding_mask.to(torch.bool).t().unsqueeze(-1), 0.0)
        y = y + self.conv(y.permute(1, 2, 0)).permute(2, 0, 1)
        return y, x_lens


class EncoderModel(nn.Module):
    """export.py's wrapper: ``forward(features, feature_lengths)``."""

    def __init__(self, encoder: nn.Module, encoder_embed: nn.Module) -> None:
        super().__init__()
        self.encoder = encoder
        self.encoder_embed = encoder_embed

    def forward(self, features: Tensor, feature_lengths: Tensor) -> Tuple[Tensor, Tensor]:
        x, x_lens = self.encoder_embed(features, feature_lengths)
        src_key_padding_mask = make_pad_mask(x_lens, x.size(1)).to(torch.int32)
        x = x.permute(1, 0, 2)
        encoder_out, encoder_out_lens = self.encoder(x, x_lens, src_key_padding_mask)
        return encoder_out.permute(1, 0, 2), encoder_out_lens


class Decoder(nn.Module):
    """icefall's stateless decoder (embedding, grouped context convolution, ReLU)."""

    def __init__(self, vocab_size: int, decoder_dim: int, blank_id: int, context_size: int):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, decoder_dim)
        self.blank_id = blank_id
        self.context_size = context_size
        self.vocab_size = vocab_size
        if context_size > 1:
            self.conv = nn.Conv1d(decoder_dim, decoder_dim, kernel_size=context_size, padding=0,
                                  groups=decoder_dim // 4, bias=False)
        else:
            self.conv = nn.Identity()

    def forward(self, y: Tensor, need_pad: bool = True) -> Tensor:
        y = y.to(torch.int64)
        embedding_out = self.embedding(y.clamp(min=0)) * (y >= 0).unsqueeze(-1)
        if self.context_size > 1:
            embedding_out = embedding_out.permute(0, 2, 1)
            if need_pad is True:
                embedding_out = F.pad(embedding_out, pad=(self.context_size - 1, 0))
            else:
                assert embedding_out.size(-1) == self.context_size
            embedding_out = self.conv(embedding_out)
            embedding_out = embedding_out.permute(0, 2, 1)
            embedding_out = F.relu(embedding_out)
        return embedding_out


class Joiner(nn.Module):
    def __init__(self, encoder_dim: int, decoder_dim: int, joiner_dim: int, vocab_size: int):
        super().__init__()
        self.encoder_proj = nn.Linear(encoder_dim, joiner_dim)
        self.decoder_proj = nn.Linear(decoder_dim, joiner_dim)
        self.output_linear = nn.Linear(joiner_dim, vocab_size)

    def forward(self, encoder_out: Tensor, decoder_out: Tensor, project_input: bool = True
                ) -> Tensor:
        assert encoder_out.ndim == decoder_out.ndim
        if project_input:
            logit = self.encoder_proj(encoder_out) + self.decoder_proj(decoder_out)
        else:
            logit = encoder_out + decoder_out
        return self.output_linear(torch.tanh(logit))


class AsrModel(nn.Module):
    """zipformer's AsrModel after export.py: encoder (wrapped), decoder, joiner, ctc_output;
    ``forward`` is ignored by the scripting (icefall's training forward is not scriptable)."""

    def __init__(self, encoder: nn.Module, decoder: Optional[nn.Module],
                 joiner: Optional[nn.Module], ctc_output: Optional[nn.Module]) -> None:
        super().__init__()
        self.encoder = encoder
        self.decoder = decoder
        self.joiner = joiner
        self.ctc_output = ctc_output

    @torch.jit.ignore
    def forward(self, x: Tensor) -> Tensor:  # pragma: no cover - training only
        return x


def build_transducer(vocab_size: int = 12, dim: int = 16, decoder_dim: int = 16,
                     joiner_dim: int = 24, context_size: int = 2, ctc: bool = True,
                     transducer: bool = True, seed: int = 0) -> AsrModel:
    torch.manual_seed(seed)
    encoder = EncoderModel(Zipformer2(dim), Conv2dSubsampling(FEATURES, dim))
    decoder = joiner = None
    if transducer:
        decoder = Decoder(vocab_size, decoder_dim, blank_id=0, context_size=context_size)
        joiner = Joiner(dim, decoder_dim, joiner_dim, vocab_size)
        with torch.no_grad():  # make blank less dominant so hypotheses are non-trivial
            joiner.output_linear.weight.mul_(4.0)
    ctc_output = (nn.Sequential(nn.Dropout(0.1), nn.Linear(dim, vocab_size),
                                nn.LogSoftmax(dim=-1)) if ctc else None)
    return AsrModel(encoder, decoder, joiner, ctc_output).eval()


def save_jit(model: nn.Module, path: Path) -> Path:
    torch.jit.script(model).save(str(path))
    return path


# --- ONNX export, as icefall's export-onnx.py ----------------------------------------------

class OnnxEncoder(nn.Module):
    def __init__(self, encoder: nn.Module, encoder_embed: nn.Module, encoder_proj: nn.Module):
        super().__init__()
        self.encoder = encoder
        self.encoder_embed = encoder_embed
        self.encoder_proj = encoder_proj

    def forward(self, x: Tensor, x_lens: Tensor) -> Tuple[Tensor, Tensor]:
        x, x_lens = self.encoder_embed(x, x_lens)
        src_key_padding_mask = make_pad_mask(x_lens, x.shape[1]).to(torch.int32)
        x = x.permute(1, 0, 2)
        encoder_out, encoder_out_lens = self.encoder(x, x_lens, src_key_padding_mask)
        encoder_out = encoder_out.permute(1, 0, 2)
        return self.encoder_proj(encoder_out), encoder_out_lens


class OnnxDecoder(nn.Module):
    def __init__(self, decoder: nn.Module, decoder_proj: nn.Module) -> None:
        super().__init__()
        self.decoder = decoder
        self.decoder_proj = decoder_proj

    def forward(self, y: Tensor) -> Tensor:
        need_pad = False
        decoder_output = self.decoder(y, need_pad=need_pad)
        decoder_output = decoder_output.squeeze(1)
        return self.decoder_proj(decoder_output)


class OnnxJoiner(nn.Module):
    def __init__(self, output_linear: nn.Module) -> None:
        super().__init__()
        self.output_linear = output_linear

    def forward(self, encoder_out: Tensor, decoder_out: Tensor) -> Tensor:
        return self.output_linear(torch.tanh(encoder_out + decoder_out))


def add_meta_data(filename: Path, meta_data: Dict[str, str]) -> None:
    import onnx

    model = onnx.load(str(filename))
    for key, value in meta_data.items():
        meta = model.metadata_props.add()
        meta.key = key
        meta.value = value
    onnx.save(model, str(filename))


def _onnx_export(*args, **kwargs) -> None:
    """``torch.onnx.export`` with the TorchScript-based exporter icefall's scripts use (newer
    torch defaults to the dynamo exporter, which rejects ``dynamic_axes`` on traced modules)."""
    if "dynamo" in inspect.signature(torch.onnx.export).parameters:
        kwargs["dynamo"] = False
    torch.onnx.export(*args, **kwargs)


def _export_encoder(module: nn.Module, inputs: Tuple[Tensor, Tensor], path: Path,
                    outputs: Tuple[str, str], model_type: str, comment: str) -> None:
    """Trace and export like export-onnx.py's encoder (and export-onnx-ctc.py's model)."""
    traced = torch.jit.trace(module.eval(), inputs)
    _onnx_export(traced, inputs, str(path), opset_version=13,
                      input_names=["x", "x_lens"], output_names=list(outputs),
                      dynamic_axes={"x": {0: "N", 1: "T"}, "x_lens": {0: "N"},
                                    outputs[0]: {0: "N", 1: "T"}, outputs[1]: {0: "N"}})
    add_meta_data(path, {"model_type": model_type, "version": "1", "model_author": "k2-fsa",
                         "comment": comment})


def export_onnx(model: AsrModel, out_dir: Path, suffix: str = "epoch-99-avg-1",
                x_lens_dtype: torch.dtype = torch.int64) -> dict[str, Path]:
    """encoder-/decoder-/joiner-{suffix}.onnx (and model.onnx with a CTC head), with
    export-onnx.py's input/output names, dynamic axes and metadata."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {}
    x = torch.zeros(1, 100, FEATURES)
    x_lens = torch.tensor([100], dtype=x_lens_dtype)
    embed, zipformer = model.encoder.encoder_embed, model.encoder.encoder
    if model.decoder is not None:
        paths["encoder"] = out_dir / f"encoder-{suffix}.onnx"
        _export_encoder(OnnxEncoder(zipformer, embed, model.joiner.encoder_proj),
                        (x, x_lens), paths["encoder"], ("encoder_out", "encoder_out_lens"),
                        "zipformer2", "non-streaming zipformer2")
        dec = torch.jit.script(OnnxDecoder(model.decoder, model.joiner.decoder_proj).eval())
        context_size = model.decoder.context_size
        paths["decoder"] = out_dir / f"decoder-{suffix}.onnx"
        _onnx_export(dec, torch.zeros(1, context_size, dtype=torch.int64),
                          str(paths["decoder"]), opset_version=13, input_names=["y"],
                          output_names=["decoder_out"],
                          dynamic_axes={"y": {0: "N"}, "decoder_out": {0: "N"}})
        add_meta_data(paths["decoder"], {"context_size": str(context_size),
                                         "vocab_size": str(model.decoder.vocab_size)})
        join = OnnxJoiner(model.joiner.output_linear).eval()
        joiner_dim = model.joiner.output_linear.weight.shape[1]
        paths["joiner"] = out_dir / f"joiner-{suffix}.onnx"
        _onnx_export(join, (torch.rand(1, joiner_dim), torch.rand(1, joiner_dim)),
                          str(paths["joiner"]), opset_version=13,
                          input_names=["encoder_out", "decoder_out"], output_names=["logit"],
                          dynamic_axes={"encoder_out": {0: "N"}, "decoder_out": {0: "N"},
                                        "logit": {0: "N"}})
        add_meta_data(paths["joiner"], {"joiner_dim": str(joiner_dim)})
    if model.ctc_output is not None:
        # export-onnx-ctc.py's wrapper is the encoder wrapper with ctc_output as the head
        paths["ctc"] = out_dir / ("model.onnx" if model.decoder is None else "ctc" / Path(
            "model.onnx"))
        paths["ctc"].parent.mkdir(parents=True, exist_ok=True)
        _export_encoder(OnnxEncoder(zipformer, embed, model.ctc_output), (x, x_lens),
                        paths["ctc"], ("log_probs", "log_probs_len"), "zipformer2_ctc",
                        "non-streaming zipformer2 CTC")
    return paths


def write_tokens(path: Path, vocab_size: int) -> Path:
    """icefall's BPE tokens.txt layout: <blk> 0, <sos/eos> 1, <unk> 2, then pieces."""
    names = ["<blk>", "<sos/eos>", "<unk>"] + [
        ("▁" if i % 3 == 0 else "") + chr(ord("a") + i) for i in range(vocab_size - 3)]
    path.write_text("".join(f"{n} {i}\n" for i, n in enumerate(names)))
    return path


# --- conformer_ctc ------------------------------------------------------------------------

Supervisions = Dict[str, Tensor]


def encoder_padding_mask(max_len: int, supervisions: Optional[Supervisions] = None
                         ) -> Optional[Tensor]:
    if supervisions is None:
        return None
    segs = torch.stack((supervisions["sequence_idx"], supervisions["start_frame"],
                        supervisions["num_frames"]), 1).to(torch.int32)
    lengths = [0 for _ in range(int(segs[:, 0].max().item()) + 1)]
    for idx in range(segs.size(0)):
        lengths[int(segs[idx, 0].item())] = int(segs[idx, 1].item() + segs[idx, 2].item())
    lengths = [((i - 1) // 2 - 1) // 2 for i in lengths]
    seq_range = torch.arange(0, max_len, dtype=torch.int64).unsqueeze(0).expand(len(lengths),
                                                                                max_len)
    return seq_range >= torch.tensor(lengths, dtype=torch.int64).unsqueeze(-1)


class PositionalEncoding(nn.Module):
    def __init__(self, d_model: int) -> None:
        super().__init__()
        self.d_model = d_model
        self.xscale = math.sqrt(d_model)

    def forward(self, x: Tensor) -> Tensor:
        pos = torch.arange(x.size(1), dtype=torch.float32, device=x.device).unsqueeze(1)
        div = torch.exp(torch.arange(0, self.d_model, 2, dtype=torch.float32, device=x.device)
                        * -(math.log(10000.0) / self.d_model))
        pe = torch.zeros(x.size(1), self.d_model, device=x.device)
        pe[:, 0::2] = torch.sin(pos * div)
        pe[:, 1::2] = torch.cos(pos * div)
        return x * self.xscale + pe.unsqueeze(0)


class ConformerCtc(nn.Module):
    """conformer_ctc's Conformer after export.py --jit: 4x subsampling (lengths ``((T - 1)
    // 2 - 1) // 2``), CTC log-probs, memory ``(T, N, C)``, an attention decoder."""

    def __init__(self, num_classes: int = 12, d_model: int = 16) -> None:
        super().__init__()
        self.encoder_embed = nn.Sequential(nn.Conv1d(FEATURES, d_model, 3, stride=2),
                                           nn.Tanh(),
                                           nn.Conv1d(d_model, d_model, 3, stride=2))
        self.encoder = nn.TransformerEncoder(
            nn.TransformerEncoderLayer(d_model, 2, 32, dropout=0.0), num_layers=1)
        self.encoder_output_layer = nn.Linear(d_model, num_classes)
        self.decoder_num_class = num_classes
        self.decoder_embed = nn.Embedding(num_classes, d_model)
        self.decoder_pos = PositionalEncoding(d_model)
        self.decoder = nn.TransformerDecoder(
            nn.TransformerDecoderLayer(d_model, 2, 32, dropout=0.0), num_layers=1)
        self.decoder_output_layer = nn.Linear(d_model, num_classes)

    def forward(self, x: Tensor, supervision: Optional[Supervisions] = None
                ) -> Tuple[Tensor, Tensor, Optional[Tensor]]:
        x = self.encoder_embed(x.permute(0, 2, 1)).permute(2, 0, 1)  # (T, N, C)
        mask = encoder_padding_mask(x.size(0), supervision)
        mask = mask.to(x.device) if mask is not None else None
        x = self.encoder(x, src_key_padding_mask=mask)
        nnet = self.encoder_output_layer(x).permute(1, 0, 2)
        return nn.functional.log_softmax(nnet, dim=-1), x, mask

    @torch.jit.export
    def decoder_nll(self, memory: Tensor, memory_key_padding_mask: Tensor,
                    token_ids: List[List[int]], sos_id: int, eos_id: int) -> Tensor:
        ys_in = [torch.tensor([sos_id] + t) for t in token_ids]
        ys_out = [torch.tensor(t + [eos_id]) for t in token_ids]
        ys_in_pad = nn.utils.rnn.pad_sequence(ys_in, batch_first=True,
                                              padding_value=float(eos_id))
        ys_out_pad = nn.utils.rnn.pad_sequence(ys_out, batch_first=True,
                                               padding_value=float(-1))
        ys_in_pad = ys_in_pad.to(memory.device, dtype=torch.int64)
        ys_out_pad = ys_out_pad.to(memory.device, dtype=torch.int64)
        u = ys_in_pad.shape[-1]
        tgt_mask = torch.triu(torch.full((u, u), float("-inf"), device=memory.device),
                              diagonal=1)
        tgt_key_padding_mask = ys_in_pad == eos_id
        tgt_key_padding_mask[:, 0] = False
        tgt = self.decoder_pos(self.decoder_embed(ys_in_pad)).permute(1, 0, 2)
        pred = self.decoder(tgt=tgt, memory=memory, tgt_mask=tgt_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask)
        pred = self.decoder_output_layer(pred.permute(1, 0, 2))
        nll = F.cross_entropy(pred.reshape(-1, self.decoder_num_class), ys_out_pad.reshape(-1),
                              ignore_index=-1, reduction="none")
        return nll.view(pred.shape[0], -1)


# --- streaming zipformer ------------------------------------------------------------------

class StreamingEncoderModel(nn.Module):
    """A causal encoder with export.py's streaming interface: each call takes ``2 *
    chunk_size + pad_length`` frames, emits ``chunk_size // 2`` frames and carries a state
    (a running sum of past outputs and icefall's ``processed_lens``)."""

    def __init__(self, dim: int = 16, chunk_size: int = 8) -> None:
        super().__init__()
        self.chunk_size = chunk_size
        self.left_context_len = 32
        self.pad_length = 7 + 2 * 3
        self.dim = dim
        self.proj = nn.Linear(4 * FEATURES, dim)
        self.look = nn.Linear(FEATURES, dim)
        self.mix = nn.Linear(dim, dim)

    def forward(self, features: Tensor, feature_lengths: Tensor, states: List[Tensor]
                ) -> Tuple[Tensor, Tensor, List[Tensor]]:
        n = features.size(0)
        c = self.chunk_size * 2
        main = features[:, :c].reshape(n, c // 4, 4 * features.size(2))
        ahead = features[:, c:].mean(dim=1, keepdim=True)
        y = torch.tanh(self.proj(main) + self.look(ahead))
        summed, count, processed = states[0], states[1], states[2]
        memory = summed / count.clamp(min=1.0).unsqueeze(1)
        y = torch.tanh(y + self.mix(memory).unsqueeze(1))
        out_lens = torch.clamp((feature_lengths.to(torch.int64) - 7) // 4, min=0,
                               max=y.size(1))
        new_states = [summed + y.sum(dim=1), count + float(y.size(1)),
                      processed + out_lens.to(torch.int32)]
        return y, out_lens, new_states

    @torch.jit.export
    def get_init_states(self, batch_size: int = 1, device: torch.device = torch.device("cpu")
                        ) -> List[Tensor]:
        return [torch.zeros(batch_size, self.dim, device=device),
                torch.zeros(batch_size, device=device),
                torch.zeros(batch_size, dtype=torch.int32, device=device)]


def build_streaming(vocab_size: int = 12, dim: int = 16, chunk_size: int = 8,
                    seed: int = 0) -> AsrModel:
    torch.manual_seed(seed)
    decoder = Decoder(vocab_size, 16, blank_id=0, context_size=2)
    joiner = Joiner(dim, 16, 24, vocab_size)
    with torch.no_grad():
        joiner.output_linear.weight.mul_(4.0)
    return AsrModel(StreamingEncoderModel(dim, chunk_size), decoder, joiner, None).eval()
