"""Drawing small graphs to SVG/PNG/PDF through graphviz (``dot`` must be installed)."""

from __future__ import annotations

import shutil
from pathlib import Path

import k2

__all__ = ["GraphvizNotFound", "draw_graph"]


class GraphvizNotFound(RuntimeError):
    """graphviz's ``dot`` program, which renders the drawings, is not installed."""

    def __init__(self) -> None:
        super().__init__("drawing needs graphviz's 'dot' program, which is not installed "
                         "(Debian/Ubuntu: apt-get install graphviz; macOS: brew install "
                         "graphviz; conda: conda install graphviz)")


def draw_graph(
    fsa: k2.Fsa,
    path: str | Path,
    title: str = "",
    token_table: k2.SymbolTable | None = None,
    word_table: k2.SymbolTable | None = None,
    max_arcs: int = 2000,
) -> Path:
    """Render ``fsa`` with graphviz; the format comes from the suffix of ``path``.

    Labels are shown as symbols when tables are given. Graphs with more than
    ``max_arcs`` arcs are refused: nobody can read them.

    Raises:
      ValueError: another suffix than .svg/.png/.pdf, an FsaVec, more than ``max_arcs`` arcs.
      GraphvizNotFound: graphviz's ``dot`` is not on ``PATH``.
    """
    path = Path(path)
    fmt = path.suffix.lstrip(".").lower()
    if fmt not in ("svg", "png", "pdf"):
        raise ValueError(f"output must end in .svg, .png or .pdf, got {path.name!r}")
    if len(fsa.shape) != 2:
        raise ValueError("draw a single FSA, not an FsaVec (index it first: fsa[0])")
    if fsa.num_arcs > max_arcs:
        raise ValueError(f"graph has {fsa.num_arcs} arcs (> max_arcs={max_arcs}); too big to draw")
    if shutil.which("dot") is None:
        raise GraphvizNotFound()
    fsa = fsa.to("cpu")
    if token_table is not None:
        fsa.labels_sym = token_table
    if word_table is not None and hasattr(fsa, "aux_labels"):
        fsa.aux_labels_sym = word_table
    digraph = k2.to_dot(fsa, title=title)
    path.parent.mkdir(parents=True, exist_ok=True)
    digraph.format = fmt
    import graphviz

    try:
        out = digraph.render(filename=path.stem, directory=str(path.parent), cleanup=True)
    except graphviz.ExecutableNotFound:
        raise GraphvizNotFound() from None
    return Path(out)
