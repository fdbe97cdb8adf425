"""The letter case of a vocabulary, and text matched to it.

icefall's LibriSpeech vocabularies (words.txt, BPE pieces) are upper case. Text in another
case, e.g. lower-case references or LM text, would otherwise be words outside the vocabulary
and pieces the BPE model spells letter by letter::

    case = bpe_case(sp)                     # "upper"
    sp.encode(match_case("the cat", case))  # the pieces of "THE CAT"
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["CASED_SHARE", "bpe_case", "match_case", "vocabulary_case"]

#: The share of a vocabulary's cased symbols that must have one case for the vocabulary to
#: have that case (a vocabulary of mixed case is left as it is).
CASED_SHARE = 0.95


def vocabulary_case(symbols: Iterable[str]) -> str | None:
    """``"upper"`` or ``"lower"`` when at least :data:`CASED_SHARE` of the symbols with
    letters of a case are all in that case, else ``None`` (mixed case, or no cased letters).
    Special symbols (``<unk>``, ``<eps>``, ``#0``, ...) do not count."""
    upper = lower = mixed = 0
    for s in symbols:
        if not s or s[0] in "<#":
            continue
        if s.isupper():
            upper += 1
        elif s.islower():
            lower += 1
        elif s.upper() != s.lower():
            mixed += 1
    total = upper + lower + mixed
    if total and upper >= CASED_SHARE * total:
        return "upper"
    if total and lower >= CASED_SHARE * total:
        return "lower"
    return None


def bpe_case(sp: Any) -> str | None:
    """:func:`vocabulary_case` of a sentencepiece model's pieces."""
    return vocabulary_case(sp.id_to_piece(i) for i in range(sp.get_piece_size()))


def match_case(text: str, case: str | None) -> str:
    """``text`` in ``case`` (``"upper"``, ``"lower"``; ``None``: unchanged)."""
    if case == "upper":
        return text.upper()
    if case == "lower":
        return text.lower()
    return text
