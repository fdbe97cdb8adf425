"""What the graph-compilation tests enumerate for a random lang (:mod:`k2dec.testing.lang`):
word sequences, their pronunciations, CTC frame sequences."""

from __future__ import annotations

import itertools
import random


def word_sequences(words: list[str], max_len: int):
    """Every word sequence of length 0..max_len."""
    for n in range(max_len + 1):
        yield from itertools.product(words, repeat=n)


def pronunciations(seq: tuple[str, ...], lexicon) -> set[tuple[str, ...]]:
    """Every token sequence spelling ``seq`` (any pronunciation of each word)."""
    prons: dict[str, list[tuple[str, ...]]] = {}
    for w, p in lexicon:
        prons.setdefault(w, []).append(tuple(p))
    return {tuple(t for p in combo for t in p)
            for combo in itertools.product(*(prons[w] for w in seq))}


def ctc_realisations(ids: list[int], rng: random.Random, num_random: int = 2,
                     exhaustive_up_to: int = 2) -> list[list[int]]:
    """CTC frame sequences (0 = blank) that collapse to ``ids``. Up to
    ``exhaustive_up_to`` tokens: every one with each token 1-2 frames and 0-1 blank frames
    before, between and after the tokens (a repeated token always gets a blank between).
    Longer: the shortest one, one with every token doubled and blanks everywhere, and
    ``num_random`` random ones (1-3 frames per token, 0-2 blanks)."""
    def realise(reps, blanks) -> list[int]:
        frames = [0] * blanks[0]
        for k, t in enumerate(ids):
            if k and ids[k - 1] == t and blanks[k] == 0:
                frames.append(0)  # a repeat needs a blank in between
            frames += [t] * reps[k] + [0] * blanks[k + 1]
        return frames

    n = len(ids)
    if not ids:
        return [[0], [0, 0]]  # k2 cannot intersect with an empty linear FSA
    if n <= exhaustive_up_to:
        out = [realise(r, b) for r in itertools.product((1, 2), repeat=n)
               for b in itertools.product((0, 1), repeat=n + 1)]
    else:
        out = [realise([1] * n, [0] * (n + 1)), realise([2] * n, [1] * (n + 1))]
        for _ in range(num_random):
            out.append(realise([rng.randint(1, 3) for _ in range(n)],
                               [rng.randint(0, 2) for _ in range(n + 1)]))
    return [list(f) for f in dict.fromkeys(tuple(f) for f in out)]
