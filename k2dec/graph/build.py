"""Lang-dir level graph building: what ``k2dec prepare-lang`` and ``k2dec compile-graph`` do.

Graphs are written next to the text files of the lang dir (icefall layout), or into a
separate graph dir (so that a read-only lang dir, such as a shipped model's, works as it is),
each with metadata tying it to that lang dir's ``tokens.txt`` / ``words.txt``. ARPA files may
be gzipped (``.arpa.gz``).
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
from .minimize import minimize_graph
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
    """Graphs ``compile_graph`` can build (the file is :attr:`file_name`)."""

    H = "H"
    L = "L"
    HL = "HL"
    HLG = "HLG"
    LG = "LG"
    G = "G"
    """The rescoring G (icefall's ``G_4_gram.pt``) for n-best and whole-lattice rescoring."""

    @property
    def file_name(self) -> str:
        """``<name>.pt``; ``G_4_gram.pt`` for the rescoring G (the name decoding looks for,
        whatever the ARPA's order)."""
        return "G_4_gram.pt" if self is GraphType.G else f"{self.value}.pt"


def write_lexicon_graphs(
    lang_dir: str | Path, sil_token: str | None = None, sil_prob: float = 0.5,
    out_dir: str | Path | None = None,
) -> tuple[Path, Path]:
    """Build and save ``L.pt`` and ``L_disambig.pt`` for a lang dir written by
    :func:`k2dec.lang.write_lang_dir`, into ``out_dir`` (default: the lang dir). Returns their
    paths."""
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
    out = Path(out_dir) if out_dir is not None else ld.path
    out.mkdir(parents=True, exist_ok=True)
    paths = (out / "L.pt", out / "L_disambig.pt")
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
    graph_dir: str | Path | None = None,
    minimize: bool = False,
) -> tuple[k2.Fsa, Path]:
    """Compile one graph for a lang dir and save it (default
    ``<graph_dir>/<GraphType.file_name>``, ``graph_dir`` defaulting to the lang dir).

    ``HLG``, ``LG`` and ``G`` need ``arpa`` (plain or gzipped); ``LG`` is determinized with
    log weight pushing (for transducer ``fast_beam_search``); ``G`` is the rescoring G
    (:func:`~k2dec.graph.build_rescoring_G`). ``L.pt``/``L_disambig.pt`` are read from the
    graph dir, else the lang dir, and built into the graph dir when missing (without optional
    silence): the lang dir itself is only read when ``graph_dir`` is given. Logs a warning
    naming the lexicon words that no arc of the graph outputs (see :func:`check_lang_graph`).
    ``minimize`` (``HL``, ``HLG``, ``LG`` only) merges the graph's states that have the same
    future (:func:`~k2dec.graph.minimize_graph`: same paths, words and scores, fewer states);
    the metadata records it.
    """
    graph_type = GraphType(graph_type)
    ld = LangDir(Path(lang_dir))
    gdir = Path(graph_dir) if graph_dir is not None else ld.path
    if graph_type in (GraphType.HLG, GraphType.LG, GraphType.G) and arpa is None:
        raise ValueError(f"{graph_type.value} needs an ARPA language model (arpa=...)")

    if minimize and graph_type not in (GraphType.HL, GraphType.HLG, GraphType.LG):
        raise ValueError(f"minimize: only HL, HLG and LG graphs are minimized, not "
                         f"{graph_type.value}")
    graph, extra = _build_graph(graph_type, ld, gdir, arpa, max_order, modified_ctc)
    if minimize:
        graph = minimize_graph(graph)
        extra["minimized"] = True
    path = Path(out) if out is not None else gdir / graph_type.file_name
    path.parent.mkdir(parents=True, exist_ok=True)
    kind = "G_4_gram" if graph_type is GraphType.G else graph_type.value
    save_graph(graph, path, graph_metadata(kind, ld.token_table, ld.word_table, **extra))
    logger.info("wrote %s (%d arcs)", path, graph.num_arcs)
    check = check_lang_graph(graph, graph_type, ld.path)
    if check.missing_words:
        logger.warning("%s: %s", path, check.describe())
    return graph, path


def _lexicon_graph(ld: LangDir, gdir: Path, name: str) -> k2.Fsa:
    """``L`` or ``L_disambig`` from the graph dir, else the lang dir, built when missing."""
    path = next((d / f"{name}.pt" for d in (gdir, ld.path) if (d / f"{name}.pt").is_file()),
                None)
    if path is None:
        write_lexicon_graphs(ld.path, out_dir=gdir)
        path = gdir / f"{name}.pt"
    return load_graph(path, ld.token_table, ld.word_table)


def _build_graph(graph_type: GraphType, ld: LangDir, gdir: Path, arpa: str | Path | None,
                 max_order: int, modified_ctc: bool) -> tuple[k2.Fsa, dict]:
    """The graph of :func:`compile_graph` and the metadata its build adds."""
    H = build_ctc_topo(ld.max_token_id, modified=modified_ctc)
    extra: dict = {}
    if graph_type is GraphType.H:
        graph = H
        extra["modified"] = modified_ctc
    elif graph_type is GraphType.L:
        graph = _lexicon_graph(ld, gdir, "L")
    elif graph_type is GraphType.HL:
        graph = compile_HL(H, _lexicon_graph(ld, gdir, "L"))
        extra["modified"] = modified_ctc
    elif graph_type is GraphType.G:  # build_G reads a gzipped ARPA itself (errors name it)
        graph = build_rescoring_G(arpa, ld.word_table, max_order)
        extra.update(arpa=str(arpa), max_order=max_order)
    else:
        G = build_G(arpa, ld.word_table, max_order)
        extra.update(arpa=str(arpa), max_order=max_order)
        if graph_type is GraphType.LG:
            graph = compile_LG(
                _lexicon_graph(ld, gdir, "L_disambig"), G, ld.first_token_disambig_id,
                ld.first_word_disambig_id, log_weight_pushing=True,
            )
        else:
            graph = compile_HLG(
                H, _lexicon_graph(ld, gdir, "L_disambig"), G, ld.first_token_disambig_id,
                ld.first_word_disambig_id
            )
            extra["modified"] = modified_ctc
    return graph, extra


def check_lang_graph(
    graph: k2.Fsa, graph_type: GraphType | str, lang_dir: str | Path
) -> GraphCheck:
    """Size of a graph of ``lang_dir`` and, for graphs with words (all but ``H``; the labels
    of the rescoring G), the lexicon words that no arc outputs
    (:func:`k2dec.graph.check_graph_words`). Markup words (``<UNK>``, ``<SPOKEN_NOISE>``:
    ``<...>``) are left out: an n-gram LM trained on text has none of them, so a graph
    without them is as it should be, not news."""
    ld = LangDir(Path(lang_dir))
    words = [] if GraphType(graph_type) is GraphType.H else [
        w for w in lexicon_words(ld.lexicon) if not _is_markup_word(w)]
    if GraphType(graph_type) is GraphType.G and not hasattr(graph, "aux_labels"):
        graph = k2.Fsa(graph.arcs)  # an acceptor: its labels are the words
        graph.aux_labels = graph.labels.clone()
    return check_graph_words(graph, ld.word_table, words)


def _is_markup_word(word: str) -> bool:
    return len(word) > 2 and word.startswith("<") and word.endswith(">")


def prepare_decoding_graphs(
    lang_dir: str | Path, arpa: str | Path, rescoring_arpa: str | Path | None = None,
    graph_dir: str | Path | None = None,
) -> dict[str, Path]:
    """Everything the decoding methods look for: ``HLG.pt`` and ``LG.pt`` from ``arpa`` (e.g.
    a 3-gram) and, with ``rescoring_arpa`` (e.g. a 4-gram), ``G_4_gram.pt`` prepared for
    lattice and n-best rescoring, in ``graph_dir`` (default: the lang dir). ARPA files may be
    gzipped. Files that exist are kept.

    Returns:
      ``{"HLG": path, "LG": path[, "G": path]}``.
    """
    ld = LangDir(Path(lang_dir))
    gdir = Path(graph_dir) if graph_dir is not None else ld.path
    todo = {GraphType.HLG: arpa, GraphType.LG: arpa}
    if rescoring_arpa is not None:
        todo[GraphType.G] = rescoring_arpa
    out: dict[str, Path] = {}
    for kind, lm in todo.items():
        path = gdir / kind.file_name
        if not path.is_file():
            compile_graph(ld.path, kind, arpa=lm, graph_dir=gdir)
        out[kind.value] = path
    return out
