"""Each search's own hypothesis type -> :class:`~k2dec.primitives.hypothesis.HypothesisRecord`.

The search modules keep their own result types (lattice ``Hypothesis``,
``TransducerHypothesis``, ``AedHypothesis``, n-best key sequences); the methods convert them
here, once, so that every method returns the same record.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

import k2
import torch

from ..lattice import (
    AuxLabels,
    Hypothesis,
    LatticeStatus,
    RescoreStatus,
    TimedUnits,
    Topology,
    path_units,
)
from ..nbest import Nbest, NbestConfig
from ..nbest.list_confidences import nbest_confidences
from ..primitives.hypothesis import HypothesisRecord, joined_notes
from ..transducer import TransducerHypothesis
from .registry import MethodResult

__all__ = [
    "EMPTY_LATTICE",
    "from_aed",
    "from_ids",
    "from_lattice",
    "from_nbest",
    "from_timed_units",
    "from_transducer",
    "lattice_failures",
    "lattice_notes",
    "oracle_records",
    "probabilities",
    "rescore_failures",
    "with_lattice_notes",
]

#: The reason recorded for a transducer utterance whose lattice has no path.
EMPTY_LATTICE = "empty lattice"


def _score(value: float) -> float | None:
    return None if math.isinf(value) or math.isnan(value) else float(value)


def lattice_failures(records: Sequence) -> list[str]:
    """Per-utterance failure reasons from lattice reports or 1best hypotheses (anything with
    ``status`` and ``reason``): the reason where the lattice is empty, else ``""``."""
    return [r.reason if r.status is LatticeStatus.EMPTY else "" for r in records]


def lattice_notes(records: Sequence) -> list[str]:
    """Per-utterance notes from lattice reports or 1best hypotheses (anything with ``status``
    and ``reason``): the reason where the result is a best partial path
    (``LatticeConfig.allow_partial``), else ``""``."""
    return [r.reason if r.status is LatticeStatus.PARTIAL else "" for r in records]


def rescore_failures(failed: Sequence[str], utterances: Sequence) -> list[str]:
    """Per utterance its lattice's failure reason (``failed``, ``""`` if none), else its
    whole-lattice rescoring's (``utterances``: :class:`~k2dec.lattice.rescore.UtteranceRescore`
    s) where that failed, else ``""``."""
    return [lat or (u.reason if u.status is RescoreStatus.FAILED else "")
            for lat, u in zip(failed, utterances, strict=True)]


def with_lattice_notes(results: Sequence[MethodResult], reports: Sequence
                       ) -> list[MethodResult]:
    """``results`` (one batch's, per setting) with :func:`lattice_notes` of the search's
    ``reports`` (one per utterance) added to each utterance's notes: a method that makes its
    hypotheses from a lattice (n-best, MBR, rescoring) says, as 1best does, when that lattice
    holds only a best partial path (``LatticeConfig.allow_partial``)."""
    extra = lattice_notes(reports)
    if not any(extra):
        return list(results)
    return [MethodResult(r.key, tuple(
        h if not note else replace(h, notes=joined_notes(h.notes, note))
        for h, note in zip(r.hyps, extra, strict=True)), r.config) for r in results]


def from_lattice(hyps: Sequence[Hypothesis], words: bool, failed: Sequence[str] | None = None,
                 notes: Sequence[str] | None = None,
                 token_confidences: Sequence[Sequence[float]] | None = None,
                 ) -> tuple[HypothesisRecord, ...]:
    """Records of lattice 1best hypotheses: tokens with their start frames, score, and with
    ``words`` the word ids with the frames of the arcs emitting them. ``failed`` gives each
    utterance's failure reason (default: :func:`lattice_failures` of ``hyps``), ``notes``
    what else its report should say (e.g. its lattice was pruned; default:
    :func:`lattice_notes` of ``hyps``, which marks best partial paths), ``token_confidences``
    the tokens' confidences where known."""
    failed = lattice_failures(hyps) if failed is None else failed
    notes = notes if notes is not None else lattice_notes(hyps)
    out = []
    for i, (h, err, note) in enumerate(zip(hyps, failed, notes)):
        if err:
            out.append(HypothesisRecord(tokens=h.tokens, words=h.words if words else None,
                                        error=err, notes=note))
        else:
            conf = token_confidences[i] if token_confidences is not None else None
            out.append(HypothesisRecord(
                tokens=h.tokens, token_frames=h.token_frames,
                words=h.words if words else None, word_frames=h.word_frames if words else None,
                score=_score(h.score), notes=note,
                token_confidences=probabilities(conf) if conf is not None else None))
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
            conf = probabilities(token_confidences[i]) if token_confidences is not None else None
            out.append(HypothesisRecord(tokens=tuple(h.tokens), token_frames=tuple(h.timestamps),
                                        words=w, score=_score(h.score), token_confidences=conf))
    return tuple(out)


def probabilities(values: Sequence[float]) -> tuple[float, ...]:
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
                word_confidences=probabilities(conf[i]), notes=notes[i]))
        else:
            out.append(HypothesisRecord(tokens=tuple(ids[i]), token_frames=tuple(begin[i]),
                                        token_confidences=probabilities(conf[i]), notes=notes[i]))
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
            token_confidences=probabilities(conf) if conf is not None else None))
    return tuple(out)


def from_nbest(
    nbest: Nbest,
    chosen: Sequence[tuple[torch.Tensor, torch.Tensor, torch.Tensor]],
    words: bool,
    topology: Topology,
    failed: Sequence[str] | None = None,
    word_start: torch.Tensor | None = None,
    posterior_scale: float = NbestConfig.posterior_scale,
) -> list[tuple[HypothesisRecord, ...]]:
    """Records of the paths chosen from an intersected n-best, one tuple per setting, with
    frames and confidences.

    Args:
      nbest: an n-best after :meth:`~k2dec.nbest.Nbest.intersect` (its FSAs are the best
        alignments of their key sequences, with the lattice's attributes).
      chosen: per setting, ``(best, best_scores, path_scores)``: int64 ``[N]`` index of each
        utterance's chosen path (``-1``: none), float ``[N]`` its score, float ``[num_paths]``
        the scores the setting ranked the paths by.
      words: the keys are word ids (records of words with their frames and durations), else
        token ids (records of tokens with their frames).
      topology: how the lattice's token labels map to frames.
      failed: per utterance, its failure reason (``""``: none); an utterance with no chosen
        path fails with :data:`EMPTY_LATTICE` when it has no other reason.
      word_start: word-start tokens (see :func:`k2dec.lattice.path_units`).
      posterior_scale: of the paths' scores in the confidences
        (:func:`k2dec.nbest.list_confidences.nbest_confidences`).

    Each chosen key's confidence is its n-best posterior. Frames come from the chosen path's
    alignment; a path whose aligned units do not spell its key sequence gets none.
    """
    n = nbest.num_utts
    failed = list(failed) if failed is not None else [""] * n
    device = nbest.device
    best_list = [b.to(device, torch.int64) for b, _, _ in chosen]
    confs = nbest_confidences(nbest.key_seqs.to(device), nbest.path_to_utt().to(device), n,
                              [p.to(device) for _, _, p in chosen], best_list, posterior_scale)
    spans = _chosen_spans(nbest, best_list, words, topology, word_start)
    keys = nbest.key_seqs.tolist()
    notes = nbest.notes()
    out = []
    for (best, scores, _), conf in zip(chosen, confs):
        recs = []
        for u, (b, sc, c) in enumerate(zip(best.tolist(), scores.tolist(), conf.tolist())):
            seq = tuple(keys[b]) if b >= 0 else ()
            if b < 0 or failed[u]:
                recs.append(HypothesisRecord(tokens=None if words else seq,
                                             words=seq if words else None,
                                             error=failed[u] or EMPTY_LATTICE, notes=notes[u]))
                continue
            recs.append(_chosen_record(seq, spans.get(b), sc, c, words, notes[u]))
        out.append(tuple(recs))
    return out


def _chosen_spans(nbest: Nbest, best_list: list[torch.Tensor], words: bool,
                  topology: Topology, word_start: torch.Tensor | None
                  ) -> dict[int, tuple[list[int], list[int], list[int]]]:
    """Units, begin and end frames of every path chosen by some setting, found once (none
    where the units do not match the tokens one to one)."""
    used = torch.unique(torch.cat(best_list)) if best_list else torch.zeros(0, dtype=torch.int64)
    used = used[used >= 0]
    if not used.numel():
        return {}
    paths = k2.index_fsa(nbest.fsa, used.to(torch.int32))
    aux = AuxLabels.WORDS if words else AuxLabels.TOKENS
    try:
        ids, begin, end = path_units(paths, topology, word_start, aux)
    except ValueError:  # units that do not match the tokens one to one: no frames
        return {}
    rows = zip(used.tolist(), ids.tolist(), begin.tolist(), end.tolist())
    return {p: (i, b, e) for p, i, b, e in rows}


def _chosen_record(seq: tuple[int, ...], span: tuple[list[int], list[int], list[int]] | None,
                   score: float, conf: list[float], words: bool, note: str
                   ) -> HypothesisRecord:
    """The record of a chosen path's key sequence ``seq``, with its frames where its aligned
    units ``span`` spell ``seq``."""
    ok = span is not None and tuple(span[0]) == seq
    if words:
        return HypothesisRecord(
            words=seq, word_frames=tuple(span[1]) if ok else None,
            word_durations=tuple(e - f for f, e in zip(span[1], span[2])) if ok
            else None, score=_score(score), word_confidences=probabilities(conf), notes=note)
    return HypothesisRecord(
        tokens=seq, token_frames=tuple(span[1]) if ok else None, score=_score(score),
        token_confidences=probabilities(conf), notes=note)


def oracle_records(
    nbest: Nbest,
    refs: list[list[int]],
    words: bool,
    topology: Topology,
    failed: Sequence[str] | None = None,
    word_start: torch.Tensor | None = None,
    posterior_scale: float = NbestConfig.posterior_scale,
    tie_break: str = NbestConfig.tie_break,
) -> list[tuple[HypothesisRecord, ...]]:
    """Records of the oracle paths of an intersected n-best (:meth:`Nbest.oracle`: the key
    sequence closest to each reference, ties broken by ``tie_break``) as :func:`from_nbest`
    makes them: frames from the path's alignment, confidences from the list posteriors of the
    paths' lattice scores (the same list distribution as the ``nbest`` methods'; how likely
    the lattice finds each oracle word). An oracle has no score of its own: the records'
    ``score`` is ``None``."""
    best, _ = nbest.oracle(refs, tie_break)
    none = torch.full(best.shape, math.nan, dtype=torch.float64, device=best.device)
    return from_nbest(nbest, [(best, none, nbest.tot_scores().values)], words, topology,
                      failed, word_start, posterior_scale)
