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


def _deprecated_alias(path: Path, node: ast.stmt) -> bool:
    """The one allowed upward import: inside ``k2dec.model.interface.supported_methods``, the
    deprecated alias of ``k2dec.methods.supported_methods``."""
    return path.name == "interface.py" and any(
        isinstance(f, ast.FunctionDef) and f.name == "supported_methods"
        and f.lineno <= node.lineno <= (f.end_lineno or f.lineno)
        for f in ast.parse(path.read_text()).body)


def test_the_model_layer_does_not_import_the_methods():
    bad = [f"{p.relative_to(ROOT)}:{node.lineno} imports {module}"
           for p in _sources(PACKAGE / "model") for module, _, node in _imports(p)
           if module.startswith("k2dec.methods") and not _deprecated_alias(p, node)]
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


def _imports_training(module: str, names: tuple[str, ...]) -> bool:
    return module == "k2dec.train" or module.startswith("k2dec.train.") or (
        module == "k2dec" and "train" in names)


def _in_train_command(path: Path, node: ast.stmt) -> bool:
    """Inside the body of a CLI command whose name starts with ``train`` (``train-lm``)."""
    return path == PACKAGE / "cli.py" and any(
        isinstance(f, ast.FunctionDef) and f.name.startswith("train")
        and f.lineno <= node.lineno <= (f.end_lineno or f.lineno)
        for f in ast.parse(path.read_text()).body)


def test_only_training_imports_the_trainers():
    """``k2dec.train`` is imported by itself, the CLI's train commands (inside the command),
    the recipes and the scripts: nothing on the decode path."""
    bad = [f"{p.relative_to(ROOT)}:{node.lineno} imports {module} {names}"
           for p in _sources(PACKAGE) if "train" not in p.relative_to(PACKAGE).parts[:1]
           for module, names, node in _imports(p)
           if _imports_training(module, names) and not _in_train_command(p, node)]
    assert not bad, bad
    assert any(_imports_training(module, names) for module, names, _ in
               _imports(PACKAGE / "cli.py")), "the finder no longer sees the train-lm import"


def test_decoding_loads_no_training_module():
    """Importing the package and the decode path (methods, job, Recognizer, CLI) leaves every
    ``k2dec.train`` module unloaded; a training import then loads them (the check sees them)."""
    import subprocess
    import sys

    code = ("import sys, k2dec, k2dec.methods, k2dec.job, k2dec.recognizer, k2dec.model, "
            "k2dec.lm, k2dec.cli\n"
            "print(sorted(m for m in sys.modules if m.startswith('k2dec.train')))\n"
            "import k2dec.train\n"
            "print(sorted(m for m in sys.modules if m.startswith('k2dec.train')))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout.splitlines()
    assert out[0] == "[]", out[0]
    assert "'k2dec.train.lm_trainer'" in out[1], out[1]
