"""What the CTC peers share: the model's output symbols as a label list, and silencing the
C-level progress output of KenLM while it reads an ARPA file."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["quiet_stderr", "read_tokens"]


def read_tokens(path: Path, vocab: int) -> list[str]:
    """The first ``vocab`` symbols of tokens.txt, by id."""
    table: dict[int, str] = {}
    for line in path.read_text().splitlines():
        sym, i = line.split()
        table[int(i)] = sym
    missing = [i for i in range(vocab) if i not in table]
    if missing:
        raise ValueError(f"{path} has no symbols for ids {missing[:5]} of the {vocab} outputs")
    return [table[i] for i in range(vocab)]


@contextmanager
def quiet_stderr() -> Iterator[None]:
    """Silence C-level stderr (KenLM's ARPA loading progress bars)."""
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)
