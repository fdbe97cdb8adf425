"""Tiny randomly initialized RNN and Transformer LMs for tests and benchmarks."""

from __future__ import annotations

import random

import torch

from k2dec.lm import RnnLM, RnnLmConfig, TransformerLM, TransformerLmConfig

__all__ = ["CONFIGS", "VOCAB", "make_lm", "random_seqs"]

VOCAB = 13

CONFIGS = {
    "rnn": RnnLmConfig(vocab_size=VOCAB, embedding_dim=8, hidden_dim=12, num_layers=2,
                       dropout=0.2),
    "rnn-tied": RnnLmConfig(vocab_size=VOCAB, embedding_dim=8, hidden_dim=8, num_layers=1,
                            tie_weights=True),
    "transformer": TransformerLmConfig(vocab_size=VOCAB, d_model=8, nhead=2, num_layers=2,
                                       dim_feedforward=16, dropout=0.2),
    "transformer-tied": TransformerLmConfig(vocab_size=VOCAB, d_model=12, nhead=3,
                                            num_layers=1, dim_feedforward=8, tie_weights=True),
}


def make_lm(name: str, device: torch.device, seed: int = 0, dtype=torch.float64):
    """An LM of ``CONFIGS[name]`` with random weights, in eval mode."""
    torch.manual_seed(seed)
    config = CONFIGS[name]
    model = RnnLM(config) if isinstance(config, RnnLmConfig) else TransformerLM(config)
    with torch.no_grad():  # spread the output distribution so that mistakes show
        for p in model.parameters():
            p.mul_(3.0)
    return model.to(device=device, dtype=dtype).eval()


def random_seqs(rng: random.Random, num: int, max_len: int = 7) -> list[list[int]]:
    """``num`` random token sequences (ids in ``[0, VOCAB)``), lengths 0 .. max_len; the first
    two are empty and length-1 when ``num >= 2``."""
    seqs = [[rng.randrange(VOCAB) for _ in range(rng.randint(0, max_len))] for _ in range(num)]
    if num >= 2:
        seqs[0] = []
        seqs[1] = [rng.randrange(VOCAB)]
    return seqs
