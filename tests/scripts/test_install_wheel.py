"""``scripts/install_wheel_for_python.py``: the k2 build is chosen by the Python its file
name names, never by the order an index lists files in (pip reads ``py3.10`` as ``py3``)."""

from __future__ import annotations

import sys

import pytest

from tests.scripts.loader import load_script

iw = load_script("install_wheel_for_python")

# k2 1.23.4's files on PyPI (py3.7 ... py3.11), plus one for this Python if it is newer
K2_FILES = [f"k2-1.23.4-py3.{m}-none-any.whl"
            for m in sorted({7, 8, 9, 10, 11, sys.version_info[1]})]
HERE = f"{sys.version_info[0]}.{sys.version_info[1]}"


def test_python_tag_field_is_not_split_at_the_version_dot():
    assert iw.wheel_python_tags("k2-1.23.4-py3.10-none-any.whl") == {"py3.10"}
    assert iw.wheel_python_tags("k2-1.23.4-py3.9-none-any.whl") == {"py3.9"}
    # a real compressed tag set is still split
    assert iw.wheel_python_tags("x-1.0-cp310.cp311-abi3-linux_x86_64.whl") == {"cp310", "cp311"}
    assert iw.wheel_python_tags("x-1.0-1build-cp310-cp310-linux_x86_64.whl") == {"cp310"}
    assert iw.wheel_python_tags("not-a-wheel.whl") == set()


@pytest.mark.parametrize("order", ["as_listed", "reversed"])
def test_choose_picks_the_build_for_this_python_whatever_the_index_order(order):
    files = K2_FILES if order == "as_listed" else K2_FILES[::-1]
    cands = [(f, f"https://index.invalid/{f}#sha256=00") for f in files]
    name, url = iw.choose("k2==1.23.4", cands)
    assert name == f"k2-1.23.4-py{HERE}-none-any.whl"
    assert url.endswith(f"{name}#sha256=00")


def test_choose_explains_when_no_build_matches(capsys):
    cands = [(f, f) for f in ("k2-1.23.4-py2.7-none-any.whl", "k2-1.23.4-py1.0-none-any.whl")]
    with pytest.raises(SystemExit):
        iw.choose("k2==1.23.4", cands)
    err = capsys.readouterr().err
    assert f"built for Python {HERE}" in err and "k2-1.23.4-py2.7-none-any.whl" in err


def test_choose_explains_an_empty_candidate_list(capsys):
    with pytest.raises(SystemExit):
        iw.choose("k2==1.23.4", [])
    assert "no wheel of k2==1.23.4" in capsys.readouterr().err


def test_installed_k2_is_the_build_for_this_python():
    import _k2

    assert f"cpython-{sys.version_info[0]}{sys.version_info[1]}" in _k2.__file__
