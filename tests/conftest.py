"""Shared pytest fixtures: every test that touches tensors runs on each available device."""

from __future__ import annotations

import pytest
import torch

# The exactness tests compare two computations of the same numbers. On Ampere and newer GPUs
# torch runs cuDNN convolutions and RNNs in TF32 by default, which rounds them differently for
# different batch shapes (1e-4 apart): tests run in full float32.
torch.backends.cudnn.allow_tf32 = False
torch.backends.cuda.matmul.allow_tf32 = False


def _device_params() -> list:
    params = [pytest.param(torch.device("cpu"), id="cpu")]
    cuda_reason = "CUDA is not available on this machine (torch.cuda.is_available() is False)"
    params.append(
        pytest.param(
            torch.device("cuda", 0),
            id="cuda",
            marks=pytest.mark.skipif(not torch.cuda.is_available(), reason=cuda_reason),
        )
    )
    return params


@pytest.fixture(params=_device_params())
def device(request) -> torch.device:
    """The device a test runs on: ``cpu`` always, ``cuda`` when a GPU is present."""
    return request.param


@pytest.fixture(autouse=True)
def _single_thread():
    """Run tests at one torch thread: results must not depend on threading, and the
    machines are shared."""
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


@pytest.fixture(scope="session")
def shipped_demo(tmp_path_factory):
    """The shipped model's lang dir with compiled graphs (HLG, LG, G_4_gram) and fbank cuts of
    the shipped test sets: ``(assets_dir, lang_dir, graph_dir, {test_set: cuts_path})``
    (the shipped lang dir is only read; graphs go to ``graph_dir``), prepared once per
    session (about a minute on 2 cores). Skips where no model ships (a wheel install)."""
    from k2dec.demo import ASSETS, prepare_demo

    if not (ASSETS / "model.pt").is_file():
        pytest.skip("no shipped model in this checkout")
    lang, graphs, cut_paths = prepare_demo(ASSETS, tmp_path_factory.mktemp("shipped"))
    return ASSETS, lang, graphs, cut_paths
