"""Hypotheses (token or word ids) to words."""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["SCORING_NORMALIZATION", "bpe_ids_to_words", "scoring_words", "token_ids_to_words",
           "word_ids_to_words"]

BPE_SPACE = "\u2581"
"""sentencepiece's word-start marker ("▁")."""


def _lookup(table: Any, i: int, name: str) -> str:
    if isinstance(i, bool) or not isinstance(i, int):
        raise TypeError(f"{name} must hold int ids, got {type(i).__name__}: {i!r}")
    try:
        sym = table[i] if isinstance(table, Mapping) else table.get(i)
    except (KeyError, IndexError, ValueError):
        sym = None
    if sym is None:
        raise ValueError(f"{name}: id {i} is not in the symbol table")
    return sym


def _as_lists(hyps: Sequence[Sequence[int]]) -> list[list[int]]:
    """Lists of ids; 1-D tensors and numpy arrays are converted with ``tolist()``."""
    if isinstance(hyps, str):
        raise TypeError(f"hyps must be a sequence of id sequences, got the string {hyps!r}")
    return [h.tolist() if hasattr(h, "tolist") else list(h) for h in hyps]


def word_ids_to_words(hyps: Sequence[Sequence[int]], word_table: Any) -> list[list[str]]:
    """Map word ids to words.

    Args:
      hyps: one sequence of word ids per utterance (lists, tuples or 1-D int tensors).
      word_table: a ``k2.SymbolTable`` (``words.txt``) or a ``{id: word}`` mapping.

    Returns:
      ``[utt][word]`` strings.

    Raises:
      ValueError: for an id missing from ``word_table``.
      TypeError: for non-integer ids.
    """
    return [[_lookup(word_table, i, "hyps") for i in h] for h in _as_lists(hyps)]


def token_ids_to_words(hyps: Sequence[Sequence[int]], token_table: Any) -> list[list[str]]:
    """Map BPE token ids to words with a token table (``tokens.txt``) instead of a BPE model.

    Pieces are concatenated and split into words at sentencepiece's ``▁`` marker.

    Args:
      hyps: one sequence of token ids per utterance.
      token_table: a ``k2.SymbolTable`` or ``{id: piece}`` mapping.

    Returns:
      ``[utt][word]`` strings.
    """
    out = []
    for h in _as_lists(hyps):
        text = "".join(_lookup(token_table, i, "hyps") for i in h)
        out.append(text.replace(BPE_SPACE, " ").split())
    return out


def bpe_ids_to_words(hyps: Sequence[Sequence[int]], sp: Any) -> list[list[str]]:
    """Map BPE token ids to words with a sentencepiece model (``sp.decode``).

    Args:
      hyps: one sequence of token ids per utterance.
      sp: a loaded ``sentencepiece.SentencePieceProcessor``.

    Returns:
      ``[utt][word]`` strings.

    Raises:
      ValueError: for an id outside ``[0, sp.get_piece_size())``.
    """
    size = sp.get_piece_size()
    lists = _as_lists(hyps)
    for h in lists:
        for i in h:
            if isinstance(i, bool) or not isinstance(i, int):
                raise TypeError(f"hyps must hold int ids, got {type(i).__name__}: {i!r}")
            if not 0 <= i < size:
                raise ValueError(f"hyps: token id {i} is outside the BPE model's [0, {size})")
    return [sp.decode(h).split() for h in lists]


#: What :func:`scoring_words` does to words before WER, as result files say it.
SCORING_NORMALIZATION = "upper case, punctuation at the start and end of each word removed"


def _is_punctuation(ch: str) -> bool:
    return unicodedata.category(ch).startswith("P")


def scoring_words(words: Sequence[str]) -> list[str]:
    """Words as WER compares them: upper case (as icefall scores), with punctuation at the
    start and end of each word removed (``"Hello?"`` -> ``HELLO``, ``"Oh,"`` -> ``OH``; inner
    marks stay: ``DON'T``, ``WELL-KNOWN``) and words that were only punctuation (``"--"``)
    dropped, as Whisper-style normalizers do before scoring; :data:`SCORING_NORMALIZATION`
    says it in words."""
    out = []
    for w in words:
        start, end = 0, len(w)
        while start < end and _is_punctuation(w[start]):
            start += 1
        while end > start and _is_punctuation(w[end - 1]):
            end -= 1
        if start < end:
            out.append(w[start:end].upper())
    return out
