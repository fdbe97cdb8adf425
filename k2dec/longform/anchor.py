"""A long recording's transcript (or reference) shared among its segments, in order, by a
first decoding pass: every transcript word goes to exactly one segment.

1. **Anchors** (:func:`anchor_words`): the transcript is matched to the first pass's words
   (the segments' words concatenated in time order) with kaldialign's edit-distance
   alignment, a window at a time (:func:`match_words`); a transcript word matched with the
   same word gets that word's segment.
2. **Fill** (:func:`fill_unmatched`): every other word goes with the word before it (the
   first anchored word's segment before the first anchor; segment 0 with no anchor at all).
3. **Runs between segments** (:func:`boundary_runs`, :func:`split_run`): a run of unmatched
   words between anchors of two different segments (the first pass often misses or garbles
   a segment's first or last word, or a whole short segment, or the words of speech the
   segmenter dropped) is shared among those two segments and the ones between them, in order,
   where the sum of the segments' scores is highest (dynamic programming over the split
   points); the caller scores (:data:`RunScorer`: e.g. each segment's best CTC path given the
   words). Without a scorer the run stays with the segment before it.

Knows nothing of the searches: the caller's first pass gives the words, its scorer the
scores. Used by forced alignment (:func:`k2dec.recognizer.align_recording`) and by the decode
job's oracle methods on long recordings (:mod:`k2dec.job.longform`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

import kaldialign

__all__ = ["ANCHOR_WINDOW", "MAX_SPLIT_JOBS", "MAX_SPLIT_RUN", "RunScorer", "anchor_words",
           "assign_words", "boundary_runs", "fill_unmatched", "match_words", "split_run",
           "words_by_segment"]

logger = logging.getLogger(__name__)

ANCHOR_WINDOW = 1000
"""Transcript words per edit-distance alignment window when anchoring (memory: one
``window x 2 window`` table of kaldialign's)."""

MAX_SPLIT_RUN = 50
"""The longest run of unmatched words between two segments that is split by trying every
split point (longer runs, a transcript that does not match the audio, stay with the segment
before them)."""

MAX_SPLIT_JOBS = 2000
"""The most scored ``(segment, words)`` jobs tried to share one run of unmatched words among
the segments around it (a run with more ways to share it stays with the segment before it)."""

_EPS = "\u0000"

RunScorer = Callable[[list[tuple[int, list[int]]]], list[float]]
"""Scores ``(segment index, transcript word indices)`` jobs: per job, how well the segment's
audio fits exactly those words (higher is better; ``-inf``: they do not fit), e.g. the log-prob
of its best CTC path through them."""


def _window_matches(ref: Sequence[str], hyp: Sequence[str], last: bool
                    ) -> tuple[list[int | None], int, int]:
    """kaldialign's alignment of ``ref`` and ``hyp``: for each of the first ref words (all
    when ``last``, else the first half), the index in ``hyp`` of the same word aligned with
    it, or ``None``; and how many ref and hyp words that covers."""
    keep = len(ref) if last else max(1, len(ref) // 2)
    out: list[int | None] = []
    h = 0
    for r, y in kaldialign.align(list(ref), list(hyp), _EPS):
        if r == _EPS:
            h += 1
            continue
        if len(out) == keep:
            break
        out.append(h if y == r else None)
        h += y != _EPS
    return out, len(out), h


def match_words(ref: Sequence[str], hyp: Sequence[str], window: int = ANCHOR_WINDOW
                ) -> list[int | None]:
    """For each ref word, the index of the hyp word it is matched with when the two are
    the same word (edit-distance alignment), else ``None``; aligned ``window`` words at a
    time, each window committing its first half (memory ``O(window**2)``, not
    ``O(len(ref) * len(hyp))``)."""
    out: list[int | None] = []
    r0 = h0 = 0
    while r0 < len(ref):
        last = r0 + window >= len(ref)
        got, used_r, used_h = _window_matches(ref[r0: r0 + window],
                                              hyp[h0: h0 + (2 if last else 1) * window], last)
        out += [None if m is None else h0 + m for m in got]
        r0, h0 = r0 + used_r, h0 + used_h
    return out


def anchor_words(ref: Sequence[str], segment_words: Sequence[Sequence[str]],
                 window: int = ANCHOR_WINDOW) -> list[int | None]:
    """The segment of the first-pass word each ``ref`` word is matched with (the same word,
    :func:`match_words` over the segments' words in order), else ``None``.

    Args:
      ref: the transcript's words.
      segment_words: per segment, in time order, the first pass's words.
      window: :func:`match_words`'s window.
    """
    hyp: list[str] = []
    owner: list[int] = []
    for i, words in enumerate(segment_words):
        hyp += list(words)
        owner += [i] * len(words)
    return [None if m is None else owner[m] for m in match_words(ref, hyp, window)]


def fill_unmatched(matched: Sequence[int | None]) -> list[int]:
    """Unmatched words to the segment of the word before them (the first's if none)."""
    prev = next((s for s in matched if s is not None), 0)
    segs = []
    for s in matched:
        prev = prev if s is None else s
        segs.append(prev)
    return segs


def boundary_runs(matched: Sequence[int | None], max_run: int = MAX_SPLIT_RUN
                  ) -> list[tuple[int, int, int, int]]:
    """``(first word, end word, segment before, segment after)`` of each run of unmatched
    words between matched words of two different segments (runs of at most ``max_run``
    words)."""
    runs = []
    w = 0
    while w < len(matched):
        if matched[w] is not None:
            w += 1
            continue
        end = w
        while end < len(matched) and matched[end] is None:
            end += 1
        if 0 < w and end < len(matched) and matched[w - 1] != matched[end] \
                and end - w <= max_run:
            runs.append((w, end, matched[w - 1], matched[end]))
        w = end
    return runs


def split_run(run: tuple[int, int, int, int], segs: list[int], score: RunScorer,
              max_jobs: int = MAX_SPLIT_JOBS) -> None:
    """Share a run of unmatched words among the segments ``a .. b`` around it, in order,
    where the sum of the segments' scores is highest (dynamic programming over the split
    points; each segment between ``a`` and ``b`` may get none); ``segs`` (each word's
    segment) is updated in place.

    Args:
      run: ``(first word, end word, a, b)`` (:func:`boundary_runs`).
      segs: every transcript word's segment (:func:`fill_unmatched`).
      score: the scorer (:data:`RunScorer`); segment ``a`` is scored with its own words
        before the run, ``b`` with its own after it.
      max_jobs: a run with more jobs than this to score stays with ``a`` (logged).
    """
    first, end, a, b = run
    run_words = list(range(first, end))
    size = len(run_words)
    own_a = [w for w, s in enumerate(segs) if s == a and w < first]
    own_b = [w for w, s in enumerate(segs) if s == b and w >= end]
    middle = list(range(a + 1, b))
    spans = [(i, k) for i in range(size + 1) for k in range(i, size + 1)]
    if len(middle) * len(spans) > max_jobs:
        logger.info("%d words between segments %d and %d stay with segment %d (too many "
                    "ways to share them)", size, a, b, a)
        return
    jobs = [(a, own_a + run_words[:k]) for k in range(size + 1)]
    jobs += [(b, run_words[i:] + own_b) for i in range(size + 1)]
    jobs += [(j, run_words[i:k]) for j in middle for i, k in spans]
    scores = score(jobs)
    best = scores[: size + 1]  # best[k]: the first k words placed so far
    choice: list[list[int]] = []
    for m in range(len(middle)):
        table = dict(zip(spans, scores[2 * (size + 1) + m * len(spans):]))
        prev = [max(range(k + 1), key=lambda i, k=k: best[i] + table[(i, k)])
                for k in range(size + 1)]
        best = [best[prev[k]] + table[(prev[k], k)] for k in range(size + 1)]
        choice.append(prev)
    tail = scores[size + 1: 2 * (size + 1)]
    k = max(range(size + 1), key=lambda i: best[i] + tail[i])
    cuts = [k]
    for prev in reversed(choice):
        cuts.append(prev[cuts[-1]])
    bounds = list(reversed(cuts))  # words given to a, then to each middle segment
    owners = [a] + middle
    for n, w in enumerate(run_words):
        segs[w] = next((owners[j] for j, c in enumerate(bounds) if n < c), b)


def assign_words(ref: Sequence[str], segment_words: Sequence[Sequence[str]],
                 score: RunScorer | None = None, window: int = ANCHOR_WINDOW) -> list[int]:
    """The segment of each ``ref`` word (see the module docstring): anchored to the first
    pass's words, the others filled in, the runs between two segments' anchors split where
    ``score`` is highest (``None``: they stay with the segment before them).

    Returns:
      per ``ref`` word, its segment index in ``[0, len(segment_words))`` (0 for all when
      nothing is anchored), non-decreasing.
    """
    matched = anchor_words(ref, segment_words, window)
    segs = fill_unmatched(matched)
    if score is not None:
        for run in boundary_runs(matched):
            split_run(run, segs, score)
    return segs


def words_by_segment(ref: Sequence[str], segs: Sequence[int], num_segments: int
                     ) -> list[list[str]]:
    """``ref`` cut into ``num_segments`` lists by each word's segment (``segs``, as
    :func:`assign_words` gives: non-decreasing), so that their concatenation is ``ref``.

    Raises:
      ValueError: ``segs`` of another length than ``ref``'s, a segment out of range, or
        decreasing (the lists would not concatenate to ``ref``).
    """
    if len(segs) != len(ref):
        raise ValueError(f"segs has {len(segs)} entries for {len(ref)} words")
    out: list[list[str]] = [[] for _ in range(num_segments)]
    for n, (word, s) in enumerate(zip(ref, segs)):
        if not 0 <= s < num_segments or (n and s < segs[n - 1]):
            raise ValueError(f"word {n} ({word!r}) has segment {s!r}: not in order within "
                             f"[0, {num_segments})")
        out[s].append(word)
    return out
