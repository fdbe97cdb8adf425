"""Each search's own hypothesis type -> :class:`~k2dec.hypothesis.HypothesisRecord`.

The search modules keep their own result types (lattice ``Hypothesis``,
``TransducerHypothesis``, ``AedHypothesis``, n-best key sequences); the methods convert them
here, once, so that every method returns the same record.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from ..hypothesis import HypothesisRecord
from ..lattice import Hypothesis, LatticeStatus, TimedUnits
from ..transducer import TransducerHypothesis

__all__ = [
    "EMPTY_LATTICE",
    "from_aed",
    "from_ids",
    "from_lattice",
    "from_timed_units",
    "from_transducer",
    "lattice_failures",
]

#: The reason recorded for a transducer utterance whose lattice has no path.
EMPTY_LATTICE = "empty lattice"


def _score(value: float) -> float | None:
    return None if math.isinf(value) or math.isnan(value) else float(value)


def lattice_failures(records: Sequence) -> list[str]:
    """Per-utterance failure reasons from lattice reports or 1best hypotheses (anything with
    ``status`` and ``reason``): the reason where the lattice is empty, else ``""``."""
    return [r.reason if r.status is LatticeStatus.EMPTY else "" for r in records]


def from_lattice(hyps: Sequence[Hypothesis], words: bool, failed: Sequence[str] | None = None,
                 notes: Sequence[str] | None = None) -> tuple[HypothesisRecord, ...]:
    """Records of lattice 1best hypotheses: tokens with their start frames, score, and with
    ``words`` the word ids with the frames of the arcs emitting them. ``failed`` gives each
    utterance's failure reason (default: :func:`lattice_failures` of ``hyps``), ``notes``
    what else its report should say (e.g. its lattice was pruned)."""
    failed = lattice_failures(hyps) if failed is None else failed
    notes = notes if notes is not None else [""] * len(hyps)
    out = []
    for h, err, note in zip(hyps, failed, notes):
        if err:
            out.append(HypothesisRecord(tokens=h.tokens, words=h.words if words else None,
                                        error=err, notes=note))
        else:
            out.append(HypothesisRecord(
                tokens=h.tokens, token_frames=h.token_frames,
                words=h.words if words else None, word_frames=h.word_frames if words else None,
                score=_score(h.score), notes=note))
    return tuple(out)


def from_transducer(hyps: Sequence[TransducerHypothesis],
                    words: Sequence[Sequence[int]] | None = None,
                    token_confidences: Sequence[Sequence[float]] | None = None,
                    ) -> tuple[HypothesisRecord, ...]:
    """Records of transducer hypotheses (tokens, their emission frames, score), with the word
    ids of the same best paths and the tokens' confidences where given. A ``-inf`` score
    (empty lattice) is a failure."""
    out = []
    for i, h in enumerate(hyps):
        w = tuple(words[i]) if words is not None else None
        if h.score == -math.inf:
            out.append(HypothesisRecord(tokens=tuple(h.tokens), words=w, error=EMPTY_LATTICE))
        else:
            conf = _probs(token_confidences[i]) if token_confidences is not None else None
            out.append(HypothesisRecord(tokens=tuple(h.tokens), token_frames=tuple(h.timestamps),
                                        words=w, score=_score(h.score), token_confidences=conf))
    return tuple(out)


def _probs(values: Sequence[float]) -> tuple[float, ...]:
    """Confidences as floats in ``[0, 1]`` (clipped against rounding)."""
    return tuple(min(1.0, max(0.0, float(v))) for v in values)


def from_timed_units(units: TimedUnits, words: bool, failed: Sequence[str],
                     tokens: Sequence[Sequence[int]] | None = None,
                     notes: Sequence[str] | None = None) -> tuple[HypothesisRecord, ...]:
    """Records of lattice outputs with frames and confidences
    (:func:`k2dec.lattice.lattice_timed_units`): with ``words`` the units are words (start
    frame, duration, confidence each), else tokens (start frame and confidence each; a
    token's duration is not recorded). ``tokens``: the best path's tokens, for word units
    that come from it; ``notes``: per utterance, e.g. that its lattice was pruned. An
    utterance with a failure reason gets no hypothesis."""
    ids, begin, end = units.ids.tolist(), units.begin.tolist(), units.end.tolist()
    conf = units.confidences.tolist()
    notes = notes if notes is not None else [""] * len(failed)
    out = []
    for i, err in enumerate(failed):
        tok = tuple(tokens[i]) if tokens is not None else None
        if err:
            out.append(HypothesisRecord.failure(err, tokens=not words or tok is not None,
                                                words=words))
        elif words:
            out.append(HypothesisRecord(
                tokens=tok, words=tuple(ids[i]), word_frames=tuple(begin[i]),
                word_durations=tuple(e - b for b, e in zip(begin[i], end[i])),
                word_confidences=_probs(conf[i]), notes=notes[i]))
        else:
            out.append(HypothesisRecord(tokens=tuple(ids[i]), token_frames=tuple(begin[i]),
                                        token_confidences=_probs(conf[i]), notes=notes[i]))
    return tuple(out)


def from_ids(ids: Sequence[Sequence[int]], words: bool, failed: Sequence[str] | None = None,
             scores: torch.Tensor | None = None, notes: Sequence[str] | None = None
             ) -> tuple[HypothesisRecord, ...]:
    """Records of id sequences chosen from an n-best (word ids with ``words``, else token ids),
    with the failure reasons (``""``: none), float ``[num_utts]`` scores of the chosen paths
    where given (``-inf``: no path, recorded as no score) and notes (e.g.
    :meth:`~k2dec.nbest.Nbest.notes`: the lattice was pruned)."""
    failed = failed if failed is not None else [""] * len(ids)
    values = scores.tolist() if scores is not None else [None] * len(ids)
    notes = notes if notes is not None else [""] * len(ids)
    out = []
    for seq, err, sc, note in zip(ids, failed, values, notes):
        seq = tuple(seq)
        out.append(HypothesisRecord(tokens=None if words else seq, words=seq if words else None,
                                    score=None if sc is None else _score(sc), error=err,
                                    notes=note))
    return tuple(out)


def from_aed(nbests: Sequence[Sequence],
             token_frames: Sequence[Sequence[int] | None] | None = None,
             token_confidences: Sequence[Sequence[float]] | None = None,
             ) -> tuple[HypothesisRecord, ...]:
    """Records of the best ended hypothesis of each utterance's attention beam search (its
    ranking score), with the tokens' frames (``None`` for an utterance whose tokens could not
    be aligned) and confidences where given; an utterance where no hypothesis ended fails."""
    out = []
    for i, nb in enumerate(nbests):
        if not nb:
            out.append(HypothesisRecord(tokens=(), error="no hypothesis ended"))
            continue
        frames = token_frames[i] if token_frames is not None else None
        conf = token_confidences[i] if token_confidences is not None else None
        out.append(HypothesisRecord(
            tokens=tuple(nb[0].tokens), score=_score(nb[0].score),
            token_frames=tuple(frames) if frames is not None else None,
            token_confidences=_probs(conf) if conf is not None else None))
    return tuple(out)
