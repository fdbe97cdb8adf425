"""L: the lexicon FST mapping token sequences to words."""

from __future__ import annotations

import math

import k2
import torch

from ..lang.lexicon import Lexicon

__all__ = ["build_L"]


def build_L(
    lexicon: Lexicon,
    token_table: k2.SymbolTable,
    word_table: k2.SymbolTable,
    sil_token: str | None = None,
    sil_prob: float = 0.5,
    disambig_self_loops: bool = False,
) -> k2.Fsa:
    """Build L with ``labels`` = token ids and ``aux_labels`` = word ids.

    Each pronunciation is a chain of token arcs leaving and re-entering a loop
    state; the word id sits on the first arc. With ``sil_token`` the lexicon has
    optional silence between words (probability ``sil_prob``, Kaldi/icefall style):
    after each word (and at the start) the path either goes straight back to the
    loop state with ``log(1 - sil_prob)`` or through a silence state with
    ``log(sil_prob)`` that must emit ``sil_token``.

    Args:
      lexicon: ``(word, tokens)`` pairs; pass ``lexicon_disambig`` (with ``#N``
        tokens) to build L_disambig.
      disambig_self_loops: add ``#0:#0`` self-loops on the states words leave from,
        so that G's backoff arcs pass through L_disambig o G (needed for LG/HLG).

    Returns:
      a single ``k2.Fsa`` (CPU), not arc-sorted.
    """
    if sil_token is not None and not 0.0 < sil_prob < 1.0:
        raise ValueError(f"sil_prob must be in (0, 1), got {sil_prob}")
    if 0 not in word_table or word_table.get(0) != "<eps>":
        raise ValueError("words.txt must map <eps> to 0")
    if sil_token is not None and sil_token not in token_table:
        raise ValueError(f"silence token {sil_token!r} is not in tokens.txt")

    arcs: list[tuple[int, int, int, int, float]] = []
    loop = 0
    sil = None  # (silence state, log(1 - sil_prob), log(sil_prob))
    if sil_token is None:
        next_state = 1
    else:
        start, loop, next_state = 0, 1, 3
        sil = (2, math.log(1.0 - sil_prob), math.log(sil_prob))
        arcs.append((start, loop, 0, 0, sil[1]))
        arcs.append((start, sil[0], 0, 0, sil[2]))
        arcs.append((sil[0], loop, token_table.get(sil_token), 0, 0.0))
    for entry, (word, tokens) in enumerate(lexicon, start=1):
        word_id, ids = _entry_ids(entry, word, tokens, token_table, word_table)
        next_state = _add_chain(arcs, loop, next_state, word_id, ids, sil)

    if disambig_self_loops:
        if "#0" not in token_table or "#0" not in word_table:
            raise ValueError("disambig_self_loops needs '#0' in both tokens.txt and words.txt")
        # Words leave from the loop state only; it is also the one final state.
        arcs.append((loop, loop, token_table.get("#0"), word_table.get("#0"), 0.0))

    final = next_state
    arcs.append((loop, final, -1, -1, 0.0))
    return _fsa_of_arcs(arcs)


def _add_chain(arcs: list[tuple[int, int, int, int, float]], loop: int, next_state: int,
               word_id: int, ids: list[int], sil: tuple[int, float, float] | None) -> int:
    """Append one pronunciation's chain of arcs from the loop state back to it (and to the
    silence state ``sil[0]``); return the next free state."""
    src = loop
    for i, tok in enumerate(ids[:-1]):
        arcs.append((src, next_state, tok, word_id if i == 0 else 0, 0.0))
        src = next_state
        next_state += 1
    last_word = word_id if len(ids) == 1 else 0
    if sil is None:
        arcs.append((src, loop, ids[-1], last_word, 0.0))
    else:
        arcs.append((src, loop, ids[-1], last_word, sil[1]))
        arcs.append((src, sil[0], ids[-1], last_word, sil[2]))
    return next_state


def _entry_ids(entry: int, word: str, tokens: list[str], token_table: k2.SymbolTable,
               word_table: k2.SymbolTable) -> tuple[int, list[int]]:
    """The word id and token ids of lexicon entry number ``entry``, checked."""
    if not tokens:
        raise ValueError(f"lexicon entry {entry} ({word!r}) has an empty pronunciation")
    if word not in word_table:
        raise ValueError(f"lexicon entry {entry}: word {word!r} is not in words.txt")
    ids = []
    for t in tokens:
        if t not in token_table:
            raise ValueError(f"lexicon entry {entry} ({word!r}): token {t!r} not in tokens.txt")
        ids.append(token_table.get(t))
    return word_table.get(word), ids


def _fsa_of_arcs(arcs: list[tuple[int, int, int, int, float]]) -> k2.Fsa:
    """A k2.Fsa of ``(src, dst, label, aux_label, score)`` arcs (sorted by source state)."""
    arcs.sort(key=lambda a: a[0])
    src_dst_lab = torch.tensor([[a[0], a[1], a[2]] for a in arcs], dtype=torch.int32)
    scores = torch.tensor([a[4] for a in arcs], dtype=torch.float32)
    arcs_t = torch.cat([src_dst_lab, scores.view(-1, 1).view(torch.int32)], dim=1)
    return k2.Fsa(arcs_t, aux_labels=torch.tensor([a[3] for a in arcs], dtype=torch.int32))
