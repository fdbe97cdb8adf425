"""Shared plumbing for the ``scripts/bench_*.py`` benchmarks and ``scripts/bench.py``.

Every benchmark script can run on its own (it prints its tables) and, given ``--report DIR``,
also writes ``DIR/<area>.json`` in the schema below plus its PNG plots into ``DIR``;
``scripts/bench.py`` (``make bench``) runs the areas side by side and assembles BENCHMARKS.md
from those files.

Report schema (``Report.to_json``)::

    {"area": "lattice", "title": "HLG / HCLG lattice decoding",
     "settings": "one paragraph: inputs, beams, threads, seeds",
     "tables": [{"caption": str, "headers": [str], "rows": [[str|float|int]]}],
     "targets": [{"target": str, "value": str, "met": true | false | null}],
     "plots": ["file.png"],            # inside DIR
     "missing": [{"peer": str, "reason": str}],
     "notes": [str],
     "peak_rss_mb": float}             # of the whole script (VmHWM), filled in by write()

Scripts are run as ``python scripts/bench_x.py`` so this module imports as ``benchlib``.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "Report",
    "PeakMemory",
    "best_time",
    "markdown_table",
    "peak_rss_mb",
    "reset_peak_rss",
    "track_peak_rss",
]


def _status_kb(key: str) -> float | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return float(line.split()[1])
    except OSError:
        return None
    return None


def peak_rss_mb() -> float | None:
    """Peak resident set size of this process in MiB (Linux VmHWM), or None elsewhere."""
    kb = _status_kb("VmHWM")
    return None if kb is None else kb / 1024.0


def current_rss_mb() -> float | None:
    kb = _status_kb("VmRSS")
    return None if kb is None else kb / 1024.0


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


def best_time(repeat: int, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[float, Any]:
    """Best wall time (seconds) of ``repeat`` calls, and the last call's result."""
    best = float("inf")
    out = None
    for _ in range(max(1, repeat)):
        t0 = time.perf_counter()
        out = fn(*args, **kwargs)
        best = min(best, time.perf_counter() - t0)
    return best, out


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


def area_parser(doc: str | None, area: str) -> argparse.ArgumentParser:
    """The arguments every ``scripts/bench_<area>.py`` takes: ``--quick`` | ``--smoke`` and
    ``--report DIR``; scripts add their own."""
    p = argparse.ArgumentParser(description=(doc or "").split("\n")[0])
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="small sizes (well under a minute)")
    mode.add_argument("--smoke", action="store_true", help="tiny sizes: checks the plumbing")
    p.add_argument("--report", default=None, metavar="DIR",
                   help=f"write DIR/{area}.json and the plots there")
    return p


def one_thread() -> None:
    """Benchmarks run at one torch thread unless threading is the point."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch

    torch.set_num_threads(1)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:  # only allowed before any inter-op work started
        pass


REPO = Path(__file__).resolve().parents[1]
SHIPPED = REPO / "assets" / "librispeech-synth"


@dataclass
class ShippedBatch:
    """The shipped model's outputs on the shipped test sets (real inputs for benchmarks).

    ``feats``/``feat_lens``: fbank ``(N, T, 80)`` float32 / ``(N,)`` int64;
    ``encoder_out``/``encoder_lens``: ``(N, T', D)`` / ``(N,)``;
    ``ctc_log_probs``: ``(N, T', V)`` float32 log-softmax (blank = 0);
    ``refs``: reference word lists; ``cut_ids``; ``test_sets``: each cut's test set.
    ``assets`` is k2dec.job.DecodeAssets (model, lang dir, BPE model, graphs
    ``resources.graphs["HLG" | "LG" | "G" | "H"]``); ``lang_dir`` (the shipped one) holds
    words.txt, tokens.txt, lexicon.txt; ``graph_dir`` HLG.pt, LG.pt, G_4_gram.pt; ``arpa`` maps
    "3gram"/"4gram" to uncompressed copies of the shipped ARPA files (for the peers)."""

    feats: Any
    feat_lens: Any
    encoder_out: Any
    encoder_lens: Any
    ctc_log_probs: Any
    refs: list[list[str]]
    cut_ids: list[str]
    test_sets: list[str]
    assets: Any
    lang_dir: Path
    arpa: dict[str, Path]
    graph_dir: Path


def shipped_batch(max_cuts: int | None = None, test_sets: tuple[str, ...] = ("test-clean",
                  "test-other"), work_dir: str | Path | None = None) -> ShippedBatch:
    """Run the shipped model's encoder on the first ``max_cuts`` cuts (sorted by id) of each
    shipped test set. Graphs and features are cached under ``work_dir`` (default
    ``exp/bench/work``), built once by k2dec.demo.prepare_demo."""
    import torch
    from lhotse import CutSet

    from k2dec.demo import prepare_demo
    from k2dec.job import load_assets

    work = Path(work_dir) if work_dir is not None else REPO / "exp" / "bench" / "work"
    lang, graphs, cut_paths = prepare_demo(SHIPPED, work)
    dec = load_assets(SHIPPED / "model.pt", lang, graph_dir=graphs)
    feats, ids, refs, sets = [], [], [], []
    for ts in test_sets:
        cuts = sorted(CutSet.from_file(cut_paths[ts]), key=lambda c: c.id)
        for c in cuts[:max_cuts] if max_cuts else cuts:
            feats.append(torch.from_numpy(c.load_features()))
            ids.append(c.id)
            refs.append(c.supervisions[0].text.split())
            sets.append(ts)
    lens = torch.tensor([f.shape[0] for f in feats], dtype=torch.int64)
    x = torch.nn.utils.rnn.pad_sequence(feats, batch_first=True)
    with torch.no_grad():
        enc, enc_lens = dec.model(x, lens)
        lp = dec.model.ctc_log_probs(enc)
    arpa = {n: _gunzip(SHIPPED / "lm" / f"{n}.arpa.gz", work / "lm" / f"{n}.arpa")
            for n in ("3gram", "4gram")}
    return ShippedBatch(x, lens, enc, enc_lens, lp, refs, ids, sets, dec, lang, arpa, graphs)


def _gunzip(src: Path, dst: Path) -> Path:
    """An uncompressed copy of ``src`` at ``dst`` (made once)."""
    import gzip
    import shutil

    if not dst.is_file():
        dst.parent.mkdir(parents=True, exist_ok=True)
        tmp = dst.with_suffix(".tmp")
        with gzip.open(src, "rb") as f, open(tmp, "wb") as g:
            shutil.copyfileobj(f, g)
        tmp.replace(dst)
    return dst
