"""The recipe's scripts, loaded as modules (they are files, not a package)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def recipe(name: str):
    """The click command (``main``) of ``recipes/librispeech/{name}.py``."""
    path = ROOT / "recipes" / "librispeech" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"recipe_{name}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module.main
