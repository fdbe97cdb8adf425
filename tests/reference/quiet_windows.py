"""Brute-force reference for :func:`k2dec.longform.quiet_windows`: each seam found by trying
every candidate frame boundary and summing the energy around it with a plain loop."""

from __future__ import annotations

import math


def quiet_seams(energy: list[float], frame: float, duration: float, chunk: float,
                search: float, span: int) -> list[float]:
    """The core boundaries ``[0, s1, ..., duration]`` (``[]`` for 0 s): from the last seam,
    the boundary between ``chunk - search`` and ``chunk + search`` seconds on (and at least
    one frame before the recording's last whole frame) whose ``span`` frames around it
    (``span // 2`` before, the rest after; frames off either end repeat the end frame) hold
    the least energy, the earliest of equals, while more than ``chunk + search`` seconds
    are left."""
    if duration <= 0:
        return []
    n = len(energy)

    def around(b: int) -> float:
        total = 0.0
        for k in range(b - span // 2, b - span // 2 + span):
            total += energy[min(max(k, 0), n - 1)] if n else 0.0
        return total

    last = int(math.floor(duration / frame + 1e-9))
    low, high = round((chunk - search) / frame), round((chunk + search) / frame)
    seams, at = [0.0], 0
    while duration - at * frame > chunk + search + 1e-9:
        candidates = list(range(at + max(1, low), min(at + high, last - 1) + 1))
        if not candidates:
            break
        best = min(candidates, key=lambda b: (around(b), b))
        at = best
        seams.append(round(at * frame, 6))
    if duration > seams[-1]:
        seams.append(float(duration))
    return seams
