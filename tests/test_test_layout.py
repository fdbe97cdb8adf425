"""The test tree's own layout: a test module never imports another test module. What several
test modules share lives in a ``conftest.py`` (fixtures) or a helper module that is not a
``test_*`` file (plain functions and data)."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def _imported_modules(source: str, package: list[str]) -> list[tuple[int, str]]:
    """``(line, module)`` of every import in ``source`` (a module of ``package``, e.g.
    ``["tests", "job"]``), relative imports resolved; ``from pkg import test_x`` is listed as
    ``pkg.test_x``."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            out.append((node.lineno, module))
            out += [(node.lineno, f"{module}.{a.name}") for a in node.names
                    if a.name.startswith("test_")]
    return out


def _is_test_module(module: str) -> bool:
    return module.split(".")[0] == "tests" and any(
        part.startswith("test_") for part in module.split(".")[1:])


def test_the_finder_sees_every_import_form():
    """Absolute, relative, ``from package import module`` and imports inside functions."""
    source = ("from .test_a import x\nfrom tests.b import test_c, helper\n"
              "from . import conftest\nimport tests.reference.ngram\n"
              "def f():\n    import tests.d.test_e\n")
    found = [(line, m) for line, m in _imported_modules(source, ["tests", "job"])
             if _is_test_module(m)]
    assert found == [(1, "tests.job.test_a"), (2, "tests.b.test_c"), (6, "tests.d.test_e")]


def test_no_test_module_imports_another_test_module():
    bad = []
    for path in sorted(TESTS.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        package = list(path.relative_to(TESTS.parent).parts[:-1])
        bad += [f"{path.relative_to(TESTS.parent)}:{line} imports {module}"
                for line, module in _imported_modules(path.read_text(), package)
                if _is_test_module(module)]
    assert not bad, "\n".join(bad)
