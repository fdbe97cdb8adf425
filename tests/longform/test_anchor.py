"""A long recording's reference shared among its segments (k2dec.longform.anchor): on random
references and segmentations (one segment, segments without words, words no first-pass
segment has, i.e. speech the VAD dropped), every word goes to exactly one segment, in order,
so the per-segment spans concatenate to the reference; with an exact first pass the true
split comes back, and with a scorer that knows the truth the runs of words the first pass
missed between segments are shared back exactly."""

from __future__ import annotations

import random

import pytest

from k2dec.longform import assign_words, words_by_segment
from k2dec.longform.anchor import boundary_runs, fill_unmatched


def _case(rng: random.Random, num_words: int, num_segments: int):
    """``(reference, true segment per word, first-pass words per segment, dropped words)``:
    unique words, a random non-decreasing split (segments may get none), and a first pass
    that drops, garbles and inserts words, never the first or last word (those anchor the
    ends)."""
    ref = [f"W{i}" for i in range(num_words)]
    cuts = sorted(rng.randint(0, num_words) for _ in range(num_segments - 1))
    bounds = [0, *cuts, num_words]
    truth = [j for j in range(num_segments) for _ in range(bounds[j], bounds[j + 1])]
    hyps: list[list[str]] = [[] for _ in range(num_segments)]
    dropped = set()
    for w, s in enumerate(truth):
        roll = rng.random()
        if 0 < w < num_words - 1 and roll < 0.25:
            dropped.add(w)  # the first pass (or the VAD) lost it
            continue
        hyps[s].append(f"X{rng.randint(0, 3)}" if 0 < w < num_words - 1 and roll < 0.35
                       else ref[w])
        if roll > 0.9:
            hyps[s].append("INSERTED")
    for s in range(num_segments):  # a segment of only noise
        if rng.random() < 0.1:
            hyps[s].insert(0, "NOISE")
    return ref, truth, hyps, dropped


def _truth_scorer(truth: list[int]):
    """Scores a segment's words by how far they are from its true words (0 at the truth):
    the dynamic program must find the truth."""
    def score(jobs):
        return [-float(len(set(words) ^ {w for w, s in enumerate(truth) if s == seg}))
                for seg, words in jobs]
    return score


@pytest.mark.parametrize("seed", range(40))
def test_spans_concatenate_to_the_reference(seed):
    rng = random.Random(seed)
    num_words = rng.choice([0, 1, 2, 5, 12, 30])
    num_segments = rng.choice([1, 1, 2, 3, 5, 8])
    ref, truth, hyps, _ = _case(rng, num_words, num_segments)
    for score in (None, _truth_scorer(truth), lambda jobs: [rng.random() for _ in jobs]):
        segs = assign_words(ref, hyps, score)
        assert len(segs) == len(ref)
        assert all(0 <= s < num_segments for s in segs)
        assert segs == sorted(segs)
        spans = words_by_segment(ref, segs, num_segments)
        assert len(spans) == num_segments
        assert [w for span in spans for w in span] == ref
        assert sum(map(len, spans)) == len(ref)


@pytest.mark.parametrize("seed", range(40))
def test_an_exact_first_pass_gives_the_true_split(seed):
    rng = random.Random(seed)
    ref, truth, _, _ = _case(rng, rng.randint(1, 40), rng.randint(1, 8))
    hyps = words_by_segment(ref, truth, max(truth) + 1)
    assert assign_words(ref, hyps) == truth
    assert assign_words(ref, hyps, _truth_scorer(truth)) == truth


@pytest.mark.parametrize("seed", range(60))
def test_runs_between_segments_are_shared_back_to_the_truth(seed):
    """Words the first pass missed, garbled or that the VAD dropped, between anchors of two
    segments (and in segments between them with no anchor at all): the scorer that knows
    the truth gets each back to its own segment; without a scorer they stay with the
    segment before them."""
    rng = random.Random(seed)
    ref, truth, hyps, _ = _case(rng, rng.randint(2, 25), rng.randint(2, 6))
    assert assign_words(ref, hyps, _truth_scorer(truth)) == truth
    plain = assign_words(ref, hyps)
    assert plain == sorted(plain) and plain[0] == truth[0] and plain[-1] == truth[-1]


def test_edge_cases():
    assert assign_words([], []) == []
    assert assign_words([], [["A"], []]) == []
    assert assign_words(["A", "B"], [[], [], []]) == [0, 0]  # nothing anchored: the first
    assert assign_words(["A", "B"], [["B"], ["A"]]) == [0, 0]  # in order: B anchors A too
    assert words_by_segment([], [], 3) == [[], [], []]
    assert fill_unmatched([None, 2, None, 3, None]) == [2, 2, 2, 3, 3]
    assert boundary_runs([0, None, None, 2, None]) == [(1, 3, 0, 2)]
    with pytest.raises(ValueError, match="not in order"):
        words_by_segment(["A", "B"], [1, 0], 2)
    with pytest.raises(ValueError, match="not in order"):
        words_by_segment(["A"], [2], 2)
    with pytest.raises(ValueError, match="segs has 1 entries for 2 words"):
        words_by_segment(["A", "B"], [0], 2)
