"""A model file records its training utterances' durations (``utterance_seconds``): the
statistics against numpy, the round trip through a training checkpoint and an exported file,
files without it, and bad entries."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from k2dec.model import UTTERANCE_SECONDS, JointModel, export_model, load_joint_model
from k2dec.model import utterance_seconds as stats
from k2dec.train import TrainConfig, train_joint_model
from tests.model.tiny_joint import SMALL


def test_statistics_agree_with_numpy():
    rng = np.random.default_rng(0)
    for n in (1, 2, 7, 100, 1001):
        d = rng.uniform(0.3, 20.0, size=n)
        got = stats(d.tolist())
        assert got["count"] == n
        assert got["median"] == pytest.approx(np.percentile(d, 50), abs=1e-3)
        assert got["p99"] == pytest.approx(np.percentile(d, 99), abs=1e-3)
        assert got["max"] == pytest.approx(d.max(), abs=1e-3)
    for bad in ([], [1.0, 0.0], [float("nan")], [-2.0]):
        with pytest.raises(ValueError, match="durations"):
            stats(bad)


def _batches(epoch: int):
    g = torch.Generator().manual_seed(epoch)
    return [{"inputs": torch.randn(2, 50, 20, generator=g),
             "supervisions": {"sequence_idx": torch.tensor([0, 1]),
                              "num_frames": torch.tensor([50, 41]), "text": ["A B", "B A"]}}]


def test_the_trainer_and_export_carry_it_and_the_loader_reads_it(tmp_path):
    torch.manual_seed(0)
    model = JointModel(SMALL)
    assert model.utterance_seconds is None
    model.utterance_seconds = stats([1.5, 2.0, 6.5])
    train_joint_model(model, _batches, lambda t: [[3 + (w == "B") for w in s.split()] for s in t],
                      tmp_path / "exp", TrainConfig(num_epochs=1, warmup_steps=1))
    ckpt = tmp_path / "exp" / "epoch-1.pt"
    assert torch.load(ckpt)[UTTERANCE_SECONDS] == model.utterance_seconds
    assert load_joint_model(ckpt).utterance_seconds == model.utterance_seconds
    path = export_model(model, tmp_path / "m.pt",
                        extra={UTTERANCE_SECONDS: torch.load(ckpt)[UTTERANCE_SECONDS]})
    assert load_joint_model(path).utterance_seconds["p99"] == pytest.approx(6.41, abs=1e-3)
    bare = export_model(JointModel(SMALL), tmp_path / "bare.pt")
    assert load_joint_model(bare).utterance_seconds is None


def test_a_bad_entry_is_refused_naming_the_file(tmp_path):
    path = export_model(JointModel(SMALL), tmp_path / "bad.pt",
                        extra={UTTERANCE_SECONDS: {"p99": -1.0}})
    with pytest.raises(ValueError, match="bad.pt.*utterance_seconds"):
        load_joint_model(path)
