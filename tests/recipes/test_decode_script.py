"""The recipe's decode script lists the methods from the registry (its docstring points there
instead of listing them by hand)."""

from __future__ import annotations

from click.testing import CliRunner

from k2dec.methods import family_order, list_methods
from tests.recipes.scripts import recipe


def test_list_methods_is_the_registry():
    r = CliRunner().invoke(recipe("decode"), ["--list-methods"])  # no required option needed
    assert r.exit_code == 0, (r.output, r.exception)
    rows = [line.split()[0] for line in r.output.splitlines()[1:] if not line.startswith(" ")]
    assert rows == [m.name for m in family_order(list_methods())]
