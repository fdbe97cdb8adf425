"""Saving and loading graphs with metadata that ties them to their symbol tables.

The file is ``torch.save(fsa.as_dict() | {"k2dec_meta": {...}})``: icefall's
``k2.Fsa.from_dict(torch.load(path))`` still loads it (the metadata becomes a
harmless non-tensor attribute), and :func:`load_graph` checks it.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import k2
import torch

from ..lang.symbols import symbol_table_digest

__all__ = ["save_graph", "load_graph", "graph_metadata"]

logger = logging.getLogger(__name__)

META_KEY = "k2dec_meta"


def graph_metadata(
    kind: str,
    token_table: k2.SymbolTable | None = None,
    word_table: k2.SymbolTable | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """Metadata stored beside a graph: its kind, table digests and library versions."""
    import k2.version

    meta: dict[str, Any] = {
        "kind": kind,
        "k2_version": k2.version.__version__,
        "torch_version": torch.__version__,
        "tokens_sha256": symbol_table_digest(token_table) if token_table is not None else None,
        "words_sha256": symbol_table_digest(word_table) if word_table is not None else None,
    }
    meta.update(extra)
    return meta


def save_graph(fsa: k2.Fsa, path: str | Path, meta: dict[str, Any]) -> None:
    """Save ``fsa`` (moved to CPU) with ``meta`` (see :func:`graph_metadata`)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    d = fsa.to("cpu").as_dict()
    d.pop(META_KEY, None)
    d[META_KEY] = dict(meta)
    tmp = path.with_suffix(path.suffix + ".tmp")
    torch.save(d, tmp)
    tmp.replace(path)


def load_graph(
    path: str | Path,
    token_table: k2.SymbolTable | None = None,
    word_table: k2.SymbolTable | None = None,
    device: torch.device | str = "cpu",
    kind: str | None = None,
) -> k2.Fsa:
    """Load a graph saved by :func:`save_graph` (or a plain icefall ``*.pt``).

    Args:
      token_table, word_table: when given and the file has k2dec metadata, their
        digests must match the ones the graph was built with.
      kind: when given, the stored kind (``"HLG"``, ``"LG"``, ...) must match.

    Raises:
      ValueError: missing/unreadable file, or a graph built for other tables.
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"graph file {path} does not exist")
    try:
        d = torch.load(path, map_location="cpu")
    except Exception as e:
        raise ValueError(f"{path}: not a torch-saved graph: {e}") from None
    if not isinstance(d, dict) or "arcs" not in d:
        raise ValueError(f"{path}: expected a dict with 'arcs' (k2.Fsa.as_dict())")
    meta = d.pop(META_KEY, None)
    if meta is None:
        logger.warning("%s has no k2dec metadata; symbol tables cannot be checked", path)
    else:
        if kind is not None and meta.get("kind") != kind:
            raise ValueError(f"{path} holds a {meta.get('kind')} graph, expected {kind}")
        for name, table in (("tokens", token_table), ("words", word_table)):
            stored = meta.get(f"{name}_sha256")
            if table is None or stored is None:
                continue
            if symbol_table_digest(table) != stored:
                raise ValueError(
                    f"{path} was built with a different {name}.txt than the one given "
                    f"(sha256 {stored[:12]}... vs {symbol_table_digest(table)[:12]}...): "
                    "rebuild the graph for this lang dir"
                )
    fsa = k2.Fsa.from_dict(d)
    if meta is not None:
        fsa.k2dec_meta = meta
    return fsa.to(torch.device(device))
