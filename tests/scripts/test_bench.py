"""``python -m scripts.bench`` (``make bench``, ``scripts/bench/runner.py``): the report is
assembled from the area modules, and an area that is missing or fails is reported as failed,
never dropped."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from scripts.bench import runner as bench

REPO = Path(__file__).resolve().parents[2]


def _run(*args: str, timeout: float = 150) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "scripts.bench", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=timeout)


def test_smoke_report_has_targets_sections_and_plots(tmp_path):
    proc = _run("--smoke", "--areas", "lattice,transducer", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    md = (tmp_path / "BENCHMARKS.md").read_text()
    assert "| area | target | value | status |" in md
    # every lattice target is in the summary table, none evaluated in smoke mode
    lattice_rows = [line for line in md.splitlines() if line.startswith("| lattice |")]
    assert len(lattice_rows) == 3, md
    assert all(row.endswith("| n/a |") for row in lattice_rows)
    assert "FAILED" not in md, md
    assert "(`lattice`)" in md and "(`transducer`)" in md
    for name in ("lattice", "transducer"):
        assert f"![{name}.png](bench/{name}.png)" in md
        assert (tmp_path / "bench" / f"{name}.png").stat().st_size > 1000
        report = json.loads((tmp_path / "raw" / f"{name}.json").read_text())
        assert report["area"] == name and report["tables"]
    for key in ("date", "commit", "cpu", "cores", "versions", "command", "mode",
                "total wall time"):
        assert f"- **{key}**:" in md
    assert ", k2 " in md and ", torch " in md
    assert str(REPO) not in md


def test_missing_area_is_reported_as_failed(tmp_path):
    proc = _run("--smoke", "--areas", "no_such_area", "--out", str(tmp_path), timeout=60)
    assert proc.returncode == 0, proc.stderr
    md = (tmp_path / "BENCHMARKS.md").read_text()
    assert ("| no_such_area | (area did not run) | no area module "
            "scripts/bench/no_such_area.py |") in md
    assert "## no_such_area: FAILED" in md


@pytest.fixture
def fake_repo(tmp_path, monkeypatch):
    (tmp_path / "scripts" / "bench").mkdir(parents=True)
    monkeypatch.setattr(bench, "REPO", tmp_path)
    return tmp_path


def test_crashing_area_reports_its_stderr(fake_repo):
    (fake_repo / "scripts" / "bench" / "boom.py").write_text(
        "import sys\nprint('starting')\nsys.stderr.write('first line\\n')\n"
        "raise RuntimeError('the peer exploded')\n")
    raw = fake_repo / "raw"
    raw.mkdir()
    run = bench.run_area("boom", "smoke", raw, timeout=60)
    assert run.report is None
    assert run.error == "exited with status 1"
    assert "RuntimeError: the peer exploded" in run.tail
    assert "first line" in run.tail
    md = bench.render([run], {k: "x" for k in (
        "date", "commit", "command", "mode", "cpu", "cores", "load average", "versions",
        "total wall time")})
    assert "## boom: FAILED" in md
    assert "RuntimeError: the peer exploded" in md
    assert "| boom | (area did not run) | exited with status 1 | n/a |" in md


def test_area_without_report_or_with_stale_report_fails(fake_repo):
    (fake_repo / "scripts" / "bench" / "quiet.py").write_text("print('done')\n")
    raw = fake_repo / "raw"
    raw.mkdir()
    (raw / "quiet.json").write_text('{"area": "quiet", "title": "stale"}')
    run = bench.run_area("quiet", "full", raw, timeout=60)
    assert run.report is None
    assert run.error == "exited normally but wrote no quiet.json"


def test_area_timeout_is_a_failure(fake_repo):
    (fake_repo / "scripts" / "bench" / "slow.py").write_text("import time\ntime.sleep(30)\n")
    raw = fake_repo / "raw"
    raw.mkdir()
    run = bench.run_area("slow", "quick", raw, timeout=0.5)
    assert run.report is None
    assert run.error.startswith("timed out")


def test_render_marks_each_target_and_links_plots(tmp_path):
    lay = bench.Layout(tmp_path / "BENCHMARKS.md", tmp_path / "bench", tmp_path / "raw")
    lay.raw.mkdir()
    rep = bench.Report("demo", "Demo area", settings="tiny")
    rep.table("numbers", ["a", "b"], [[1, 2.5]])
    rep.target("fast enough", "1.2x", True)
    rep.target("accurate enough", "97%", False)
    rep.target("not measurable", "peer missing", None)
    rep.peer_missing("somepeer", "not installed")
    (lay.raw / "demo.png").write_bytes(b"png")
    rep.plots.append("never_written.png")
    rep.plots.append("demo.png")
    run = bench.AreaRun("demo", seconds=1.0, report=rep)
    bench.copy_plots(run, lay.raw, lay)
    md = bench.render([run], {k: "x" for k in (
        "date", "commit", "command", "mode", "cpu", "cores", "load average", "versions",
        "total wall time")})
    assert "| demo | fast enough | 1.2x | met |" in md
    assert "| demo | accurate enough | 97% | **not met** |" in md
    assert "| demo | not measurable | peer missing | n/a |" in md
    assert "![demo.png](bench/demo.png)" in md
    assert (tmp_path / "bench" / "demo.png").read_bytes() == b"png"
    assert "plot never_written.png was registered but not written" in md
    assert "- somepeer: not installed" in md
    assert "| 1 | 2.50 |" in md


def test_bad_areas_argument_is_rejected():
    with pytest.raises(SystemExit):
        bench.main(["--areas", ",,"])
    with pytest.raises(SystemExit):
        bench.main(["--areas", "../etc"])


def test_reuse_keeps_the_other_areas_of_an_earlier_run(tmp_path):
    assert _run("--smoke", "--areas", "lattice", "--out", str(tmp_path)).returncode == 0
    raw = tmp_path / "raw" / "lattice.json"
    rep = json.loads(raw.read_text())
    rep["notes"] = ["marker note"]
    raw.write_text(json.dumps(rep))
    # without --reuse a run of another area reports only that area
    assert _run("--smoke", "--areas", "transducer", "--out", str(tmp_path)).returncode == 0
    md = (tmp_path / "BENCHMARKS.md").read_text()
    assert "(`transducer`)" in md and "(`lattice`)" not in md
    # with --reuse the earlier lattice report comes back, marked as reused
    assert _run("--smoke", "--areas", "transducer", "--reuse",
                "--out", str(tmp_path)).returncode == 0
    md = (tmp_path / "BENCHMARKS.md").read_text()
    assert "(`transducer`)" in md and "(`lattice`)" in md
    assert md.index("(`lattice`)") < md.index("(`transducer`)")  # the order of AREAS
    assert "marker note" in md and "reused from an earlier run" in md


def test_recorded_gpu_reports_are_shown_as_recorded(tmp_path, monkeypatch):
    shipped = bench.recorded_gpu_runs()
    assert [r.area for r in shipped] == sorted(p.stem for p in bench.GPU_REPORTS.glob("*.json"))
    for run in shipped:  # each names its device and says where it comes from
        assert "cuda" in run.report.settings.lower() or "gpu" in run.report.settings.lower()
        assert any("docs/bench/gpu/" in n for n in run.report.notes)
    (tmp_path / "streams-x.json").write_text(json.dumps({
        "area": "streams", "title": "Batch scaling", "settings": "Device: GPU X (cuda).",
        "targets": [{"target": "same hypotheses", "value": "yes", "met": True}]}))
    monkeypatch.setattr(bench, "GPU_REPORTS", tmp_path)
    runs = bench.recorded_gpu_runs()
    text = bench.render(runs, {k: "x" for k in (
        "date", "commit", "command", "mode", "cpu", "cores", "load average", "versions",
        "total wall time")})
    assert "| streams-x | same hypotheses | yes | met |" in text
    assert '<a id="streams-x"></a>' in text and "Wall time not recorded" in text


def test_reports_recorded_with_a_peer_are_shown_as_recorded(tmp_path, monkeypatch):
    assert [r.area for r in bench.recorded_peer_runs()] == sorted(
        p.stem for p in bench.RECORDED_REPORTS.glob("*.json"))
    (tmp_path / "icefall_dropin.json").write_text(json.dumps({
        "area": "icefall_dropin", "title": "icefall drop-in", "settings": "s",
        "targets": [{"target": "identical", "value": "1 of 2", "met": False}]}))
    monkeypatch.setattr(bench, "RECORDED_REPORTS", tmp_path)
    [run] = bench.recorded_peer_runs()
    assert "`python -m scripts.bench.icefall_dropin`" in run.report.notes[-1]
    text = bench.render([run], {k: "x" for k in (
        "date", "commit", "command", "mode", "cpu", "cores", "load average", "versions",
        "total wall time")})
    assert "| icefall_dropin | identical | 1 of 2 | **not met** |" in text


def test_refresh_recorded_renders_only_the_recorded_reports_again(tmp_path, monkeypatch):
    info = {k: "x" for k in ("date", "commit", "command", "mode", "cpu", "cores",
                             "load average", "versions", "total wall time")}
    other = bench.AreaRun("demo", report=bench.Report("demo", "Demo area", settings="kept"))
    other.report.target("fast", "2x", True)
    rec, gpu = tmp_path / "recorded", tmp_path / "gpu"
    rec.mkdir()
    gpu.mkdir()
    monkeypatch.setattr(bench, "RECORDED_REPORTS", rec)
    monkeypatch.setattr(bench, "GPU_REPORTS", gpu)

    def record(value, met, title="icefall drop-in"):
        (rec / "icefall_dropin.json").write_text(json.dumps({
            "area": "icefall_dropin", "title": title, "settings": f"run {value}",
            "targets": [{"target": "identical", "value": value, "met": met}]}))

    record("1 of 2", False)
    md = tmp_path / "BENCHMARKS.md"
    md.write_text(bench.render([other, *bench.recorded_peer_runs()], info))
    first = md.read_text()
    assert bench.refresh_recorded(md) == first  # nothing recorded anew: the same file
    record("2 of 2", True)
    text = bench.refresh_recorded(md)
    assert text == bench.render([other, *bench.recorded_peer_runs()], info)
    assert "| icefall_dropin | identical | 2 of 2 | met |" in text and "1 of 2" not in text
    assert "**Settings.** run 2 of 2" in text and "**Settings.** kept" in text
    assert "| demo | fast | 2x | met |" in text
    (gpu / "streams-x.json").write_text(json.dumps({
        "area": "streams-x", "title": "GPU", "settings": "cuda"}))
    md.write_text(text)
    text = bench.refresh_recorded(md)
    assert '<a id="streams-x"></a>' in text  # a new one: appended, and linked from the list
    assert "[icefall_dropin](#icefall-dropin), [streams-x](#streams-x)" in text


def test_splice_replaces_the_areas_run_now_and_keeps_the_others(fake_repo, monkeypatch):
    info = {k: "x" for k in ("date", "commit", "command", "mode", "cpu", "cores",
                             "load average", "versions", "total wall time")}
    monkeypatch.setattr(bench, "RECORDED_REPORTS", fake_repo / "none")
    monkeypatch.setattr(bench, "GPU_REPORTS", fake_repo / "none")

    def run(area, value, settings):
        r = bench.AreaRun(area, report=bench.Report(area, area.title(), settings=settings))
        r.report.target("fast", value, value != "1x")
        return r

    md = fake_repo / "BENCHMARKS.md"
    md.write_text(bench.render([run("memory", "1x", "old"), run("lattice", "3x", "kept")], info))
    lay = bench.layout("full", None)
    assert lay.markdown == md
    started = bench.datetime.datetime(2026, 1, 2, 3, 4, tzinfo=bench.datetime.timezone.utc)
    assert bench.splice_runs([run("memory", "2x", "new")], lay, "0.5 / 0.4 / 0.3", started) == 0
    text = md.read_text()
    assert "| memory | fast | 2x | met |" in text and "| memory | fast | 1x |" not in text
    assert "**Settings.** new" in text and "**Settings.** old" not in text
    assert "| lattice | fast | 3x | met |" in text and "**Settings.** kept" in text
    assert "on 2026-01-02 03:04 UTC at commit" in text and "load average 0.5 / 0.4 / 0.3" in text
    assert text.index('<a id="memory">') < text.index('<a id="lattice">')  # its place kept
    failed = bench.AreaRun("lattice", error="timed out")
    assert bench.splice_runs([failed], lay, "x", started) == 1
    assert "## lattice: FAILED" in md.read_text()  # a failure is shown, never the old figures


def test_splice_keeps_rows_of_other_sections_that_start_like_a_target_row(fake_repo, monkeypatch):
    """A table in another area's section whose rows start ``| lattice |`` is not a target row:
    splicing the lattice area must not replace everything between them."""
    info = {k: "x" for k in ("date", "commit", "command", "mode", "cpu", "cores",
                             "load average", "versions", "total wall time")}
    monkeypatch.setattr(bench, "RECORDED_REPORTS", fake_repo / "none")
    monkeypatch.setattr(bench, "GPU_REPORTS", fake_repo / "none")

    def run(area, value):
        r = bench.AreaRun(area, report=bench.Report(area, area.title(), settings=area))
        r.report.target("fast", value, True)
        return r

    text = bench.render([run("lattice", "1x"), run("memory", "1x")], info)
    text += "\n| lattice | a row of another table |\n\nthe end of the file\n"
    text = bench.splice(text, run("lattice", "2x"))
    assert "| lattice | fast | 2x | met |" in text and "| lattice | fast | 1x |" not in text
    assert "| memory | fast | 1x | met |" in text and '<a id="memory">' in text
    assert "| lattice | a row of another table |" in text and "the end of the file" in text
