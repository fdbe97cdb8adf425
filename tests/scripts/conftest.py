"""The benchmark areas' shared work folder (graphs, features, peer files: ~130 MB) goes to a
temporary folder for the test session, removed at its end, instead of ``exp/bench/work`` in
the checkout: ``make test`` leaves nothing behind. Set before any ``scripts.bench`` module is
imported (they read it once), and inherited by the benches the tests run as subprocesses."""

from __future__ import annotations

import os
import shutil
import tempfile

_OWN_WORK = "K2DEC_BENCH_WORK" not in os.environ
if _OWN_WORK:
    os.environ["K2DEC_BENCH_WORK"] = tempfile.mkdtemp(prefix="k2dec-bench-work-")


def pytest_sessionfinish(session, exitstatus):
    if _OWN_WORK:
        shutil.rmtree(os.environ["K2DEC_BENCH_WORK"], ignore_errors=True)
