"""The machine a benchmark runs on: what the report header says about it, and how busy it is
now (other work on a shared machine slows every measurement; the areas say so)."""

from __future__ import annotations

import multiprocessing
import os
import platform
import subprocess
import time
from importlib import metadata

from .common import REPO

__all__ = ["autogroup", "core_count", "cpu_model", "cpu_scaling_ceiling", "git_commit",
           "load1", "load_average", "versions"]

#: packages whose versions the report header lists (peers included)
PACKAGES = ("torch", "k2", "lhotse", "kaldi-decoder", "kaldifst", "kaldilm", "kaldialign",
            "sentencepiece", "numpy", "torchaudio", "pyctcdecode", "kenlm", "espnet")


def _git(*args: str) -> str:
    try:
        out = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def git_commit() -> str:
    commit = _git("rev-parse", "--short=12", "HEAD") or "unknown"
    if _git("status", "--porcelain", "--untracked-files=no"):
        commit += " (with uncommitted changes)"
    return commit


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def core_count() -> str:
    total = os.cpu_count() or 0
    if hasattr(os, "sched_getaffinity"):
        usable = len(os.sched_getaffinity(0))
        if usable != total:
            return f"{usable} usable of {total}"
    return str(total)


def load_average() -> str:
    try:
        return " / ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def versions() -> str:
    parts = [f"python {platform.python_version()}"]
    for name in PACKAGES:
        try:
            parts.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            parts.append(f"{name} (not installed)")
    return ", ".join(parts)


def _spin(n: int) -> int:
    x = 0
    for i in range(n):
        x += i
    return x


def cpu_scaling_ceiling(repeat: int = 2, n: int = 2_000_000) -> float:
    """Throughput scaling of a pure-Python busy loop from 1 to 2 processes, measured now: the
    most any 2-process decoder could gain on this machine at this moment (other work on a
    shared machine lowers it)."""
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        pool.map(_spin, [10, 10])  # start-up
        t1 = t2 = float("inf")
        for _ in range(repeat):
            t0 = time.perf_counter()
            _spin(n)
            t1 = min(t1, time.perf_counter() - t0)
            t0 = time.perf_counter()
            pool.map(_spin, [n, n], chunksize=1)
            t2 = min(t2, time.perf_counter() - t0)
    return 2 * t1 / t2


def load1() -> float:
    """1-minute load average (0 where unknown)."""
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0


def autogroup() -> bool:
    try:
        with open("/proc/sys/kernel/sched_autogroup_enabled") as f:
            return f.read().strip() == "1"
    except OSError:
        return False


