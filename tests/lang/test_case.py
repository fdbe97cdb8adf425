"""The letter case of vocabularies, and text matched to it."""

from __future__ import annotations

import pytest

from k2dec.lang import match_case, vocabulary_case


@pytest.mark.parametrize("symbols, case", [
    (["<eps>", "<UNK>", "THE", "CAT", "DON'T", "#0"], "upper"),
    (["<blk>", "<unk>", "\u2581THE", "S", "\u2581A"], "upper"),
    (["<eps>", "the", "cat", "#0"], "lower"),
    (["The", "cat", "SAT"], None),  # mixed
    (["<eps>", "1", "2", "#0"], None),  # no cased letters
    (["\u4e2d", "\u6587"], None),
    ([], None),
])
def test_vocabulary_case(symbols, case):
    assert vocabulary_case(symbols) == case


def test_match_case():
    assert match_case("the Cat", "upper") == "THE CAT"
    assert match_case("The CAT", "lower") == "the cat"
    assert match_case("The CAT", None) == "The CAT"
