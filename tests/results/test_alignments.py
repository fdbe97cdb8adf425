"""Lhotse supervisions with word alignments, written by lhotse and read back with it; the
``words`` dicts of result lines."""

from __future__ import annotations

import pytest
from lhotse import SupervisionSet

from k2dec.results import CtmWord, word_dicts, words_from_dicts, write_alignments

WORDS = [CtmWord("WORLD", 1.0, 0.5, 0.8), CtmWord("HELLO", 0.5, 0.4, 0.9)]


@pytest.mark.parametrize("name", ["rec.jsonl", "rec.jsonl.gz"])
def test_alignments_read_back_with_lhotse(tmp_path, name):
    path = write_alignments(tmp_path / "ali" / name, "rec", WORDS, duration=2.5)
    (sup,) = SupervisionSet.from_file(path)
    assert (sup.id, sup.recording_id, sup.start, sup.duration) == ("rec", "rec", 0.0, 2.5)
    assert sup.text == "HELLO WORLD"
    assert [(a.symbol, a.start, a.duration, a.score) for a in sup.alignment["word"]] == \
        [("HELLO", 0.5, 0.4, 0.9), ("WORLD", 1.0, 0.5, 0.8)]


def test_word_dicts_round_trip():
    dicts = word_dicts(WORDS)
    assert dicts[0] == {"word": "HELLO", "start": 0.5, "end": 0.9, "confidence": 0.9}
    assert [(w.word, w.start) for w in words_from_dicts(dicts)] == [("HELLO", 0.5),
                                                                   ("WORLD", 1.0)]


def test_bad_input_is_refused(tmp_path):
    with pytest.raises(ValueError, match="rec.txt"):
        write_alignments(tmp_path / "rec.txt", "rec", WORDS)
    with pytest.raises(ValueError, match="recording_id"):
        write_alignments(tmp_path / "rec.jsonl", "", WORDS)
    with pytest.raises(ValueError, match="ends before the last word"):
        write_alignments(tmp_path / "rec.jsonl", "rec", WORDS, duration=1.0)
    with pytest.raises(TypeError, match="CtmWord"):
        write_alignments(tmp_path / "rec.jsonl", "rec", [("A", 0.0, 1.0)])
