from __future__ import annotations

import pytest

from k2dec.lang import make_symbol_table, read_symbol_table, symbol_table_digest, write_symbol_table


def test_round_trip(tmp_path):
    table = make_symbol_table([("<eps>", 0), ("a", 1), ("b", 2), ("#0", 3)])
    write_symbol_table(table, tmp_path / "t.txt")
    assert (tmp_path / "t.txt").read_text() == "<eps> 0\na 1\nb 2\n#0 3\n"
    back = read_symbol_table(tmp_path / "t.txt")
    assert back.get("b") == 2 and back.get(3) == "#0"
    assert symbol_table_digest(back) == symbol_table_digest(table)


def test_digest_changes_with_content():
    a = make_symbol_table([("<eps>", 0), ("a", 1)])
    b = make_symbol_table([("<eps>", 0), ("b", 1)])
    assert symbol_table_digest(a) != symbol_table_digest(b)


@pytest.mark.parametrize(
    "text, message",
    [
        ("<eps> 0\na 1 extra\n", "t.txt:2: expected 'symbol id'"),
        ("<eps> 0\na\n", "t.txt:2: expected 'symbol id'"),
        ("<eps> 0\na one\n", "t.txt:2: id 'one' is not an integer"),
        ("<eps> 0\na -1\n", "t.txt:2: id -1 is negative"),
        ("<eps> 0\na 1\na 2\n", "t.txt:3: duplicate symbol 'a'"),
        ("<eps> 0\na 1\nb 1\n", "t.txt:3: duplicate id 1"),
        ("\n\n", "is empty"),
    ],
)
def test_malformed_tables_name_file_and_line(tmp_path, text, message):
    (tmp_path / "t.txt").write_text(text)
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        read_symbol_table(tmp_path / "t.txt")


def test_missing_file(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        read_symbol_table(tmp_path / "nope.txt")


def test_make_symbol_table_rejects_duplicates_and_spaces():
    with pytest.raises(ValueError, match="duplicate"):
        make_symbol_table([("a", 1), ("a", 2)])
    with pytest.raises(ValueError, match="whitespace"):
        make_symbol_table([("a b", 1)])
