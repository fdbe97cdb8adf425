"""SRT and WebVTT written through pysubs2 and read back with it; lines cut at pauses, at the
maximum line length and the maximum duration."""

from __future__ import annotations

import pysubs2
import pytest

from k2dec.results import CtmWord, SubtitleConfig, subtitle_lines, write_subtitles

WORDS = [CtmWord("HELLO", 0.5, 0.4, 0.9), CtmWord("WORLD", 1.0, 0.5, 0.8),
         # a 2 s pause: a new line
         CtmWord("THE", 3.5, 0.2, 1.0), CtmWord("END", 3.8, 0.3, 0.7)]


def test_lines_are_cut_at_pauses():
    lines = subtitle_lines(list(reversed(WORDS)))  # any order
    assert [(ln.start, ln.end, ln.text) for ln in lines] == \
        [(0.5, 1.5, "HELLO WORLD"), (3.5, 4.1, "THE END")]


def test_lines_are_cut_at_the_maximum_length_and_duration():
    words = [CtmWord(f"W{i:02d}", 0.4 * i, 0.3, 1.0) for i in range(30)]  # no pauses
    by_chars = subtitle_lines(words, SubtitleConfig(max_chars=11, max_duration=100.0))
    assert [ln.text for ln in by_chars[:2]] == ["W00 W01 W02", "W03 W04 W05"]
    assert all(len(ln.text) <= 11 for ln in by_chars)
    by_time = subtitle_lines(words, SubtitleConfig(max_chars=1000, max_duration=2.0))
    assert all(ln.end - ln.start <= 2.0 for ln in by_time)
    assert " ".join(ln.text for ln in by_time) == " ".join(w.word for w in words)
    long_word = subtitle_lines([CtmWord("X" * 60, 0.0, 1.0, 1.0)])
    assert long_word[0].text == "X" * 60


def test_a_short_line_is_shown_for_min_duration_but_not_into_the_next():
    words = [CtmWord("A", 0.0, 0.1, 1.0), CtmWord("B", 1.0, 0.1, 1.0)]
    lines = subtitle_lines(words, SubtitleConfig(max_pause=0.5, min_duration=2.0))
    assert [(ln.start, ln.end) for ln in lines] == [(0.0, 1.0), (1.0, 3.0)]


@pytest.mark.parametrize("suffix", [".srt", ".vtt"])
def test_written_files_read_back_with_pysubs2(tmp_path, suffix):
    path = write_subtitles(tmp_path / "sub" / f"rec{suffix}", WORDS)
    subs = pysubs2.load(str(path))
    assert subs.format == suffix[1:]
    assert [(e.start, e.end, e.plaintext) for e in subs] == \
        [(500, 1500, "HELLO WORLD"), (3500, 4100, "THE END")]


def test_bad_input_is_refused(tmp_path):
    with pytest.raises(ValueError, match="rec.txt"):
        write_subtitles(tmp_path / "rec.txt", WORDS)
    with pytest.raises(TypeError, match=r"words\[0\] must be a CtmWord"):
        write_subtitles(tmp_path / "rec.srt", [("HELLO", 0.5, 0.4)])
    with pytest.raises(ValueError, match="SubtitleConfig.max_chars"):
        SubtitleConfig(max_chars=0)
    empty = pysubs2.load(str(write_subtitles(tmp_path / "empty.srt", [])), format_="srt")
    assert len(empty) == 0
