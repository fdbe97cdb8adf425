"""Lang-dir level graph building: what ``k2dec prepare-lang`` and ``k2dec compile-graph`` do.

Graphs are written next to the text files of the lang dir (icefall layout), each
with metadata tying it to that lang dir's ``tokens.txt`` / ``words.txt``.
"""

from __future__ import annotations

import enum
import logging
from pathlib import Path

import k2

from ..lang.langdir import LangDir
from ..lang.lexicon import lexicon_words
from .check import GraphCheck, check_graph_words
from .compile import compile_HL, compile_HLG, compile_LG
from .io import graph_metadata, load_graph, save_graph
from .lexicon_fst import build_L
from .ngram import build_G, build_rescoring_G
from .topo import build_ctc_topo

__all__ = [
    "GraphType",
    "write_lexicon_graphs",
    "compile_graph",
    "check_lang_graph",
    "prepare_decoding_graphs",
]

logger = logging.getLogger(__name__)


class GraphType(str, enum.Enum):
    """Graphs ``compile_graph`` can build (the file is ``<name>.pt`` in the lang dir)."""

    H = "H"
    L = "L"
    HL = "HL"
    HLG = "HLG"
    LG = "LG"


def write_lexicon_graphs(
    lang_dir: str | Path, sil_token: str | None = None, sil_prob: float = 0.5
) -> tuple[Path, Path]:
    """Build and save ``L.pt`` and ``L_disambig.pt`` for a lang dir written by
    :func:`k2dec.lang.write_lang_dir`. Returns their paths."""
    ld = LangDir(Path(lang_dir))
    L = build_L(ld.lexicon, ld.token_table, ld.word_table, sil_token, sil_prob)
    L_disambig = build_L(
        ld.lexicon_disambig,
        ld.token_table,
        ld.word_table,
        sil_token,
        sil_prob,
        disambig_self_loops=True,
    )
    paths = (ld.path / "L.pt", ld.path / "L_disambig.pt")
    meta = dict(sil_token=sil_token, sil_prob=sil_prob if sil_token else None)
    for kind, fsa, path in (("L", L, paths[0]), ("L_disambig", L_disambig, paths[1])):
        save_graph(fsa, path, graph_metadata(kind, ld.token_table, ld.word_table, **meta))
    return paths


def compile_graph(
    lang_dir: str | Path,
    graph_type: GraphType | str,
    arpa: str | Path | None = None,
    max_order: int = -1,
    modified_ctc: bool = False,
    out: str | Path | None = None,
) -> tuple[k2.Fsa, Path]:
    """Compile one graph for a lang dir and save it (default ``<lang_dir>/<type>.pt``).

    ``HLG`` and ``LG`` need ``arpa``; ``LG`` is determinized with log weight pushing
    (for transducer ``fast_beam_search``). ``L.pt``/``L_disambig.pt`` are built
    first when missing (without optional silence). Logs a warning naming the lexicon
    words that no arc of the graph outputs (see :func:`check_lang_graph`).
    """
    graph_type = GraphType(graph_type)
    ld = LangDir(Path(lang_dir))
    if graph_type in (GraphType.HLG, GraphType.LG) and arpa is None:
        raise ValueError(f"{graph_type.value} needs an ARPA language model (arpa=...)")
    if not (ld.path / "L_disambig.pt").is_file():
        write_lexicon_graphs(ld.path)

    def load(name: str) -> k2.Fsa:
        return load_graph(ld.path / f"{name}.pt", ld.token_table, ld.word_table)

    H = build_ctc_topo(ld.max_token_id, modified=modified_ctc)
    extra: dict = {}
    if graph_type is GraphType.H:
        graph = H
        extra["modified"] = modified_ctc
    elif graph_type is GraphType.L:
        graph = load("L")
    elif graph_type is GraphType.HL:
        graph = compile_HL(H, load("L"))
        extra["modified"] = modified_ctc
    else:
        G = build_G(arpa, ld.word_table, max_order)
        extra.update(arpa=str(arpa), max_order=max_order)
        if graph_type is GraphType.LG:
            graph = compile_LG(
                load("L_disambig"), G, ld.first_token_disambig_id, ld.first_word_disambig_id,
                log_weight_pushing=True,
            )
        else:
            graph = compile_HLG(
                H, load("L_disambig"), G, ld.first_token_disambig_id, ld.first_word_disambig_id
            )
            extra["modified"] = modified_ctc
    path = Path(out) if out is not None else ld.path / f"{graph_type.value}.pt"
    save_graph(graph, path, graph_metadata(graph_type.value, ld.token_table, ld.word_table,
                                           **extra))
    logger.info("wrote %s (%d arcs)", path, graph.num_arcs)
    check = check_lang_graph(graph, graph_type, ld.path)
    if check.missing_words:
        logger.warning("%s: %s", path, check.describe())
    return graph, path


def check_lang_graph(
    graph: k2.Fsa, graph_type: GraphType | str, lang_dir: str | Path
) -> GraphCheck:
    """Size of a graph of ``lang_dir`` and, for graphs with words (all but ``H``), the
    lexicon words that no arc outputs (:func:`k2dec.graph.check_graph_words`)."""
    ld = LangDir(Path(lang_dir))
    words = [] if GraphType(graph_type) is GraphType.H else lexicon_words(ld.lexicon)
    return check_graph_words(graph, ld.word_table, words)


def prepare_decoding_graphs(
    lang_dir: str | Path, arpa: str | Path, rescoring_arpa: str | Path | None = None
) -> dict[str, Path]:
    """Everything the decoding methods look for in a lang dir: ``HLG.pt`` and ``LG.pt`` from
    ``arpa`` (e.g. a 3-gram) and, with ``rescoring_arpa`` (e.g. a 4-gram), ``G_4_gram.pt``
    prepared for lattice and n-best rescoring. Files that exist are kept.

    Returns:
      ``{"HLG": path, "LG": path[, "G": path]}``.
    """
    ld = LangDir(Path(lang_dir))
    out: dict[str, Path] = {}
    for kind in ("HLG", "LG"):
        path = ld.path / f"{kind}.pt"
        if not path.is_file():
            compile_graph(ld.path, kind, arpa=arpa)
        out[kind] = path
    if rescoring_arpa is not None:
        path = ld.path / "G_4_gram.pt"
        if not path.is_file():
            G = build_rescoring_G(rescoring_arpa, ld.word_table)
            save_graph(G, path, graph_metadata("G_4_gram", ld.token_table, ld.word_table,
                                               arpa=str(rescoring_arpa)))
        out["G"] = path
    return out
