"""Stateless transducer networks with icefall's interface.

The search functions in :mod:`k2dec.transducer` accept *any* model that follows this interface
(icefall checkpoints and their TorchScript exports included):

- ``model.decoder.context_size``, ``model.decoder.blank_id``, ``model.decoder.vocab_size``;
- ``model.decoder(y, need_pad=False)`` with ``y`` an int64 tensor ``[N, context_size]`` returning
  ``[N, 1, decoder_dim]``;
- ``model.joiner(encoder_out, decoder_out, project_input=...)`` returning logits ``[..., V]``,
  optionally with ``model.joiner.encoder_proj`` / ``model.joiner.decoder_proj``.

The classes here are small reference implementations of that interface, used by the tests, the
benchmark and as a starting point for training code; the decoder, :class:`StatelessDecoder`,
lives with the driver that runs it (:mod:`k2dec.transducer.network`).
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["Joiner", "LinearEncoder", "Transducer"]


class Joiner(nn.Module):
    """Additive joiner: ``output_linear(tanh(encoder_proj(enc) + decoder_proj(dec)))``.

    Args:
      encoder_dim: last dimension ``C`` of the encoder output.
      decoder_dim: last dimension ``D`` of the decoder output.
      joiner_dim: hidden dimension ``J``.
      vocab_size: number of output symbols ``V``.
    """

    def __init__(self, encoder_dim: int, decoder_dim: int, joiner_dim: int, vocab_size: int):
        super().__init__()
        self.encoder_proj = nn.Linear(encoder_dim, joiner_dim)
        self.decoder_proj = nn.Linear(decoder_dim, joiner_dim)
        self.output_linear = nn.Linear(joiner_dim, vocab_size)

    def forward(
        self, encoder_out: torch.Tensor, decoder_out: torch.Tensor, project_input: bool = True
    ) -> torch.Tensor:
        """Logits for every (frame, context) pair, broadcasting over leading dimensions.

        Args:
          encoder_out: float tensor ``[..., C]`` (``[..., J]`` if ``project_input`` is False).
          decoder_out: float tensor ``[..., D]`` (``[..., J]`` if ``project_input`` is False),
            broadcastable against ``encoder_out`` except in the last dimension.
          project_input: apply ``encoder_proj`` / ``decoder_proj`` first. Search code projects
            once up front and passes False.

        Returns:
          float tensor ``[..., V]`` of unnormalized logits.
        """
        if project_input:
            encoder_out = self.encoder_proj(encoder_out)
            decoder_out = self.decoder_proj(decoder_out)
        return self.output_linear(torch.tanh(encoder_out + decoder_out))


class LinearEncoder(nn.Module):
    """A deliberately tiny encoder (one linear layer + tanh, no subsampling) so that tests and
    benchmarks can build a complete scriptable :class:`Transducer` without a real acoustic
    model.

    Args:
      feature_dim: input feature dimension ``F``.
      encoder_dim: output dimension ``C``.
    """

    def __init__(self, feature_dim: int, encoder_dim: int) -> None:
        super().__init__()
        self.linear = nn.Linear(feature_dim, encoder_dim)

    def forward(
        self, x: torch.Tensor, x_lens: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``x``: float ``[N, T, F]``, ``x_lens``: int ``[N]`` -> (``[N, T, C]``, ``[N]``)."""
        return torch.tanh(self.linear(x)), x_lens


class Transducer(nn.Module):
    """Container with icefall's attribute names ``encoder``, ``decoder``, ``joiner``.

    ``forward(x, x_lens)`` runs the encoder only (the search functions drive the decoder and the
    joiner), which keeps the module scriptable with ``torch.jit.script``.
    """

    def __init__(self, encoder: nn.Module, decoder: nn.Module, joiner: nn.Module) -> None:
        super().__init__()
        self.encoder = encoder
        self.decoder = decoder
        self.joiner = joiner

    def forward(
        self, x: torch.Tensor, x_lens: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``x``: float ``[N, T, F]``, ``x_lens``: int ``[N]`` -> (encoder_out ``[N, T', C]``,
        encoder_out_lens ``[N]``)."""
        return self.encoder(x, x_lens)
