"""``make bench``: run every benchmark area one after another and assemble one report.

Each area is a module ``scripts/bench/<area>.py`` run as a subprocess,
``python -m scripts.bench.<area> --report RAW_DIR`` (plus ``--quick`` or ``--smoke``); it
writes ``RAW_DIR/<area>.json`` (see ``common.py``) and its PNG plots. This module then writes
``BENCHMARKS.md``: a header describing the machine and the run, a table of every target of
every area (met / not met / n/a), and one section per area with its settings, tables, plots,
missing peers and notes. An area whose module is missing, exits non-zero, times out or writes
no report becomes a "failed" section quoting the end of its output; it is never dropped.

Where things go:

* full mode (default): ``BENCHMARKS.md`` at the repository root, plots under ``docs/bench/``,
  raw reports and logs under ``exp/bench/raw/``;
* ``--quick`` / ``--smoke``: everything under ``exp/bench-quick/`` / ``exp/bench-smoke/``;
* ``--out DIR``: ``DIR/BENCHMARKS.md``, plots in ``DIR/bench/``, raw files in ``DIR/raw/``.

Usage (from the repository root)::

    python -m scripts.bench                       # full run, the committed report
    python -m scripts.bench --quick               # a few minutes
    python -m scripts.bench --smoke --areas lattice,transducer --out /tmp/b
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from .common import REPO, Report, markdown_table, mode_of, scrub
from .machine import core_count, cpu_model, git_commit, load_average, versions

#: area reports recorded on a GPU machine, shown in the full run's BENCHMARKS.md
GPU_REPORTS = REPO / "docs" / "bench" / "gpu"
#: reports recorded by hand with a peer that ``make bench`` does not have (an icefall
#: checkout: ``scripts/bench/icefall_dropin.py``), shown in the full run's BENCHMARKS.md
RECORDED_REPORTS = REPO / "docs" / "bench" / "recorded"

AREAS = ("lattice", "ctc_lm", "transducer", "aed", "nbest", "confidence", "scorers", "hotwords",
         "streams", "memory", "longform")
#: per-area subprocess time limit in seconds, by mode
TIMEOUTS = {"full": 1200, "quick": 300, "smoke": 120}
#: areas that need longer (memory: every method at 30 s and 60 s, one process per case;
#: hotwords: eleven methods at four list sizes and three at 100,000 phrases, one
#: process per case, short decodes repeated (best of 3);
#: transducer: five runs of eight searches of k2dec and icefall on two models;
#: longform: four methods on recordings of up to 60 minutes, one process per case)
AREA_TIMEOUTS = {"memory": {"full": 5400, "quick": 1800, "smoke": 300},
                 "longform": {"full": 7200, "quick": 1800, "smoke": 600},
                 "hotwords": {"full": 3600, "quick": 300, "smoke": 120},
                 "transducer": {"full": 3600, "quick": 3000, "smoke": 120}}
TAIL_LINES = 25
#: modules of scripts/bench that are not areas (icefall_dropin: run by hand with an icefall
#: checkout; large_model: run by hand on a GPU machine; each one's report is kept and shown as
#: a section of BENCHMARKS.md of its own)
NOT_AREAS = ("__init__", "__main__", "common", "icefall_dropin", "large_model", "lm", "machine",
             "plots", "runner", "shipped", "synthetic")
#: how the report is made (the header quotes it)
COMMAND = "python -m scripts.bench"
STATUS = {True: "met", False: "**not met**", None: "n/a"}


@dataclass
class AreaRun:
    """Outcome of one area's run."""

    area: str
    seconds: float = 0.0
    report: Report | None = None
    error: str = ""
    tail: str = ""
    plots: list[tuple[str, str]] = field(default_factory=list)  # (name, path from the .md)


@dataclass(frozen=True)
class Layout:
    markdown: Path
    plots: Path
    raw: Path


def layout(mode: str, out: str | None) -> Layout:
    if out is not None:
        base = Path(out).resolve()
        return Layout(base / "BENCHMARKS.md", base / "bench", base / "raw")
    if mode == "full":
        return Layout(REPO / "BENCHMARKS.md", REPO / "docs" / "bench",
                      REPO / "exp" / "bench" / "raw")
    base = REPO / "exp" / f"bench-{mode}"
    return Layout(base / "BENCHMARKS.md", base / "bench", base / "raw")


def tail(text: str, n: int = TAIL_LINES) -> str:
    return scrub("\n".join(text.rstrip().splitlines()[-n:]))


def area_command(area: str, mode: str, raw: Path) -> list[str]:
    """The command line that runs one area into ``raw``."""
    cmd = [sys.executable, "-m", f"scripts.bench.{area}", "--report", str(raw)]
    if mode != "full":
        cmd.append(f"--{mode}")
    return cmd


def run_limited(cmd: list[str], timeout: float) -> tuple[int | None, str, str]:
    """Run ``cmd`` in the repository root: exit status (None after a timeout), stdout,
    stderr. In its own process group, so a timeout also stops the area's worker processes."""
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
        return proc.returncode, out, err
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, err = proc.communicate()
        return None, out, err


def run_area(area: str, mode: str, raw: Path, timeout: float) -> AreaRun:
    """Run ``python -m scripts.bench.<area> --report raw`` and read its JSON report."""
    run = AreaRun(area)
    if area in NOT_AREAS or not (REPO / "scripts" / "bench" / f"{area}.py").is_file():
        run.error = f"no area module scripts/bench/{area}.py"
        return run
    result_path = raw / f"{area}.json"
    result_path.unlink(missing_ok=True)  # never report a stale result
    cmd = area_command(area, mode, raw)
    start = time.perf_counter()
    code, out, err = run_limited(cmd, timeout)
    run.seconds = time.perf_counter() - start
    (raw / f"{area}.log").write_text(f"$ {' '.join(cmd)}\n--- stdout\n{out}\n--- stderr\n{err}")
    if code is None:
        run.error = f"timed out after {timeout:g} s"
    elif code != 0:
        run.error = f"exited with status {code}"
    elif not result_path.is_file():
        run.error = f"exited normally but wrote no {area}.json"
    else:
        try:
            run.report = Report.read(result_path)
        except (ValueError, TypeError, KeyError) as e:
            run.error = f"unreadable {area}.json: {e}"
    if run.error:
        run.tail = tail(err if err.strip() else out)
    return run


def copy_plots(run: AreaRun, raw: Path, lay: Layout) -> None:
    if run.report is None:
        return
    lay.plots.mkdir(parents=True, exist_ok=True)
    for name in run.report.plots:
        src = raw / name
        if not src.is_file():
            run.report.notes.append(f"plot {name} was registered but not written")
            continue
        dst = lay.plots / name
        shutil.copyfile(src, dst)
        run.plots.append((name, os.path.relpath(dst, lay.markdown.parent)))


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render(runs: list[AreaRun], info: dict[str, str]) -> str:
    lines = ["# k2dec benchmarks", ""]
    lines.append("Decoding only (network outputs are computed once, before timing); every "
                 "comparison runs k2dec and its peer on the same inputs in the same run, so "
                 f"read the ratios, not the absolute times. Generated by `{COMMAND}` "
                 "(`make bench`); do not edit by hand.")
    lines.append("")
    for key in ("date", "commit", "command", "mode", "cpu", "cores", "load average",
                "versions", "total wall time"):
        lines.append(f"- **{key}**: {info[key]}")
    lines += ["", "## Targets", ""]
    rows = []
    for run in runs:
        if run.report is None:
            rows.append([run.area, "(area did not run)", _cell(run.error), "n/a"])
            continue
        if not run.report.targets:
            rows.append([run.area, "(no targets reported)", "", "n/a"])
        for t in run.report.targets:
            rows.append([run.area, _cell(t["target"]), _cell(t["value"]), STATUS[t["met"]]])
    lines.append(markdown_table(["area", "target", "value", "status"], rows))
    lines += ["", "Areas: " + ", ".join(
        f"[{r.area}](#{r.area.replace('_', '-')})" + (" (failed)" if r.report is None else "")
        for r in runs), ""]
    for run in runs:
        lines += render_area(run)
    return scrub("\n".join(lines).rstrip() + "\n")


def render_area(run: AreaRun) -> list[str]:
    lines = [f'<a id="{run.area.replace("_", "-")}"></a>', ""]
    rep = run.report
    if rep is None:
        lines += [f"## {run.area}: FAILED", "",
                  f"The area did not produce a report ({run.error}, after "
                  f"{run.seconds:.1f} s), so its targets could not be evaluated."]
        if run.tail:
            lines += ["", "Last lines of its output:", "", "```text", run.tail, "```"]
        return lines + [""]
    lines += [f"## {rep.title} (`{run.area}`)", ""]
    rss = f"{rep.peak_rss_mb:.0f} MiB" if rep.peak_rss_mb is not None else "n/a"
    wall = f"{run.seconds:.1f} s" if run.seconds > 0 else "not recorded"
    lines += [f"Wall time {wall}; peak RSS of the script {rss}.", ""]
    if rep.settings:
        lines += [f"**Settings.** {rep.settings}", ""]
    for t in rep.tables:
        lines += [f"**{t['caption']}**", "", markdown_table(t["headers"], t["rows"]), ""]
    if rep.targets:
        lines += ["**Targets.**", ""]
        lines += [f"- {t['target']}: {t['value']} ({STATUS[t['met']]})" for t in rep.targets]
        lines.append("")
    for name, rel in run.plots:
        lines += [f"![{name}]({rel})", ""]
    if rep.missing:
        lines += ["**Missing peers.**", ""]
        lines += [f"- {m['peer']}: {m['reason']}" for m in rep.missing]
        lines.append("")
    if rep.notes:
        lines += ["**Notes.**", ""]
        lines += [f"- {n}" for n in rep.notes]
        lines.append("")
    return lines


def _recorded(directory: Path, note: str) -> list[AreaRun]:
    runs = []
    for path in sorted(directory.glob("*.json")):
        run = AreaRun(path.stem, report=Report.read(path))
        run.report.notes.append(note.format(name=path.stem))
        runs.append(run)
    return runs


def recorded_gpu_runs() -> list[AreaRun]:
    """Reports recorded on a GPU machine (``docs/bench/gpu/*.json``, raw area reports kept as
    they came back: neither CI nor the machine that makes this file has a GPU), shown after
    the areas run now, each under its file name."""
    return _recorded(GPU_REPORTS, "recorded earlier on the GPU machine named above and kept in "
                                  "docs/bench/gpu/ (this header's date, commit, CPU and load "
                                  "are not its)")


def recorded_peer_runs() -> list[AreaRun]:
    """Reports recorded by hand with a peer ``make bench`` lacks (``docs/bench/recorded/
    <module>.json``, written by ``python -m scripts.bench.<module> --report
    docs/bench/recorded``), shown after the areas run now."""
    return _recorded(RECORDED_REPORTS, "recorded earlier by `python -m scripts.bench.{name}` "
                                       "(it needs a peer checkout) and kept in "
                                       "docs/bench/recorded/ (this header's date, commit, CPU "
                                       "and load are not its)")


def splice(text: str, run: AreaRun) -> str:
    """``text`` (a BENCHMARKS.md) with ``run``'s section and target rows in place of the ones
    of its area (added at the end / to the targets when it has none yet)."""
    slug = run.area.replace("_", "-")
    anchor = f'<a id="{slug}"></a>'
    section = scrub("\n".join(render_area(run)).rstrip() + "\n")
    start = text.find(anchor)
    if start < 0:
        text = text.rstrip() + "\n\n" + section
        text = re.sub(r"^(Areas: .*)$", lambda m: f"{m.group(1)}, [{run.area}](#{slug})", text,
                      count=1, flags=re.M)
    else:
        end = text.find("\n<a id=", start + len(anchor))
        text = text[:start] + section + ("\n" + text[end + 1:] if end >= 0 else "")
    targets = run.report.targets if run.report is not None else []
    rows = [f"| {run.area} | {_cell(t['target'])} | {_cell(t['value'])} | {STATUS[t['met']]} |"
            for t in targets]
    lines = text.split("\n")
    if "## Targets" not in lines:
        return text
    first = lines.index("## Targets") + 2
    end = first
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    # Only the targets table's rows: other sections may hold rows that start the same way.
    old = [i for i in range(first, end) if lines[i].startswith(f"| {run.area} | ")]
    if old:
        lines[old[0]:old[-1] + 1] = rows
    elif rows:
        lines[end:end] = rows
    return "\n".join(lines)


def refresh_recorded(markdown: Path) -> str:
    """``markdown`` (an existing BENCHMARKS.md) with the sections and target rows of the
    recorded reports (:func:`recorded_peer_runs`, :func:`recorded_gpu_runs`) rendered again
    from their files; the other areas and the header stay as they are (their raw reports may
    be gone)."""
    text = markdown.read_text()
    for run in recorded_peer_runs() + recorded_gpu_runs():
        text = splice(text, run)
    return text


def parse_areas(text: str) -> list[str]:
    areas = [a.strip() for a in text.split(",") if a.strip()]
    if not areas:
        raise argparse.ArgumentTypeError(f"--areas needs at least one area, got {text!r}")
    for a in areas:
        if not a.replace("_", "").isalnum():
            raise argparse.ArgumentTypeError(f"bad area name {a!r} in --areas")
    return areas


def reuse_earlier(runs: list[AreaRun], lay: Layout) -> list[AreaRun]:
    """``runs`` plus the areas not run now whose report an earlier run left in ``lay.raw``,
    in the order of AREAS; reused reports say so in their notes."""
    done = {r.area: r for r in runs}
    earlier = {}
    runs_json = lay.raw / "runs.json"
    if runs_json.is_file():
        earlier = {r["area"]: r for r in json.loads(runs_json.read_text())}
    out = []
    for area in AREAS:
        if area in done:
            out.append(done[area])
            continue
        path = lay.raw / f"{area}.json"
        if not path.is_file():
            continue
        run = AreaRun(area, seconds=float(earlier.get(area, {}).get("seconds", 0.0)))
        run.report = Report.read(path)
        run.report.notes.append(f"reused from an earlier run of {COMMAND} into the same "
                                "directory (this header's date, commit and load are not its)")
        copy_plots(run, lay.raw, lay)
        out.append(run)
    return out


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog=COMMAND, description=__doc__.split("\n")[0])
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="small sizes, a few minutes")
    mode.add_argument("--smoke", action="store_true", help="tiny sizes: checks the plumbing")
    p.add_argument("--out", default=None, help="output directory (see the module docstring)")
    p.add_argument("--areas", type=parse_areas, default=list(AREAS),
                   help=f"comma-separated areas (default: {','.join(AREAS)})")
    p.add_argument("--reuse", action="store_true",
                   help="put the other areas' reports from an earlier run into the same output "
                        "directory into BENCHMARKS.md too (marked as reused), e.g. after "
                        "rerunning one area")
    p.add_argument("--splice", action="store_true",
                   help="full mode: put the areas run now into the existing BENCHMARKS.md in "
                        "place of their earlier sections, each noting its own date, commit "
                        "and load (the header keeps the earlier run's); the other areas stay")
    p.add_argument("--refresh-recorded", action="store_true",
                   help="run nothing: render the recorded reports (docs/bench/recorded/, "
                        "docs/bench/gpu/) into the existing BENCHMARKS.md again, after "
                        "recording one anew")
    return p.parse_args(argv)


def run_areas(areas: list[str], mode: str, lay: Layout) -> list[AreaRun]:
    """Each area in turn, its plots copied next to the markdown, progress on stdout."""
    runs = []
    for area in areas:
        print(f"[bench] {area}: running ({mode})", flush=True)
        run = run_area(area, mode, lay.raw, AREA_TIMEOUTS.get(area, TIMEOUTS)[mode])
        copy_plots(run, lay.raw, lay)
        state = "ok" if run.report is not None else f"FAILED: {run.error}"
        print(f"[bench] {area}: {state} in {run.seconds:.1f} s", flush=True)
        if run.tail:
            print(run.tail, flush=True)
        runs.append(run)
    return runs


def header(started: datetime.datetime, command: str, mode: str, load_before: str,
           total: float) -> dict[str, str]:
    """The report header's fields (see :func:`render`)."""
    return {
        "date": started.strftime("%Y-%m-%d %H:%M UTC"),
        "commit": git_commit(),
        "command": f"`{scrub(command)}`",
        "mode": mode,
        "cpu": cpu_model(),
        "cores": core_count(),
        "load average": f"{load_before} (1/5/15 min, before the run; other work on the "
                        "machine makes absolute times noisy)",
        "versions": versions(),
        "total wall time": f"{total:.0f} s",
    }


def splice_runs(runs: list[AreaRun], lay: Layout, load_before: str,
                started: datetime.datetime, commit: str | None = None) -> int:
    """``--splice``: each run's section into the existing BENCHMARKS.md, with a note of when,
    at which commit (``commit``: taken before the run, whose own plots would otherwise count
    as uncommitted changes) and under which load it ran."""
    commit = commit or git_commit()
    if lay.markdown != REPO / "BENCHMARKS.md" or not lay.markdown.is_file():
        raise SystemExit("--splice needs full mode and an existing BENCHMARKS.md")
    text = lay.markdown.read_text()
    for run in runs:
        if run.report is not None:
            run.report.notes.append(
                f"run by `{COMMAND} --splice` on {started.strftime('%Y-%m-%d %H:%M UTC')} at "
                f"commit {commit} on {cpu_model()} ({core_count()} cores), load average "
                f"{load_before} before it (this header's date, commit and load are not its)")
        text = splice(text, run)
    lay.markdown.write_text(text)
    failed = [r.area for r in runs if r.report is None]
    print(f"[bench] spliced {', '.join(r.area for r in runs)} into "
          f"{scrub(str(lay.markdown))}" + (f"; failed: {', '.join(failed)}" if failed else ""),
          flush=True)
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.refresh_recorded:
        path = REPO / "BENCHMARKS.md"
        path.write_text(refresh_recorded(path))
        print(f"[bench] rendered the recorded reports into {scrub(str(path))}", flush=True)
        return 0
    mode = mode_of(args)
    lay = layout(mode, args.out)
    lay.raw.mkdir(parents=True, exist_ok=True)
    started = datetime.datetime.now(datetime.timezone.utc)
    load_before = load_average()
    commit = git_commit()
    t0 = time.perf_counter()
    runs = run_areas(args.areas, mode, lay)
    total = time.perf_counter() - t0
    if args.splice:
        return splice_runs(runs, lay, load_before, started, commit)
    if args.reuse:
        runs = reuse_earlier(runs, lay)
    if lay.markdown == REPO / "BENCHMARKS.md":
        runs += recorded_peer_runs() + recorded_gpu_runs()
    command = " ".join([COMMAND, *(sys.argv[1:] if argv is None else argv)])
    lay.markdown.parent.mkdir(parents=True, exist_ok=True)
    lay.markdown.write_text(render(runs, header(started, command, mode, load_before, total)))
    (lay.raw / "runs.json").write_text(json.dumps(
        [{"area": r.area, "seconds": r.seconds, "error": r.error} for r in runs], indent=1))
    failed = [r.area for r in runs if r.report is None]
    print(f"[bench] wrote {scrub(str(lay.markdown))} in {total:.0f} s"
          + (f"; failed areas: {', '.join(failed)}" if failed else ""), flush=True)
    return 0
