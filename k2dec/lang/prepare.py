"""What ``k2dec prepare-lang`` writes a lang dir from: a lexicon file, or a word list spelled
with CMUdict (phones) or a BPE model (pieces), checked before anything is written."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import k2

from ..primitives.files import text_lines
from .bpe import bpe_lexicon, bpe_token_table, load_bpe_model
from .lexicon import RESERVED_WORDS, Lexicon, check_lexicon_tokens, is_disambig, read_lexicon
from .phone import SILENCE_ENTRIES, cmudict_lexicon

__all__ = ["LexiconSource", "prepare_lexicon", "read_word_list"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class LexiconSource:
    """A lexicon and the token inventory to write it with (:func:`write_lang_dir`).

    Attributes:
      lexicon: ``(word, tokens)`` pairs.
      tokens: the BPE model's pieces (ids kept), or None: the lexicon's tokens, numbered.
      blank: the symbol of token id 0 (``<blk>`` for BPE, ``<eps>`` for phones).
    """

    lexicon: Lexicon
    tokens: k2.SymbolTable | None
    blank: str


def read_word_list(path: str | Path) -> list[str]:
    """The distinct words of a word list or text file (every whitespace-separated field of
    every line), sorted. A ``words.txt`` symbol table (every line ``WORD ID``) gives its words
    (ids and the special words ``<eps>``, ``#0``, ``<s>``, ``</s>`` left out, said in the log).

    Raises:
      ValueError: naming the file (and line) for a file that is not UTF-8 text, that has no
        words, or a plain word list with a reserved word (``<eps>``, ``#0``, ``<s>``,
        ``</s>``, ``#N``).
    """
    path = Path(path)
    lines = [(n, line.split()) for n, line in text_lines(path, "word list")]
    lines = [(n, f) for n, f in lines if f]
    if not lines:
        raise ValueError(f"word list {path} has no words")
    if all(len(f) == 2 and f[1].isdigit() for _, f in lines):
        logger.warning("%s is a symbol table (WORD ID lines): using its words", path)
        words = {f[0] for _, f in lines} - set(RESERVED_WORDS)
        words = {w for w in words if not is_disambig(w)}
        if not words:
            raise ValueError(f"word list {path} has no words besides the special ones")
        return sorted(words)
    for n, fields in lines:
        bad = [w for w in fields if w in RESERVED_WORDS or is_disambig(w)]
        if bad:
            raise ValueError(f"{path}:{n}: {bad[0]!r} is a reserved word (<eps>, #0, <s>, "
                             "</s>, #N) and cannot be in a word list")
    return sorted({w for _, f in lines for w in f})


def prepare_lexicon(
    lexicon: str | Path | None = None,
    words: str | Path | None = None,
    bpe_model: str | Path | None = None,
    allow_oov: bool = False,
) -> LexiconSource:
    """The lexicon of a new lang dir, from exactly one of ``lexicon`` (a lexicon.txt used as
    is; with ``bpe_model`` its tokens must be the model's pieces) and ``words`` (a word list,
    :func:`read_word_list`, spelled with ``bpe_model``'s pieces, else with CMUdict).

    Args:
      allow_oov: with ``words`` and CMUdict, leave out the words CMUdict lacks instead of
        failing (they are logged).

    Raises:
      ValueError: naming the file and line for anything :func:`read_lexicon`,
        :func:`read_word_list` or :func:`load_bpe_model` refuses, a lexicon token that is
        not a piece of ``bpe_model``, and words CMUdict lacks (unless ``allow_oov``).
    """
    if (lexicon is None) == (words is None):
        raise ValueError("give exactly one of a lexicon and a word list")
    sp = load_bpe_model(bpe_model) if bpe_model is not None else None
    tokens = bpe_token_table(sp) if sp is not None else None
    blank = "<blk>" if sp is not None else "<eps>"
    if lexicon is not None:
        lex = read_lexicon(lexicon)
        if tokens is not None:
            check_lexicon_tokens(lex, tokens, f"{lexicon} (spelled with {bpe_model}'s pieces)")
        return LexiconSource(lex, tokens, blank)
    vocab = read_word_list(words)
    if sp is not None:
        return LexiconSource(bpe_lexicon(sp, vocab), tokens, blank)
    lex, oov = cmudict_lexicon(vocab)
    if oov and not allow_oov:
        raise ValueError(f"{words}: {len(oov)} words are not in CMUdict (first: "
                         f"{', '.join(oov[:10])}); pass --allow-oov to leave them out")
    if oov:
        logger.warning("%s: left out %d words CMUdict lacks (first: %s)", words, len(oov),
                       ", ".join(oov[:10]))
    if len(lex) == len(SILENCE_ENTRIES):
        raise ValueError(f"{words}: none of its words is in CMUdict")
    return LexiconSource(lex, None, blank)
