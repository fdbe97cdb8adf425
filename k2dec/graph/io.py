"""Saving and loading graphs with metadata that ties them to their symbol tables.

The file is ``torch.save(fsa.as_dict() | {"k2dec_meta": {...}})``: icefall's
``k2.Fsa.from_dict(torch.load(path))`` still loads it (the metadata becomes a
harmless non-tensor attribute; torch >= 2.6 needs ``weights_only=False`` there, as for any
k2 graph with ragged aux labels), and :func:`load_graph` checks it.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import k2
import torch

from ..lang.symbols import check_vocab_size, disambig_ids, symbol_table_digest
from ..primitives.files import load_torch_file

__all__ = ["KIND_OF_FILE", "check_graph", "save_graph", "load_graph", "graph_metadata"]

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


#: What a graph file's name says it holds (icefall's lang-dir names): file stem -> kind.
KIND_OF_FILE = {"H": "H", "L": "L", "L_disambig": "L_disambig", "HL": "HL", "HLG": "HLG",
                "LG": "LG", "HCLG": "HCLG", "G_3_gram": "G_3_gram", "G_4_gram": "G_4_gram"}
#: Kinds whose ``labels`` are the network's token ids (they index the model's outputs).
TOKEN_LABEL_KINDS = ("H", "HL", "HLG", "LG")
#: Kinds that output words (``aux_labels``) from tokens.
WORD_OUTPUT_KINDS = ("L", "L_disambig", "HL", "HLG", "LG", "HCLG")


def load_graph(
    path: str | Path,
    token_table: k2.SymbolTable | None = None,
    word_table: k2.SymbolTable | None = None,
    device: torch.device | str = "cpu",
    kind: str | None = None,
    vocab_size: int | None = None,
) -> k2.Fsa:
    """Load a graph saved by :func:`save_graph` (or a plain icefall ``*.pt``) and check that it
    is the graph the caller expects.

    Args:
      token_table, word_table: when given and the file has k2dec metadata, their
        digests must match the ones the graph was built with; for a file without metadata
        (icefall's), the graph's labels / words must be ids of these tables.
      kind: the kind expected (``"HLG"``, ``"LG"``, ...); default: the kind the file name
        says (``HLG.pt`` -> ``"HLG"``, see :data:`KIND_OF_FILE`), none for other names. The
        stored kind must match; a file without metadata must look like it (HLG/HL/H: CTC
        blank arcs; LG: no epsilon input arcs, which ``fast_beam_search`` would take for
        blanks; G: an acceptor; word-output kinds: ``aux_labels``).
      vocab_size: the model's output dimension: for token-labelled kinds (H, HL, HLG, LG)
        every label must be below it, and ``token_table`` must have exactly this many
        tokens (a 12-token phone graph with a 256-token model decodes garbage).

    Raises:
      ValueError: missing/unreadable file, or a graph of another kind or built for other
        tables or another vocabulary, naming the file.
    """
    path = Path(path)
    d = load_torch_file(path, "graph file")
    if not isinstance(d, dict) or "arcs" not in d:
        raise ValueError(f"{path}: expected a dict with 'arcs' (k2.Fsa.as_dict()), got "
                         f"{type(d).__name__}")
    if kind is None:
        kind = KIND_OF_FILE.get(path.stem)
    meta = d.pop(META_KEY, None)
    _check_meta(path, meta, kind, token_table, word_table)
    _check_arcs_tensor(path, d["arcs"])
    try:
        fsa = k2.Fsa.from_dict(d)
    except (RuntimeError, ValueError, TypeError, AssertionError) as e:
        raise ValueError(f"{path}: not a valid k2 FSA: {str(e).strip()[:300]}") from None
    check_graph(fsa, path, kind, token_table, word_table, vocab_size)
    if meta is not None:
        fsa.k2dec_meta = meta
    return fsa.to(torch.device(device))


def _check_meta(path: Path, meta: Any, kind: str | None, token_table: k2.SymbolTable | None,
                word_table: k2.SymbolTable | None) -> None:
    """A graph file's k2dec metadata (if any) names ``kind`` and the given tables' digests."""
    if meta is not None and not isinstance(meta, dict):
        raise ValueError(f"{path}: its {META_KEY} is a {type(meta).__name__}, not a dict")
    if meta is None:
        logger.warning("%s has no k2dec metadata; symbol tables cannot be checked by digest",
                       path)
        return
    if kind is not None and meta.get("kind") != kind:
        raise ValueError(f"{path} holds a {meta.get('kind')} graph, expected {kind} "
                         f"(the file name or the caller says {kind})")
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


def _check_arcs_tensor(path: Path, arcs: Any) -> None:
    """A graph file's ``arcs`` is an int32 ``[num_arcs, 4]`` tensor."""
    if not isinstance(arcs, torch.Tensor) or arcs.dim() != 2 or arcs.shape[1] != 4 \
            or arcs.dtype != torch.int32:
        raise ValueError(f"{path}: 'arcs' must be an int32 tensor [num_arcs, 4], got "
                         f"{getattr(arcs, 'dtype', type(arcs).__name__)} "
                         f"{tuple(getattr(arcs, 'shape', ()))}")


def check_graph(
    fsa: k2.Fsa,
    source: str | Path,
    kind: str | None = None,
    token_table: k2.SymbolTable | None = None,
    word_table: k2.SymbolTable | None = None,
    vocab_size: int | None = None,
) -> None:
    """Structural checks of a decoding graph against what it should be (see
    :func:`load_graph`); ``source`` names it in messages.

    Raises:
      ValueError: labels or words out of range for the tables / vocabulary, or a structure
        that does not fit ``kind``.
    """
    if len(fsa.shape) != 2:
        raise ValueError(f"{source}: expected a single FSA, got an FsaVec of {fsa.shape[0]}")
    labels = fsa.labels
    if not bool(torch.isfinite(fsa.scores).any()) and fsa.num_arcs > 0:
        raise ValueError(f"{source}: no arc has a finite score")
    if bool(torch.isnan(fsa.scores).any()):
        raise ValueError(f"{source}: NaN scores")
    max_label = int(labels.max()) if fsa.num_arcs else -1
    has_aux = hasattr(fsa, "aux_labels")
    if kind in WORD_OUTPUT_KINDS and not has_aux:
        raise ValueError(f"{source}: a {kind} graph outputs words (aux_labels) but this one has "
                         "none (an acceptor: a G?)")
    if kind is not None and kind.startswith("G_") and has_aux:
        raise ValueError(f"{source}: a {kind} rescoring graph is an acceptor over words, but "
                         "this one has aux_labels (a decoding graph?)")
    if kind in ("H", "HL", "HLG") and fsa.num_arcs and not bool((labels == 0).any()):
        raise ValueError(f"{source}: a {kind} graph has CTC blank (label 0) arcs; this one has "
                         "none (an LG?)")
    if kind == "LG" and bool((labels == 0).any()):
        raise ValueError(f"{source}: an LG graph for fast_beam_search has no epsilon (label "
                         "0) arcs, which the search would take for blanks; this one has "
                         f"{int((labels == 0).sum())} (an HLG?)")
    if kind in TOKEN_LABEL_KINDS:
        if token_table is not None:
            dis = set(disambig_ids(token_table))
            known = max(i for i in token_table.ids if i not in dis)
            if max_label > known:
                raise ValueError(f"{source}: label {max_label} is not a token of tokens.txt "
                                 f"(largest non-disambiguation id {known})")
            if vocab_size is not None:
                check_vocab_size(token_table, vocab_size, f"the tokens.txt given for {source}")
        if vocab_size is not None and max_label >= vocab_size:
            raise ValueError(f"{source}: label {max_label} is not an output of the model "
                             f"(vocab size {vocab_size})")
    if word_table is not None and (has_aux or (kind or "").startswith("G_")):
        aux = fsa.aux_labels if has_aux else labels
        values = aux.values if isinstance(aux, k2.RaggedTensor) else aux
        max_word = int(values.max()) if values.numel() else 0
        if max_word > max(word_table.ids):
            raise ValueError(f"{source}: word id {max_word} is not in words.txt (largest id "
                             f"{max(word_table.ids)})")
