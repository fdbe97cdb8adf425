"""Lexicons (``lexicon.txt``): reading, writing, validation and disambiguation symbols.

A lexicon is a list of ``(word, tokens)`` pairs, in file order; a word may appear
more than once (alternative pronunciations).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

import k2

from ..primitives.files import text_lines

__all__ = [
    "RESERVED_TOKENS",
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


#: Tokens a pronunciation may not use: the epsilon, the CTC blank and the attention
#: decoder's sentence mark (icefall's special tokens; ``#N`` are refused too).
RESERVED_TOKENS = ("<eps>", "<blk>", "<sos/eos>")


def _as_number(field: str) -> float | None:
    if not any(c.isdigit() for c in field):
        return None
    try:
        return float(field)
    except ValueError:
        return None


def _looks_like_probability(field: str) -> bool:
    """A decimal number that no token inventory uses (``1.0``, ``-0.5``, ``1e-3``): a
    pronunciation probability of a Kaldi ``lexiconp.txt`` line."""
    return _as_number(field) is not None and not field.isdigit()


def read_lexicon(path: str | Path, token_table: k2.SymbolTable | None = None,
                 disambig: bool = False) -> Lexicon:
    """Read ``word tok1 tok2 ...`` lines (UTF-8, optionally gzip-compressed; a byte-order
    mark is ignored).

    Args:
      path: the lexicon file.
      token_table: when given, every token must be in it and none may have id 0 (the
        epsilon / blank).
      disambig: the file is a ``lexicon_disambig.txt``: pronunciations may end in
        disambiguation symbols ``#N``.

    Raises:
      ValueError: naming file and line for a line with a word but no tokens (an empty
        pronunciation), a word with a pronunciation it already has on another line, a
        reserved word (``<eps>``, ``#0``, ``<s>``, ``</s>``, ``#N``), a
        reserved token (``<eps>``, ``<blk>``, ``<sos/eos>``, ``#N``) or one with id 0 (an
        epsilon pronunciation), a token missing from ``token_table``; and for a Kaldi
        ``lexiconp.txt`` (``word prob tok1 ...``), whose probabilities would otherwise
        become tokens: every line's second field a number, or one line's a decimal number
        that ``token_table`` lacks (a probability outside ``(0, 1]`` is named with its line).
    """
    path = Path(path)
    lexicon: Lexicon = []
    where_of: list[str] = []
    first: dict[tuple[str, ...], str] = {}
    for lineno, line in text_lines(path, "lexicon"):
        fields = line.split()
        if not fields:
            continue
        where = f"{path}:{lineno}"
        word = fields[0]
        if len(fields) < 2:
            raise ValueError(f"{where}: word {word!r} has an empty pronunciation")
        if word in RESERVED_WORDS or is_disambig(word):
            raise ValueError(f"{where}: {word!r} is reserved and cannot be a lexicon word")
        _check_pronunciation(where, word, fields[1:], token_table, disambig)
        if tuple(fields) in first:  # L would hold two equal paths (a homophone of itself)
            raise ValueError(f"{where}: word {word!r} with the pronunciation "
                             f"{' '.join(fields[1:])!r} is already on {first[tuple(fields)]}")
        first[tuple(fields)] = f"line {lineno}"
        lexicon.append((word, fields[1:]))
        where_of.append(where)
    if not lexicon:
        raise ValueError(f"lexicon {path} is empty")
    _refuse_probabilities(path, lexicon, where_of, token_table)
    return lexicon


def _check_pronunciation(where: str, word: str, tokens: list[str],
                         token_table: k2.SymbolTable | None, disambig: bool) -> None:
    """The token checks of :func:`read_lexicon` for one line."""
    for i, t in enumerate(tokens):
        in_table = token_table is not None and t in token_table
        if disambig and i > 0 and is_disambig(t):
            if token_table is not None and not in_table:
                raise ValueError(f"{where}: disambiguation symbol {t!r} of word {word!r} is "
                                 "not in tokens.txt")
            continue
        blank = t in ("<eps>", "<blk>") or (in_table and token_table.get(t) == 0)
        if blank or t in RESERVED_TOKENS or is_disambig(t):
            what = "the epsilon/blank token" if blank else "the reserved token"
            id0 = " (id 0)" if in_table and token_table.get(t) == 0 else ""
            raise ValueError(
                f"{where}: word {word!r} has {what} {t!r}{id0} in its pronunciation; a word "
                "must consume at least one real token, each token a real one (<eps>, <blk>, "
                "<sos/eos> and #N are reserved)"
            )
        if token_table is not None and not in_table:
            raise ValueError(f"{where}: token {t!r} of word {word!r} is not in tokens.txt")


def _refuse_probabilities(path: Path, lexicon: Lexicon, where_of: list[str],
                          token_table: k2.SymbolTable | None) -> None:
    """Refuse a Kaldi ``lexiconp.txt`` (see :func:`read_lexicon`)."""
    second = [toks[0] for _, toks in lexicon]
    unknown = [token_table is None or t not in token_table for t in second]
    numbers = [_as_number(t) for t in second]
    if all(x is not None for x in numbers) and all(unknown):
        for i, p in enumerate(numbers):
            if not 0.0 < p <= 1.0:
                raise ValueError(
                    f"{where_of[i]}: word {lexicon[i][0]!r} has the pronunciation probability "
                    f"{second[i]}, outside (0, 1]; and k2dec reads lexicon.txt (word, tokens), "
                    "not Kaldi's lexiconp.txt (word, probability, tokens)")
        raise ValueError(
            f"{path} looks like a Kaldi lexiconp.txt (word, pronunciation probability, "
            f"tokens: {where_of[0]} is {lexicon[0][0]} {' '.join(lexicon[0][1])!r}); "
            "k2dec reads lexicon.txt (word, tokens). Drop the probabilities first, e.g. "
            "awk '{$2=\"\"; print}' lexiconp.txt > lexicon.txt"
        )
    for i, t in enumerate(second):
        if unknown[i] and _looks_like_probability(t):
            raise ValueError(
                f"{where_of[i]}: word {lexicon[i][0]!r} starts its pronunciation with {t!r}, "
                "a number, not a token: a pronunciation probability (Kaldi lexiconp.txt)? "
                "k2dec reads lexicon.txt (word, tokens); drop the probabilities")


def is_disambig(symbol: str) -> bool:
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
            if is_disambig(t):
                raise ValueError(f"word {word!r} already uses disambiguation symbol {t!r}")
    count = Counter(tuple(tokens) for _, tokens in lexicon)
    prefixes = _proper_prefixes(count)

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


def _proper_prefixes(pronunciations) -> set[tuple[str, ...]]:
    """The ``pronunciations`` that are a proper prefix of another one, found with a trie:
    memory and time linear in the tokens (a set of every prefix was quadratic: one word of
    100,000 tokens took more memory than the machine had)."""
    root: dict = {}
    ends = []
    for tokens in pronunciations:
        node = root
        for t in tokens:
            node = node.setdefault(t, {})
        ends.append((tokens, node))
    return {tuple(tokens) for tokens, node in ends if node}


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
