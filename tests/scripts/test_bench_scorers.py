"""scripts/bench/scorers.py: the first utterance of a batch of method inputs."""

from __future__ import annotations

import warnings

import torch

from k2dec.methods import CtcInputs
from scripts.bench.scorers import first_utterance


def test_first_utterance_of_ctc_inputs():
    log_probs = torch.randn(2, 5, 4).log_softmax(-1)
    memory = torch.randn(2, 5, 3)
    inputs = CtcInputs(log_probs, torch.tensor([5, 3]), memory=memory,
                       memory_lens=torch.tensor([5, 3]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        first = first_utterance(inputs)
    assert torch.equal(first.log_probs, log_probs[:1])
    assert first.log_probs_lens.tolist() == [5]
    assert torch.equal(first.memory, memory[:1]) and first.memory_lens.tolist() == [5]
