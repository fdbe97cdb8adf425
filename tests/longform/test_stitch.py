"""Stitching by time: against a brute-force reference on random word timelines cut into
windows of random sizes and overlaps; words straddling a seam; the record-level stitch."""

from __future__ import annotations

import random

import pytest

from k2dec.longform import Segment, WindowConfig, fixed_windows, stitch_records, stitch_words
from k2dec.primitives.hypothesis import HypothesisRecord
from k2dec.results import CtmWord


def _timeline(rng: random.Random, duration: float) -> list[CtmWord]:
    """Words w0, w1, ... with random lengths (0.1-0.9 s) and gaps (0-0.6 s)."""
    words, t = [], rng.uniform(0, 0.5)
    while True:
        length = rng.uniform(0.1, 0.9)
        if t + length > duration:
            return words
        words.append(CtmWord(f"w{len(words)}", t, length, rng.uniform(0, 1)))
        t += length + rng.choice([0.0, rng.uniform(0, 0.6)])


def _decoded(seg: Segment, truth: list[CtmWord], rng: random.Random, jitter: float
             ) -> list[CtmWord]:
    """What a decoder sees in a window: every word inside its audio, in the window's clock,
    its times moved by up to ``jitter``; a word cut by the window's edge is heard half the
    time, clipped to the edge."""
    out = []
    for w in truth:
        start, end = max(w.start, seg.start), min(w.start + w.duration, seg.end)
        inside = start == w.start and end == w.start + w.duration
        if end <= start or (not inside and rng.random() < 0.5):
            continue
        shift = rng.uniform(-jitter, jitter)
        out.append(CtmWord(w.word, max(0.0, start - seg.start + shift), end - start,
                           w.confidence))
    return out


def _brute_force(truth: list[CtmWord], segments) -> list[str]:
    """Each true word once, in the window whose core holds its true midpoint."""
    out = []
    for w in truth:
        mid = w.start + w.duration / 2
        owners = [s for s in segments if s.own_start <= mid < s.own_end]
        assert len(owners) == 1
        out.append(w.word)
    return out


@pytest.mark.parametrize("jitter", [0.0, 0.04])
def test_random_windows_keep_every_word_once(jitter):
    rng = random.Random(1234 + int(jitter * 100))
    for _ in range(200):
        duration = rng.uniform(5, 120)
        config = WindowConfig(chunk=rng.uniform(2, 30), context=rng.uniform(0.5, 3))
        truth = _timeline(rng, duration)
        segments = fixed_windows(duration, config).segments
        pieces = [(s, _decoded(s, truth, rng, jitter)) for s in segments]
        rng.shuffle(pieces)  # order of the pieces does not matter
        got = stitch_words(pieces)
        assert [w.word for w in got] == _brute_force(truth, segments)
        for g, w in zip(got, truth):
            assert g.start == pytest.approx(w.start, abs=jitter + 1e-9)
            assert g.confidence == w.confidence


def _seam_pieces(left_mid: float, right_mid: float):
    """A word ``x`` of 0.4 s straddling the seam at 10 s of two windows (cores [0, 10) and
    [10, 20), 2 s of context), placed at ``left_mid`` by the left window and ``right_mid`` by
    the right one (recording clock), between ``a`` and ``b``."""
    left, right = Segment(0.0, 12.0, 0.0, 10.0), Segment(8.0, 20.0, 10.0, 20.0)
    words = [("a", 9.0), ("x", None), ("b", 11.0)]

    def decode(seg, mid_x):
        return [CtmWord(w, (t if t is not None else mid_x) - 0.2 - seg.start, 0.4, 0.9)
                for w, t in words]
    return [(left, decode(left, left_mid)), (right, decode(right, right_mid))]


@pytest.mark.parametrize("left_mid, right_mid", [
    (9.98, 10.02),  # each window keeps it: doubled without the seam check
    (10.02, 9.98),  # each window leaves it to the other: lost without the seam check
    (9.97, 9.99), (10.01, 10.03),  # both agree
])
def test_a_word_straddling_a_seam_is_kept_exactly_once(left_mid, right_mid):
    got = stitch_words(_seam_pieces(left_mid, right_mid))
    assert [w.word for w in got] == ["a", "x", "b"]


def test_a_repeated_word_at_a_seam_is_not_merged():
    left, right = Segment(0.0, 12.0, 0.0, 10.0), Segment(8.0, 20.0, 10.0, 20.0)
    the1, the2 = (9.5, 9.8), (9.9, 10.3)  # "the the": adjacent, not overlapping
    pieces = [(seg, [CtmWord("the", s - seg.start, e - s, 1.0) for s, e in (the1, the2)])
              for seg in (left, right)]
    assert [(w.word, round(w.start, 2)) for w in stitch_words(pieces)] == \
        [("the", 9.5), ("the", 9.9)]


def test_vad_segments_keep_all_their_words_in_the_recording_clock():
    a, b = Segment(1.0, 4.0), Segment(6.5, 9.0)
    pieces = [(b, [CtmWord("c", 0.1, 0.3, 1.0)]),
              (a, [CtmWord("a", 0.0, 0.5, 1.0), CtmWord("b", 2.9, 0.1, 1.0)])]
    got = stitch_words(pieces)
    assert [(w.word, w.start) for w in got] == [("a", 1.0), ("b", 3.9), ("c", 6.6)]
    assert stitch_words([]) == []


def test_bad_pieces_are_refused():
    with pytest.raises(ValueError, match="own overlapping"):
        stitch_words([(Segment(0.0, 5.0), []), (Segment(4.0, 8.0), [])])
    with pytest.raises(TypeError, match="must be a Segment"):
        stitch_words([((0.0, 5.0), [])])
    with pytest.raises(ValueError, match="core_start"):
        Segment(2.0, 5.0, 1.0, 4.0)
    with pytest.raises(ValueError, match="Segment.end"):
        Segment(0.0, float("nan"))


def test_records_are_stitched_by_frames():
    fs = 0.04
    left, right = Segment(0.0, 12.0, 0.0, 10.0), Segment(8.0, 20.0, 10.0, 20.0)
    # left: tokens 1@5.0 s, 2@9.96 s, 3@11 s (context); right: 2@10.0 s, 4@15 s (own clock - 8)
    rl = HypothesisRecord(tokens=(1, 2, 3), token_frames=(125, 249, 275), words=(7, 8),
                          word_frames=(125, 249), word_durations=(5, 5),
                          token_confidences=(0.5, 0.6, 0.7), score=-1.0)
    rr = HypothesisRecord(tokens=(2, 4), token_frames=(50, 175), words=(8, 9),
                          word_frames=(50, 175), word_durations=(5, 5),
                          token_confidences=(0.8, 0.9), score=-2.0, notes="pruned")
    got = stitch_records([(right, rr), (left, rl)], fs)
    # token 2 is placed at 9.96 s by the left window, 10.0 s by the right: kept once (left)
    assert got.tokens == (1, 2, 4)
    assert got.token_frames == (125, 249, 375)
    assert got.token_confidences == (0.5, 0.6, 0.9)
    # word 8's midpoint: 10.06 s (left), 10.1 s (right): the right window's
    assert got.words == (7, 8, 9)
    assert got.word_frames == (125, 250, 375)
    assert got.score == -3.0
    assert got.notes == "segment 8.00-20.00 s: pruned"


def test_record_stitching_refuses_untimed_overlaps_and_odd_starts():
    untimed = HypothesisRecord(tokens=(1, 2))
    with pytest.raises(ValueError, match="need frames"):
        stitch_records([(Segment(0.0, 12.0, 0.0, 10.0), untimed),
                        (Segment(8.0, 20.0, 10.0, 20.0), untimed)], 0.04)
    got = stitch_records([(Segment(0.0, 2.0), untimed), (Segment(3.0, 5.0), untimed)], 0.04)
    assert got.tokens == (1, 2, 1, 2) and got.token_frames is None
    with pytest.raises(ValueError, match="whole number of frames"):
        stitch_records([(Segment(0.01, 2.0), untimed)], 0.04)
    with pytest.raises(ValueError, match="frame_shift"):
        stitch_records([], 0.0)


def test_a_word_of_tokens_straddling_a_seam_comes_whole_from_one_window():
    """A word of two tokens spans 9.92-10.08 s across the seam at 10 s; the left window hears
    it as tokens 5 6, the right as 3 7. Token by token the result would be the chimera 5 7
    (each token kept by its own time); by words it comes whole from the window owning its
    midpoint (10.0 s: the right), and whole from the left once it moves left of the seam."""
    fs = 0.04
    word_start = [False, True, True, True, True, True, False, False]
    left, right = Segment(0.0, 12.0, 0.0, 10.0), Segment(8.0, 20.0, 10.0, 20.0)
    rl = HypothesisRecord(tokens=(1, 5, 6), token_frames=(100, 248, 251))
    rr = HypothesisRecord(tokens=(3, 7, 2), token_frames=(48, 51, 200))
    assert stitch_records([(left, rl), (right, rr)], fs).tokens == (1, 5, 7, 2)
    by_word = stitch_records([(left, rl), (right, rr)], fs, word_start)
    assert by_word.tokens == (1, 3, 7, 2) and by_word.token_frames == (100, 248, 251, 400)
    rl2 = HypothesisRecord(tokens=(1, 5, 6), token_frames=(100, 246, 249))
    rr2 = HypothesisRecord(tokens=(3, 7, 2), token_frames=(46, 49, 200))
    assert stitch_records([(left, rl2), (right, rr2)], fs, word_start).tokens == (1, 5, 6, 2)
