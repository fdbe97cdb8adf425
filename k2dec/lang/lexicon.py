"""Lexicons (``lexicon.txt``): reading, writing, validation and disambiguation symbols.

A lexicon is a list of ``(word, tokens)`` pairs, in file order; a word may appear
more than once (alternative pronunciations).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

import k2

__all__ = [
    "Lexicon",
    "read_lexicon",
    "write_lexicon",
    "add_disambig_symbols",
    "check_lexicon_tokens",
    "lexicon_words",
    "lexicon_tokens",
]

Lexicon = list[tuple[str, list[str]]]


def read_lexicon(path: str | Path, token_table: k2.SymbolTable | None = None) -> Lexicon:
    """Read ``word tok1 tok2 ...`` lines.

    Args:
      path: the lexicon file.
      token_table: when given, every token must be in it.

    Raises:
      ValueError: naming file and line for a line with a word but no tokens
        (an empty pronunciation), or a token missing from ``token_table``.
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"lexicon {path} does not exist")
    lexicon: Lexicon = []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            fields = line.split()
            if not fields:
                continue
            if len(fields) < 2:
                raise ValueError(
                    f"{path}:{lineno}: word {fields[0]!r} has an empty pronunciation"
                )
            if token_table is not None:
                for t in fields[1:]:
                    if t not in token_table:
                        raise ValueError(
                            f"{path}:{lineno}: token {t!r} of word {fields[0]!r} "
                            "is not in tokens.txt"
                        )
            lexicon.append((fields[0], fields[1:]))
    if not lexicon:
        raise ValueError(f"lexicon {path} is empty")
    return lexicon


def write_lexicon(lexicon: Iterable[tuple[str, Sequence[str]]], path: str | Path) -> None:
    """Write ``word tok1 tok2 ...`` lines."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for word, tokens in lexicon:
            if not tokens:
                raise ValueError(f"word {word!r} has an empty pronunciation")
            f.write(f"{word} {' '.join(tokens)}\n")


def lexicon_words(lexicon: Lexicon) -> list[str]:
    """Distinct words of ``lexicon`` in first-seen order."""
    return list(dict.fromkeys(w for w, _ in lexicon))


def lexicon_tokens(lexicon: Lexicon) -> list[str]:
    """Distinct tokens of ``lexicon`` in first-seen order."""
    return list(dict.fromkeys(t for _, toks in lexicon for t in toks))


def add_disambig_symbols(lexicon: Lexicon) -> tuple[Lexicon, int]:
    """Append ``#1``, ``#2``, ... to pronunciations that need them (Kaldi's add_lex_disambig).

    A pronunciation needs a disambiguation symbol when it is shared by several
    entries (homophones) or is a proper prefix of another pronunciation. Each such
    token sequence counts its own symbols from ``#1``; ``#0`` is never used here
    (it is reserved for the backoff arcs of G).

    Returns:
      ``(lexicon_disambig, max_disambig)``: the new lexicon (same order) and the
      largest ``N`` used in ``#N`` (0 when none was needed). The lang dir then holds
      ``#0 .. #max_disambig``.
    """
    for word, tokens in lexicon:
        if not tokens:
            raise ValueError(f"word {word!r} has an empty pronunciation")
        for t in tokens:
            if t.startswith("#") and t[1:].isdigit():
                raise ValueError(f"word {word!r} already uses disambiguation symbol {t!r}")
    count = Counter(tuple(tokens) for _, tokens in lexicon)
    prefixes: set[tuple[str, ...]] = set()
    for _, tokens in lexicon:
        for n in range(1, len(tokens)):
            prefixes.add(tuple(tokens[:n]))

    last_used: dict[tuple[str, ...], int] = {}
    max_disambig = 0
    out: Lexicon = []
    for word, tokens in lexicon:
        key = tuple(tokens)
        if count[key] == 1 and key not in prefixes:
            out.append((word, list(tokens)))
            continue
        n = last_used.get(key, 0) + 1
        last_used[key] = n
        max_disambig = max(max_disambig, n)
        out.append((word, list(tokens) + [f"#{n}"]))
    return out, max_disambig


def check_lexicon_tokens(
    lexicon: Lexicon, token_table: k2.SymbolTable, source: str = "lexicon"
) -> None:
    """Raise ``ValueError`` naming the entry (and its position in ``source``) for the
    first token not in ``token_table``."""
    for i, (word, tokens) in enumerate(lexicon, start=1):
        for t in tokens:
            if t not in token_table:
                raise ValueError(
                    f"{source}: entry {i} ({word!r}): token {t!r} is not in tokens.txt"
                )
