"""A small Conformer encoder (4x subsampling) for the recipes' joint CTC/transducer/attention
model. Sized for CPU training of toy corpora; the structure follows the Conformer paper:
half-step feed-forward, self-attention, convolution module, half-step feed-forward, norm."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from ..primitives.positional import sinusoidal_positions

__all__ = ["ConformerConfig", "Conv2dSubsampling", "ConformerEncoder", "subsampled_lengths"]


@dataclass(frozen=True)
class ConformerConfig:
    """Encoder sizes (defaults: ~1.5M parameters)."""

    num_features: int = 80
    d_model: int = 144
    nhead: int = 4
    num_layers: int = 6
    dim_feedforward: int = 384
    conv_kernel: int = 15
    dropout: float = 0.1

    def __post_init__(self) -> None:
        for name in ("num_features", "d_model", "nhead", "num_layers", "dim_feedforward",
                     "conv_kernel"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive int, got {v!r}")
        if self.d_model % self.nhead:
            raise ValueError(f"d_model ({self.d_model}) must be divisible by nhead ({self.nhead})")
        if self.conv_kernel % 2 == 0:
            raise ValueError(f"conv_kernel must be odd, got {self.conv_kernel}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")


def subsampled_lengths(feature_lens: torch.Tensor) -> torch.Tensor:
    """Frames after :class:`Conv2dSubsampling`: ``((T - 1) // 2 - 1) // 2``."""
    return torch.div(torch.div(feature_lens - 1, 2, rounding_mode="floor") - 1, 2,
                     rounding_mode="floor")


class Conv2dSubsampling(nn.Module):
    """Two 3x3 stride-2 convolutions: ``[N, T, F] -> [N, ((T-1)//2-1)//2, d_model]``."""

    def __init__(self, num_features: int, d_model: int, channels: int = 32) -> None:
        super().__init__()
        self.conv = nn.Sequential(
            nn.Conv2d(1, channels, 3, stride=2), nn.ReLU(),
            nn.Conv2d(channels, channels, 3, stride=2), nn.ReLU(),
        )
        freq = ((num_features - 1) // 2 - 1) // 2
        self.out = nn.Linear(channels * freq, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(x.unsqueeze(1))  # [N, C, T', F']
        n, c, t, f = x.shape
        return self.out(x.transpose(1, 2).reshape(n, t, c * f))


class _FeedForward(nn.Module):
    def __init__(self, d: int, hidden: int, dropout: float) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, hidden), nn.SiLU(),
                                 nn.Dropout(dropout), nn.Linear(hidden, d), nn.Dropout(dropout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class _ConvModule(nn.Module):
    def __init__(self, d: int, kernel: int, dropout: float) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.pointwise1 = nn.Conv1d(d, 2 * d, 1)
        self.depthwise = nn.Conv1d(d, d, kernel, padding=kernel // 2, groups=d)
        self.mid_norm = nn.LayerNorm(d)
        self.pointwise2 = nn.Conv1d(d, d, 1)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, pad_mask: torch.Tensor) -> torch.Tensor:
        y = self.norm(x).masked_fill(pad_mask.unsqueeze(2), 0.0).transpose(1, 2)
        y = nn.functional.glu(self.pointwise1(y), dim=1)
        y = self.depthwise(y.masked_fill(pad_mask.unsqueeze(1), 0.0))
        y = nn.functional.silu(self.mid_norm(y.transpose(1, 2))).transpose(1, 2)
        return self.dropout(self.pointwise2(y).transpose(1, 2))


class _ConformerLayer(nn.Module):
    def __init__(self, cfg: ConformerConfig) -> None:
        super().__init__()
        d = cfg.d_model
        self.ff1 = _FeedForward(d, cfg.dim_feedforward, cfg.dropout)
        self.attn_norm = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, cfg.nhead, dropout=cfg.dropout, batch_first=True)
        self.attn_dropout = nn.Dropout(cfg.dropout)
        self.conv = _ConvModule(d, cfg.conv_kernel, cfg.dropout)
        self.ff2 = _FeedForward(d, cfg.dim_feedforward, cfg.dropout)
        self.final_norm = nn.LayerNorm(d)

    def forward(self, x: torch.Tensor, pad_mask: torch.Tensor) -> torch.Tensor:
        x = x + 0.5 * self.ff1(x)
        y = self.attn_norm(x)
        y, _ = self.attn(y, y, y, key_padding_mask=pad_mask, need_weights=False)
        x = x + self.attn_dropout(y)
        x = x + self.conv(x, pad_mask)
        x = x + 0.5 * self.ff2(x)
        return self.final_norm(x)


class ConformerEncoder(nn.Module):
    """``forward(features [N, T, F], feature_lens [N]) -> (encoder_out [N, T', d_model],
    encoder_out_lens [N])`` with ``T' = ((T - 1) // 2 - 1) // 2``."""

    #: Utterances need this many feature frames to give at least one encoder frame.
    min_input_frames = 7
    #: input frames per output frame (output frame ``t`` starts near input frame ``4 t``)
    subsampling_factor = 4

    def __init__(self, cfg: ConformerConfig = ConformerConfig()) -> None:  # noqa: B008
        super().__init__()
        self.cfg = cfg
        self.subsampling = Conv2dSubsampling(cfg.num_features, cfg.d_model)
        self.dropout = nn.Dropout(cfg.dropout)
        self.layers = nn.ModuleList(_ConformerLayer(cfg) for _ in range(cfg.num_layers))

    @property
    def output_dim(self) -> int:
        return self.cfg.d_model

    def forward(self, x: torch.Tensor, feature_lens: torch.Tensor) -> tuple[torch.Tensor,
                                                                       torch.Tensor]:
        if x.dim() != 3 or x.size(2) != self.cfg.num_features:
            raise ValueError(f"features must be [N, T, {self.cfg.num_features}], got "
                             f"{tuple(x.shape)}")
        if x.size(1) < 7:
            raise ValueError(f"need at least 7 input frames for 4x subsampling, got {x.size(1)}")
        x = self.subsampling(x)
        out_lens = subsampled_lengths(feature_lens.to(x.device)).clamp(min=0, max=x.size(1))
        x = self.dropout(x * math.sqrt(self.cfg.d_model)
                         + sinusoidal_positions(0, x.size(1), self.cfg.d_model, x.device,
                                                x.dtype))
        pad_mask = torch.arange(x.size(1), device=x.device).unsqueeze(0) >= out_lens.unsqueeze(1)
        for layer in self.layers:
            x = layer(x, pad_mask)
        return x, out_lens
