"""The joint model's network (the Conformer encoder) and its file: export and load."""

from __future__ import annotations

import pytest
import torch

from k2dec.model import (
    ConformerEncoder,
    JointModel,
    export_model,
    load_joint_model,
    load_model,
    subsampled_lengths,
)

from .tiny_joint import SMALL


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


@pytest.mark.parametrize("half", [False, True])
def test_an_exported_model_loads_back(tmp_path, half):
    """export_model writes what load_joint_model (and load_model) read: the same weights (to
    float16's precision when ``half``), float32, in eval mode."""
    torch.manual_seed(4)
    model = JointModel(SMALL).eval()
    path = export_model(model, tmp_path / "out" / "model.pt", half=half, extra={"note": "x"})
    assert torch.load(path)["note"] == "x"
    for back in (load_joint_model(path), load_model(path)):
        assert isinstance(back, JointModel) and not back.training
        for (name, a), (_, b) in zip(model.state_dict().items(), back.state_dict().items()):
            assert b.dtype == a.dtype, name
            assert torch.allclose(a, b, atol=1e-2 if half else 0.0), name


def test_loading_names_a_bad_model_file(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        load_joint_model(tmp_path / "none.pt")
    torch.save({"x": 1}, tmp_path / "bad.pt")
    with pytest.raises(ValueError, match="not a k2dec model file"):
        load_joint_model(tmp_path / "bad.pt")
