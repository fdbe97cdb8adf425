"""The tiny HLG (:func:`k2dec.testing.lang.tiny_hlg`) as a module fixture for the n-best tests."""

import pytest

from k2dec.testing.lang import tiny_hlg as _tiny_hlg


@pytest.fixture(scope="module")
def tiny_hlg(tmp_path_factory):
    """``(LangDir, HLG, H)`` of the tiny lang."""
    return _tiny_hlg(tmp_path_factory.mktemp("nbest_lang"))
