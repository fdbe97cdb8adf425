"""Each search's own hypothesis type -> :class:`~k2dec.utils.HypothesisRecord`.

The search modules keep their own result types (lattice ``Hypothesis``,
``TransducerHypothesis``, ``AedHypothesis``, n-best key sequences); the methods convert them
here, once, so that every method returns the same record.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from ..lattice import Hypothesis, LatticeStatus
from ..transducer import TransducerHypothesis
from ..utils import HypothesisRecord

__all__ = [
    "EMPTY_LATTICE",
    "from_aed",
    "from_ids",
    "from_lattice",
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
                    words: Sequence[Sequence[int]] | None = None
                    ) -> tuple[HypothesisRecord, ...]:
    """Records of transducer hypotheses (tokens, their emission frames, score), with the word
    ids of the same best paths where given. A ``-inf`` score (empty lattice) is a failure."""
    out = []
    for i, h in enumerate(hyps):
        w = tuple(words[i]) if words is not None else None
        if h.score == -math.inf:
            out.append(HypothesisRecord(tokens=tuple(h.tokens), words=w, error=EMPTY_LATTICE))
        else:
            out.append(HypothesisRecord(tokens=tuple(h.tokens), token_frames=tuple(h.timestamps),
                                        words=w, score=_score(h.score)))
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


def from_aed(nbests: Sequence[Sequence]) -> tuple[HypothesisRecord, ...]:
    """Records of the best ended hypothesis of each utterance's attention beam search (its
    ranking score); an utterance where no hypothesis ended fails."""
    return tuple(
        HypothesisRecord(tokens=tuple(nb[0].tokens), score=_score(nb[0].score)) if nb
        else HypothesisRecord(tokens=(), error="no hypothesis ended")
        for nb in nbests)
