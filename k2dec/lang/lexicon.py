"""Lexicons (``lexicon.txt``): reading, writing, validation and disambiguation symbols.

A lexicon is a list of ``(word, tokens)`` pairs, in file order; a word may appear
more than once (alternative pronunciations).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

import k2

from ..files import text_lines

__all__ = [
    "RESERVED_WORDS",
    "Lexicon",
    "read_lexicon",
    "write_lexicon",
    "add_disambig_symbols",
    "check_lexicon_tokens",
    "lexicon_words",
    "lexicon_tokens",
]

Lexicon = list[tuple[str, list[str]]]


#: Words a lexicon may not define: the epsilon, G's backoff symbol and the sentence marks
#: (``words.txt`` gives them their own ids; Kaldi's prepare_lang refuses them too).
RESERVED_WORDS = ("<eps>", "#0", "<s>", "</s>")


def _is_probability(field: str) -> bool:
    try:
        p = float(field)
    except ValueError:
        return False
    return 0.0 < p <= 1.0


def read_lexicon(path: str | Path, token_table: k2.SymbolTable | None = None) -> Lexicon:
    """Read ``word tok1 tok2 ...`` lines (UTF-8, optionally gzip-compressed).

    Args:
      path: the lexicon file.
      token_table: when given, every token must be in it and none may have id 0 (the
        epsilon / blank).

    Raises:
      ValueError: naming file and line for a line with a word but no tokens (an empty
        pronunciation), a reserved word (``<eps>``, ``#0``, ``<s>``, ``</s>``, ``#N``), a
        token ``<eps>`` or one with id 0 (an epsilon pronunciation), a token missing from
        ``token_table``; and for a Kaldi ``lexiconp.txt`` (``word prob tok1 ...``: every
        line's second field a probability that is not a token), whose probabilities would
        otherwise become tokens.
    """
    path = Path(path)
    lexicon: Lexicon = []
    where_of: list[str] = []
    for lineno, line in text_lines(path, "lexicon"):
        fields = line.split()
        if not fields:
            continue
        where = f"{path}:{lineno}"
        word = fields[0]
        if len(fields) < 2:
            raise ValueError(f"{where}: word {word!r} has an empty pronunciation")
        if word in RESERVED_WORDS or _is_disambig(word):
            raise ValueError(f"{where}: {word!r} is reserved and cannot be a lexicon word")
        for t in fields[1:]:
            if t == "<eps>" or (token_table is not None and t in token_table
                                and token_table.get(t) == 0):
                raise ValueError(
                    f"{where}: word {word!r} has the epsilon/blank token {t!r} (id 0) in its "
                    "pronunciation; a word must consume at least one real token, each token "
                    "a real one"
                )
            if token_table is not None and t not in token_table:
                raise ValueError(
                    f"{where}: token {t!r} of word {word!r} is not in tokens.txt"
                )
        lexicon.append((word, fields[1:]))
        where_of.append(where)
    if not lexicon:
        raise ValueError(f"lexicon {path} is empty")
    second = [toks[0] for _, toks in lexicon]
    if all(_is_probability(t) for t in second) and (
        token_table is None or not any(t in token_table for t in second)
    ):
        raise ValueError(
            f"{path} looks like a Kaldi lexiconp.txt (word, pronunciation probability, "
            f"tokens: {where_of[0]} is {lexicon[0][0]} {' '.join(lexicon[0][1])!r}); "
            "k2dec reads lexicon.txt (word, tokens). Drop the probabilities first, e.g. "
            "awk '{$2=\"\"; print}' lexiconp.txt > lexicon.txt"
        )
    return lexicon


def _is_disambig(symbol: str) -> bool:
    return symbol.startswith("#") and symbol[1:].isdigit()


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
            if _is_disambig(t):
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
