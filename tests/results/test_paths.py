"""Names as file-name components (injective, never leaving a folder) and writes that never
follow a symlink."""

from __future__ import annotations

import os
from urllib.parse import unquote

import pytest

from k2dec.results import UnusableDirError
from k2dec.results.paths import (
    NAME_MAX,
    check_component,
    job_folder,
    path_component,
    replace_text,
)

NAMES = ["test-clean", "..", ".", "...", "../../x", "/abs", "a\\b", "a\0b", "a b", "a\tb",
         "%2F", "a%b", "100%", "café", "日本語", "a\nb", "\udce9", "-", "x.y"]


@pytest.mark.parametrize("name", NAMES)
def test_a_component_is_one_plain_name_and_undone_by_unquote(name):
    out = path_component(name, "--test-set")
    assert "/" not in out and "\\" not in out and "\0" not in out
    assert out not in (".", "..") and not any(c.isspace() for c in out)
    assert unquote(out, errors="surrogateescape") == name
    check_component(out, "x")  # what it returns is accepted as it is


def test_components_are_injective():
    outs = [path_component(n, "name") for n in NAMES]
    assert len(set(outs)) == len(NAMES)


def test_plain_names_are_unchanged():
    for name in ("test-clean", "dev_other.v2", "greedy_search", "lm_scale_0.6"):
        assert path_component(name, "name") == name


def test_refusals_name_the_option_and_value():
    with pytest.raises(ValueError, match="--test-set 'xxx.*' is 300 bytes"):
        path_component("x" * 300, "--test-set")
    with pytest.raises(ValueError, match="is 101 bytes as a file name, over the 100"):
        path_component("y" * 101, "test_set", 100)
    assert path_component("é" * (NAME_MAX // 2), "n")  # 254 bytes
    with pytest.raises(ValueError, match="must not be empty"):
        path_component("", "--test-set")
    with pytest.raises(TypeError, match="method name must be a str, got int 3"):
        path_component(3, "method name")
    for bad in ("a/b", "..", "a b", "a\\b"):
        with pytest.raises(ValueError, match="cannot be part of a file name"):
            check_component(bad, "key")


def test_replace_text_replaces_a_symlink_instead_of_writing_through_it(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    folder = tmp_path / "out"
    folder.mkdir()
    link = folder / "recogs.txt"
    link.symlink_to(victim)
    replace_text(link, "new\n")
    assert victim.read_text() == "precious\n"
    assert not link.is_symlink() and link.read_text() == "new\n"
    assert sorted(os.listdir(folder)) == ["recogs.txt"]  # no temporary file left


def test_replace_text_into_a_folder_says_what_to_do(tmp_path):
    (tmp_path / "results.txt").mkdir()
    with pytest.raises(UnusableDirError, match="results.txt: it is a folder; move it away"):
        replace_text(tmp_path / "results.txt", "x")
    with pytest.raises(UnusableDirError, match="too long"):
        replace_text(tmp_path / ("n" * 300), "x")
    assert sorted(os.listdir(tmp_path)) == ["results.txt"]


def test_job_folder_refuses_a_symlink_or_a_file(tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(UnusableDirError, match="is a symlink.*remove it"):
        job_folder(tmp_path / "link")
    (tmp_path / "file").write_text("x")
    with pytest.raises(UnusableDirError, match="a file is in the way"):
        job_folder(tmp_path / "file")
    assert job_folder(tmp_path / "a" / "b").is_dir()


@pytest.mark.parametrize("name", ["a.srt", "a.vtt", "a.TextGrid", "a.supervisions.jsonl.gz"])
def test_library_writers_replace_a_planted_symlink(tmp_path, name):
    """The writers that hand a path to pysubs2 / praatio / lhotse write a temporary file and
    put it in place: a symlink planted at the output path is replaced, and the file it points
    to (outside the folder) keeps its bytes."""
    from k2dec.results import CtmWord
    from k2dec.results.alignments import write_alignments
    from k2dec.results.subtitles import write_subtitles
    from k2dec.results.textgrid import write_textgrid

    outside = tmp_path / "outside.txt"
    outside.write_text("keep me")
    out = tmp_path / "out"
    out.mkdir()
    (out / name).symlink_to(outside)
    words = [CtmWord("HELLO", 0.5, 0.4, 0.9), CtmWord("WORLD", 1.0, 0.3, 0.8)]
    if name.endswith((".srt", ".vtt")):
        write_subtitles(out / name, words)
    elif name.endswith(".TextGrid"):
        write_textgrid(out / name, words, 2.0)
    else:
        write_alignments(out / name, "a", words, 2.0)
    assert outside.read_text() == "keep me"
    assert not (out / name).is_symlink() and (out / name).stat().st_size > 0
    assert [p.name for p in out.iterdir()] == [name]  # no temporary file left
