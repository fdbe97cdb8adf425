"""A plain backoff n-gram scorer for ARPA files, written independently of kaldilm/k2."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

LN10 = math.log(10.0)


class ArpaScorer:
    """Scores word sequences with the standard ARPA backoff recursion (log10 -> ln)."""

    def __init__(self, path: str | Path):
        self.prob: dict[tuple[str, ...], float] = {}
        self.bow: dict[tuple[str, ...], float] = {}
        self.order = 0
        section = 0
        for line in Path(path).read_text().splitlines():
            line = line.strip()
            if not line or line in ("\\data\\", "\\end\\") or line.startswith("ngram "):
                continue
            if line.endswith("-grams:"):
                section = int(line[1:-len("-grams:")])
                self.order = max(self.order, section)
                continue
            f = line.split()
            key = tuple(f[1 : 1 + section])
            self.prob[key] = float(f[0])
            if len(f) > section + 1:
                self.bow[key] = float(f[section + 1])

    def _log10_p(self, history: tuple[str, ...], word: str) -> float:
        history = history[-(self.order - 1) :] if self.order > 1 else ()
        while True:
            if history + (word,) in self.prob:
                return self.prob[history + (word,)]
            if not history:
                raise KeyError(word)
            back = self.bow.get(history, 0.0)
            history = history[1:]
            return back + self._log10_p(history, word)

    def sentence_logprob(self, words: Sequence[str]) -> float:
        """ln P(words </s> | <s>)."""
        history: tuple[str, ...] = ("<s>",)
        total = 0.0
        for w in list(words) + ["</s>"]:
            total += self._log10_p(history, w)
            history = history + (w,)
        return total * LN10
