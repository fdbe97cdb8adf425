"""Per-segment hypotheses -> one hypothesis per recording, in the recording's clock.

Each segment owns the part of the recording from its own start (its core's start, for windows
with context) to the next segment's own start (the first one from the recording's start, the
last one to its end), so the owned parts tile the recording. A word (or token) decoded in a
segment is kept when its midpoint, in the recording's clock, lies in that segment's part: a
word that two overlapping windows both decode is kept once, by the window that holds it.

Two windows can place the same word a little differently (one puts its midpoint just before
the seam, the other just after). At each seam between overlapping segments the words next to
the seam are therefore compared: the same word seen by both windows with overlapping times is
kept exactly once, neither doubled (both kept it) nor lost (both left it to the other).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from ..primitives.hypothesis import HypothesisRecord
from ..primitives.sizes import check_positive
from ..results.ctm import CtmWord
from .segments import Segment

__all__ = ["Span", "assign_spans", "kept_tokens", "stitch_records", "stitch_words"]

Span = tuple[object, float, float]
"""``(label, start, end)``: a word or token with its times in seconds of its segment's clock."""


def _ordered(segments: Sequence[Segment]) -> list[int]:
    for i, seg in enumerate(segments):
        if not isinstance(seg, Segment):
            raise TypeError(f"segments[{i}] must be a Segment, got {type(seg).__name__}")
    order = sorted(range(len(segments)), key=lambda i: segments[i].own_start)
    for a, b in zip(order, order[1:]):
        if segments[a].own_end > segments[b].own_start:
            raise ValueError(f"segments {a} and {b} own overlapping parts of the recording: "
                             f"{segments[a]} and {segments[b]}")
    return order


def _same(a: Span, b: Span, tolerance: float) -> bool:
    """The same word (or token) seen by two windows: the same label, midpoints at most half
    the shorter one's length apart, or ``tolerance`` seconds (for tokens, which have no
    length)."""
    gap = abs((a[1] + a[2]) - (b[1] + b[2])) / 2
    return a[0] == b[0] and gap <= max(0.5 * min(a[2] - a[1], b[2] - b[1]), tolerance)


def _reconcile(left: Sequence[Span], right: Sequence[Span], kept_left: list[int],
               kept_right: list[int], tolerance: float) -> None:
    """Fix the seam between two overlapping neighbours (spans in the recording's clock):
    drop a word both kept; keep (on the left) a word both left to the other."""
    if kept_left and kept_right and _same(left[kept_left[-1]], right[kept_right[0]], tolerance):
        kept_right.pop(0)
        return
    after = kept_left[-1] + 1 if kept_left else 0
    before = kept_right[0] - 1 if kept_right else len(right) - 1
    if after < len(left) and before >= 0 and _same(left[after], right[before], tolerance):
        kept_left.append(after)


def assign_spans(pieces: Sequence[tuple[Segment, Sequence[Span]]], tolerance: float = 0.1
                 ) -> list[list[int]]:
    """Which spans each segment keeps: per piece (in the order given), the indices of its
    spans kept, in time order.

    Args:
      pieces: ``(segment, spans)`` per segment; spans in seconds from the segment's start.
      tolerance: seconds two windows' placements of one word may differ by (beyond half its
        length) and still be taken for the same word at a seam.

    Raises:
      TypeError: a segment that is not a :class:`Segment`.
      ValueError: segments whose own parts overlap, a span ending before it starts.
    """
    segments = [seg for seg, _ in pieces]
    order = _ordered(segments)
    shifted = []
    for seg, spans in pieces:
        for label, start, end in spans:
            if not end >= start:
                raise ValueError(f"a span must not end before it starts, got {label!r} from "
                                 f"{start!r} to {end!r} s")
        shifted.append([(lab, seg.start + s, seg.start + e) for lab, s, e in spans])
    kept: list[list[int]] = [[] for _ in pieces]
    for rank, i in enumerate(order):
        low = segments[i].own_start if rank else float("-inf")
        high = segments[order[rank + 1]].own_start if rank + 1 < len(order) else float("inf")
        kept[i] = [k for k, (_, s, e) in enumerate(shifted[i]) if low <= (s + e) / 2 < high]
    for a, b in zip(order, order[1:]):
        if segments[a].end > segments[b].start:
            _reconcile(shifted[a], shifted[b], kept[a], kept[b], tolerance)
    return kept


def stitch_words(pieces: Sequence[tuple[Segment, Sequence[CtmWord]]]) -> list[CtmWord]:
    """One recording's words, in the recording's clock and time order, from its segments'
    words (each in seconds from its segment's start)."""
    spans = [(seg, [(w.word, w.start, w.start + w.duration) for w in words])
             for seg, words in pieces]
    kept = assign_spans(spans)
    out = [replace(words[k], start=seg.start + words[k].start)
           for (seg, words), ks in zip(pieces, kept) for k in ks]
    return sorted(out, key=lambda w: w.start)


def _spans(seg: Segment, labels: tuple[int, ...] | None, frames: tuple[int, ...] | None,
           durations: tuple[int, ...] | None, frame_shift: float) -> list[Span]:
    if labels is None:
        return []
    if frames is None:  # untimed: owned by this segment (no overlap, checked by the caller)
        t = seg.own_start - seg.start
        return [(lab, t, t) for lab in labels]
    durs = durations or (0,) * len(labels)
    return [(lab, f * frame_shift, (f + d) * frame_shift)
            for lab, f, d in zip(labels, frames, durs)]


def _pick(record: HypothesisRecord, kept: list[int], name: str) -> tuple | None:
    value = getattr(record, name)
    return None if value is None else tuple(value[k] for k in kept)


def _joined(records: Sequence[HypothesisRecord], kept: Sequence[list[int]], name: str,
            shifts: Sequence[int] | None = None) -> tuple | None:
    parts = [_pick(r, k, name) for r, k in zip(records, kept)]
    if any(p is None for p in parts):
        return None
    if shifts is not None:
        parts = [tuple(f + s for f in p) for p, s in zip(parts, shifts)]
    return tuple(x for p in parts for x in p)


def _token_words(record: HypothesisRecord, word_start: Sequence[bool]) -> list[list[int]]:
    """Indices of a record's tokens grouped into words: a token that begins a word (by
    ``word_start``, a token id out of its range counts as one) starts a group."""
    groups: list[list[int]] = []
    for k, tok in enumerate(record.tokens or ()):
        if not groups or not 0 <= tok < len(word_start) or word_start[tok]:
            groups.append([k])
        else:
            groups[-1].append(k)
    return groups


def _kept_tokens(pieces: Sequence[tuple[Segment, HypothesisRecord]], frame_shift: float,
                 tolerance: float, word_start: Sequence[bool] | None) -> list[list[int]]:
    """Per piece, the indices of its tokens kept: token by token, or (with ``word_start``
    and timed tokens) whole words of tokens, each word by its span's midpoint, so that a
    word that straddles a seam comes whole from one segment."""
    if word_start is None or any(r.tokens is not None and r.token_frames is None
                                 for _, r in pieces):
        return assign_spans([(s, _spans(s, r.tokens, r.token_frames, None, frame_shift))
                             for s, r in pieces], tolerance)
    groups = [_token_words(r, word_start) for _, r in pieces]
    spans = [(s, [(tuple(r.tokens[k] for k in g), r.token_frames[g[0]] * frame_shift,
                   (r.token_frames[g[-1]] + 1) * frame_shift) for g in gs])
             for (s, r), gs in zip(pieces, groups)]
    kept = assign_spans(spans, tolerance)
    return [[k for i in ks for k in gs[i]] for ks, gs in zip(kept, groups)]


def kept_tokens(pieces: Sequence[tuple[Segment, HypothesisRecord]], frame_shift: float,
                word_start: Sequence[bool] | None = None) -> list[list[int]]:
    """Per piece (in the order given), the indices of its record's tokens that
    :func:`stitch_records` keeps (the same arguments): those of the segment's own part of the
    recording, a word at a time with ``word_start``."""
    check_positive("frame_shift", frame_shift)
    return _kept_tokens(pieces, frame_shift, max(0.1, 2 * frame_shift), word_start)


def stitch_records(pieces: Sequence[tuple[Segment, HypothesisRecord]],
                   frame_shift: float, word_start: Sequence[bool] | None = None
                   ) -> HypothesisRecord:
    """One recording's :class:`~k2dec.primitives.hypothesis.HypothesisRecord` from its segments'
    records, frames counted from the recording's start.

    Tokens are kept by their frame's time, words by their midpoint (``word_frames`` +
    ``word_durations`` / 2), as :func:`assign_spans` says (two windows' placements of one
    token may differ by up to ``max(0.1 s, 2 frames)``); per-token / per-word fields follow
    them; a field missing in any segment is ``None``. ``score`` is the sum of the segments'
    scores (``None`` if one has none); ``error`` and ``notes`` join the segments' own, prefixed
    with the segment's times.

    Args:
      pieces: ``(segment, record)`` per segment, frames counted from the segment's start; a
        segment's start must be a whole number of frames.
      frame_shift: seconds per frame of the records (e.g. 0.04: 10 ms features, subsampling 4).
      word_start: per token id, whether it begins a word (BPE's ``▁`` pieces,
        :func:`k2dec.lang.bpe_word_start_mask`); given, tokens are kept a whole word at a
        time (by the word's midpoint), so a word straddling a seam is not made of one
        window's first pieces and the other's last ones.

    Raises:
      ValueError: ``frame_shift`` <= 0; a segment start that is not a whole number of frames;
        overlapping segments whose records carry no frames for their tokens / words.
    """
    check_positive("frame_shift", frame_shift)
    pieces = sorted(pieces, key=lambda p: p[0].start)
    records = [r for _, r in pieces]
    shifts = []
    for seg, _ in pieces:
        shift = round(seg.start / frame_shift)
        if abs(shift * frame_shift - seg.start) > 1e-6:
            raise ValueError(f"segment start {seg.start!r} s is not a whole number of frames "
                             f"of {frame_shift!r} s")
        shifts.append(shift)
    overlapping = any(a[0].end > b[0].start for a, b in zip(pieces, pieces[1:]))
    if overlapping and any((r.tokens is not None and r.token_frames is None)
                           or (r.words is not None and r.word_frames is None) for r in records):
        raise ValueError("overlapping segments need frames for their tokens and words "
                         "(token_frames / word_frames) to be stitched by time")
    tolerance = max(0.1, 2 * frame_shift)
    tok = _kept_tokens(pieces, frame_shift, tolerance, word_start)
    wrd = assign_spans([(s, _spans(s, r.words, r.word_frames, r.word_durations, frame_shift))
                        for s, r in pieces], tolerance)
    scores = [r.score for r in records]
    return HypothesisRecord(
        tokens=_joined(records, tok, "tokens"),
        words=_joined(records, wrd, "words"),
        token_frames=_joined(records, tok, "token_frames", shifts),
        word_frames=_joined(records, wrd, "word_frames", shifts),
        word_durations=_joined(records, wrd, "word_durations"),
        score=None if not scores or None in scores else float(sum(scores)),
        token_confidences=_joined(records, tok, "token_confidences"),
        word_confidences=_joined(records, wrd, "word_confidences"),
        error=_labelled(pieces, "error"), notes=_labelled(pieces, "notes"))


def _labelled(pieces: Sequence[tuple[Segment, HypothesisRecord]], name: str) -> str:
    return "; ".join(f"segment {s.start:.2f}-{s.end:.2f} s: {getattr(r, name)}"
                     for s, r in pieces if getattr(r, name))
