"""Renamed parameters, modules and classes: the new names say what they are (which frames a
length counts, what a module holds); the old names still work, with a DeprecationWarning, and
give the same results."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import warnings
from pathlib import Path

import k2
import pytest
import torch

from k2dec.deprecation import MOVED_MODULES
from k2dec.lattice import ctc_decoding, ctc_greedy_search, get_lattice, make_dense_fsa_vec
from k2dec.lattice.ctc_prefix_beam_search import ctc_prefix_beam_search
from k2dec.methods import CtcInputs
from k2dec.model import subsampled_lengths
from k2dec.scorers import CtcPrefixScorer

ROOT = Path(__file__).resolve().parents[1]


def _inputs():
    g = torch.Generator().manual_seed(0)
    return torch.randn(2, 9, 5, generator=g).log_softmax(-1), torch.tensor([9, 6])


CALLS = [
    ("get_lattice", lambda lp, n, **kw: get_lattice(lp, graph=k2.arc_sort(k2.ctc_topo(4)), **kw)
     .lattice.num_arcs),
    ("ctc_decoding", lambda lp, n, **kw: [h.tokens for h in ctc_decoding(lp, **kw)]),
    ("ctc_greedy_search", lambda lp, n, **kw: [h.tokens for h in ctc_greedy_search(lp, **kw)]),
    ("make_dense_fsa_vec", lambda lp, n, **kw: make_dense_fsa_vec(lp, **kw).num_frames.tolist()),
    ("ctc_prefix_beam_search", lambda lp, n, **kw: [
        [h.tokens for h in hs] for hs in ctc_prefix_beam_search(lp, **kw)]),
]


@pytest.mark.parametrize("name, call", CALLS, ids=[c[0] for c in CALLS])
def test_old_lengths_keyword_is_a_deprecated_alias(name, call):
    lp, lens = _inputs()
    new = call(lp, lens, log_probs_lens=lens)
    with pytest.warns(DeprecationWarning, match=rf"{name}\(lengths=...\) is deprecated: the "
                                                r"parameter is now log_probs_lens"):
        old = call(lp, lens, lengths=lens)
    assert old == new
    with pytest.raises(TypeError, match="got both log_probs_lens= and its old name lengths="):
        call(lp, lens, lengths=lens, log_probs_lens=lens)


def test_other_renamed_parameters():
    lp, lens = _inputs()
    with pytest.warns(DeprecationWarning, match="now feature_lens"):
        assert subsampled_lengths(lengths=torch.tensor([40])).tolist() == [9]
    with pytest.warns(DeprecationWarning, match="now log_probs_lens"):
        scorer = CtcPrefixScorer(lp, lens=lens, blank_id=0, eos_id=4)
    assert scorer.lens.tolist() == [9, 6]
    with pytest.warns(DeprecationWarning, match="now log_probs_lens"):
        inputs = CtcInputs(lp, lengths=lens)
    assert inputs.log_probs_lens is lens
    with pytest.warns(DeprecationWarning, match="use CtcInputs.log_probs_lens"):
        assert inputs.lengths is lens


@pytest.mark.parametrize("old, new", sorted(MOVED_MODULES.items()))
def test_old_module_path_is_a_deprecated_alias(old, new):
    """The old path imports the new module itself (private names too), warning once with the
    new path, at the importing line."""
    module = importlib.import_module(new)
    parent, _, leaf = old.rpartition(".")
    sys.modules.pop(old, None)
    vars(importlib.import_module(parent)).pop(leaf, None)
    with pytest.warns(DeprecationWarning) as caught:
        __import__(old)
    assert [str(w.message) for w in caught] == [f"module {old} is deprecated: it is now {new}"]
    assert caught[0].filename == __file__
    assert sys.modules[old] is module
    assert getattr(importlib.import_module(parent), leaf) is module
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        importlib.import_module(old)  # warned once: not again
    public = [n for n in module.__all__ if not n.startswith("_")]
    private = [n for n in vars(module) if n.startswith("_") and not n.startswith("__")]
    for name in public[:1] + private[:1]:
        exec(f"from {old} import {name} as got", ns := {})
        assert ns["got"] is getattr(module, name)


def test_new_module_paths_do_not_warn():
    code = ("import importlib\n"
            f"for name in {sorted(set(MOVED_MODULES.values()))!r}:\n"
            "    importlib.import_module(name)\n"
            "import k2dec.lattice, k2dec.methods, k2dec.utils\n")
    proc = subprocess.run([sys.executable, "-W", "error::DeprecationWarning:k2dec", "-c", code],
                          capture_output=True, text=True, cwd=ROOT,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.returncode == 0, proc.stderr[-2000:]


@pytest.mark.parametrize("module", ["k2dec.lattice", "k2dec.lattice.parallel"])
@pytest.mark.parametrize("old, new", [("DecodeRunner", "ParallelOneBestDecoder"),
                                      ("RunnerStats", "WorkerStats")])
def test_old_class_names_are_deprecated_aliases(module, old, new):
    mod = importlib.import_module(module)
    vars(mod).pop(old, None)
    with pytest.warns(DeprecationWarning, match=rf"{module}\.{old} is deprecated: it is now "
                                                rf"{module}\.{new}"):
        exec(f"from {module} import {old} as got", ns := {})
    assert ns["got"] is getattr(mod, new)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert getattr(mod, old) is getattr(mod, new)  # warned once: not again
    with pytest.raises(AttributeError, match="has no attribute 'NoSuchName'"):
        mod.NoSuchName  # noqa: B018
