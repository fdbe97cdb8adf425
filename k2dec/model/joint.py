"""The recipes' joint model: a Conformer encoder shared by a CTC head, a stateless
transducer and an attention decoder; :func:`export_model` writes it to a file and
:func:`load_joint_model` reads it back (its training losses are :mod:`k2dec.train.losses`).

Token convention (icefall BPE): ``<blk>`` = 0 (CTC and transducer blank), ``<sos/eos>`` = 1
(the attention decoder's sos and eos), ``<unk>`` = 2.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ..aed import TransformerDecoder
from ..data.features import FeatureConfig
from ..primitives.files import checked_config, load_checked_state, load_torch_file
from ..transducer import Joiner, StatelessDecoder
from .conformer import ConformerConfig, ConformerEncoder
from .interface import AcousticModel, EncoderOutput

__all__ = ["UTTERANCE_SECONDS", "JointConfig", "JointModel", "export_model", "load_joint_model",
           "utterance_seconds"]


@dataclass(frozen=True)
class JointConfig:
    """Model sizes (defaults: about 2.5M parameters with a 500-token vocabulary)."""

    vocab_size: int = 500
    encoder: ConformerConfig = field(default_factory=ConformerConfig)
    decoder_dim: int = 256
    joiner_dim: int = 256
    context_size: int = 2
    attention_dim: int = 144
    attention_heads: int = 4
    attention_layers: int = 2
    attention_ff: int = 384
    sos_eos_id: int = 1

    def __post_init__(self) -> None:
        if self.vocab_size < 4:
            raise ValueError(f"vocab_size must be >= 4, got {self.vocab_size}")
        if isinstance(self.encoder, dict):
            object.__setattr__(self, "encoder", ConformerConfig(**self.encoder))

    def to_dict(self) -> dict:
        return asdict(self)


class JointModel(nn.Module, AcousticModel):
    """Encoder + CTC head + stateless transducer + attention decoder.

    Exposes icefall's names ``encoder``, ``decoder``, ``joiner`` (the transducer search
    functions of :mod:`k2dec.transducer` accept this model as is), ``ctc_output`` and
    ``attention_decoder``, and implements :class:`k2dec.model.AcousticModel` (CTC,
    transducer and attention methods).
    """

    kind = "k2dec"

    def __init__(self, cfg: JointConfig = JointConfig()) -> None:  # noqa: B008
        super().__init__()
        self.cfg = cfg
        self.encoder = ConformerEncoder(cfg.encoder)
        d = cfg.encoder.d_model
        self.ctc_output = nn.Sequential(nn.Dropout(0.1), nn.Linear(d, cfg.vocab_size))
        self.decoder = StatelessDecoder(cfg.vocab_size, cfg.decoder_dim, blank_id=0,
                                        context_size=cfg.context_size)
        self.joiner = Joiner(d, cfg.decoder_dim, cfg.joiner_dim, cfg.vocab_size)
        # the simple RNN-T loss's projections (k2dec.train.losses): unused in decoding, kept
        # so that the shipped model's state dict loads
        self.simple_am_proj = nn.Linear(d, cfg.vocab_size)
        self.simple_lm_proj = nn.Linear(cfg.decoder_dim, cfg.vocab_size)
        self.attention_decoder = TransformerDecoder(
            cfg.vocab_size, d, d_model=cfg.attention_dim, nhead=cfg.attention_heads,
            num_layers=cfg.attention_layers, dim_feedforward=cfg.attention_ff, dropout=0.1,
            sos_id=cfg.sos_eos_id, eos_id=cfg.sos_eos_id,
        )

    def forward(self, features: torch.Tensor, feature_lens: torch.Tensor) -> tuple[
            torch.Tensor, torch.Tensor]:
        """``features`` float ``[N, T, F]`` -> (encoder_out ``[N, T', C]``, lengths ``[N]``)."""
        return self.encoder(features, feature_lens)

    def ctc_log_probs(self, encoder_out: torch.Tensor) -> torch.Tensor:
        """float ``[N, T', V]`` log-softmax of the CTC head."""
        return self.ctc_output(encoder_out).log_softmax(dim=-1)

    # --- AcousticModel -------------------------------------------------------------------
    @property
    def feature_config(self) -> FeatureConfig:
        return getattr(self, "_feature_config", None) or FeatureConfig(
            num_mel_bins=self.cfg.encoder.num_features)

    @property
    def vocab_size(self) -> int:  # type: ignore[override]
        """Network outputs (``cfg.vocab_size``)."""
        return self.cfg.vocab_size

    @property
    def min_input_frames(self) -> int:  # type: ignore[override]
        return self.encoder.min_input_frames

    @property
    def subsampling_factor(self) -> int:  # type: ignore[override]
        return self.encoder.subsampling_factor

    @property
    def has_ctc(self) -> bool:
        return True

    @property
    def transducer(self) -> JointModel:
        return self

    @property
    def attention_decoder(self) -> TransformerDecoder:  # type: ignore[override]
        # a property of the interface would hide the submodule registered in __init__
        return self._modules["attention_decoder"]

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    def _encode(self, features: torch.Tensor, feature_lens: torch.Tensor) -> EncoderOutput:
        enc, enc_lens = self.encoder(features, feature_lens)
        enc_lens = enc_lens.to(torch.int64)
        return EncoderOutput(enc, enc_lens, ctc_log_probs=self.ctc_log_probs(enc).float(),
                             memory=enc, memory_lens=enc_lens)


def export_model(model: JointModel, path: str | Path, half: bool = True,
                 extra: dict | None = None) -> Path:
    """A release file: a dict of ``model_config``, ``model`` (the state dict, float16 if
    ``half``) and the entries of ``extra``; :func:`load_joint_model` reads it back."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {k: (v.half() if half and v.is_floating_point() else v)
             for k, v in model.state_dict().items()}
    torch.save({"model_config": model.cfg.to_dict(), "model": state, **(extra or {})}, path)
    return path


#: The key of a model file (or training checkpoint) holding :func:`utterance_seconds` of the
#: utterances the model was trained on.
UTTERANCE_SECONDS = "utterance_seconds"
_STATS = ("count", "median", "p99", "max")


def utterance_seconds(durations: Sequence[float]) -> dict[str, float]:
    """What a model file records of its training utterances' durations (seconds):
    ``{"count": n, "median": ..., "p99": ..., "max": ...}`` (percentiles by linear
    interpolation, as numpy's default).

    Raises:
      ValueError: no durations, or one that is not a finite number > 0.
    """
    values = torch.as_tensor([float(d) for d in durations], dtype=torch.float64)
    if values.numel() == 0 or not bool(torch.isfinite(values).all()) or \
            not bool((values > 0).all()):
        low = values.min().item() if values.numel() else None
        raise ValueError(f"durations must be finite numbers of seconds > 0, at least one; "
                         f"got {values.numel()} values, the smallest {low!r}")
    q = torch.quantile(values, torch.tensor([0.5, 0.99], dtype=torch.float64))
    return {"count": float(values.numel()), "median": round(float(q[0]), 3),
            "p99": round(float(q[1]), 3), "max": round(float(values.max()), 3)}


def _checked_seconds(value: Any, path: Path) -> dict[str, float] | None:
    if value is None:
        return None
    if not isinstance(value, dict) or set(value) != set(_STATS) or not all(
            isinstance(v, int | float) and math.isfinite(v) and v > 0 for v in value.values()):
        raise ValueError(f"{path}: its {UTTERANCE_SECONDS} must be a dict of positive numbers "
                         f"{list(_STATS)}, got {value!r}")
    return {k: float(value[k]) for k in _STATS}


def load_joint_model(path: str | Path, device: torch.device | str = "cpu") -> JointModel:
    """Rebuild a :class:`JointModel` from an exported file or a training checkpoint
    (float32, eval mode); its :attr:`~k2dec.model.AcousticModel.utterance_seconds` from the
    file's :data:`UTTERANCE_SECONDS` entry when there is one."""
    path = Path(path)
    ckpt = load_torch_file(path, "k2dec model file", keys=("model_config", "model"))
    model = JointModel(checked_config(JointConfig, ckpt["model_config"], path))
    load_checked_state(model, ckpt["model"], path)
    model.utterance_seconds = _checked_seconds(ckpt.get(UTTERANCE_SECONDS), path)
    return model.to(torch.device(device)).eval()
