"""Version 0.2.0 dropped 0.1.0's deprecated aliases: an old module path, parameter or class name
is an error (no silent alias), and the ground-floor helpers are found only in k2dec.primitives."""

from __future__ import annotations

import sys
from pathlib import Path

import k2
import pytest
import torch

import k2dec
import k2dec.lattice
import k2dec.lattice.parallel
import k2dec.model
from k2dec.lattice import ctc_decoding, get_lattice
from k2dec.methods import CtcInputs

#: the ground floor's old top-level modules (now in k2dec.primitives)
FLOOR = ["hypothesis", "ragged", "sizes", "files", "positional", "best_paths", "batch_search",
         "family"]
OLD_MODULES = ["k2dec.paths", "k2dec.utils", "k2dec.lattice.confidence", "k2dec.lattice.runner",
               "k2dec.methods.hotwords", "k2dec.methods.transducer_lm", "k2dec.nbest.confidence",
               "k2dec.results.confidence", "k2dec.scorers.hotwords",
               "k2dec.transducer.confidence"] + [f"k2dec.{name}" for name in FLOOR]


PACKAGE = Path(k2dec.__file__).parent


@pytest.mark.parametrize("name", OLD_MODULES)
def test_an_old_module_path_is_gone(name):
    """Neither a module at the old path nor an import hook of k2dec's serving it."""
    path = PACKAGE.joinpath(*name.split(".")[1:])
    assert not path.with_suffix(".py").exists() and not path.is_dir()
    assert not [f for f in sys.meta_path if type(f).__module__.startswith("k2dec")]


def _inputs():
    g = torch.Generator().manual_seed(0)
    return torch.randn(2, 9, 5, generator=g).log_softmax(-1), torch.tensor([9, 6])


def test_an_old_keyword_is_a_type_error():
    lp, lens = _inputs()
    with pytest.raises(TypeError, match="lengths"):
        ctc_decoding(lp, lengths=lens)
    with pytest.raises(TypeError, match="lengths"):
        get_lattice(lp, graph=k2.arc_sort(k2.ctc_topo(4)), lengths=lens)
    with pytest.raises(TypeError, match="lengths"):
        CtcInputs(lp, lengths=lens)
    assert not hasattr(CtcInputs(lp, lens), "lengths")
    assert [h.tokens for h in ctc_decoding(lp, log_probs_lens=lens)]  # the new name works


@pytest.mark.parametrize("module", [k2dec.lattice, k2dec.lattice.parallel])
@pytest.mark.parametrize("old", ["DecodeRunner", "RunnerStats"])
def test_an_old_class_name_is_gone(module, old):
    with pytest.raises(AttributeError, match=old):
        getattr(module, old)


def test_supported_methods_lives_in_the_registry_only():
    assert not hasattr(k2dec.model, "supported_methods")
    from k2dec.methods import supported_methods

    assert callable(supported_methods)
