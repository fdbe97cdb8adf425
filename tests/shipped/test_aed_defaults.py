"""attention-beam-search at its defaults (no settings file) does not degenerate on the shipped
model: joint CTC/attention scoring keeps it near the recorded WER, while the attention decoder
alone (ctc_weight=0, the old default) ends too early and loops ("STES STES STES ...")."""

from __future__ import annotations

import pytest
from lhotse import CutSet

from k2dec.demo import ASSETS
from k2dec.job import DecodeConfig, load_assets, plan_methods, run_decode
from k2dec.results import read_results

pytestmark = pytest.mark.skipif(not (ASSETS / "model.pt").is_file(),
                                reason="no shipped model in this checkout")

#: WER % of the first 30 cuts of test-clean at the method's defaults, recorded from a real run
#: (RESULTS.md "Attention beam search defaults"), plus 3 points for float differences
DEFAULT_WER = 55.49 + 3.0


def test_defaults_do_not_degenerate(shipped_demo, tmp_path):
    _, lang, graphs, cut_paths = shipped_demo
    cuts = CutSet.from_cuts(sorted(CutSet.from_file(cut_paths["test-clean"]),
                                   key=lambda c: c.id)[:30])
    assets = load_assets(ASSETS / "model.pt", lang, graph_dir=graphs)
    wer, longest = {}, {}
    for name, sets in (("default", ()), ("attention only", ("ctc_weight=0",))):
        run, = plan_methods(["attention-beam-search"], sets)
        row, = run_decode(assets, {"test-clean": cuts}, [run], tmp_path / name,
                          DecodeConfig(max_duration=100.0))
        assert row.failed == []
        wer[name] = row.headline[1]
        records = read_results(row.results_path).values()
        longest[name] = max(len(r["hyp"]) / max(1, len(r["ref"])) for r in records)
    assert wer["default"] <= DEFAULT_WER, wer
    assert longest["default"] < 1.5, longest  # no hypothesis runs on in a loop
    assert wer["attention only"] > wer["default"] + 30, wer  # what the default guards against
