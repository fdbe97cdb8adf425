"""The ``exp_dir/checkpoint-{step}.pt`` files both trainers write: the newest one (to resume
from) and pruning all but the newest few."""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["latest_checkpoint", "prune_checkpoints", "step_checkpoints"]

_CHECKPOINT_RE = re.compile(r"^checkpoint-(\d+)\.pt$")


def step_checkpoints(exp_dir: str | Path) -> list[tuple[int, Path]]:
    """``(step, path)`` of every ``checkpoint-{step}.pt`` in ``exp_dir``, by step (empty when
    ``exp_dir`` does not exist)."""
    exp_dir = Path(exp_dir)
    if not exp_dir.is_dir():
        return []
    return sorted((int(m.group(1)), p) for p in exp_dir.iterdir()
                  if (m := _CHECKPOINT_RE.match(p.name)))


def latest_checkpoint(exp_dir: str | Path) -> Path | None:
    """The ``checkpoint-{step}.pt`` in ``exp_dir`` with the largest step, or ``None``."""
    found = step_checkpoints(exp_dir)
    return found[-1][1] if found else None


def prune_checkpoints(exp_dir: str | Path, keep: int) -> None:
    """Delete all but the ``keep`` newest ``checkpoint-{step}.pt`` (none when ``keep <= 0``)."""
    if keep > 0:
        for _, old in step_checkpoints(exp_dir)[:-keep]:
            old.unlink()
