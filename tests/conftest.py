"""Shared pytest fixtures: every test that touches tensors runs on each available device."""

from __future__ import annotations

import pytest
import torch


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
