"""A tiny lang dir and a hand-written ARPA shared by the graph tests."""

from __future__ import annotations

import pytest

from k2dec.lang import write_lang_dir

# "a" is a prefix of "a b" and "b" of "b a"; "D" and "E" are homophones.
TINY_LEXICON = [
    ("A", ["a"]),
    ("AB", ["a", "b"]),
    ("B", ["b"]),
    ("BA", ["b", "a"]),
    ("C", ["c"]),
    ("D", ["c", "d"]),
    ("E", ["c", "d"]),
]

# Hand-written bigram. Every explicit bigram is more likely than its backoff
# alternative, so the best path of G (tropical) is the ARPA probability.
TINY_ARPA = """\\data\\
ngram 1=9
ngram 2=6

\\1-grams:
-1.0 </s>
-99 <s> -0.5
-0.7 A -0.3
-0.8 AB -0.2
-0.9 B -0.3
-1.0 BA -0.3
-1.1 C -0.4
-1.2 D -0.2
-1.3 E -0.25

\\2-grams:
-0.2 <s> A
-0.1 A B
-0.3 B </s>
-0.4 C D
-0.5 D E
-0.6 <s> C

\\end\\
"""


@pytest.fixture
def tiny_lang(tmp_path):
    """(LangDir, arpa path) for TINY_LEXICON / TINY_ARPA."""
    lang = write_lang_dir(tmp_path / "lang", TINY_LEXICON)
    arpa = tmp_path / "lm.arpa"
    arpa.write_text(TINY_ARPA)
    return lang, arpa
