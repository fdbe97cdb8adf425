"""k2dec.primitives.files: the one place gzip files are opened (text lines, plain copies, .gz
outputs)."""

from __future__ import annotations

import gzip

import pytest

from k2dec.primitives.files import copy_as, is_gzip, plain_file, text_lines


@pytest.mark.parametrize("name", ["lm.arpa.gz", "lm.arpa"])
def test_plain_file_decompresses_by_content_not_name(tmp_path, name):
    path = tmp_path / name
    with gzip.open(path, "wb") as f:
        f.write(b"\\data\\\n")
    with plain_file(path, "ARPA file") as plain:
        assert plain != path and not is_gzip(plain)
        assert plain.read_bytes() == b"\\data\\\n"
        kept = plain
    assert not kept.exists()  # the copy is removed on exit


def test_plain_file_gives_a_plain_file_itself(tmp_path):
    path = tmp_path / "lm.arpa.gz"  # named .gz, but plain text
    path.write_text("\\data\\\n")
    with plain_file(path, "ARPA file") as plain:
        assert plain == path


def test_plain_file_names_a_corrupt_gzip_file(tmp_path):
    path = tmp_path / "lm.arpa.gz"
    path.write_bytes(gzip.compress(b"x" * 1000)[:20])
    with pytest.raises(ValueError, match=r"lm.arpa.gz: cannot decompress ARPA file"):
        with plain_file(path, "ARPA file"):
            pass


@pytest.mark.parametrize("name, compressed", [("out.arpa.gz", True), ("out.arpa", False)])
def test_copy_as_compresses_by_the_name_and_reads_back(tmp_path, name, compressed):
    src = tmp_path / "src.txt"
    src.write_text("a\nb\n")
    dst = copy_as(src, tmp_path / name)
    assert dst == tmp_path / name and is_gzip(dst) is compressed
    assert not (tmp_path / f"{name}.partial").exists()
    assert [line for _, line in text_lines(dst, "text")] == ["a\n", "b\n"]
