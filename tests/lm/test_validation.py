"""Bad inputs to the LMs raise clear errors before any model code runs."""

from __future__ import annotations

import k2
import pytest
import torch

from k2dec.lm import RnnLM, RnnLmConfig, TransformerLM, TransformerLmConfig
from k2dec.testing.lm import CONFIGS, VOCAB, make_lm

NAMES = ["rnn", "transformer"]


@pytest.mark.parametrize("name", NAMES)
def test_score_sequences_bad_inputs(name, device):
    lm = make_lm(name, device)
    with pytest.raises(ValueError, match=rf"token ids in \[0, {VOCAB}\).*got {VOCAB}"):
        lm.score_sequences(k2.RaggedTensor([[1, VOCAB], []], dtype=torch.int32))
    with pytest.raises(ValueError, match="got -3"):
        lm.score_sequences(k2.RaggedTensor([[4], [-3, 2]], dtype=torch.int32))
    with pytest.raises(TypeError, match="int32 ragged tensor, got torch.float32"):
        lm.score_sequences(k2.RaggedTensor([[4.0], [2.0]], dtype=torch.float32))
    with pytest.raises(ValueError, match="2 axes .* got 3 axes"):
        lm.score_sequences(k2.RaggedTensor([[[4], [2]]], dtype=torch.int32))
    with pytest.raises(TypeError, match="must be a k2.RaggedTensor, got list"):
        lm.score_sequences([[4, 2]])
    with pytest.raises(TypeError, match="k2.RaggedTensor, got Tensor"):
        lm.score_sequences(torch.tensor([[4, 2]], dtype=torch.int32))


@pytest.mark.parametrize("name", NAMES)
def test_step_bad_inputs(name, device):
    lm = make_lm(name, device)
    good = torch.tensor([[1, 3], [1, 4]], device=device)
    with pytest.raises(TypeError, match="tokens must be int64, got torch.int32"):
        lm.step(good.to(torch.int32), None)
    with pytest.raises(ValueError, match=r"shape \[M, u\] with u >= 1, got \(2,\)"):
        lm.step(good[:, 0], None)
    with pytest.raises(ValueError, match=r"shape \[M, u\] with u >= 1, got \(2, 0\)"):
        lm.step(good[:, :0], None)
    with pytest.raises(ValueError, match=rf"token ids in \[0, {VOCAB}\).*got 99"):
        lm.step(torch.tensor([[1, 99]], device=device), None)
    with pytest.raises(ValueError, match="got -1"):
        lm.step(torch.tensor([[1, -1]], device=device), None)
    with pytest.raises(ValueError, match=r"tokens\[:, 0\] must be sos_id=1 .* got \[5\]"):
        lm.step(torch.tensor([[1, 3], [5, 3]], device=device), None)
    with pytest.raises(TypeError, match="tokens must be a torch.Tensor, got list"):
        lm.step([[1, 3]], None)
    with torch.no_grad():
        _, state = lm.step(good, None)
    with pytest.raises(ValueError, match="tokens has 2 positions but the state already covers 2"):
        lm.step(good, state)
    with pytest.raises(ValueError, match="tokens has 3 rows but the state has 2; reorder"):
        lm.step(torch.tensor([[1, 3, 4]] * 3, device=device), state)
    with pytest.raises(TypeError, match="state must be an? (Rnn|Transformer)LmState or None"):
        lm.step(good, (torch.zeros(1), torch.zeros(1)))
    with pytest.raises(TypeError, match="1-D int64 tensor, got dtype torch.int32"):
        lm.select_state(state, torch.tensor([0, 1], dtype=torch.int32, device=device))
    with pytest.raises(ValueError, match=r"index values must be in \[0, 2\), got 2"):
        lm.select_state(state, torch.tensor([0, 2], device=device))
    with pytest.raises(ValueError, match=r"index values must be in \[0, 2\), got -1"):
        lm.select_state(state, torch.tensor([-1], device=device))
    with pytest.raises(TypeError, match="state must be an? (Rnn|Transformer)LmState, got tuple"):
        lm.select_state((1, 2), torch.tensor([0], device=device))


def test_bad_configs():
    with pytest.raises(ValueError, match="tie_weights needs embedding_dim == hidden_dim"):
        RnnLM(RnnLmConfig(vocab_size=10, embedding_dim=4, hidden_dim=6, tie_weights=True))
    with pytest.raises(ValueError, match=r"d_model \(10\) must be divisible by config.nhead \(4\)"):
        TransformerLM(TransformerLmConfig(vocab_size=10, d_model=10, nhead=4))
    with pytest.raises(ValueError, match="vocab_size must be an int >= 2, got 1"):
        RnnLM(RnnLmConfig(vocab_size=1, sos_id=0, eos_id=0))
    with pytest.raises(ValueError, match=r"sos_id must be an int in \[0, 5\), got 7"):
        RnnLM(RnnLmConfig(vocab_size=5, sos_id=7))
    with pytest.raises(ValueError, match="num_layers must be a positive int, got 0"):
        TransformerLM(TransformerLmConfig(vocab_size=10, d_model=8, nhead=2, num_layers=0))
    with pytest.raises(ValueError, match=r"dropout must be in \[0, 1\), got 1.5"):
        RnnLM(RnnLmConfig(vocab_size=10, dropout=1.5))
    with pytest.raises(TypeError, match="config must be an RnnLmConfig, got TransformerLmConfig"):
        RnnLM(CONFIGS["transformer"])
    with pytest.raises(TypeError, match="config must be a TransformerLmConfig, got RnnLmConfig"):
        TransformerLM(CONFIGS["rnn"])
