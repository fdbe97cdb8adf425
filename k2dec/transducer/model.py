"""Stateless transducer networks with icefall's interface.

The search functions in :mod:`k2dec.transducer` accept *any* model that follows this interface
(icefall checkpoints and their TorchScript exports included):

- ``model.decoder.context_size``, ``model.decoder.blank_id``, ``model.decoder.vocab_size``;
- ``model.decoder(y, need_pad=False)`` with ``y`` an int64 tensor ``[N, context_size]`` returning
  ``[N, 1, decoder_dim]``;
- ``model.joiner(encoder_out, decoder_out, project_input=...)`` returning logits ``[..., V]``,
  optionally with ``model.joiner.encoder_proj`` / ``model.joiner.decoder_proj``.

The classes here are small reference implementations of that interface, used by the tests, the
benchmark and as a starting point for training code.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .common import check_decoder_sizes

__all__ = ["Joiner", "LinearEncoder", "StatelessDecoder", "Transducer"]


class StatelessDecoder(nn.Module):
    """Stateless prediction network: an embedding of the last ``context_size`` tokens followed by
    a grouped 1-D convolution over them and a ReLU (Ghodsi et al., 2020; icefall's ``Decoder``).

    Negative token ids (used to fill the initial context) embed to zero. The blank embedding is a
    learned vector like any other (icefall versions differ on this; the searches do not rely on
    it).

    Args:
      vocab_size: number of output symbols ``V`` including blank.
      decoder_dim: embedding and output dimension ``D``.
      blank_id: the blank symbol (0 in icefall's models; required to be 0 by fast_beam_search).
      context_size: number of previous tokens the output depends on (1 = bigram, 2 = trigram).
      conv_groups: groups of the context convolution; ``None`` means ``decoder_dim // 4`` when
        ``decoder_dim`` is divisible by 4 (icefall's choice), else 1.
    """

    def __init__(
        self,
        vocab_size: int,
        decoder_dim: int,
        blank_id: int = 0,
        context_size: int = 2,
        conv_groups: int | None = None,
    ) -> None:
        super().__init__()
        check_decoder_sizes(blank_id, context_size, vocab_size)
        if decoder_dim < 1:
            raise ValueError(f"decoder_dim must be >= 1, got {decoder_dim}")
        if conv_groups is None:
            conv_groups = decoder_dim // 4 if decoder_dim % 4 == 0 else 1
        if conv_groups < 1 or decoder_dim % conv_groups != 0:
            raise ValueError(
                f"conv_groups must divide decoder_dim={decoder_dim}, got {conv_groups}"
            )
        self.vocab_size = vocab_size
        self.decoder_dim = decoder_dim
        self.blank_id = blank_id
        self.context_size = context_size
        self.embedding = nn.Embedding(vocab_size, decoder_dim)
        # With context_size == 1 the convolution would be a per-channel scale; icefall skips it,
        # and so do we (an identity module keeps the module scriptable).
        self.conv: nn.Module
        if context_size > 1:
            self.conv = nn.Conv1d(
                decoder_dim, decoder_dim, kernel_size=context_size, groups=conv_groups, bias=False
            )
        else:
            self.conv = nn.Identity()

    def forward(self, y: torch.Tensor, need_pad: bool = True) -> torch.Tensor:
        """Decoder output for each position of ``y``.

        Args:
          y: int tensor ``[N, U]`` of token ids; negative ids embed to zero.
          need_pad: if True (training), left-pad with ``context_size - 1`` zero frames so the
            output has one row per input position; if False (decoding), ``U`` must equal
            ``context_size`` and the output has one row.

        Returns:
          float tensor ``[N, U, D]`` (``need_pad=True``) or ``[N, 1, D]`` (``need_pad=False``).
        """
        y = y.to(torch.int64)
        emb = self.embedding(y.clamp(min=0)) * (y >= 0).unsqueeze(-1).to(self.embedding.weight)
        if self.context_size > 1:
            x = emb.permute(0, 2, 1)  # [N, D, U]
            if need_pad:
                x = F.pad(x, (self.context_size - 1, 0))
            elif x.size(-1) != self.context_size:
                raise ValueError(
                    f"with need_pad=False, y must have context_size={self.context_size} "
                    f"columns, got {x.size(-1)}"
                )
            emb = self.conv(x).permute(0, 2, 1)
        return F.relu(emb)


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
