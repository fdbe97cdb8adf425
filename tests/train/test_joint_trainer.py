from __future__ import annotations

import pytest
import torch

from k2dec.model import JointModel, export_model, load_joint_model
from k2dec.train import TrainConfig, average_checkpoints, latest_checkpoint, train_joint_model
from tests.model.tiny_joint import SMALL


def _batches(epoch: int):
    """Two lhotse-format batches per epoch (deterministic)."""
    g = torch.Generator().manual_seed(100 + epoch)
    out = []
    for b in range(2):
        lens = torch.tensor([50, 41])
        out.append({
            "inputs": torch.randn(2, 50, 20, generator=g),
            "supervisions": {
                "sequence_idx": torch.tensor([0, 1]),
                "num_frames": lens,
                "text": ["A B C", "B C"] if b == 0 else ["C A", "A A B"],
            },
        })
    return out


def _encode(texts):
    table = {"A": 3, "B": 4, "C": 5}
    return [[table[w] for w in t.split()] for t in texts]


def _fresh() -> JointModel:
    torch.manual_seed(0)
    return JointModel(SMALL)


def test_resume_gives_the_same_model_as_an_uninterrupted_run(tmp_path):
    cfg = TrainConfig(num_epochs=3, lr=1e-3, warmup_steps=2, save_every_n=2, log_every=1)
    straight = _fresh()
    train_joint_model(straight, _batches, _encode, tmp_path / "a", cfg)

    interrupted = _fresh()
    first = TrainConfig(num_epochs=3, max_steps=3, lr=1e-3, warmup_steps=2, save_every_n=2,
                        log_every=1)
    out = train_joint_model(interrupted, _batches, _encode, tmp_path / "b", first)
    assert out["step"] == 3
    assert latest_checkpoint(tmp_path / "b").name == "checkpoint-3.pt"
    resumed = _fresh()
    out = train_joint_model(resumed, _batches, _encode, tmp_path / "b", cfg)
    assert out["step"] == 6
    for (n, a), (_, b) in zip(straight.state_dict().items(), resumed.state_dict().items()):
        assert torch.allclose(a.float(), b.float(), atol=1e-6), n
    assert (tmp_path / "a/epoch-3.pt").is_file()


def test_training_lowers_the_loss(tmp_path):
    model = _fresh()
    cfg = TrainConfig(num_epochs=8, lr=3e-3, warmup_steps=2, save_every_n=0, log_every=2)

    def fixed(epoch):
        return _batches(0)

    first = train_joint_model(model, fixed, _encode, tmp_path / "x",
                              TrainConfig(num_epochs=1, lr=3e-3, warmup_steps=2,
                                          save_every_n=0, log_every=2))
    last = train_joint_model(model, fixed, _encode, tmp_path / "y", cfg)
    assert last["loss_per_token"] < first["loss_per_token"]


def test_average_export_and_load(tmp_path):
    model = _fresh()
    cfg = TrainConfig(num_epochs=2, lr=1e-3, warmup_steps=2, save_every_n=1, keep_last_k=3)
    train_joint_model(model, _batches, _encode, tmp_path, cfg)
    ckpts = sorted(tmp_path.glob("checkpoint-*.pt"))
    assert len(ckpts) == 3, "keep_last_k prunes older checkpoints"
    avg = average_checkpoints(ckpts)
    states = [torch.load(p)["model"] for p in ckpts]
    name = "encoder.layers.0.ff1.net.1.weight"
    assert torch.allclose(avg[name], sum(s[name] for s in states) / 3, atol=1e-6)
    model.load_state_dict(avg)
    path = export_model(model, tmp_path / "release.pt", half=True)
    back = load_joint_model(path)
    assert torch.allclose(back.state_dict()[name], avg[name], atol=1e-2)
    with pytest.raises(ValueError, match="no checkpoints"):
        average_checkpoints([])
