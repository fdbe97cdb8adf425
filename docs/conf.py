"""Sphinx configuration of k2dec's user guide and API reference (``make docs``; the test suite
builds it with warnings as errors: tests/test_docs.py).

The guide's pages are Markdown (MyST); the API pages are reST with autodoc. The method tables
and pages are generated from the method registry at build time (``_ext/k2dec_docs.py``) and the
CLI reference from the click commands (sphinx-click), so neither can drift from the code.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE / "_ext"))

import k2dec  # noqa: E402

project = "k2dec"
copyright = "2026, the k2dec authors"  # noqa: A001 (Sphinx's name)
author = "the k2dec authors"
release = version = k2dec.__version__
extensions = ["myst_parser", "sphinx.ext.autodoc", "sphinx.ext.napoleon",
              "sphinx.ext.viewcode", "sphinx_click", "k2dec_docs"]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
# "--set" and "--lang-dir" in generated table text stay two hyphens (no en dashes)
smartquotes = False
# Google-style sections (Args, Returns, Raises, Attributes) as the docstrings write them
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_ivar = True
autodoc_default_options = {"members": True, "show-inheritance": True}
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autoclass_content = "class"
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence"]
html_theme = "alabaster"
html_static_path = ["_static"]
html_css_files = ["k2dec.css"]
html_theme_options = {"page_width": "1100px", "sidebar_width": "230px",
                      "show_powered_by": False}
html_show_sourcelink = False
html_title = f"k2dec {release}"
exclude_patterns = ["_build", "bench", "_ext"]
