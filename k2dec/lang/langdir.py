"""The icefall lang-dir layout.

::

    lang_dir/
      tokens.txt              <eps>/<blk> 0, tokens..., #0, #1, ...
      words.txt               <eps> 0, words..., #0, <s>, </s>
      lexicon.txt             word tok1 tok2 ...
      lexicon_disambig.txt    the same with #1, #2, ... appended where needed
      L.pt, L_disambig.pt     written by k2dec.graph (k2.Fsa.as_dict())
      HLG.pt, LG.pt, G_*.pt   written by k2dec.graph
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import k2

from .lexicon import (
    Lexicon,
    add_disambig_symbols,
    check_lexicon_tokens,
    lexicon_tokens,
    lexicon_words,
    read_lexicon,
    write_lexicon,
)
from .symbols import disambig_ids, make_symbol_table, read_symbol_table, write_symbol_table

__all__ = ["LangDir", "write_lang_dir", "SPECIAL_WORDS"]

#: Word symbols appended after the lexicon's words (Kaldi/icefall layout).
SPECIAL_WORDS = ("#0", "<s>", "</s>")


@dataclass(frozen=True)
class LangDir:
    """Read access to an icefall-layout lang dir (files are read lazily, once)."""

    path: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", Path(self.path))
        if not self.path.is_dir():
            raise ValueError(f"lang dir {self.path} does not exist")

    @cached_property
    def token_table(self) -> k2.SymbolTable:
        return read_symbol_table(self.path / "tokens.txt")

    @cached_property
    def word_table(self) -> k2.SymbolTable:
        return read_symbol_table(self.path / "words.txt")

    @cached_property
    def lexicon(self) -> Lexicon:
        return read_lexicon(self.path / "lexicon.txt", self.token_table)

    @cached_property
    def lexicon_disambig(self) -> Lexicon:
        return read_lexicon(self.path / "lexicon_disambig.txt", self.token_table,
                            disambig=True)

    @property
    def first_token_disambig_id(self) -> int:
        """Id of ``#0`` in tokens.txt."""
        return _id_of(self.token_table, "#0", self.path / "tokens.txt")

    @property
    def first_word_disambig_id(self) -> int:
        """Id of ``#0`` in words.txt."""
        return _id_of(self.word_table, "#0", self.path / "words.txt")

    @property
    def max_token_id(self) -> int:
        """Largest non-disambiguation token id (the network's output dim is this + 1).

        Raises:
          ValueError: tokens.txt has no token but the blank (id 0) and ``#N`` symbols.
        """
        dis = set(disambig_ids(self.token_table))
        top = max((i for i in self.token_table.ids if i not in dis), default=0)
        if top < 1:
            raise ValueError(f"{self.path / 'tokens.txt'} has no token but the blank (id 0) "
                             "and disambiguation symbols: a lang dir needs the tokens its "
                             "words are spelled with")
        return top

    @property
    def blank_symbol(self) -> str:
        return self.token_table.get(0)


def _id_of(table: k2.SymbolTable, sym: str, path: Path) -> int:
    if sym not in table:
        raise ValueError(f"{path} has no {sym!r}")
    return table.get(sym)


def write_lang_dir(
    lang_dir: str | Path,
    lexicon: Lexicon,
    tokens: Sequence[str] | k2.SymbolTable | None = None,
    blank: str = "<eps>",
) -> LangDir:
    """Write tokens.txt, words.txt, lexicon.txt and lexicon_disambig.txt.

    Args:
      lang_dir: output directory (created).
      lexicon: ``(word, tokens)`` pairs; every token must be in ``tokens``.
      tokens: the token inventory. A ``k2.SymbolTable`` keeps its ids (BPE models,
        where id ``i`` is piece ``i``); a sequence is numbered from 1 after ``blank``;
        ``None`` takes the lexicon's tokens, sorted.
      blank: symbol of id 0 when ids are assigned here (``<eps>`` for phone lang dirs,
        which doubles as the CTC blank, as in icefall).

    Returns:
      the :class:`LangDir`. The disambiguation symbols ``#0..#N`` are appended to
      both tables; ``#0`` in words.txt is G's backoff symbol.

    Raises:
      ValueError: ``lang_dir`` is a file or cannot be created; an empty lexicon (no word
        to decode); a lexicon token not in ``tokens``.
    """
    lang_dir = Path(lang_dir)
    lexicon = list(lexicon)
    if not lexicon:
        raise ValueError(f"lexicon is empty: a lang dir ({lang_dir}) needs at least one word "
                         "with its tokens")
    if lang_dir.exists() and not lang_dir.is_dir():
        raise ValueError(f"lang dir {lang_dir} is a file, not a directory")
    try:
        lang_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ValueError(f"cannot create lang dir {lang_dir}: {e.strerror or e}") from None
    if isinstance(tokens, k2.SymbolTable):
        token_pairs = [(tokens.get(i), i) for i in sorted(tokens.ids)]
    else:
        names = sorted(lexicon_tokens(lexicon)) if tokens is None else list(tokens)
        names = [t for t in names if t != blank]
        token_pairs = [(blank, 0)] + [(t, i) for i, t in enumerate(names, start=1)]
    base_tokens = make_symbol_table(token_pairs)
    check_lexicon_tokens(lexicon, base_tokens)

    lexicon_disambig, max_disambig = add_disambig_symbols(lexicon)
    next_id = max(i for _, i in token_pairs) + 1
    token_pairs += [(f"#{n}", next_id + n) for n in range(max_disambig + 1)]

    words = sorted(w for w in lexicon_words(lexicon) if w not in ("<eps>",) + SPECIAL_WORDS)
    word_pairs = [("<eps>", 0)] + [(w, i) for i, w in enumerate(words, start=1)]
    word_pairs += [(w, len(word_pairs) + k) for k, w in enumerate(SPECIAL_WORDS)]

    write_symbol_table(make_symbol_table(token_pairs), lang_dir / "tokens.txt")
    write_symbol_table(make_symbol_table(word_pairs), lang_dir / "words.txt")
    write_lexicon(lexicon, lang_dir / "lexicon.txt")
    write_lexicon(lexicon_disambig, lang_dir / "lexicon_disambig.txt")
    return LangDir(lang_dir)
