import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from k2dec.results import ResultWriter, merge_results, read_results, wer_results


def _lines(path):
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_write_resume_and_failures(tmp_path):
    path = tmp_path / "sub" / "results.jsonl"
    with ResultWriter(path) as out:
        out.write("c1", hyp=["A", "B"], ref=["A", "C"], duration=1.5)
        out.write_failure("c2", ValueError("log_probs has NaN"))
        assert "c1" in out and "c2" in out and "c3" not in out
    assert _lines(path) == [
        {"cut_id": "c1", "status": "ok", "hyp": ["A", "B"], "ref": ["A", "C"], "duration": 1.5},
        {"cut_id": "c2", "status": "error", "error": "ValueError: log_probs has NaN"},
    ]
    # Reopen: done cuts (including the failed one) are skipped; new ones append.
    with ResultWriter(path) as out:
        todo = [c for c in ["c1", "c2", "c3"] if c not in out]
        assert todo == ["c3"]
        out.write("c3", hyp=[])
        with pytest.raises(ValueError, match="already in"):
            out.write("c1", hyp=["A"])
    assert [r["cut_id"] for r in _lines(path)] == ["c1", "c2", "c3"]
    # retry_failed: the failed cut is tried again and its new record wins.
    with ResultWriter(path, retry_failed=True) as out:
        assert [c for c in ["c1", "c2", "c3"] if c not in out] == ["c2"]
        out.write("c2", hyp=["X"])
    res = read_results(path)
    assert sorted(res) == ["c1", "c2", "c3"]
    assert res["c2"]["status"] == "ok" and res["c2"]["hyp"] == ["X"]


def test_truncated_last_line_is_dropped(tmp_path):
    path = tmp_path / "r.jsonl"
    with ResultWriter(path) as out:
        out.write("c1", hyp=["A"])
    with open(path, "a") as f:
        f.write('{"cut_id": "c2", "status": "o')  # killed mid-write
    assert sorted(read_results(path)) == ["c1"]
    with ResultWriter(path) as out:
        assert "c2" not in out
        out.write("c2", hyp=["B"])
    assert [r["cut_id"] for r in _lines(path)] == ["c1", "c2"]


def test_bad_arguments(tmp_path):
    assert read_results(tmp_path / "missing.jsonl") == {}
    with ResultWriter(tmp_path / "ok.jsonl") as out:
        with pytest.raises(TypeError, match="hyp must be a list of words"):
            out.write("c1", hyp="A B")
        with pytest.raises(ValueError, match="reserved"):
            out.write("c1", hyp=["A"], status="x")
        with pytest.raises(ValueError, match="cut_id must be a non-empty str"):
            out.write("", hyp=["A"])
    assert (tmp_path / "ok.jsonl").read_text() == ""


_JOB = textwrap.dedent("""
    import sys, time
    from k2dec.results import ResultWriter
    path, n, delay = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    with ResultWriter(path) as out:
        for i in range(n):
            cut = f"cut-{i:03d}"
            if cut in out:
                continue
            if i % 7 == 3:
                out.write_failure(cut, RuntimeError(f"bad cut {i}"))
            else:
                out.write(cut, hyp=["W" + str(i)], ref=["W" + str(i)])
            time.sleep(delay)
""")


def test_killed_job_resumes_without_duplicates_or_losses(tmp_path):
    path = tmp_path / "r.jsonl"
    script = tmp_path / "job.py"
    script.write_text(_JOB)
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    proc = subprocess.Popen([sys.executable, str(script), str(path), "40", "0.02"], env=env)
    deadline = time.time() + 30
    while time.time() < deadline:
        if path.is_file() and len(path.read_text().splitlines()) >= 10:
            break
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    n_before = len(read_results(path))
    assert 10 <= n_before < 40
    subprocess.run([sys.executable, str(script), str(path), "40", "0"], env=env, check=True)
    records = _lines(path)
    ids = [r["cut_id"] for r in records]
    assert ids == sorted(set(ids)) and len(ids) == 40
    failed = [r["cut_id"] for r in records if r["status"] == "error"]
    assert failed == [f"cut-{i:03d}" for i in range(40) if i % 7 == 3]
    assert all(r["hyp"] == r["ref"] for r in records if r["status"] == "ok")


def test_wer_results_and_merge(tmp_path):
    a, b = tmp_path / "rank0.jsonl", tmp_path / "rank1.jsonl"
    with ResultWriter(a) as out:
        out.write("c2", hyp=["B"], ref=["B", "C"])
        out.write_failure("c3", "out of memory")
        out.write("c9", hyp=["Z"])  # no reference: not in the WER input
    with ResultWriter(b) as out:
        out.write("c1", hyp=["A"], ref=["A"])
        out.write("c3", hyp=["C"], ref=["C"])
        out.write("c2", hyp=["B"], ref=["B", "C"])  # a cut in two shards, same result
    merged = merge_results([a, b], tmp_path / "all.jsonl")
    assert list(merged) == ["c1", "c2", "c3", "c9"]
    assert merged["c3"]["status"] == "ok"
    assert [r["cut_id"] for r in _lines(tmp_path / "all.jsonl")] == ["c1", "c2", "c3", "c9"]
    results, failed = wer_results(read_results(a))
    assert results == [("c2", ["B", "C"], ["B"])] and failed == ["c3"]
    results, failed = wer_results(merged)
    assert [r[0] for r in results] == ["c1", "c2", "c3"] and failed == []
    with ResultWriter(tmp_path / "rank2.jsonl") as out:
        out.write("c1", hyp=["X"], ref=["A"])
    with pytest.raises(ValueError, match="two different results"):
        merge_results([a, b, tmp_path / "rank2.jsonl"], tmp_path / "bad.jsonl")
