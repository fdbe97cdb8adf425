"""The tiny lang dir of :mod:`k2dec.testing.lang` as a fixture for the graph tests."""

from __future__ import annotations

import pytest

from k2dec.testing.lang import write_tiny_lang


@pytest.fixture
def tiny_lang(tmp_path):
    """(LangDir, arpa path) for TINY_LEXICON / TINY_ARPA."""
    return write_tiny_lang(tmp_path)
