import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from k2dec.data import has_digits, normalize_text, split_sentences


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("Hello, world!", "HELLO WORLD"),
        ("Don't stop", "DON'T STOP"),
        ("'Quoted' words", "QUOTED WORDS"),
        ("rock-n-roll -- fine", "ROCK N ROLL FINE"),
        ("caf\u00e9 na\u00efve", "CAFE NAIVE"),
        ("it\u2019s O\u2019Brien\u2019s", "IT'S O'BRIEN'S"),
        ("in 1951 he left", "IN HE LEFT"),
        ("  spaces\tand\nnewlines  ", "SPACES AND NEWLINES"),
        ("the dogs' bones", "THE DOGS BONES"),
        ("'tis", "TIS"),
        ("...", ""),
        ("", ""),
    ],
)
def test_normalize_text(raw, expected):
    assert normalize_text(raw) == expected


def test_normalize_is_idempotent():
    s = normalize_text("He said: \"I can't -- won't!\" 3 times.")
    assert s == "HE SAID I CAN'T WON'T TIMES"
    assert normalize_text(s) == s


def test_normalize_rejects_non_str():
    with pytest.raises(TypeError, match="text must be a str"):
        normalize_text(["A"])
    with pytest.raises(TypeError, match="text must be a str"):
        split_sentences(None)


def test_split_sentences():
    text = "First one.  Second\nline here? Third!  \"Quoted.\" Last bit"
    assert split_sentences(text) == [
        "First one.", "Second line here?", "Third!", "\"Quoted.", "Last bit"]
    assert split_sentences("") == []
    # No split inside a word or after a period without space.
    assert split_sentences("e.g.this stays") == ["e.g.this stays"]


def test_has_digits():
    assert has_digits("route 66")
    assert not has_digits("ROUTE SIXTY SIX")


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_normalize_invariants(text):
    out = normalize_text(text)
    assert normalize_text(out) == out
    assert re.fullmatch(r"([A-Z]+('[A-Z]+)*( [A-Z]+('[A-Z]+)*)*)?", out), out
