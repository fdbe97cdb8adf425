"""Imports run one way (the package layout of the design): read from the source, so that a new
upward import fails here rather than as an import cycle somewhere later."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "k2dec"


def _imports(path: Path, tree: ast.AST | None = None
             ) -> list[tuple[str, tuple[str, ...], ast.stmt]]:
    """``(absolute module, imported names, node)`` of every import in ``path`` (relative
    imports resolved against its package; ``tree``: its parsed source, if at hand)."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    package = parts if parts[-1] == "__init__" else parts[:-1]
    package = package[:-1] if package[-1] == "__init__" else package
    out = []
    for node in ast.walk(tree or ast.parse(path.read_text())):
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
def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


def _type_checking_block(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _k2dec_imports(path: Path, modules: set[str]) -> list[tuple[str, int, bool]]:
    """``(imported k2dec module, line, in a function)`` of every import of a k2dec module in
    ``path`` that runs (those under ``if TYPE_CHECKING:`` do not); ``from a import b`` imports
    ``a`` and, when it is a module, ``a.b``."""
    tree = ast.parse(path.read_text())
    imports = {id(node): (module, names) for module, names, node in _imports(path, tree)}
    out: list[tuple[str, int, bool]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if _type_checking_block(child):
                continue
            if id(child) in imports:
                module, names = imports[id(child)]
                targets = [module] if isinstance(child, ast.ImportFrom) else []
                targets += [f"{module}.{n}" for n in names] or [module]
                out.extend((t, child.lineno, in_function) for t in targets if t in modules)
            visit(child, in_function or isinstance(child, FUNCTIONS))

    visit(tree, False)
    return out


@functools.cache
def _import_graph() -> tuple[dict[str, set[str]], list[tuple[str, int, str]]]:
    """The module-level import graph of k2dec (module -> the k2dec modules it imports when it
    is imported) and the function-level imports ``(importer, line, imported)``, which are not
    edges: they run when the function does."""
    paths = {_module_name(p): p for p in _sources(PACKAGE)}
    graph: dict[str, set[str]] = {m: set() for m in paths}
    deferred = []
    for module, path in paths.items():
        for target, line, in_function in _k2dec_imports(path, set(paths)):
            if in_function:
                deferred.append((module, line, target))
            elif target != module:
                graph[module].add(target)
    return graph, deferred


def _reaches(graph: dict[str, set[str]], start: str, goal: str) -> list[str] | None:
    """A path of imports from ``start`` to ``goal``, or None."""
    paths = {start: [start]}
    todo = [start]
    while todo:
        module = todo.pop()
        if module == goal:
            return paths[module]
        for nxt in sorted(graph[module] - set(paths)):
            paths[nxt] = paths[module] + [nxt]
            todo.append(nxt)
    return None


def test_no_module_level_import_cycle():
    """No k2dec module imports, at module level, one that imports it back (directly or through
    others): each import runs one way, and a module's names exist when the next one reads
    them."""
    graph, _ = _import_graph()
    cycles = [path for module in sorted(graph) for target in sorted(graph[module])
              if (path := _reaches(graph, target, module))]
    assert not cycles, [" -> ".join(path + [path[0]]) for path in cycles]


#: The modules that may import k2dec modules inside functions, and why. Anywhere else an
#: import of k2dec belongs at the top of the module (where the graph above sees it).
FUNCTION_LEVEL_IMPORTS = {
    "k2dec": "k2dec.__getattr__ imports the Recognizer on first use: `import k2dec` stays "
             "light (no torch, k2, lhotse)",
    "k2dec.cli": "each command imports what it runs: `k2dec --help` loads no torch / k2",
    "k2dec.demo": "an entry point like the CLI: the synthetic fallback (no shipped model) "
                  "imports only the lattice search, the shipped-model demo the job",
    "k2dec.model.loader": "a model file loads only its backend's module (onnxruntime, an "
                          "optional dependency, only for ONNX exports)",
    "k2dec.job.settings": "in a module split by issue 35's settings redesign",
    "k2dec.methods.registry": "in a module split by issue 35 (registry / resources / parser)",
}

#: Function-level imports that would close an import cycle if they ran at module level:
#: (importer, imported) -> why the cycle is broken this way.
HIDDEN_CYCLES = {
    ("k2dec", "k2dec.recognizer"): "the Recognizer's job layer reads k2dec.__version__; the "
                                   "package imports the Recognizer lazily (see above)",
}


def test_function_level_imports_only_where_named():
    _, deferred = _import_graph()
    bad = [f"{module}:{line} imports {target} inside a function"
           for module, line, target in deferred if module not in FUNCTION_LEVEL_IMPORTS]
    assert not bad, bad


def test_function_level_imports_hide_no_other_cycle():
    """A function-level import that the module-level graph leads back from is an import cycle
    made invisible; only the named ones are allowed."""
    graph, deferred = _import_graph()
    hidden = {(module, target): _reaches(graph, target, module)
              for module, _, target in deferred if target != module}
    bad = [" -> ".join([module] + path) for (module, target), path in sorted(hidden.items())
           if path and (module, target) not in HIDDEN_CYCLES]
    assert not bad, bad
    assert all(hidden.get(pair) for pair in HIDDEN_CYCLES), "a named cycle is gone: unname it"


#: The top-level modules of k2dec: the package's public entry points.
ENTRY_POINTS = {
    "__init__": "`import k2dec`: the version and the one-object API, k2dec.Recognizer",
    "cli": "the `k2dec` command (pyproject's console script)",
    "demo": "`k2dec demo` / `make demo`: the main job, a user entry point of its own",
}

def test_no_top_level_module_but_the_entry_points():
    """Everything else lives in a subpackage named for what it holds (the ground floor, the
    helpers the searches share, in k2dec.primitives)."""
    top = {p.stem for p in PACKAGE.glob("*.py")}
    assert top <= set(ENTRY_POINTS), sorted(top - set(ENTRY_POINTS))
    assert set(ENTRY_POINTS) <= top


def test_the_ground_floor_imports_nothing_above_it():
    """k2dec.primitives sits below every other package: it imports only itself."""
    graph, deferred = _import_graph()
    floor = {m for m in graph if m.startswith("k2dec.primitives")}
    bad = sorted((m, t) for m in floor for t in graph[m] if not t.startswith("k2dec.primitives"))
    bad += sorted((m, t) for m, _, t in deferred if m in floor)
    assert not bad, bad
    assert floor >= {"k2dec.primitives.hypothesis", "k2dec.primitives.best_paths"}
