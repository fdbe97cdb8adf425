"""NbestConfig: the one place n-best sampling defaults and checks live."""

from __future__ import annotations

import inspect
import math

import k2
import pytest

from k2dec.nbest import Nbest, NbestConfig


def test_from_lattice_defaults_are_the_configs():
    params = inspect.signature(Nbest.from_lattice).parameters
    assert params["num_paths"].default == NbestConfig().num_paths == 100
    assert params["nbest_scale"].default == NbestConfig().nbest_scale == 0.5


@pytest.mark.parametrize("kwargs, message", [
    (dict(num_paths=0), r"NbestConfig.num_paths must be an int in \[1, 10000\], got 0"),
    (dict(num_paths=2.7), r"NbestConfig.num_paths must be an int in \[1, 10000\], got 2.7"),
    (dict(num_paths=True), r"NbestConfig.num_paths must be an int in \[1, 10000\], got True"),
    (dict(nbest_scale=0.0), "nbest_scale must be > 0 and finite, got 0.0"),
    (dict(nbest_scale=-1), "nbest_scale must be > 0 and finite"),
    (dict(nbest_scale=math.inf), "nbest_scale must be > 0 and finite"),
    (dict(nbest_scale=math.nan), "nbest_scale must be > 0 and finite"),
])
def test_bad_settings_are_clear_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        NbestConfig(**kwargs)


def test_from_lattice_checks_through_the_config(tiny_hlg):
    _, HLG, _ = tiny_hlg
    lattice = k2.create_fsa_vec([HLG])
    with pytest.raises(ValueError,
                       match=r"NbestConfig.num_paths must be an int in \[1, 10000\], got 0"):
        Nbest.from_lattice(lattice, 0)
    with pytest.raises(ValueError, match="nbest_scale must be > 0"):
        Nbest.from_lattice(lattice, 5, 0.0)
