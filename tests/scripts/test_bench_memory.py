"""``scripts/bench/memory.py``: the hard limit kills a process that grows past it (and says so,
never dropping the case), and the shipped model's heaviest methods decode 30 s of speech
within 3 GB at icefall's lattice output beam (8; k2dec's default 4 makes smaller lattices),
recording the pruning of their lattices."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from scripts.bench import memory as bench_memory

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "assets" / "librispeech-synth"

#: the methods that needed more than 3 GB (or were killed) on 30 s before the bounds
HEAVY = ("whole-lattice-rescoring", "nbest-rescoring", "attention-decoder",
         "fast_beam_search_nbest_oracle")


def test_the_limit_kills_a_growing_process_and_reports_it():
    grow = ("import time\nx = []\nfor _ in range(40):\n    x.append(bytearray(50 * 2**20))\n"
            "    time.sleep(0.02)\nprint('{\"peak_mb\": 0}')")
    r = bench_memory.run_limited([sys.executable, "-c", grow], limit_mb=300, timeout=60)
    assert r["outcome"].startswith("killed at") and "limit 300" in r["outcome"]
    assert 300 < r["polled_peak_mb"] < 1000
    slow = "import time\ntime.sleep(30)"
    r = bench_memory.run_limited([sys.executable, "-c", slow], limit_mb=300, timeout=1)
    assert r["outcome"] == "killed after 1 s"
    fail = "raise ValueError('bad input')"
    r = bench_memory.run_limited([sys.executable, "-c", fail], limit_mb=300, timeout=30)
    assert r["outcome"] == "failed: ValueError: bad input"
    ok = "print('{\"peak_mb\": 12.5}')"
    r = bench_memory.run_limited([sys.executable, "-c", ok], limit_mb=300, timeout=30)
    assert r["outcome"] == "ok" and r["peak_mb"] == 12.5


@pytest.mark.skipif(not (SHIPPED / "model.pt").is_file(), reason="no shipped model")
def test_heaviest_methods_stay_within_3_gb_on_30_s(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "scripts.bench.memory", "--durations", "30",
         "--methods", ",".join(HEAVY), "--set", "lattice.output_beam=8", "--report", str(tmp_path)],
        cwd=REPO, capture_output=True, text=True, timeout=1500)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rep = json.loads((tmp_path / "memory.json").read_text())
    (table,) = rep["tables"]
    rows = {r[0]: r for r in table["rows"]}
    assert set(rows) == set(HEAVY)
    for name, (_, peak, seconds, wer, notes) in rows.items():
        assert peak <= 3072, (name, peak, notes)
        assert seconds is not None and seconds > 0 and wer is not None, (name, notes)
    # the 30 s lattice (1.9M arcs at icefall's output beam) had to be pruned: recorded
    for name in ("nbest-rescoring", "attention-decoder", "whole-lattice-rescoring"):
        assert "lattice pruned from" in rows[name][4], rows[name]
    assert rep["targets"][0]["met"] is True
