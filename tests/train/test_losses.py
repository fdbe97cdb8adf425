"""The joint model's training losses: the pruned RNN-T loss against k2's full one, gradients,
input checks, and a few optimizer steps that fit one batch."""

from __future__ import annotations

import k2
import pytest
import torch

from k2dec.model import JointModel
from k2dec.train import LossConfig, joint_losses
from k2dec.transducer import greedy_search
from tests.model.tiny_joint import SMALL, small_batch


@pytest.mark.parametrize("rnnt_type", ["regular", "modified", "constrained"])
def test_pruned_loss_with_full_range_equals_the_full_rnnt_loss(rnnt_type):
    """Two implementations: the pruned loss with a range covering every symbol must equal
    k2's full RNN-T loss over the joiner's logits for every (frame, symbol) pair."""
    torch.manual_seed(1)
    model = JointModel(SMALL).eval()
    x, lens, toks = small_batch()
    cfg = LossConfig(rnnt_type=rnnt_type, prune_range=10)
    losses = joint_losses(model, x, lens, toks, cfg)
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
    x, lens, toks = small_batch(device=device)
    out = joint_losses(model, x, lens, toks)
    for name in ("ctc", "transducer_simple", "transducer_pruned", "attention", "total"):
        assert torch.isfinite(getattr(out, name)), name
    out.total.backward()
    assert all(p.grad is not None for p in model.encoder.parameters() if p.requires_grad)
    assert out.num_tokens == 9
    long = k2.RaggedTensor([list(range(3, 19))] * 3).to(device)  # 16 tokens > 14 frames
    with pytest.raises(ValueError, match="more tokens than encoder frames"):
        joint_losses(model, x, lens, long, LossConfig(rnnt_type="modified"))
    with pytest.raises(ValueError, match="rnnt_type"):
        LossConfig(rnnt_type="fancy")
    with pytest.raises(ValueError, match="token sequences for"):
        joint_losses(model, x, lens, k2.RaggedTensor([[3]]).to(device))


def test_a_few_steps_fit_one_batch_and_search_runs():
    torch.manual_seed(3)
    model = JointModel(SMALL)
    x, lens, toks = small_batch(seed=3)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    first = None
    for _ in range(30):
        loss = joint_losses(model, x, lens, toks).total
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
