"""long-form knows nothing of the searches (the design's layering): none of its modules
imports a search, decoding-method, model, job or front-end module."""

from __future__ import annotations

import ast
from pathlib import Path

import k2dec.longform

FORBIDDEN = ("lattice", "transducer", "aed", "nbest", "lm", "scorers", "methods", "model",
             "job", "recognizer", "cli", "icefall", "graph", "lang", "batch_search")


def _imported(path: Path) -> list[tuple[int, str]]:
    """``(line, module)`` of every k2dec module ``path`` imports (relative ones resolved)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # k2dec/longform/x.py: level 1 is k2dec.longform, 2 is k2dec
                base = ["k2dec", "longform"][: 3 - node.level]
                out.append((node.lineno, ".".join(base + [node.module or ""])))
            else:
                out.append((node.lineno, node.module or ""))
    return [(line, m) for line, m in out if m.startswith("k2dec")]


def test_longform_imports_no_search_or_job():
    folder = Path(k2dec.longform.__file__).parent
    bad = [f"{p.name}:{line} {m}" for p in sorted(folder.glob("*.py"))
           for line, m in _imported(p) if (m.split(".") + [""])[1] in FORBIDDEN]
    assert not bad, bad
    assert any(m == "k2dec.results.ctm" for _, m in _imported(folder / "stitch.py"))
