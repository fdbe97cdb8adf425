"""Random CTC inputs (log-probs, attention memory, references) for the CTC method tests."""

from __future__ import annotations

import torch

from k2dec.methods import CtcInputs


def random_ctc_inputs(seed: int, vocab: int, n: int = 3) -> CtcInputs:
    """CTC log-probs float ``[n, 7, vocab]`` (lengths 7, 5, 6), a memory ``[n, 7, 8]`` and
    reference word ids."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.tensor([7, 5, 6][:n])
    log_probs = (torch.randn(n, 7, vocab, generator=g) * 2).log_softmax(-1)
    memory = torch.randn(n, 7, 8, generator=g)
    return CtcInputs(log_probs, lengths, ref_words=[[1, 3], [5], [2, 4]][:n], memory=memory,
                     memory_lens=lengths)
