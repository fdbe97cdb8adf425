"""Every method ``k2dec decode --list-methods --model`` lists for the shipped model decodes with
the shipped files alone (graphs compiled from the shipped ARPA files, the RNN LM, LODR's
token bigram, the settings file), as the demo finds them: no method is skipped for a missing
resource and no cut fails."""

from __future__ import annotations

import pytest
from lhotse import CutSet

from k2dec.demo import ASSETS, SHIPPED_SETTINGS, SHIPPED_TOKEN_LM
from k2dec.job import (
    DecodeConfig,
    load_assets,
    plan_methods,
    read_settings,
    run_decode,
    split_available,
)
from k2dec.methods import supported_methods

pytestmark = pytest.mark.skipif(not (ASSETS / "model.pt").is_file(),
                                reason="no shipped model in this checkout")


def test_every_listed_method_decodes_with_the_shipped_files(shipped_demo, tmp_path):
    _, lang, graphs, cut_paths = shipped_demo
    lodr = ASSETS / "lm" / SHIPPED_TOKEN_LM
    assert lodr.is_file()
    assets = load_assets(ASSETS / "model.pt", lang, graph_dir=graphs,
                         lm_paths={"rnn_lm": ASSETS / "lm" / "rnn_lm.pt"}, lodr_arpa=lodr)
    methods = sorted(supported_methods(assets.model), key=lambda m: m.name)
    assert len(methods) >= 31
    ok, lacking = split_available(methods, assets.resources)
    assert lacking == {}
    cuts = CutSet.from_cuts(sorted(CutSet.from_file(cut_paths["test-clean"]),
                                   key=lambda c: c.id)[:1])
    runs = plan_methods([m.name for m in ok], settings=read_settings(SHIPPED_SETTINGS),
                        require_used=False)
    rows = run_decode(assets, {"test-clean": cuts}, runs, tmp_path / "decode",
                      DecodeConfig(max_duration=100.0))
    assert sorted(r.method for r in rows) == sorted(m.name for m in methods)
    assert [r.method for r in rows if r.failed] == []
    assert all(r.num_cuts == 1 for r in rows)
