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


def ctc_batch_with_empty(seed: int, vocab: int, lengths: list[int], dead_token: int,
                         dead_at: int | None = None) -> CtcInputs:
    """Random CTC log-probs (``lengths`` frames each, padded), a memory ``[n, T, 8]`` and
    reference word ids, plus, at position ``dead_at`` when given, an utterance of 4 frames
    where only ``dead_token`` is possible (a token that spells no word alone: its HLG
    lattice is empty)."""
    g = torch.Generator().manual_seed(seed)
    lens = list(lengths)
    if dead_at is not None:
        lens.insert(dead_at, 4)
    t = max(lens)
    log_probs = (torch.randn(len(lens), t, vocab, generator=g) * 2).log_softmax(-1)
    if dead_at is not None:
        log_probs[dead_at] = float("-inf")
        log_probs[dead_at, :, dead_token] = 0.0
    memory = torch.randn(len(lens), t, 8, generator=g)
    refs = [[1 + (seed + i) % 5, 1 + (seed * i) % 5] for i in range(len(lens))]
    lens_t = torch.tensor(lens)
    return CtcInputs(log_probs, lens_t, ref_words=refs, memory=memory, memory_lens=lens_t)
