"""Cuts -> utterances -> batches of features for decoding, where nothing is dropped.

What an utterance is (icefall decodes supervision segments; so does k2dec):

- a cut with one supervision is one utterance with the cut's id; if the supervision covers only
  part of the cut, only that part is decoded;
- a cut with several supervisions gives one utterance per supervision, trimmed to it with
  lhotse's ``trim_to_supervisions(keep_overlapping=False)``; each takes its supervision's id
  (lhotse's rule, which icefall's result files follow);
- a cut without supervisions is one utterance, the whole cut, without a reference.

Two utterances with the same id are refused (:func:`utterance_cuts`) before anything is decoded:
results are keyed by id, so one would silently replace the other.

:class:`DecodeDataset` reads each cut's features on its own: a missing, unreadable or malformed
feature file fails that cut (with the reason), not the batch or the job.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import torch
from lhotse import CutSet
from lhotse.cut import Cut
from lhotse.features.io import available_storage_backends
from lhotse.utils import LOG_EPSILON, fastcopy

from ..results.paths import NAME_MAX, check_component, path_component
from .features import frame_energies
from .loader import make_sampler

__all__ = ["DecodeBatch", "DecodeDataset", "FEATURE_READ_ERRORS", "MAX_ID_BYTES", "loudest_frames",
           "make_decode_loader", "split_bad_cuts", "utterance_cuts"]

logger = logging.getLogger(__name__)

#: What reading a cut's features can raise for a bad file, through lhotse's storage backends:
#: a missing file or directory (``OSError``), bytes that do not decode (``ValueError`` from
#: lilcom, numpy), an unknown storage type (``TypeError``), a key not in an archive
#: (``KeyError``), a truncated archive (``EOFError``, ``IndexError``), backend checks
#: (``AssertionError``, ``RuntimeError``).
FEATURE_READ_ERRORS = (OSError, ValueError, TypeError, KeyError, IndexError, EOFError,
                       AssertionError, RuntimeError)


def _covers(cut: Cut, start: float, duration: float) -> bool:
    """True if ``[start, start + duration)`` covers the cut up to half a frame."""
    tol = 0.5 * (getattr(cut, "frame_shift", None) or 0.01)
    return start <= tol and start + duration >= cut.duration - tol


def _check_id(what: str, value: object) -> None:
    """A cut or supervision id must be usable as a field of the result files and as a file
    name (lhotse's feature writers name a cut's file by its id)."""
    if not isinstance(value, str) or not value:
        raise ValueError(f"cuts: {what} id {value!r} must be a non-empty string")
    bad = next((c for c in value if c.isspace() or not c.isprintable()
                or 0xD800 <= ord(c) <= 0xDFFF), None)
    if bad is not None:
        raise ValueError(
            f"cuts: {what} id {value!r} contains {bad!r}: result files (icefall's recogs and "
            "errs files, CTM) separate fields by whitespace and are UTF-8 text; give it an id "
            "without whitespace or control characters (e.g. CutSet.modify_ids)")
    try:
        path_component(value, f"cuts: {what} id", MAX_ID_BYTES)  # its length
        check_component(value, f"cuts: {what} id")  # features are stored under it
    except ValueError as e:
        raise ValueError(f"{e} (e.g. CutSet.modify_ids)") from None


#: The longest cut or supervision id (UTF-8 bytes): a file name with room for an extension.
MAX_ID_BYTES = NAME_MAX - 16


def _number(value: object) -> bool:
    """True for a finite int or float (not a bool, not a str)."""
    return isinstance(value, int | float) and not isinstance(value, bool) \
        and math.isfinite(value)


def _field_problem(cut: Cut) -> str:
    """Why a cut (with a valid id) cannot be decoded, naming the field; ``""`` if it can."""
    if not (_number(cut.duration) and cut.duration > 0):
        return f"duration {cut.duration!r}: a cut needs a number > 0"
    if not (_number(getattr(cut, "start", 0.0)) and getattr(cut, "start", 0.0) >= 0):
        return f"start {cut.start!r}: a cut needs a number >= 0"
    for sup in cut.supervisions:
        _check_id(f"cut {cut.id!r}: supervision", sup.id)
        where = f"supervision {sup.id!r}"
        if not (_number(sup.start) and _number(sup.duration) and sup.duration > 0):
            return (f"{where} has start {sup.start!r} and duration {sup.duration!r}; a "
                    "supervision needs a finite start and a duration > 0")
        if sup.start >= cut.duration or sup.start + sup.duration <= 0:
            return (f"{where} ({sup.start:g} s to {sup.start + sup.duration:g} s) lies outside "
                    f"the cut (0 to {cut.duration:g} s)")
        if sup.text is not None and not isinstance(sup.text, str):
            return f"{where}: text {sup.text!r} must be a string"
    if getattr(cut, "features", None) is not None:  # the audio is not read
        return _features_problem(cut)
    return _recording_problem(cut)


#: lhotse's audio source types.
AUDIO_SOURCE_TYPES = ("file", "url", "command", "memory", "shar")


def _recording_problem(cut: Cut) -> str:
    """Why the recording of a cut without features (if it has one) cannot be read, naming
    the field; ``""`` if it can."""
    rec = getattr(cut, "recording", None)
    if rec is None:
        return ""
    if not (isinstance(rec.sampling_rate, int) and not isinstance(rec.sampling_rate, bool)
            and rec.sampling_rate > 0):
        return f"recording sampling_rate {rec.sampling_rate!r}: must be an int > 0"
    channels = getattr(cut, "channel", 0)
    wanted = channels if isinstance(channels, list) else [channels]
    outside = [c for c in wanted if c not in rec.channel_ids]
    if outside:
        return (f"channel {channels!r}: the recording {rec.id!r} has channels "
                f"{rec.channel_ids}")
    for src in rec.sources:
        if src.type not in AUDIO_SOURCE_TYPES:
            return (f"recording {rec.id!r}: source type {src.type!r} is not one of "
                    f"{', '.join(AUDIO_SOURCE_TYPES)}")
    return ""


def _features_problem(cut: Cut) -> str:
    """Why a cut's features cannot be read, naming the field; ``""`` if they can (a missing
    or corrupt feature file fails when it is read)."""
    feats = cut.features
    if feats.storage_type not in available_storage_backends():
        return (f"features storage_type {feats.storage_type!r} is not one of lhotse's "
                f"({', '.join(available_storage_backends())})")
    if not (isinstance(feats.num_frames, int) and feats.num_frames > 0):
        return f"features num_frames {feats.num_frames!r}: must be an int > 0"
    return ""


def split_bad_cuts(cuts: CutSet) -> tuple[CutSet, dict[str, str]]:
    """The cuts whose fields can be decoded, and ``{cut id: why not}`` of the others (a
    duration that is not a positive number, a supervision text that is not a string or a
    supervision outside its cut, a channel the recording lacks, an unknown audio source or
    feature storage type), each reason naming the cut and the field: one bad cut fails alone
    (a recording or feature file that cannot be read fails its cut when it is read).

    Raises:
      TypeError: ``cuts`` is not a CutSet.
      ValueError: a cut or supervision id that cannot be one (not a non-empty string; with
        whitespace, control characters, ``/`` or ``\\``; ``.`` or ``..``; over
        :data:`MAX_ID_BYTES` bytes): results are keyed by it.
    """
    if not isinstance(cuts, CutSet):
        raise TypeError(f"cuts must be a lhotse CutSet, got {type(cuts).__name__}")
    good, bad = [], {}
    for cut in cuts:
        _check_id("cut", cut.id)
        why = _field_problem(cut)
        if why:
            bad[cut.id] = f"cut {cut.id!r}: {why}: fix or remove it in the manifest"
        else:
            good.append(cut)
    return CutSet.from_cuts(good), bad


def _check_cut(cut: Cut) -> None:
    """Refuse a cut (naming it and the field) whose ids or fields cannot be decoded."""
    _check_id("cut", cut.id)
    why = _field_problem(cut)
    if why:
        raise ValueError(f"cuts: cut {cut.id!r}: {why}: fix or remove it in the manifest")


def utterance_cuts(cuts: CutSet) -> CutSet:
    """One cut per utterance to decode (see the module docstring), each with at most one
    supervision that spans it, in the order of ``cuts`` (a cut's supervisions in their order).

    Raises:
      TypeError: if ``cuts`` is not a CutSet.
      ValueError: if two utterances have the same id (a cut id given twice, a supervision id
        used twice, or a supervision id equal to another cut's id), naming some of them; a cut
        or supervision id with whitespace or control characters, a cut without a positive
        duration, or a supervision without a positive duration or outside its cut, naming
        the cut, the supervision and the field.
    """
    if not isinstance(cuts, CutSet):
        raise TypeError(f"cuts must be a lhotse CutSet, got {type(cuts).__name__}")
    out: list[Cut] = []
    for cut in cuts:
        _check_cut(cut)
        sups = cut.supervisions
        if len(sups) > 1:
            out.extend(cut.trim_to_supervisions(keep_overlapping=False))
        elif len(sups) == 1 and not _covers(cut, sups[0].start, sups[0].duration):
            out.append(fastcopy(cut.truncate(offset=max(0.0, sups[0].start),
                                             duration=sups[0].duration), id=cut.id))
        else:
            out.append(cut)
    repeated = [(cut_id, n) for cut_id, n in Counter(c.id for c in out).items() if n > 1]
    if repeated:
        shown = ", ".join(f"{cut_id!r} x{n}" for cut_id, n in repeated[:5])
        raise ValueError(
            f"cuts: {len(repeated)} utterance ids occur more than once ({shown}); results are "
            "keyed by utterance id (the cut id, or the supervision id for a cut with several "
            "supervisions), so give each cut and supervision a unique id (e.g. "
            "CutSet.modify_ids)")
    return CutSet.from_cuts(out)


@dataclass
class DecodeBatch:
    """A batch of utterances for decoding.

    Attributes:
      features: float32 ``[N, T, F]``, each row padded after its frames (``T`` = the longest).
      num_frames: int64 ``[N]``, valid frames per row.
      cut_ids: the ``N`` utterance ids, rows sorted by decreasing duration.
      texts: each row's reference (``None``: the utterance has none).
      failed: ``{cut_id: reason}`` of the batch's cuts whose features could not be read; they
        are not among the rows.
    """

    features: torch.Tensor
    num_frames: torch.Tensor
    cut_ids: list[str]
    texts: list[str | None]
    failed: dict[str, str]


def _read(cut: Cut) -> np.ndarray:
    """The cut's features ``[T, F]``; a ``ValueError`` if they are unusable."""
    if not cut.has_features:
        raise ValueError("the cut has no features (compute them first: "
                         "k2dec.data.compute_cut_features)")
    feats = cut.load_features()
    if not isinstance(feats, np.ndarray) or feats.ndim != 2 or feats.shape[0] == 0:
        raise ValueError(f"its feature matrix has shape {getattr(feats, 'shape', None)}, "
                         "expected [num_frames > 0, num_features]")
    if cut.num_features is not None and feats.shape[1] != cut.num_features:
        raise ValueError(f"its features have {feats.shape[1]} dims, the manifest says "
                         f"{cut.num_features}")
    if not np.isfinite(feats).all():
        raise ValueError("its features contain NaN or inf")
    return feats


class DecodeDataset(torch.utils.data.Dataset):
    """Maps a CutSet (a batch from a lhotse sampler) of utterances (:func:`utterance_cuts`) to
    a :class:`DecodeBatch`, reading each cut's features on its own so that a bad file fails
    only its cut."""

    def __getitem__(self, cuts: CutSet) -> DecodeBatch:
        rows: list[tuple[Cut, np.ndarray]] = []
        failed: dict[str, str] = {}
        # decreasing duration, ties in the given order (as lhotse's ASR dataset)
        for cut in sorted(cuts, key=lambda c: c.duration, reverse=True):
            try:
                rows.append((cut, _read(cut)))
            except FEATURE_READ_ERRORS as e:
                first_line = str(e).split("\n", 1)[0]  # lhotse appends a long "[extra info]"
                failed[cut.id] = f"cannot read the features: {type(e).__name__}: {first_line}"
                logger.warning("cut %s: %s", cut.id, failed[cut.id])
        num_frames = torch.tensor([f.shape[0] for _, f in rows], dtype=torch.int64)
        dim = rows[0][1].shape[1] if rows else 0
        features = torch.full((len(rows), int(num_frames.max()) if rows else 0, dim),
                              LOG_EPSILON, dtype=torch.float32)
        for i, (_, f) in enumerate(rows):
            features[i, : f.shape[0]] = torch.from_numpy(f)
        texts = [c.supervisions[0].text if c.supervisions else None for c, _ in rows]
        return DecodeBatch(features, num_frames, [c.id for c, _ in rows], texts, failed)


def loudest_frames(features: torch.Tensor, num_frames: torch.Tensor) -> torch.Tensor:
    """Per row of a batch of log-mel features (float ``[N, T, F]``, rows padded after their
    ``num_frames`` ``[N]`` valid frames), the largest frame energy
    (:func:`k2dec.data.frame_energies`), float32 ``[N]`` (``-inf`` for a row without frames)."""
    energy = frame_energies(features)
    valid = torch.arange(energy.shape[1], device=energy.device)[None, :] < num_frames[:, None]
    return energy.masked_fill(~valid, -math.inf).amax(dim=1) if energy.shape[1] else \
        torch.full((energy.shape[0],), -math.inf)


class _AtMost:
    """The batches of a lhotse sampler, each split (in order) where it holds more than
    ``max_duration`` seconds of audio: lhotse's samplers end a batch after the cut that
    exceeds the limit (a 100 s cut then a 200 s cut make one batch at ``max_duration=200``).
    A cut longer than ``max_duration`` is a batch of its own."""

    def __init__(self, sampler: Iterable[CutSet], max_duration: float) -> None:
        self.sampler, self.max_duration = sampler, max_duration

    def __iter__(self) -> Iterator[CutSet]:
        for cuts in self.sampler:
            batch: list[Cut] = []
            seconds = 0.0
            for cut in cuts:
                if batch and seconds + cut.duration > self.max_duration:
                    yield CutSet.from_cuts(batch)
                    batch, seconds = [], 0.0
                batch.append(cut)
                seconds += cut.duration
            if batch:
                yield CutSet.from_cuts(batch)


def make_decode_loader(cuts: CutSet, max_duration: float, num_buckets: int = 10
                       ) -> torch.utils.data.DataLoader:
    """A DataLoader of :class:`DecodeBatch` es over ``cuts`` (utterances, from
    :func:`utterance_cuts`), cuts of similar duration together (the sampler of
    :func:`k2dec.data.make_dataloader`, unshuffled), at most ``max_duration`` seconds of audio
    in each (a longer cut alone).

    Raises:
      TypeError, ValueError: see :func:`k2dec.data.make_sampler`.
    """
    sampler = make_sampler(cuts, max_duration, shuffle=False, num_buckets=num_buckets,
                           world_size=1, rank=0)
    return torch.utils.data.DataLoader(DecodeDataset(), sampler=_AtMost(sampler, max_duration),
                                       batch_size=None)
