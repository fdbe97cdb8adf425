"""Run ``k2dec`` commands in a forked process: a command that kills its process (an abort in
C++, the kernel's out-of-memory killer, a hang) shows as its exit status instead of killing the
test run. For tests of malformed inputs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from typing import Any

from k2dec.cli import main

__all__ = ["TRACEBACK_STATUS", "child_outcomes", "run_cli"]

#: The status :func:`run_cli` gives an exception that escaped click (its traceback is in the
#: output).
TRACEBACK_STATUS = 70


def run_cli(args: list[str], timeout: float = 120.0) -> tuple[int, str]:
    """``k2dec ARGS`` in a process forked from this one (the libraries already imported):
    ``(exit status, stdout and stderr together)``; the status is ``-signal`` for a killed
    process (``-9`` past ``timeout`` seconds) and :data:`TRACEBACK_STATUS` for an exception
    that escaped click. Fork only from a process that runs no other threads (a child
    process of the test run, not pytest itself)."""
    with tempfile.TemporaryFile() as out:
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the child: never returns
            _child(args, out.fileno())
        status = _wait(pid, timeout)
        out.seek(0)
        text = out.read().decode("utf-8", "replace")
    return status, text


def _child(args: list[str], fd: int) -> None:
    code = TRACEBACK_STATUS
    try:
        import logging

        logging.disable(logging.NOTSET)  # the command's warnings are part of its output
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        main.main(args=args, prog_name="k2dec", standalone_mode=True)
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:  # noqa: BLE001 (reported as a traceback)
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _wait(pid: int, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return -9
        time.sleep(0.02)


def child_outcomes(module: str, work: Any, repo: Any, timeout: float = 900.0) -> dict[str, dict]:
    """Run ``python -m MODULE WORK`` (a test module whose ``__main__`` runs its cases, printing
    a JSON line ``{"start": id}`` before each and ``{"done": id, ...}`` after) in a child
    process with one OpenMP thread, and return the ``done`` records by case id. Fails naming
    the case that was running when the child died."""
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(repo))
    proc = subprocess.run([sys.executable, "-m", module, str(work)], cwd=repo, env=env,
                          capture_output=True, text=True, timeout=timeout)
    lines = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
    started = [x["start"] for x in lines if "start" in x]
    if proc.returncode != 0:
        raise AssertionError(f"the child exited with {proc.returncode} while running "
                             f"{started[-1] if started else None!r}:\n{proc.stderr[-3000:]}")
    return {x["done"]: x for x in lines if "done" in x}
