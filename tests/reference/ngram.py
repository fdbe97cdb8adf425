"""A plain backoff n-gram scorer for ARPA files, written independently of kaldilm/k2."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from functools import cache
from pathlib import Path

LN10 = math.log(10.0)


class ArpaScorer:
    """Scores word sequences with the standard ARPA backoff recursion (log10 -> ln).

    :meth:`sentence_logprob` is the ARPA probability; :meth:`best_path_logprob` is what
    a backoff G (Kaldi's arpa2fst, kaldilm) gives in the tropical semiring, where a
    backoff arc may be taken even where the n-gram exists. Both need a "proper" ARPA
    file (every n-gram's first and last n-1 words are (n-1)-grams).
    """

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

    # ---- the backoff graph's best path (tropical semiring) ----

    def _is_state(self, history: tuple[str, ...]) -> bool:
        return not history or (len(history) < self.order and history in self.prob
                               and history[-1] != "</s>")

    def _backoff_state(self, history: tuple[str, ...]) -> tuple[str, ...]:
        history = history[1:]
        while not self._is_state(history):
            history = history[1:]
        return history

    def best_path_logprob(self, words: Sequence[str]) -> float:
        """ln of the best path of G (``<s>`` start, ``</s>`` final weight) reading
        ``words``: at every word either the n-gram's arc or a backoff arc (paying the
        backoff weight) to the next lower-order history. ``-inf`` if none."""

        @cache
        def best(state: tuple[str, ...], rest: tuple[str, ...]) -> float:
            options = []
            if not rest:
                if state + ("</s>",) in self.prob:
                    options.append(self.prob[state + ("</s>",)])
            elif state + rest[:1] in self.prob and rest[0] not in ("<s>", "</s>"):
                nxt = state + rest[:1]
                if len(nxt) == self.order:
                    nxt = nxt[1:]
                while not self._is_state(nxt):  # only for improper files
                    nxt = nxt[1:]
                options.append(self.prob[state + rest[:1]] + best(nxt, rest[1:]))
            if state:
                back = self.bow.get(state, 0.0)
                options.append(back + best(self._backoff_state(state), rest))
            return max(options, default=-math.inf)

        return best(("<s>",), tuple(words)) * LN10


def segmentations(
    tokens: Sequence[str], lexicon: Sequence[tuple[str, Sequence[str]]]
) -> Iterator[tuple[str, ...]]:
    """Every word sequence whose pronunciations (any of each word's) spell ``tokens``."""
    tokens = tuple(tokens)
    if not tokens:
        yield ()
        return
    seen: set[tuple[str, ...]] = set()
    for word, pron in lexicon:
        n = len(pron)
        if n and tuple(pron) == tokens[:n]:
            for rest in segmentations(tokens[n:], lexicon):
                if (word,) + rest not in seen:
                    seen.add((word,) + rest)
                    yield (word,) + rest


def lexicon_lm_word_sequences(
    tokens: Sequence[str], lexicon: Sequence[tuple[str, Sequence[str]]], lm: ArpaScorer
) -> dict[tuple[str, ...], float]:
    """What ``L o G`` (no silence, zero lexicon scores) maps ``tokens`` to: every word
    sequence spelling them that G accepts, with G's best-path score (ln)."""
    out = {}
    for words in segmentations(tokens, lexicon):
        score = lm.best_path_logprob(words)
        if score > -math.inf:
            out[words] = score
    return out
