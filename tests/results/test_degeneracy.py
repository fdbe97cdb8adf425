"""Tandem-repeat check (k2dec.results.degeneracy) against a brute-force reference."""

import random

import pytest
import torch

from k2dec.results import Repeat, count_degenerate, find_repeat, is_degenerate
from tests.reference.degeneracy import find_repeat_brute


def test_empty_and_single_items_hold_no_repeat():
    assert find_repeat([]) is None
    assert find_repeat([7]) is None
    assert find_repeat([7], min_repeats=2, max_ngram=1) is None
    assert count_degenerate([]) == 0


def test_three_copies_pass_and_four_are_degenerate():
    assert not is_degenerate([5, 5, 5])
    assert find_repeat([1, 5, 5, 5, 5, 2]) == Repeat(start=1, ngram=1, count=4)
    assert not is_degenerate("THEME THEME THEME".split())
    assert is_degenerate("ON THEME THEME THEME THEME".split())
    assert find_repeat([1, 2, 1, 2, 1, 2, 3]) is None
    assert find_repeat([0, 1, 2, 1, 2, 1, 2, 1, 2, 1]) == Repeat(start=1, ngram=2, count=4)


def test_an_ngram_repeat_is_found_up_to_max_ngram_only():
    words = "THE AST OF THE AST OF THE AST OF THE AST OF".split()
    assert find_repeat(words) == Repeat(start=0, ngram=3, count=4)
    assert find_repeat(words, max_ngram=2) is None
    assert find_repeat(words, min_repeats=5) is None
    # characters of a looping word
    assert find_repeat(list("ASUSUSUSUST")) == Repeat(start=1, ngram=2, count=4)
    assert not is_degenerate(list("MISSISSIPPI"))


def test_count_counts_hypotheses_not_repeats():
    hyps = [[1, 1, 1, 1, 2, 2, 2, 2], [1, 2, 3], [], [4, 4, 4, 4, 4, 4, 4, 4, 4]]
    assert count_degenerate(hyps) == 2
    assert count_degenerate(hyps, min_repeats=5) == 1


def test_tensors_are_read_as_token_ids():
    assert find_repeat(torch.tensor([3, 9, 9, 9, 9])) == Repeat(start=1, ngram=1, count=4)


@pytest.mark.parametrize("seed", range(6))
def test_matches_brute_force_on_random_sequences(seed):
    rng = random.Random(seed)
    for _ in range(400):
        vocab = rng.randint(1, 4)
        seq = [rng.randrange(vocab) for _ in range(rng.randint(0, 24))]
        if rng.random() < 0.5 and seq:  # plant a repeat of a random unit
            i = rng.randrange(len(seq))
            unit = seq[i:i + rng.randint(1, 4)]
            seq[i:i] = unit * rng.randint(2, 5)
        min_repeats, max_ngram = rng.randint(2, 5), rng.randint(1, 6)
        got = find_repeat(seq, min_repeats, max_ngram)
        want = find_repeat_brute(seq, min_repeats, max_ngram)
        assert (None if got is None else (got.start, got.ngram, got.count)) == want, seq


@pytest.mark.parametrize("kwargs,error,match", [
    ({"items": "ABBBB"}, TypeError, "items must be a sequence.*text.split"),
    ({"items": [1], "min_repeats": 1}, ValueError, "min_repeats must be >= 2, got 1"),
    ({"items": [1], "max_ngram": 0}, ValueError, "max_ngram must be >= 1, got 0"),
    ({"items": [1], "min_repeats": 4.0}, TypeError, "min_repeats must be an int, got float"),
    ({"items": [1], "max_ngram": True}, TypeError, "max_ngram must be an int, got bool"),
])
def test_bad_arguments_are_named(kwargs, error, match):
    with pytest.raises(error, match=match):
        find_repeat(**kwargs)
