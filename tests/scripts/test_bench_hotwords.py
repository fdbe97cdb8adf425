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


def test_targets_ask_for_a_decode_at_the_largest_list_and_a_refusal_at_load():
    from scripts.bench.common import Report

    def row(name, n, **kw):
        return {"method": name, "phrases": n, **kw}

    ok = {"decode_s": 1.0, "decode_cpu_s": 1.2, "peak_mb": 900.0}
    rows = [row("a", 0, decode_s=1.0, decode_cpu_s=1.0, peak_mb=800.0), row("a", 10, **ok),
            row("b", 0, decode_s=1.0, decode_cpu_s=1.0, peak_mb=800.0),
            row("b", 10, refused="at first utterance: too large", peak_mb=700.0),
            row("a", bench_hotwords.REFUSED, refused="at load: too many", peak_mb=700.0),
            row("b", bench_hotwords.REFUSED, refused="at first utterance: x", peak_mb=700.0)]
    report = Report(bench_hotwords.AREA, "t")
    bench_hotwords._targets(report, rows, smoke=False)
    met = {t["target"]: t["met"] for t in report.targets}
    assert met == {"a, 10 phrases: decoded within 1.5 GB peak RSS": True,
                   "a, 10 phrases: decode CPU time <= 125% of no hotwords": True,
                   "b, 10 phrases: decoded within 1.5 GB peak RSS": False,
                   f"a, {bench_hotwords.REFUSED} phrases: refused at load with a message (or "
                   "decoded within 1.5 GB), never killed": True,
                   f"b, {bench_hotwords.REFUSED} phrases: refused at load with a message (or "
                   "decoded within 1.5 GB), never killed": False}
