"""What every benchmark area shares: its report, its command-line arguments and modes, timing,
memory measurement, WER, and where things are.

Every area module (``python -m scripts.bench.<area>``) can run on its own (it prints its
tables) and, given ``--report DIR``, also writes ``DIR/<area>.json`` in the schema below plus
its PNG plots into ``DIR``; ``python -m scripts.bench`` (``make bench``, see ``runner.py``) runs
the areas one after another and assembles BENCHMARKS.md from those files.

Report schema (``Report.to_json``)::

    {"area": "lattice", "title": "HLG / HCLG lattice decoding",
     "settings": "one paragraph: inputs, beams, threads, seeds",
     "tables": [{"caption": str, "headers": [str], "rows": [[str|float|int]]}],
     "targets": [{"target": str, "value": str, "met": true | false | null}],
     "plots": ["file.png"],            # inside DIR
     "missing": [{"peer": str, "reason": str}],
     "notes": [str],
     "peak_rss_mb": float}             # of the whole process (VmHWM), filled in by write()
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "REPO",
    "SHIPPED",
    "WORK",
    "PeakMemory",
    "Progress",
    "Report",
    "Timed",
    "area_parser",
    "best_time",
    "best_wall_and_cpu",
    "clean_error",
    "current_rss_mb",
    "device_name",
    "equal_wer_rows",
    "interleaved",
    "markdown_table",
    "mode_of",
    "one_thread",
    "peak_rss_mb",
    "proc_status_mb",
    "reset_peak_rss",
    "scrub",
    "track_peak_rss",
    "wer",
]

REPO = Path(__file__).resolve().parents[2]
#: the shipped model, lang dir, LMs and test sets
SHIPPED = REPO / "assets" / "librispeech-synth"
#: graphs, features and peer files built once and reused by every area (``K2DEC_BENCH_WORK``
#: moves them: the test suite points it at a temporary folder, so a test run leaves nothing
#: in the checkout)
WORK = Path(os.environ.get("K2DEC_BENCH_WORK") or REPO / "exp" / "bench" / "work")


# ------------------------------------------------------------------------------------ memory


def proc_status_mb(key: str, pid: int | str = "self") -> float | None:
    """A ``/proc/<pid>/status`` field given in kB (``VmHWM``, ``VmRSS``, ``VmSize``) in MiB, or
    None where there is no such file (not Linux, process gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return float(line.split()[1]) / 1024.0
    except OSError:
        return None
    return None


def peak_rss_mb() -> float | None:
    """Peak resident set size of this process in MiB (Linux VmHWM), or None elsewhere."""
    return proc_status_mb("VmHWM")


def current_rss_mb() -> float | None:
    return proc_status_mb("VmRSS")


def reset_peak_rss() -> bool:
    """Reset VmHWM to the current RSS (Linux >= 4.0: ``echo 5 > /proc/self/clear_refs``).

    Returns False where that is not possible (the peak then includes earlier work)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


@dataclass
class PeakMemory:
    """Filled in by :func:`track_peak_rss`: RSS before, peak during, and the increase (MiB)."""

    before_mb: float | None = None
    peak_mb: float | None = None

    @property
    def increase_mb(self) -> float | None:
        if self.before_mb is None or self.peak_mb is None:
            return None
        return max(0.0, self.peak_mb - self.before_mb)


@contextmanager
def track_peak_rss() -> Iterator[PeakMemory]:
    """``with track_peak_rss() as mem: work()`` then ``mem.peak_mb`` / ``mem.increase_mb``.

    Measures the whole process (C++ allocations of k2 and torch included), so run one
    measured thing at a time."""
    mem = PeakMemory()
    reset_peak_rss()
    mem.before_mb = current_rss_mb()
    try:
        yield mem
    finally:
        mem.peak_mb = peak_rss_mb()


# ------------------------------------------------------------------------------------ timing


def best_time(repeat: int, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[float, Any]:
    """Best wall time (seconds) of ``repeat`` calls, and the last call's result."""
    best = float("inf")
    out = None
    for _ in range(max(1, repeat)):
        t0 = time.perf_counter()
        out = fn(*args, **kwargs)
        best = min(best, time.perf_counter() - t0)
    return best, out


def best_wall_and_cpu(repeat: int, fn: Callable[[], Any]) -> tuple[float, float, Any]:
    """Best wall time and best process CPU time of ``repeat`` calls, and the last result."""
    wall = cpu = float("inf")
    out = None
    for _ in range(max(1, repeat)):
        w0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        wall = min(wall, time.perf_counter() - w0)
        cpu = min(cpu, time.process_time() - c0)
    return wall, cpu, out


@dataclass
class Timed:
    """One function's runs in :func:`interleaved`: every wall time and process CPU time, the
    last result, and the largest peak RSS increase of a run (MiB; None when not tracked)."""

    times: list[float] = field(default_factory=list)
    result: Any = None
    mem_mb: float | None = None
    cpu_times: list[float] = field(default_factory=list)

    @property
    def best(self) -> float:
        return min(self.times)

    @property
    def best_cpu(self) -> float:
        """Best CPU time: other work on a shared machine disturbs it less than wall time."""
        return min(self.cpu_times)

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    @property
    def median_cpu(self) -> float:
        return statistics.median(self.cpu_times)

    @property
    def spread(self) -> float:
        """Slowest over fastest run."""
        return max(self.times) / min(self.times)


def interleaved(repeat: int, fns: Sequence[Callable[[], Any]],
                track_memory: bool = False) -> list[Timed]:
    """Each zero-argument function run ``repeat`` times in turns (``a b c a b c ...``), so that
    load from other work hits all of them alike; with ``track_memory`` each run's peak RSS
    increase is measured too."""
    out = [Timed() for _ in fns]
    for _ in range(max(1, repeat)):
        for fn, timed in zip(fns, out):
            if not track_memory:
                _timed_call(fn, timed)
                continue
            with track_peak_rss() as m:
                _timed_call(fn, timed)
            if m.increase_mb is not None:
                timed.mem_mb = max(timed.mem_mb or 0.0, m.increase_mb)
    return out


def _timed_call(fn: Callable[[], Any], timed: Timed) -> None:
    t0, c0 = time.perf_counter(), time.process_time()
    timed.result = fn()
    timed.times.append(time.perf_counter() - t0)
    timed.cpu_times.append(time.process_time() - c0)


class Progress:
    """``progress("what")`` prints ``[area] what: done at N s`` (seconds since it was made)."""

    def __init__(self, area: str) -> None:
        self.area = area
        self.start = time.perf_counter()

    def __call__(self, what: str) -> None:
        print(f"[{self.area}] {what}: done at {time.perf_counter() - self.start:.1f} s",
              flush=True)


# ------------------------------------------------------------------------------------ accuracy


def wer(refs: Sequence[list[str]], hyps: Sequence[list[str]],
        cut_ids: Sequence[str] | None = None) -> float:
    """WER in percent of hypotheses against references (k2dec.results.compute_wer; the cut
    ids default to the utterance indices)."""
    from k2dec.results import compute_wer

    ids = cut_ids if cut_ids is not None else [str(i) for i in range(len(refs))]
    return compute_wer(list(zip(ids, refs, hyps))).wer


def equal_wer_rows(peer_runs: Sequence[Any], k2_runs: Sequence[Any],
                   wer_of: Callable[[Any], float] = lambda r: r.wer
                   ) -> tuple[list[list], list[float | None]]:
    """For each peer run (most accurate first): k2dec's fastest run whose WER is not worse, and
    its speed over the peer's (None where no k2dec run is that accurate). Runs have
    ``system``, ``setting`` and ``fps``; ``wer_of`` reads their WER. Rows: peer setting, peer
    WER, peer fps, k2dec run, k2dec WER, k2dec fps, speed ratio."""
    rows, ratios = [], []
    for p in sorted(peer_runs, key=wer_of):
        ok = [r for r in k2_runs if wer_of(r) <= wer_of(p)]
        best = max(ok, key=lambda r: r.fps) if ok else None
        ratio = best.fps / p.fps if best else None
        ratios.append(ratio)
        rows.append([p.setting, wer_of(p), p.fps,
                     f"{best.system}, {best.setting}" if best else "none as accurate",
                     wer_of(best) if best else None, best.fps if best else None, ratio])
    return rows, ratios


# ------------------------------------------------------------------------------------ report


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        if v != v:  # NaN
            return "n/a"
        if abs(v) >= 100:
            return f"{v:.0f}"
        if abs(v) >= 10:
            return f"{v:.1f}"
        return f"{v:.2f}"
    if v is None:
        return "n/a"
    return str(v)


def markdown_table(headers: list[str], rows: list[list[Any]]) -> str:
    """A GitHub markdown table; floats get 2-3 significant digits, None prints as n/a."""
    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    for r in rows:
        out.append("| " + " | ".join(_fmt(v) for v in r) + " |")
    return "\n".join(out)


@dataclass
class Report:
    """What one benchmark area reports; see the module docstring for the JSON schema."""

    area: str
    title: str
    settings: str = ""
    tables: list[dict] = field(default_factory=list)
    targets: list[dict] = field(default_factory=list)
    plots: list[str] = field(default_factory=list)
    missing: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    peak_rss_mb: float | None = None

    def table(self, caption: str, headers: list[str], rows: list[list[Any]]) -> None:
        self.tables.append({"caption": caption, "headers": list(headers), "rows": rows})

    def target(self, target: str, value: str, met: bool | None) -> None:
        """``met=None`` when the target could not be evaluated (say why in ``value``)."""
        self.targets.append({"target": target, "value": value, "met": met})

    def peer_missing(self, peer: str, reason: str) -> None:
        self.missing.append({"peer": peer, "reason": reason})

    def note(self, text: str) -> None:
        self.notes.append(text)

    def plot_path(self, out_dir: str | Path | None, name: str) -> Path | None:
        """Where to save a plot called ``name`` (registering it), or None without --report."""
        if out_dir is None:
            return None
        self.plots.append(name)
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        return Path(out_dir) / name

    def print(self) -> None:
        print(f"== {self.title} ==")
        if self.settings:
            print(self.settings)
        for t in self.tables:
            print(f"\n{t['caption']}\n" + markdown_table(t["headers"], t["rows"]))
        for t in self.targets:
            mark = {True: "MET", False: "NOT MET", None: "n/a"}[t["met"]]
            print(f"target: {t['target']}: {t['value']} [{mark}]")
        for m in self.missing:
            print(f"missing peer {m['peer']}: {m['reason']}")
        for n in self.notes:
            print(f"note: {n}")

    def write(self, out_dir: str | Path | None) -> None:
        """Print the report; with an output dir also write ``<area>.json`` there."""
        self.peak_rss_mb = peak_rss_mb()
        self.print()
        if out_dir is None:
            return
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        (out / f"{self.area}.json").write_text(json.dumps(asdict(self), indent=1, default=str))

    @staticmethod
    def read(path: str | Path) -> Report:
        return Report(**json.loads(Path(path).read_text()))


def scrub(text: str) -> str:
    """Replace this checkout's absolute path by ``.`` (reports must not name machine paths)."""
    return text.replace(str(REPO) + os.sep, "").replace(str(REPO), ".")


def clean_error(e: BaseException) -> str:
    """An error message without this checkout's or the venv's location (reports are
    committed)."""
    return scrub(str(e)).replace(sys.prefix, "<venv>")


# ------------------------------------------------------------------------------------ running


def area_parser(doc: str | None, area: str) -> argparse.ArgumentParser:
    """The arguments every area takes: ``--quick`` | ``--smoke`` and ``--report DIR``; areas
    add their own."""
    p = argparse.ArgumentParser(prog=f"python -m scripts.bench.{area}",
                                description=(doc or "").split("\n")[0])
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="small sizes (well under a minute)")
    mode.add_argument("--smoke", action="store_true", help="tiny sizes: checks the plumbing")
    p.add_argument("--report", default=None, metavar="DIR",
                   help=f"write DIR/{area}.json and the plots there")
    return p


def mode_of(args: argparse.Namespace) -> str:
    """``"smoke"``, ``"quick"`` or ``"full"`` from the arguments of :func:`area_parser`."""
    return "smoke" if args.smoke else "quick" if args.quick else "full"


def device_name(device) -> str:
    """What a report calls the torch ``device`` it ran on: the GPU's name, else the CPU's."""
    import platform

    import torch

    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return platform.processor() or platform.machine()


def one_thread() -> None:
    """Benchmarks run at one torch thread unless threading is the point."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch

    torch.set_num_threads(1)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:  # only allowed before any inter-op work started
        pass
