"""A joint model small enough for unit tests, and a batch for it (shared by tests/model and
tests/train)."""

from __future__ import annotations

import k2
import torch

from k2dec.model import ConformerConfig, JointConfig

SMALL = JointConfig(
    vocab_size=20,
    encoder=ConformerConfig(num_features=20, d_model=32, nhead=2, num_layers=2,
                            dim_feedforward=64, conv_kernel=5, dropout=0.0),
    decoder_dim=32, joiner_dim=32, attention_dim=32, attention_heads=2, attention_layers=1,
    attention_ff=64,
)


def small_batch(seed: int = 0, device="cpu") -> tuple[torch.Tensor, torch.Tensor,
                                                       k2.RaggedTensor]:
    """Features float ``[3, 60, 20]``, their lengths int ``[3]`` (60, 47, 33) and token ids
    int32 ragged ``[utt][token]`` (3, 2 and 4 tokens) for :data:`SMALL`."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(3, 60, 20, generator=g).to(device)
    lens = torch.tensor([60, 47, 33], device=device)
    toks = k2.RaggedTensor([[3, 4, 5], [6, 7], [8, 9, 10, 11]]).to(device)
    return x, lens, toks
