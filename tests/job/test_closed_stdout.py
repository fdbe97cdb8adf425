"""``k2dec decode ... | head -1``: a reader that closes stdout before the results table is
printed changes nothing: every result file is complete and the exit status is the job's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from k2dec.results import read_results

ROOT = Path(__file__).resolve().parents[2]


def test_a_closed_stdout_pipe_keeps_exit_status_zero(decode_setup, tmp_path):
    s = decode_setup
    cuts = tmp_path / "cuts.jsonl.gz"
    s["cuts"].subset(first=2).to_file(cuts)
    out = tmp_path / "out"
    p = subprocess.Popen(
        [sys.executable, "-m", "k2dec.cli", "decode", "--cuts", str(cuts), "--model",
         str(s["model_path"]), "--lang-dir", str(s["lang_dir"]), "--method", "greedy_search",
         "--out-dir", str(out), "--test-set", "t", "--max-duration", "3"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)})
    p.stdout.close()  # the reader is gone before anything is printed
    _, err = p.communicate(timeout=600)
    err = err.decode()
    assert p.returncode == 0, err
    assert "Traceback" not in err and "BrokenPipe" not in err, err
    records = read_results(out / "greedy_search" / "results-t.jsonl")
    assert len(records) == 2 and all(r["status"] == "ok" for r in records.values())
    assert (out / "greedy_search" / "wer-summary-t.txt").is_file()
