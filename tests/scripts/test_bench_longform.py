"""The long-form bench's assets (``scripts/bench/longform.py``): a worker gives a method the
LMs ``k2dec decode`` would load for it (``--rnn-lm`` / ``--lodr-arpa``), so the LM-fusion and
LODR methods decode instead of failing for a missing LM."""

from __future__ import annotations

import pytest

from k2dec.job import check_references, load_assets
from k2dec.methods import get_method, list_methods
from scripts.bench.common import SHIPPED
from scripts.bench.longform import lm_inputs, worker_references

LM_METHODS = [m.name for m in list_methods() if {"lm", "lodr"} & set(m.requires)]


def test_lm_inputs_only_for_the_methods_that_need_them():
    assert "modified_beam_search_LODR" in LM_METHODS
    for method in list_methods():
        got = lm_inputs((method.name,))
        assert (got["lm_paths"] is not None) == ("lm" in method.requires), method.name
        assert (got["lodr_arpa"] is not None) == ("lodr" in method.requires), method.name
    both = lm_inputs(("greedy_search", "modified_beam_search_LODR"))
    assert both["lm_paths"] is not None and both["lodr_arpa"] is not None


@pytest.mark.parametrize("method", LM_METHODS)
def test_loaded_assets_serve_the_method(method):
    """The shipped model with what lm_inputs gives lacks nothing but graphs for the method."""
    assets = load_assets(SHIPPED / "model.pt", SHIPPED / "lang", **lm_inputs((method,)))
    missing = assets.resources.missing(get_method(method).requires)
    assert not [r for r in missing if r in ("lm", "lodr", "attention_decoder")], missing


def test_oracle_workers_get_the_recordings_reference(tmp_path):
    """An oracle method's case is given the recording's reference, keyed by the id its audio
    file gets, so the job does not refuse it before decoding; the others get none."""
    (tmp_path / "long.wav").touch()
    (tmp_path / "text").write_text("long HELLO WORLD AGAIN\n")
    oracles = [m.name for m in list_methods() if m.needs_references]
    assert {"nbest-oracle", "fast_beam_search_nbest_oracle"} <= set(oracles)
    for method in list_methods():
        got = worker_references(tmp_path, method.name)
        if method.needs_references:
            assert got == {"long": "HELLO WORLD AGAIN"}, method.name
            check_references([method.name], {"long": got["long"]})
        else:
            assert got is None, method.name
    with pytest.raises(ValueError, match="nbest-oracle"):
        check_references(["nbest-oracle"], {"long": None})
