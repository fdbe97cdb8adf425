"""add_disambig_symbols finds the pronunciations that are a proper prefix of another with a
trie (linear memory); it must agree with Kaldi's add_lex_disambig.pl written out the
obvious, quadratic way on random lexicons, and take a 100,000-token pronunciation."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from k2dec.lang.lexicon import add_disambig_symbols


def _reference(lexicon):
    """Kaldi's rule, by brute force: every proper prefix of every pronunciation listed."""
    count = Counter(tuple(t) for _, t in lexicon)
    prefixes = {tuple(t[:n]) for _, t in lexicon for n in range(1, len(t))}
    used: dict[tuple, int] = {}
    out, top = [], 0
    for word, tokens in lexicon:
        key = tuple(tokens)
        if count[key] == 1 and key not in prefixes:
            out.append((word, list(tokens)))
            continue
        used[key] = used.get(key, 0) + 1
        top = max(top, used[key])
        out.append((word, list(tokens) + [f"#{used[key]}"]))
    return out, top


@pytest.mark.parametrize("seed", range(200))
def test_agrees_with_the_brute_force_rule(seed):
    rng = random.Random(seed)
    size = rng.choice([0, 1, 2, 5, 20])
    lexicon = [(f"W{i}", [rng.choice("abc") for _ in range(rng.randint(1, 4))])
               for i in range(size)]
    assert add_disambig_symbols(lexicon) == _reference(lexicon)


def test_a_huge_pronunciation_is_linear():
    long = ["a", "b"] * 50_000
    lexicon = [("LONG", long), ("AB", ["a", "b"]), ("A", ["a"]), ("A2", ["a"])]
    out, top = add_disambig_symbols(lexicon)
    assert out == [("LONG", long), ("AB", ["a", "b", "#1"]), ("A", ["a", "#1"]),
                   ("A2", ["a", "#2"])] and top == 2
