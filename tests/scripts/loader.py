"""Import a ``scripts/*.py`` file as a module (the scripts are run by path, not as a package;
the benchmarks are the package ``scripts.bench`` and import normally)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[2]


def load_script(name: str) -> ModuleType:
    """``scripts/<name>.py`` as module ``k2dec_<name>`` (registered in sys.modules, where
    dataclasses look their module up)."""
    path = REPO / "scripts" / f"{name}.py"
    if str(path.parent) not in sys.path:
        sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location(f"k2dec_{name}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
