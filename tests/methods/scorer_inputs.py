"""The scorer methods' random inputs over a 6-token vocabulary: a random transducer's encoder
output, CTC log-probs with an attention memory."""

from __future__ import annotations

import torch

from k2dec.methods import CtcInputs, TransducerInputs
from k2dec.testing.transducer import random_batch, random_model

VOCAB = 6


def transducer_inputs(seed: int = 1):
    """A random transducer and encoder output for 3 utterances (6, 1 and 4 frames)."""
    model = random_model(vocab_size=VOCAB, seed=seed)
    enc, lens = random_batch([6, 1, 4], seed=seed)
    return TransducerInputs(model, enc, lens)


def ctc_inputs(seed: int = 1, n: int = 3):
    """CTC log-probs float ``[n, 7, VOCAB]`` (lengths 7, 5, 6) and a memory ``[n, 7, 8]``."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.tensor([7, 5, 6][:n])
    log_probs = (torch.randn(n, 7, VOCAB, generator=g) * 2).log_softmax(-1)
    return CtcInputs(log_probs, lengths, memory=torch.randn(n, 7, 8, generator=g),
                     memory_lens=lengths)
