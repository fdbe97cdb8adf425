"""``scripts/bench/confidence.py --smoke``: WER of 1best and MBR per lattice kind and test set,
confidence metrics, timing ratios, targets evaluated and the reliability plot."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "assets" / "librispeech-synth"

pytestmark = pytest.mark.skipif(not (SHIPPED / "model.pt").is_file(),
                                reason="no shipped model in this checkout")


def test_smoke_report(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "scripts.bench.confidence", "--smoke",
                           "--report", str(tmp_path)],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rep = json.loads((tmp_path / "confidence.json").read_text())
    wer, conf, times = rep["tables"]
    assert [r[0] for r in wer["rows"]] == ["HLG"] * 3 + ["fast_beam_search_LG"] * 3
    assert all(0 <= x <= 200 for r in wer["rows"] for x in r[2:])
    assert len(conf["rows"]) == 12 and len(conf["headers"]) == 9
    for r in conf["rows"]:
        assert r[2] > 0 and 0 <= r[4] <= 1 and 0 <= r[7] <= 1  # words, mean conf, AUC
    assert all(r[2] > 0 and r[5] > 0 and r[6] > 0 for r in times["rows"])
    assert len(rep["targets"]) == 6 and all(t["met"] in (True, False) for t in rep["targets"])
    nce = [t for t in rep["targets"] if "NCE > 0" in t["target"]]
    assert len(nce) == 4  # stated on held-out-calibrated confidences, raw NCE reported
    assert all("calibrated on held-out words" in t["target"] and "(raw " in t["value"]
               for t in nce)
    assert rep["plots"] == ["confidence_reliability.png"]
    assert (tmp_path / "confidence_reliability.png").stat().st_size > 1000
