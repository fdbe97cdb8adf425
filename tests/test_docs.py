"""The API reference (docs/api, Sphinx autodoc + napoleon) builds from the docstrings without a
single warning, and covers every public package."""

from __future__ import annotations

import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import k2dec

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "api"
#: Subpackages that are not decoding API: test factories.
NOT_API = {"testing"}


def test_every_public_package_has_its_page():
    """A new subpackage needs an ``.. automodule::`` in docs/api/*.rst."""
    documented = "\n".join(p.read_text() for p in DOCS.glob("*.rst"))
    packages = [m.name for m in pkgutil.iter_modules(k2dec.__path__) if m.ispkg]
    missing = [p for p in packages if p not in NOT_API
               and f".. automodule:: k2dec.{p}\n" not in documented]
    assert not missing, f"add '.. automodule:: k2dec.<name>' to a page of {DOCS} for {missing}"


def test_api_reference_builds_without_warnings(tmp_path):
    pytest.importorskip("sphinx", reason="Sphinx is in the dev extra (pip install -e .[dev])")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b",
                          "html", str(DOCS), str(tmp_path / "html")], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout + run.stderr
    page = (tmp_path / "html" / "recognizer.html").read_text()
    for name in ("k2dec.recognizer.Recognizer.from_files", "k2dec.recognizer.RecognizerStream",
                 "k2dec.recognizer.RecognitionResult"):
        assert f'id="{name}"' in page
    searches = (tmp_path / "html" / "searches.html").read_text()
    assert 'id="k2dec.lattice.get_lattice"' in searches
    assert 'id="k2dec.transducer.fast_beam_search"' in searches
