"""``scripts/bench/hotwords.py --quick``: one fresh process per (method, list size), each row
with its peak RSS, times, U-WER and B-WER, the targets at the largest list, and the list
and B-WER helpers on known input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from scripts.bench import hotwords as bench_hotwords

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "assets" / "librispeech-synth"


def test_lists_and_biased_word_error_rates():
    refs = [["THE", "GOLDEN", "LEAVES", "FELL", "DOWN"], ["GOLDEN", "LEAVES", "AGAIN"]]
    vocab = {"THE", "GOLDEN", "LEAVES", "FELL", "DOWN", "AGAIN"}
    assert bench_hotwords.target_phrases(refs, vocab) == ["GOLDEN LEAVES"]
    assert bench_hotwords.target_phrases(refs, vocab - {"LEAVES"}) == []
    words = ["ALPHA", "BETA", "GAMMA"]
    got = bench_hotwords.phrase_list(5, ["GOLDEN LEAVES"], words)
    assert got[0] == "GOLDEN LEAVES" and len(got) == 5
    assert all(2 <= len(p.split()) <= 3 and set(p.split()) <= set(words) for p in got[1:])
    assert got == bench_hotwords.phrase_list(5, ["GOLDEN LEAVES"], words)  # seeded
    hyps = [["THE", "GOLDEN", "LEAF", "FELL", "DOWN"], ["GOLDEN", "LEAVES", "AGAIN", "NOW"]]
    u_wer, b_wer = bench_hotwords.biased_stats(refs, hyps, ["GOLDEN LEAVES"])
    assert b_wer == pytest.approx(100.0 / 4)  # LEAF for LEAVES, of 4 biased words
    assert u_wer == pytest.approx(100.0 / 4)  # the insertion NOW, of 4 other words


@pytest.mark.skipif(not (SHIPPED / "model.pt").is_file(), reason="no shipped model")
def test_quick_report(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "scripts.bench.hotwords", "--quick",
                           "--report", str(tmp_path)],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rep = json.loads((tmp_path / "hotwords.json").read_text())
    (table,) = rep["tables"]
    rows = table["rows"]
    assert [(r[0], r[1]) for r in rows] == [(m, n) for m in ("modified_beam_search", "1best")
                                            for n in (0, 100)]
    for _name, n, peak, build, decode, cpu, extra, u_wer, b_wer, note in rows:
        assert note == "" and peak > 0 and float(build) > 0 and float(decode) > 0, note
        assert float(cpu) > 0 and 0 <= float(u_wer) <= 200 and 0 <= float(b_wer) <= 100
        assert (extra == "") == (n == 0)
    assert {t["target"].split(",")[0] for t in rep["targets"]} == {"modified_beam_search",
                                                                  "1best"}
    assert all(t["met"] is not None for t in rep["targets"])
