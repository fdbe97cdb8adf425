"""Fixtures shared with the n-best tests."""

from tests.nbest.conftest import tiny_hlg  # noqa: F401
