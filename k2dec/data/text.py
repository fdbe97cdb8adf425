"""LibriSpeech-style text normalization, shared by the synthetic corpus maker and the recipes.

LibriSpeech transcripts are upper case words of the letters ``A``-``Z`` and the apostrophe, one
space between words, no punctuation and no digits. :func:`normalize_text` maps free text to that
form; :func:`split_sentences` cuts running prose into sentences before normalization.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["has_digits", "normalize_text", "split_sentences"]

# Typographic apostrophes and primes that mean "'" inside a word.
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'", "`": "'", "\u00b4": "'"})
# Anything that is not a letter, an apostrophe or white space separates words.
_NON_WORD = re.compile(r"[^A-Z'\s]+")
# An apostrophe that does not sit between two letters is a quotation mark, not part of a word.
_STRAY_APOSTROPHE = re.compile(r"(?<![A-Z])'|'(?![A-Z])")
_SPACES = re.compile(r"\s+")
# End of a sentence: ., ! or ? (possibly repeated, possibly followed by closing quotes or
# brackets) and then white space.
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+")
_DIGIT = re.compile(r"[0-9]")


def has_digits(text: str) -> bool:
    """True if ``text`` contains an ASCII digit (such sentences are usually skipped, since
    LibriSpeech spells numbers out and we cannot do so reliably)."""
    return _DIGIT.search(text) is not None


def normalize_text(text: str) -> str:
    """Normalize ``text`` the LibriSpeech way.

    Upper case; accents removed (``café`` -> ``CAFE``); typographic apostrophes become ``'``;
    every character other than ``A``-``Z`` and ``'`` separates words (so hyphens and
    punctuation become spaces, and digits are dropped); apostrophes are kept only inside a word
    (``DON'T`` stays, ``'QUOTED'`` becomes ``QUOTED``); single spaces between words and none at
    the ends.

    Args:
      text: any string.

    Returns:
      The normalized string, possibly empty.

    Raises:
      TypeError: if ``text`` is not a ``str``.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}: {text!r}")
    text = unicodedata.normalize("NFKD", text.translate(_APOSTROPHES))
    text = "".join(c for c in text if not unicodedata.combining(c)).upper()
    text = _NON_WORD.sub(" ", text)
    text = _STRAY_APOSTROPHE.sub(" ", text)
    return _SPACES.sub(" ", text).strip()


def split_sentences(text: str) -> list[str]:
    """Split running prose into sentences at ``.``, ``!`` and ``?`` followed by white space.

    Line breaks inside a sentence are joined. The sentences are returned unnormalized (pass
    them through :func:`normalize_text`); empty pieces are dropped.

    Raises:
      TypeError: if ``text`` is not a ``str``.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}: {text!r}")
    joined = _SPACES.sub(" ", text).strip()
    return [s.strip() for s in _SENTENCE_END.split(joined) if s.strip()]
