"""``scripts/bench/streams.py --smoke``: one row per search and batch size with a positive time
and RTF, batch invariance reported as a target (it holds), and a CPU run says where the GPU
figures come from."""

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


def test_smoke_report(tmp_path, device):
    proc = subprocess.run([sys.executable, "-m", "scripts.bench.streams", "--smoke", "--device",
                           str(device), "--report", str(tmp_path)],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rep = json.loads((tmp_path / "streams.json").read_text())
    (table,) = rep["tables"]
    rows = table["rows"]
    assert [(r[0], r[1]) for r in rows] == [
        (s, n) for s in ("fast_beam_search (trivial graph)", "fast_beam_search (LG)",
                         "HLG 1best") for n in (1, 2)]
    assert all(r[2] > 0 and float(r[3]) > 0 for r in rows)
    assert all(r[-1] is True for r in rows)
    assert rep["targets"][0]["met"] is True
    if device.type == "cpu":
        assert any("--device cuda" in n for n in rep["notes"])
