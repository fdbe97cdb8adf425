"""TextGrids written through praatio and read back with it."""

from __future__ import annotations

import pytest
from praatio import textgrid

from k2dec.results import MIN_INTERVAL, CtmWord, write_textgrid


def _read(path):
    grid = textgrid.openTextgrid(str(path), includeEmptyIntervals=False)
    return grid, grid.getTier("words")


def test_words_read_back_with_praatio(tmp_path):
    words = [CtmWord("WORLD", 1.0, 0.5, 0.8), CtmWord("HELLO", 0.5, 0.4, 0.9)]
    grid, tier = _read(write_textgrid(tmp_path / "tg" / "rec.TextGrid", words, duration=3.0))
    assert grid.maxTimestamp == 3.0
    assert [(e.start, e.end, e.label) for e in tier.entries] == \
        [(0.5, 0.9, "HELLO"), (1.0, 1.5, "WORLD")]


def test_overlaps_and_empty_words_become_valid_intervals(tmp_path):
    words = [CtmWord("A", 0.0, 0.6, 1.0), CtmWord("B", 0.5, 0.5, 1.0), CtmWord("C", 2.0, 0.0, 1.0)]
    grid, tier = _read(write_textgrid(tmp_path / "rec.TextGrid", words))
    got = [(round(e.start, 4), round(e.end, 4), e.label) for e in tier.entries]
    assert got == [(0.0, 0.6, "A"), (0.6, 1.0, "B"), (2.0, 2.0 + MIN_INTERVAL, "C")]
    assert grid.maxTimestamp == pytest.approx(2.0 + MIN_INTERVAL)


def test_bad_input_is_refused(tmp_path):
    words = [CtmWord("A", 0.0, 2.0, 1.0)]
    with pytest.raises(ValueError, match="duration must be > 0 and not before"):
        write_textgrid(tmp_path / "rec.TextGrid", words, duration=1.0)
    with pytest.raises(ValueError, match="duration must be > 0"):
        write_textgrid(tmp_path / "rec.TextGrid", [])
    with pytest.raises(TypeError, match="CtmWord"):
        write_textgrid(tmp_path / "rec.TextGrid", [{"word": "A"}])
