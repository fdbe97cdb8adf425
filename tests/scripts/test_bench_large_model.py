"""``scripts/bench/large_model.py --smoke``: a row per search and batch size with positive times
and an RTF that is their ratio to the audio, the batch-invariance target evaluated (it holds),
and the model's size in the settings."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_smoke_report(tmp_path, device):
    proc = subprocess.run([sys.executable, "-m", "scripts.bench.large_model", "--smoke",
                           "--device", str(device), "--report", str(tmp_path)],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rep = json.loads((tmp_path / "large_model.json").read_text())
    (table,) = rep["tables"]
    rows = table["rows"]
    assert [(r[0], r[1]) for r in rows] == [
        (s, n) for s in ("greedy_search (batched)", "fast_beam_search (trivial graph)",
                         "fast_beam_search (LG)", "modified_beam_search (beam 4)",
                         "HLG 1best (CTC head)")
        for n in (1, 2)]
    for r in rows:
        audio, total, encoder, rtf = r[2], r[3], r[4], float(r[5])
        assert audio > 0 and total > 0 and 0 < encoder <= total
        assert abs(rtf - total / audio) < 1e-3 * max(rtf, 1e-3) + 1e-5
        # the times are rounded to 1e-4 s, the RTFx to 0.1: the RTFx lie within what the
        # rounded times allow
        rtfx, search_rtfx = r[6], r[7]
        assert _within_rounding(rtfx, audio, total, 1e-4)
        assert _within_rounding(search_rtfx, audio, total - encoder, 2e-4)
        assert r[10] >= 0  # output units per frame
    assert [r[-1] for r in rows if r[1] == 2] == [True] * 5
    assert [t["met"] for t in rep["targets"]] == [True]
    assert "parameters" in rep["settings"] and f"({device.type})" in rep["settings"]


def _within_rounding(value: float, audio: float, seconds: float, slack: float) -> bool:
    """Whether ``value`` (rounded to 0.1) is ``audio / t`` for some ``t`` within ``slack`` of
    ``seconds`` (itself from times rounded to 1e-4)."""
    low = audio / (seconds + slack)
    high = audio / (seconds - slack) if seconds > slack else float("inf")
    return low - 0.05 <= value <= high + 0.05
