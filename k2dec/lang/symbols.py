"""Symbol tables (``tokens.txt``, ``words.txt``) as :class:`k2.SymbolTable`, validated."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path

import k2

from ..primitives.files import text_lines

__all__ = [
    "read_symbol_table",
    "write_symbol_table",
    "make_symbol_table",
    "symbol_table_digest",
    "token_inventory_digest",
    "disambig_ids",
    "check_vocab_size",
]


def read_symbol_table(path: str | Path) -> k2.SymbolTable:
    """Read a ``symbol id`` file (one pair per line) into a :class:`k2.SymbolTable`.

    Raises:
      ValueError: naming the file and line for a malformed line, a non-integer or
        negative id, a duplicate symbol or a duplicate id.
    """
    path = Path(path)
    sym2id: dict[str, int] = {}
    id2sym: dict[int, str] = {}
    for lineno, line in text_lines(path, "symbol table"):
        fields = line.split()
        if not fields:
            continue
        where = f"{path}:{lineno}"
        if len(fields) != 2:
            raise ValueError(f"{where}: expected 'symbol id', got {line.rstrip()!r}")
        sym, id_str = fields
        try:
            idx = int(id_str)
        except ValueError:
            raise ValueError(f"{where}: id {id_str!r} is not an integer") from None
        if idx < 0:
            raise ValueError(f"{where}: id {idx} is negative")
        if idx >= 2**31:
            raise ValueError(f"{where}: id {idx} does not fit k2's int32 labels")
        if sym in sym2id:
            raise ValueError(
                f"{where}: duplicate symbol {sym!r} (first given id {sym2id[sym]})"
            )
        if idx in id2sym:
            raise ValueError(f"{where}: duplicate id {idx} (already used by {id2sym[idx]!r})")
        sym2id[sym] = idx
        id2sym[idx] = sym
    if not sym2id:
        raise ValueError(f"symbol table {path} is empty")
    return make_symbol_table((s, i) for s, i in sym2id.items())


def make_symbol_table(pairs: Iterable[tuple[str, int]]) -> k2.SymbolTable:
    """Build a :class:`k2.SymbolTable` from ``(symbol, id)`` pairs (validated for duplicates)."""
    text = []
    seen_sym: set[str] = set()
    seen_id: set[int] = set()
    for sym, idx in pairs:
        if sym in seen_sym or idx in seen_id:
            raise ValueError(f"duplicate symbol or id: {sym!r} {idx}")
        if not sym or any(c.isspace() for c in sym):
            raise ValueError(f"symbol {sym!r} is empty or contains whitespace")
        seen_sym.add(sym)
        seen_id.add(idx)
        text.append(f"{sym} {idx}")
    return k2.SymbolTable.from_str("\n".join(text))


def write_symbol_table(table: k2.SymbolTable, path: str | Path) -> None:
    """Write ``table`` as ``symbol id`` lines sorted by id."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for idx in sorted(table.ids):
            f.write(f"{table.get(idx)} {idx}\n")


def symbol_table_digest(table: k2.SymbolTable) -> str:
    """SHA-256 of the table's ``symbol id`` lines, sorted by id (for graph metadata)."""
    return _lines_digest(table, sorted(table.ids))


def token_inventory_digest(table: k2.SymbolTable, vocab_size: int) -> str | None:
    """SHA-256 of what output ids ``0 .. vocab_size - 1`` mean: the ``symbol id`` lines of
    those ids (disambiguation symbols above them left out), so a tokens.txt and the BPE model
    it was made from (:func:`~k2dec.lang.bpe_token_table`) agree; ``None`` when the table
    lacks one of those ids. Stored in LM checkpoints: an LM trained on another BPE model of
    the same size is refused (its ids mean other pieces)."""
    if any(idx not in table for idx in range(vocab_size)):
        return None
    return _lines_digest(table, range(vocab_size))


def _lines_digest(table: k2.SymbolTable, ids) -> str:
    h = hashlib.sha256()
    for idx in ids:
        h.update(f"{table.get(idx)} {idx}\n".encode())
    return h.hexdigest()


def disambig_ids(table: k2.SymbolTable) -> list[int]:
    """Ids of the disambiguation symbols ``#0``, ``#1``, ... present in ``table``, sorted."""
    return sorted(
        table.get(s) for s in table.symbols if s.startswith("#") and s[1:].isdigit()
    )


def check_vocab_size(table: k2.SymbolTable, vocab_size: int, source: str | Path) -> None:
    """Check that a ``tokens.txt`` has exactly the model's ``vocab_size`` tokens (ids ``0 ..
    vocab_size - 1`` besides the disambiguation symbols ``#N``): a graph built from another
    token inventory decodes garbage without any error (a 12-token phone lang with a
    256-token model: 93.75% WER).

    Raises:
      ValueError: naming ``source`` and both sizes.
    """
    dis = set(disambig_ids(table))
    largest = max((i for i in table.ids if i not in dis), default=-1)
    if largest + 1 != vocab_size:
        raise ValueError(
            f"{source} has {largest + 1} tokens (ids 0..{largest}) but the model has "
            f"{vocab_size} outputs: the lang dir and its graphs were built for another "
            "vocabulary than the model's")
