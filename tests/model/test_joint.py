from __future__ import annotations

import k2
import pytest
import torch

from k2dec.model import (
    ConformerConfig,
    ConformerEncoder,
    JointConfig,
    JointModel,
    LossConfig,
    subsampled_lengths,
)
from k2dec.transducer import greedy_search

SMALL = JointConfig(
    vocab_size=20,
    encoder=ConformerConfig(num_features=20, d_model=32, nhead=2, num_layers=2,
                            dim_feedforward=64, conv_kernel=5, dropout=0.0),
    decoder_dim=32, joiner_dim=32, attention_dim=32, attention_heads=2, attention_layers=1,
    attention_ff=64,
)


def _batch(seed: int = 0, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(3, 60, 20, generator=g).to(device)
    lens = torch.tensor([60, 47, 33], device=device)
    toks = k2.RaggedTensor([[3, 4, 5], [6, 7], [8, 9, 10, 11]]).to(device)
    return x, lens, toks


def test_subsampling_lengths_match_the_convolutions(device):
    enc = ConformerEncoder(SMALL.encoder).to(device).eval()
    for t in (7, 8, 9, 10, 33, 60, 61):
        out, lens = enc(torch.randn(1, t, 20, device=device), torch.tensor([t], device=device))
        assert out.shape[1] == ((t - 1) // 2 - 1) // 2 == int(lens[0])
    assert subsampled_lengths(torch.tensor([60, 47])).tolist() == [14, 11]
    with pytest.raises(ValueError, match="at least 7 input frames"):
        enc(torch.randn(1, 6, 20, device=device), torch.tensor([6], device=device))
    with pytest.raises(ValueError, match="features must be"):
        enc(torch.randn(1, 30, 21, device=device), torch.tensor([30], device=device))


def test_padding_does_not_change_the_encoder_output():
    torch.manual_seed(0)
    enc = ConformerEncoder(SMALL.encoder).eval()
    x = torch.randn(1, 40, 20)
    alone, n = enc(x, torch.tensor([40]))
    padded = torch.cat([x, torch.randn(1, 20, 20)], dim=1)
    both, _ = enc(padded, torch.tensor([40]))
    assert torch.allclose(alone[0, : int(n)], both[0, : int(n)], atol=1e-5)


@pytest.mark.parametrize("rnnt_type", ["regular", "modified", "constrained"])
def test_pruned_loss_with_full_range_equals_the_full_rnnt_loss(rnnt_type):
    """Two implementations: the pruned loss with a range covering every symbol must equal
    k2's full RNN-T loss over the joiner's logits for every (frame, symbol) pair."""
    torch.manual_seed(1)
    model = JointModel(SMALL).eval()
    x, lens, toks = _batch()
    cfg = LossConfig(rnnt_type=rnnt_type, prune_range=10)
    losses = model.losses(x, lens, toks, cfg)
    enc, enc_lens = model.encoder(x, lens)
    y = toks.pad(mode="constant", padding_value=0).to(torch.int64)
    y_lens = torch.tensor([3, 2, 4])
    sos_y = torch.cat([torch.zeros(3, 1, dtype=torch.int64), y], dim=1)
    dec = model.decoder(sos_y, need_pad=True)
    logits = model.joiner(enc.unsqueeze(2), dec.unsqueeze(1))  # [N, T, S+1, V]
    boundary = torch.zeros(3, 4, dtype=torch.int64)
    boundary[:, 2] = y_lens
    boundary[:, 3] = enc_lens
    full = k2.rnnt_loss(logits, y, termination_symbol=0, boundary=boundary,
                        rnnt_type=rnnt_type, reduction="sum")
    assert float(losses.transducer_pruned) == pytest.approx(float(full), rel=1e-4)


def test_losses_backward_and_validation(device):
    torch.manual_seed(2)
    model = JointModel(SMALL).to(device)
    x, lens, toks = _batch(device=device)
    out = model.losses(x, lens, toks)
    for name in ("ctc", "transducer_simple", "transducer_pruned", "attention", "total"):
        assert torch.isfinite(getattr(out, name)), name
    out.total.backward()
    assert all(p.grad is not None for p in model.encoder.parameters() if p.requires_grad)
    assert out.num_tokens == 9
    long = k2.RaggedTensor([list(range(3, 19))] * 3).to(device)  # 16 tokens > 14 frames
    with pytest.raises(ValueError, match="more tokens than encoder frames"):
        model.losses(x, lens, long, LossConfig(rnnt_type="modified"))
    with pytest.raises(ValueError, match="rnnt_type"):
        LossConfig(rnnt_type="fancy")
    with pytest.raises(ValueError, match="token sequences for"):
        model.losses(x, lens, k2.RaggedTensor([[3]]).to(device))


def test_a_few_steps_fit_one_batch_and_search_runs():
    torch.manual_seed(3)
    model = JointModel(SMALL)
    x, lens, toks = _batch(seed=3)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    first = None
    for _ in range(30):
        loss = model.losses(x, lens, toks).total
        first = float(loss) if first is None else first
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert float(loss) < 0.5 * first
    model.eval()
    with torch.no_grad():
        enc, enc_lens = model(x, lens)
        hyps = greedy_search(model, enc, enc_lens)
    assert len(hyps) == 3
