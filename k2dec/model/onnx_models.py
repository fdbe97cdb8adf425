"""sherpa-onnx style ONNX exports (icefall's ``export-onnx.py`` / ``export-onnx-ctc.py``)
through onnxruntime, behind :class:`AcousticModel`.

Transducer: three files, as icefall's ``export-onnx.py`` writes them:

- ``encoder*.onnx``: inputs ``x`` float ``[N, T, F]``, ``x_lens`` int64 (or int32) ``[N]``;
  outputs ``encoder_out`` ``[N, T', J]`` (the joiner's ``encoder_proj`` is inside) and
  ``encoder_out_lens``. Metadata ``model_type`` (``zipformer2``, ``zipformer``, ...).
- ``decoder*.onnx``: input ``y`` int64 ``[N, context_size]``, output ``decoder_out``
  ``[N, J]`` (``decoder_proj`` inside). Metadata ``context_size``, ``vocab_size``.
- ``joiner*.onnx``: inputs ``encoder_out``, ``decoder_out`` ``[N, J]``, output ``logit``
  ``[N, V]``. Metadata ``joiner_dim``.

The blank id is 0 (sherpa-onnx hard-codes it too). Since the projections live in the encoder
and decoder files, the joiner here has no ``encoder_proj`` / ``decoder_proj`` and
:class:`k2dec.transducer.TransducerNet` calls it on projected inputs as icefall's
``onnx_pretrained.py`` does.

CTC: one file (``model.onnx``): inputs ``x``, ``x_lens``; outputs ``log_probs``
``[N, T', V]`` and ``log_probs_len``; metadata ``model_type`` (``zipformer2_ctc``, ...) and
optionally ``subsampling_factor``. Models that need other features (NeMo's, marked by a
non-empty ``normalize_type``) are refused with a message.

Sessions run on CPU; outputs are moved to the device the features came from.
"""

from __future__ import annotations

import logging
from pathlib import Path

import k2
import numpy as np
import torch

from ..data.features import FeatureConfig
from .interface import AcousticModel, EncoderOutput, normalized_log_probs, token_vocab_size

__all__ = ["OnnxCtcModel", "OnnxSession", "OnnxTransducerModel", "load_onnx_model"]

logger = logging.getLogger(__name__)

_NP_TYPES = {
    "tensor(float)": np.float32,
    "tensor(float16)": np.float16,
    "tensor(double)": np.float64,
    "tensor(int64)": np.int64,
    "tensor(int32)": np.int32,
}


class OnnxSession:
    """An onnxruntime CPU session taking and returning torch tensors.

    Attributes:
      path: the file; inputs / outputs: ``[(name, type string, shape)]``;
      metadata: the model's custom metadata (``{key: value}`` strings).
    """

    def __init__(self, path: str | Path) -> None:
        try:
            import onnxruntime as ort
        except ImportError as e:  # pragma: no cover - a dependency of k2dec
            raise ImportError("ONNX models need onnxruntime (pip install onnxruntime)") from e
        self.path = Path(path)
        opts = ort.SessionOptions()
        opts.inter_op_num_threads = 1
        opts.intra_op_num_threads = max(1, torch.get_num_threads())
        opts.log_severity_level = 3
        try:
            self.session = ort.InferenceSession(str(path), sess_options=opts,
                                                providers=["CPUExecutionProvider"])
        except Exception as e:  # onnxruntime raises its own exception types
            raise ValueError(f"onnxruntime cannot load {path}: {e}") from None
        self.inputs = [(i.name, i.type, list(i.shape)) for i in self.session.get_inputs()]
        self.outputs = [(o.name, o.type, list(o.shape)) for o in self.session.get_outputs()]
        self.metadata = dict(self.session.get_modelmeta().custom_metadata_map)

    def meta_int(self, key: str, default: int | None = None) -> int | None:
        value = self.metadata.get(key)
        if value is None:
            return default
        try:
            return int(value)
        except ValueError:
            raise ValueError(f"{self.path}: metadata {key}={value!r} is not an integer") from None

    def check_dynamic_batch(self) -> None:
        for name, _, shape in self.inputs:
            if shape and isinstance(shape[0], int) and shape[0] != 1:
                raise ValueError(f"{self.path}: input {name!r} has a fixed batch size "
                                 f"{shape[0]}; export with dynamic axes")

    def __call__(self, *args: torch.Tensor) -> list[torch.Tensor]:
        """Run on ``args`` (in input order); outputs as CPU torch tensors."""
        if len(args) != len(self.inputs):
            raise ValueError(f"{self.path.name} takes {len(self.inputs)} inputs "
                             f"({[i[0] for i in self.inputs]}), got {len(args)}")
        feed = {}
        for (name, kind, _), x in zip(self.inputs, args):
            dtype = _NP_TYPES.get(kind)
            if dtype is None:
                raise ValueError(f"{self.path.name}: input {name!r} has type {kind}, which "
                                 "k2dec does not feed")
            feed[name] = np.ascontiguousarray(x.detach().cpu().numpy().astype(dtype, copy=False))
        outs = self.session.run(None, feed)
        return [torch.from_numpy(np.asarray(o)) for o in outs]


class OnnxDecoder:
    """The decoder file as icefall's stateless decoder interface: ``decoder(y,
    need_pad=False)`` with ``y`` int ``[N, context_size]`` returns ``[N, 1, J]`` (projected)."""

    def __init__(self, session: OnnxSession, context_size: int, vocab_size: int,
                 blank_id: int = 0) -> None:
        self.session = session
        self.context_size = context_size
        self.vocab_size = vocab_size
        self.blank_id = blank_id
        self.dim = int(session.outputs[0][2][-1]) if isinstance(
            session.outputs[0][2][-1], int) else None

    def __call__(self, y: torch.Tensor, need_pad: bool = False) -> torch.Tensor:
        if need_pad:
            raise ValueError("an ONNX decoder takes exactly context_size tokens (need_pad=False)")
        if y.dim() != 2 or y.size(1) != self.context_size:
            raise ValueError(f"y must have shape [N, {self.context_size}], got "
                             f"{tuple(y.shape)}")
        if y.size(0) == 0:
            return torch.zeros(0, 1, self.dim or 0, device=y.device)
        (out,) = self.session(y.to(torch.int64))[:1]
        return out.to(y.device, torch.float32).unsqueeze(1)


class OnnxJoiner:
    """The joiner file: ``joiner(encoder_out, decoder_out)`` on projected inputs ``[..., J]``
    (broadcast against each other) returns logits ``[..., V]``."""

    def __init__(self, session: OnnxSession, vocab_size: int) -> None:
        self.session = session
        self.vocab_size = vocab_size

    def __call__(self, encoder_out: torch.Tensor, decoder_out: torch.Tensor) -> torch.Tensor:
        e, d = torch.broadcast_tensors(encoder_out, decoder_out)
        lead = e.shape[:-1]
        e = e.reshape(-1, e.size(-1))
        d = d.reshape(-1, d.size(-1))
        if e.size(0) == 0:
            return torch.zeros(*lead, self.vocab_size, device=encoder_out.device)
        (out,) = self.session(e, d)[:1]
        return out.to(encoder_out.device, torch.float32).reshape(*lead, -1)


class OnnxTransducer:
    """``.decoder`` and ``.joiner`` for :mod:`k2dec.transducer`'s searches."""

    def __init__(self, decoder: OnnxDecoder, joiner: OnnxJoiner) -> None:
        self.decoder = decoder
        self.joiner = joiner


def _feature_config(session: OnnxSession, given: FeatureConfig | None) -> FeatureConfig:
    if given is not None:
        return given
    cfg = FeatureConfig()
    shape = session.inputs[0][2]
    if len(shape) == 3 and isinstance(shape[2], int) and shape[2] != cfg.num_mel_bins:
        cfg = cfg.override(num_mel_bins=int(shape[2]))
    rate = session.meta_int("sample_rate")
    return cfg.override(sampling_rate=rate) if rate else cfg


def _min_frames(model_type: str) -> int:
    # zipformer's Conv2dSubsampling: ((T - 7) // 2 + 1) // 2; conformer's: ((T - 1) // 2 - 1) // 2
    return 9 if model_type.startswith("zipformer") else 7


class _OnnxEncoderMixin:
    """Runs an encoder-like session on a batch (one utterance at a time for exports
    without ``x_lens``, as ``export-onnx.py --keep-x-lens 0`` writes them); outputs go to
    :attr:`device` (the sessions themselves run on CPU)."""

    session: OnnxSession
    _device: torch.device

    @property
    def device(self) -> torch.device:
        return self._device

    def to(self, device: torch.device | str):
        self._device = torch.device(device)
        return self

    def _run(self, features: torch.Tensor, lens: torch.Tensor
             ) -> tuple[torch.Tensor, torch.Tensor]:
        if len(self.session.inputs) == 2:
            out, out_lens = self.session(features, lens)[:2]
            return out.to(features.device, torch.float32), out_lens.to(features.device,
                                                                        torch.int64)
        outs = [self.session(features[i: i + 1, : int(lens[i])])[0][0]
                for i in range(features.size(0))]
        out_lens = torch.tensor([o.size(0) for o in outs], dtype=torch.int64)
        padded = torch.nn.utils.rnn.pad_sequence(outs, batch_first=True)
        return padded.to(features.device, torch.float32), out_lens.to(features.device)


class OnnxTransducerModel(_OnnxEncoderMixin, AcousticModel):
    """A sherpa-onnx transducer (encoder / decoder / joiner files)."""

    kind = "onnx"

    def __init__(self, encoder: str | Path, decoder: str | Path, joiner: str | Path,
                 tokens: k2.SymbolTable | None = None,
                 feature_config: FeatureConfig | None = None,
                 device: torch.device | str = "cpu") -> None:
        self.session = OnnxSession(encoder)
        dec = OnnxSession(decoder)
        join = OnnxSession(joiner)
        if len(self.session.inputs) > 2:
            raise ValueError(f"{encoder} takes {len(self.session.inputs)} inputs (cached "
                             "states): streaming ONNX exports are not supported; use the "
                             "non-streaming export or the TorchScript streaming export")
        for s in (self.session, dec, join):
            s.check_dynamic_batch()
        context_size = dec.meta_int("context_size")
        if context_size is None:
            context_size = dec.inputs[0][2][1] if isinstance(dec.inputs[0][2][1], int) else None
        if context_size is None:
            raise ValueError(f"{decoder}: no context_size in its metadata or input shape")
        out_shape = join.outputs[0][2]
        vocab = dec.meta_int("vocab_size") or (out_shape[-1] if isinstance(out_shape[-1], int)
                                               else None)
        if vocab is None:
            raise ValueError(f"{decoder}: no vocab_size in its metadata")
        self.paths = (Path(encoder), Path(decoder), Path(joiner))
        self.model_type = self.session.metadata.get("model_type", "")
        self.vocab_size = int(vocab)
        self._transducer = OnnxTransducer(OnnxDecoder(dec, int(context_size), self.vocab_size),
                                          OnnxJoiner(join, self.vocab_size))
        self.tokens = tokens
        self.subsampling_factor = self.session.meta_int("subsampling_factor", 4) or 4
        self.min_input_frames = _min_frames(self.model_type)
        self.set_feature_config(_feature_config(self.session, feature_config))
        self._device = torch.device(device)

    @property
    def transducer(self) -> OnnxTransducer:
        return self._transducer

    def _encode(self, features: torch.Tensor, feature_lens: torch.Tensor) -> EncoderOutput:
        enc, enc_lens = self._run(features, feature_lens)
        return EncoderOutput(enc, enc_lens)


class OnnxCtcModel(_OnnxEncoderMixin, AcousticModel):
    """A sherpa-onnx CTC model (``model.onnx``: ``x``, ``x_lens`` -> ``log_probs``,
    ``log_probs_len``)."""

    kind = "onnx"

    def __init__(self, path: str | Path, tokens: k2.SymbolTable | None = None,
                 feature_config: FeatureConfig | None = None,
                 device: torch.device | str = "cpu") -> None:
        self.session = OnnxSession(path)
        self.session.check_dynamic_batch()
        normalize = self.session.metadata.get("normalize_type", "")
        if normalize:
            raise ValueError(f"{path}: normalize_type={normalize!r} (a NeMo model with its own "
                             "feature normalization): k2dec computes Kaldi fbank only")
        if len(self.session.outputs) < 2 or len(self.session.inputs) != 2:
            raise ValueError(f"{path}: expected inputs (x, x_lens) and outputs (log_probs, "
                             f"log_probs_len), got {[i[0] for i in self.session.inputs]} -> "
                             f"{[o[0] for o in self.session.outputs]}")
        self.paths = (Path(path),)
        self.model_type = self.session.metadata.get("model_type", "")
        vocab = self.session.outputs[0][2][-1]
        self.vocab_size = int(vocab) if isinstance(vocab, int) else token_vocab_size(tokens)
        self.tokens = tokens
        default_sub = 1 if self.model_type == "tdnn" else 4
        self.subsampling_factor = self.session.meta_int("subsampling_factor",
                                                        default_sub) or default_sub
        self.min_input_frames = 1 if self.model_type == "tdnn" else _min_frames(self.model_type)
        self.set_feature_config(_feature_config(self.session, feature_config))
        self._device = torch.device(device)

    @property
    def has_ctc(self) -> bool:
        return True

    def _encode(self, features: torch.Tensor, feature_lens: torch.Tensor) -> EncoderOutput:
        log_probs, lens = self._run(features, feature_lens)
        log_probs = normalized_log_probs(log_probs)
        return EncoderOutput(log_probs, lens, ctc_log_probs=log_probs)


def _pick(files: list[Path], prefix: str) -> Path | None:
    """The one ``prefix*.onnx`` file, preferring float32 over ``.int8.`` exports."""
    found = [f for f in files if f.name.startswith(prefix)]
    full = [f for f in found if ".int8." not in f.name]
    choice = full or found
    if len(choice) > 1:
        raise ValueError(f"several {prefix} files: {', '.join(f.name for f in choice)}; pass "
                         f"the {prefix} file you want as the model path")
    return choice[0] if choice else None


def load_onnx_model(path: str | Path, tokens: k2.SymbolTable | None = None,
                    feature_config: FeatureConfig | None = None,
                    device: torch.device | str = "cpu") -> AcousticModel:
    """An ONNX transducer or CTC model from a folder or one of its files.

    A folder with ``encoder*.onnx``, ``decoder*.onnx`` and ``joiner*.onnx`` (float32 files
    preferred over ``*.int8.onnx``), or the path of its encoder file (the decoder and joiner
    are the files whose names replace ``encoder`` by ``decoder`` / ``joiner``), is a
    transducer; a folder with one other ``.onnx`` file (``model.onnx``), or that file, is a
    CTC model.
    """
    path = Path(path)
    folder = path if path.is_dir() else path.parent
    files = sorted(folder.glob("*.onnx"))
    if not path.is_dir() and path.name.startswith("encoder"):
        dec = path.with_name(path.name.replace("encoder", "decoder", 1))
        join = path.with_name(path.name.replace("encoder", "joiner", 1))
        if not (dec.is_file() and join.is_file()):
            raise ValueError(f"{path}: expected {dec.name} and {join.name} beside it")
        return OnnxTransducerModel(path, dec, join, tokens, feature_config, device)
    if not path.is_dir():
        return OnnxCtcModel(path, tokens, feature_config, device)
    enc, dec, join = (_pick(files, p) for p in ("encoder", "decoder", "joiner"))
    if enc is not None and dec is not None and join is not None:
        return OnnxTransducerModel(enc, dec, join, tokens, feature_config, device)
    rest = [f for f in files if not f.name.startswith(("encoder", "decoder", "joiner"))]
    single = _pick(rest, "model") or (rest[0] if len(rest) == 1 else None)
    if single is not None:
        return OnnxCtcModel(single, tokens, feature_config, device)
    raise ValueError(f"{folder}: found {[f.name for f in files] or 'no .onnx files'}; expected "
                     "encoder*/decoder*/joiner*.onnx (transducer) or model.onnx (CTC)")
