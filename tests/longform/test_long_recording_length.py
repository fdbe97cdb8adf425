"""scripts/make_long_recording.py with ``min_duration`` shorter than the test set: it stops
once that much speech is written (the bench's 1-minute recording is 1 minute), and with
none it writes one whole pass."""

from __future__ import annotations

from k2dec.demo import ASSETS
from tests.scripts.loader import load_script

CORPUS = ASSETS / "corpus" / "test-clean"


def test_min_duration_stops_within_the_first_pass(tmp_path):
    make = load_script("make_long_recording")
    utts = make.corpus_utterances(CORPUS)
    sups = make.make_long_recording(CORPUS, tmp_path / "a", min_duration=20.0)
    speech = sum(s.duration for s in sups)
    assert 20.0 <= speech < 20.0 + 15.0, speech
    assert len(sups) < len(utts) and not any("_r" in s.id for s in sups)
    whole = make.make_long_recording(CORPUS, tmp_path / "b", num_utterances=5)
    assert [s.id for s in whole] == [u for u, _, _ in utts[:5]]
