"""Words as WER compares them (k2dec.results.scoring_words): upper case, punctuation at word
edges removed, punctuation-only words dropped; a scored test set says so in its wer-summary
only when references held such punctuation."""

from __future__ import annotations

import random
import string
import unicodedata

import pytest

from k2dec.job.scoring import score_results
from k2dec.results import SCORING_NORMALIZATION, scoring_words


@pytest.mark.parametrize("words, scored", [
    ([], []),
    (["Hello?"], ["HELLO"]),
    (["Oh,", "well..."], ["OH", "WELL"]),
    (["don't", "well-known", "'tis", "James'"], ["DON'T", "WELL-KNOWN", "TIS", "JAMES"]),
    (["--", "...", "a"], ["A"]),
    (["«Bonjour»", "¿Qué?"], ["BONJOUR", "QUÉ"]),
    (["<UNK>", "+1"], ["<UNK>", "+1"]),  # symbols, not punctuation
])
def test_scoring_words(words, scored):
    assert scoring_words(words) == scored


def _reference(word: str) -> list[str]:
    """One word scored by a per-character loop: strip category P from both ends, upper."""
    chars = list(word)
    while chars and unicodedata.category(chars[0]).startswith("P"):
        chars.pop(0)
    while chars and unicodedata.category(chars[-1]).startswith("P"):
        chars.pop()
    return ["".join(chars).upper()] if chars else []


def test_scoring_words_against_a_per_word_loop():
    rng = random.Random(0)
    alphabet = string.ascii_letters + string.punctuation + "éß«»¿¡"
    for _ in range(500):
        words = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 6)))
                 for _ in range(rng.randint(0, 5))]
        assert scoring_words(words) == [w for word in words for w in _reference(word)]
        assert scoring_words(scoring_words(words)) == scoring_words(words)  # idempotent


def _records(refs: dict[str, list[str]], hyps: dict[str, list[str]]) -> dict:
    return {k: {"cut_id": k, "status": "ok", "ref": refs[k],
                "hyps": {"m": {"text": hyps[k], "tokens": []}}} for k in refs}


def test_punctuated_references_score_as_clean_ones_and_the_summary_says_so(tmp_path):
    hyps = {"a": ["HELLO", "WORLD"], "b": ["OH", "WELL", "YES"]}
    clean = {"a": ["HELLO", "WORLD"], "b": ["OH", "WELL", "NO"]}
    punct = {"a": ["Hello,", "world!"], "b": ["Oh,", "well", "--", "no."]}
    got = {}
    for name, refs in (("clean", clean), ("punct", punct)):
        out = tmp_path / name
        summary = score_results(_records(refs, hyps), out / "r.jsonl", out, "m", "t", 0.1, "")
        got[name] = (summary.wers, (out / "wer-summary-t.txt").read_text())
    assert got["clean"][0] == got["punct"][0] == {"m": 20.0}
    assert "#" not in got["clean"][1]  # nothing normalized beyond case: the summary as before
    assert got["punct"][1].splitlines()[-1] == (
        f"# words normalized before scoring: {SCORING_NORMALIZATION} (5 reference words "
        "changed)")
