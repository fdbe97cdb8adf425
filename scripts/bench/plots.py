"""Matplotlib without a display, and the WER-vs-speed plot several areas draw."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

__all__ = ["pyplot", "save", "wer_vs_speed"]


def pyplot():
    """``matplotlib.pyplot`` on the Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save(fig, path: Path, dpi: int = 110) -> None:
    """Lay out, write and close a figure."""
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    pyplot().close(fig)


def wer_vs_speed(runs: Sequence[Any], path: Path, title: str, xlabel: str, ylabel: str,
                 wer_of: Callable[[Any], float] = lambda r: r.wer) -> None:
    """One line per system (in order of first appearance) through its settings' (fps, WER)
    points, sorted by speed; k2dec's systems solid with circles, peers dashed with squares;
    a log speed axis."""
    fig, ax = pyplot().subplots(figsize=(7.5, 4.8))
    for i, system in enumerate(dict.fromkeys(r.system for r in runs)):
        rs = sorted((r for r in runs if r.system == system), key=lambda r: r.fps)
        style = "o-" if system.startswith("k2dec") else "s--"
        ax.plot([r.fps for r in rs], [wer_of(r) for r in rs], style, color=f"C{i}",
                label=system)
    ax.set_xscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    save(fig, path)
