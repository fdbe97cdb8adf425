"""Imports run one way (the package layout of the design): read from the source, so that a new
upward import fails here rather than as an import cycle somewhere later."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "k2dec"


def _imports(path: Path) -> list[tuple[str, tuple[str, ...], ast.stmt]]:
    """``(absolute module, imported names, node)`` of every import in ``path`` (relative
    imports resolved against its package)."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    package = parts if parts[-1] == "__init__" else parts[:-1]
    package = package[:-1] if package[-1] == "__init__" else package
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [(a.name, (), node) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            out.append((module, tuple(a.name for a in node.names), node))
    return out


def _sources(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.py") if "__pycache__" not in p.parts)


def test_the_model_layer_does_not_import_the_methods():
    bad = [f"{p.relative_to(ROOT)}:{node.lineno} imports {module}"
           for p in _sources(PACKAGE / "model") for module, _, node in _imports(p)
           if module.startswith("k2dec.methods")]
    assert not bad, bad


def test_the_registry_imports_no_method_module():
    """The methods package imports each method module once (registering its methods);
    the registry never imports them (no cycle)."""
    path = PACKAGE / "methods" / "registry.py"
    own = {p.stem for p in (PACKAGE / "methods").glob("*.py")} - {"__init__", "registry"}
    bad = [(module, names) for module, names, _ in _imports(path)
           if module == "k2dec.methods" and set(names) & own
           or module.removeprefix("k2dec.methods.") in own]
    assert not bad, bad


def test_every_method_module_is_imported_by_the_package():
    from k2dec.methods import list_methods

    modules = {m.run.__module__ for m in list_methods()}
    init = (PACKAGE / "methods" / "__init__.py").read_text()
    for module in modules:
        assert module.rsplit(".", 1)[1] in init, module


@pytest.mark.parametrize("folder", ["methods", "scorers", "nbest", "lattice", "job", "model",
                                    "lang", "recognizer", "graph", "results", "aed", "lm",
                                    "icefall"])
def test_no_private_name_is_imported_from_a_sibling_module(folder):
    """What modules share is public (imported by its public name), in one place."""
    bad = [f"{p.relative_to(ROOT)}:{node.lineno} imports {names} from {module}"
           for p in _sources(PACKAGE / folder) for module, names, node in _imports(p)
           if module.startswith("k2dec")
           and any(n.startswith("_") and not n.startswith("__") for n in names)]
    assert not bad, bad


def test_nothing_outside_tests_imports_tests():
    """The benchmarks and recipes run without the test tree (tests/reference is the tests')."""
    bad = [f"{p.relative_to(ROOT)}:{node.lineno} imports {module}"
           for folder in ("k2dec", "scripts", "recipes") for p in _sources(ROOT / folder)
           for module, _, node in _imports(p) if module.split(".")[0] == "tests"]
    assert not bad, bad


def test_the_icefall_drop_in_sits_above_the_methods():
    """``k2dec.icefall`` is built on the searches and methods: nothing else in ``k2dec``
    imports it, and it imports none of the layers that run jobs (job, CLI, Recognizer)."""
    above = ("k2dec.job", "k2dec.cli", "k2dec.recognizer", "k2dec.demo", "k2dec.testing")
    bad = [f"{p.relative_to(ROOT)}:{node.lineno} imports {module}"
           for p in _sources(PACKAGE) for module, _, node in _imports(p)
           if module.startswith("k2dec.icefall") and "icefall" not in p.relative_to(PACKAGE).parts]
    bad += [f"{p.relative_to(ROOT)}:{node.lineno} imports {module}"
            for p in _sources(PACKAGE / "icefall") for module, _, node in _imports(p)
            if module.startswith(above)]
    assert not bad, bad
    assert any(module.startswith("k2dec.methods")
               for p in _sources(PACKAGE / "icefall") for module, _, _ in _imports(p))
