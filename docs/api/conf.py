"""Sphinx configuration of k2dec's API reference (``make docs``; the test suite builds it with
warnings as errors: tests/test_docs.py)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import k2dec  # noqa: E402

project = "k2dec"
release = version = k2dec.__version__
extensions = ["sphinx.ext.autodoc", "sphinx.ext.napoleon", "sphinx.ext.viewcode"]
# Google-style sections (Args, Returns, Raises, Attributes) as the docstrings write them
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_ivar = True
autodoc_default_options = {"members": True, "show-inheritance": True}
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autoclass_content = "class"
html_theme = "alabaster"
html_static_path: list[str] = []
exclude_patterns = ["_build"]
