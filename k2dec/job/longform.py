"""Utterances longer than :attr:`~k2dec.job.DecodeConfig.segment_max`: decoded in segments
through the job's own batch path, stitched back into one record in the recording's clock.

For such an utterance (a whole long recording, typically):

1. it is cut into segments (:func:`segment_utterance`): silero-vad over its audio file
   (:func:`k2dec.longform.vad_segments`, the cut's range of the file read in blocks;
   segments of at most ``segment_max`` seconds, split at the quietest point; fixed windows
   only for a cut with no audio file, e.g. one read through ffmpeg) or fixed windows with context
   (:func:`k2dec.longform.fixed_windows`); segment starts are rounded down to the model's
   output frame grid (``frame_shift * subsampling_factor``, 40 ms for the shipped model), so
   the stitched frames are exact;
2. each segment's features are its frames of the utterance's features (lhotse reads the
   range: ``Cut.truncate``); segments go through :func:`k2dec.job.batches.decode_or_split`
   and :func:`~k2dec.job.batches.silenced` in batches (:func:`long_batch_seconds`: at most
   ``max_duration`` and twice ``segment_max`` seconds, one ``segment_max`` for a method that
   builds a lattice), as short utterances do, so every method (lattices, n-best, MBR, LODR,
   hotwords, LM fusion, confidences) works per segment; a segment that fails (unreadable
   features, an empty lattice) is left out, said in the record's notes and the log (the
   recording fails only when every segment does);
3. per setting, the segments' records are stitched by time
   (:func:`k2dec.longform.stitch_records`) into one
   :class:`~k2dec.primitives.hypothesis.HypothesisRecord` whose frames count from the
   utterance's start; its words come from it as any record's do.

Speech the VAD dropped (runs shorter than its minimum) is never silent: its total goes into
the record (``dropped_speech``), its notes, the log and the job's summary. A recording in
which the VAD finds no speech gets an empty hypothesis whose notes say so.

Oracle methods (``needs_references``: nbest-oracle, fast_beam_search_nbest_oracle) read a
reference per segment: the recording's one reference is cut into one span per segment
(:func:`segment_references`) before step 2. A first greedy pass over the segments (greedy
CTC; the transducer's greedy search for a model without a CTC head) gives the words of each
segment's own part (a window's core), and :func:`k2dec.longform.assign_words` (what forced
alignment uses) anchors the reference words to them and shares the runs between two
segments' anchors where the segments' CTC paths score best (their log-probs wait in a
temporary file, not in memory); every word goes to exactly one segment, in order, so the
spans concatenate to the reference. The record's notes say how it was split; its WER is
scored against the whole reference, as any long recording's.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import logging
import math
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch
from lhotse.cut import Cut
from lhotse.utils import LOG_EPSILON

from ..data import load_feature_range
from ..lang import bpe_case, match_case
from ..lattice import ctc_greedy_search
from ..lattice.forced_align import path_scores
from ..longform import (
    RunScorer,
    Segment,
    Segmentation,
    VadConfig,
    WindowConfig,
    assign_words,
    fixed_windows,
    kept_tokens,
    stitch_records,
    vad_segments,
    window_segments,
    words_by_segment,
)
from ..methods import Method
from ..primitives.hypothesis import HypothesisRecord, joined_notes
from ..transducer import FastBeamSearchConfig, greedy_search
from .assets import DecodeAssets, hypothesis_texts
from .batches import Decoded, decode_or_split, silenced
from .config import DecodeConfig
from .encoder import JobEncoder
from .outputs import word_start_mask

__all__ = ["LongDecoded", "builds_lattice", "decode_long", "dropped_speech", "is_long",
           "long_batch_seconds", "long_key", "output_frame_shift", "segment_references",
           "segment_utterance", "window_seconds"]

logger = logging.getLogger(__name__)

#: Seconds below which the last piece of a speech run split at the cap joins the piece
#: before it (a sliver too short for the model would fail).
_MIN_PIECE = 1.0

#: A batch of a long recording's segments holds at most this many times ``segment_max``
#: seconds (:func:`long_batch_seconds`).
LONG_BATCH_FACTOR = 2.0

#: The same for methods that build a lattice (:func:`builds_lattice`): their peak is the
#: largest lattice of one batch, and a longer recording, with more batches, reached a larger
#: one (1best 792 / 947 MB at 1 / 60 minutes with batches of 60 s).
LATTICE_BATCH_FACTOR = 1.0

#: Graphs a method intersects with its network output (it builds a lattice).
_LATTICE_GRAPHS = frozenset({"H", "HLG", "LG", "G"})


def is_long(cut: Cut, config: DecodeConfig) -> bool:
    """Whether ``cut`` is decoded in segments (longer than ``config.segment_max``)."""
    return cut.duration > config.segment_max


def long_key(config: DecodeConfig) -> str:
    """What a long utterance's results depend on besides its cut: the segmenter's settings
    (part of its input digest: a rerun with others decodes it again)."""
    extra = "".join(f":{name}={getattr(config, name):g}" for name in (
        "segment_window", "segment_search", "segment_trim_db") if getattr(config, name))
    return (f"{config.segmenter}:{config.segment_max:g}:{config.segment_context:g}:"
            f"{config.max_duration:g}{extra}")


def window_seconds(model: Any, config: DecodeConfig) -> float:
    """Seconds of a window's core for the windows segmenter: ``config.segment_window``, else
    the p99 of the model's training utterances' durations (at most ``segment_max``), else
    ``segment_max`` (logged: the model file does not record them)."""
    if config.segment_window is not None:
        return config.segment_window
    seconds = getattr(model, "utterance_seconds", None)
    if not seconds:
        logger.info("the model file records no training utterance durations: windows of "
                    "segment_max=%g s", config.segment_max)
        return config.segment_max
    return min(config.segment_max, max(1.0, seconds["p99"]))


def dropped_speech(records: Mapping[str, Mapping[str, Any]], name: str) -> float:
    """Seconds of speech the VAD dropped in a results file's records (logged under the
    job's ``name`` when there is some)."""
    total = sum(float(r.get("dropped_speech") or 0.0) for r in records.values())
    if total > 0:
        logger.warning("%s: %.2f s of speech the VAD found was dropped (runs shorter than its "
                       "minimum speech length); see dropped_speech in the results file", name,
                       total)
    return total


def output_frame_shift(assets: DecodeAssets, config: DecodeConfig) -> float:
    """Seconds per network output frame: the grid segment starts are rounded to."""
    sub = config.subsampling_factor or int(assets.model.subsampling_factor)
    return config.frame_shift * sub


def _audio_range(cut: Cut) -> tuple[str, float] | None:
    """``(audio file, offset in seconds)`` of a cut that is a range of a single-file
    recording (the whole of it, or a part: a recordings-only ``--cuts`` manifest's cut; or,
    for a multi-channel file downmixed into features, the file and offset
    :func:`k2dec.data.cut_features` names in ``custom["audio_file"]`` /
    ``custom["audio_offset"]``), else ``None``."""
    rec = getattr(cut, "recording", None)
    custom = getattr(cut, "custom", None) or {}
    if rec is None and isinstance(custom.get("audio_file"), str):
        return custom["audio_file"], float(custom.get("audio_offset") or 0.0)
    if rec is None or len(rec.sources) != 1 or rec.sources[0].type != "file":
        return None
    if cut.start < 0 or cut.start + cut.duration > rec.duration + 0.02:
        return None
    return rec.sources[0].source, float(cut.start)


def _on_grid(seg: Segmentation, grid: float) -> Segmentation:
    """``seg`` with every segment's start rounded down to a multiple of ``grid`` seconds."""
    out: list[Segment] = []
    for s in seg.segments:
        if s.core_start is None:
            s = Segment(round(math.floor(s.start / grid + 1e-6) * grid, 6), s.end)
            if out and out[-1].end > s.start:  # pieces of one speech run: still a tiling
                out[-1] = Segment(out[-1].start, s.start)
            if out and out[-1].end >= s.start and s.duration < _MIN_PIECE:
                out[-1] = Segment(out[-1].start, s.end)  # a sliver of a split run: joined
                continue
        out.append(s)
    return replace(seg, segments=tuple(out))


def segment_utterance(cut: Cut, config: DecodeConfig, grid: float,
                      window: float | None = None) -> Segmentation:
    """The segments of a long utterance (times from its start), as the module docstring says.

    Args:
      cut: the utterance (its audio file is read by the VAD; its duration gives windows).
      config: ``segmenter``, ``segment_max``, ``segment_context``, ``segment_search``,
        ``segment_trim_db``.
      grid: seconds per model output frame; every segment starts on a multiple of it.
      window: seconds of a window's core (:func:`window_seconds`); ``None``:
        ``config.segment_window`` or ``segment_max``.
    """
    where = _audio_range(cut)
    if config.segmenter == "vad" and where is None:
        logger.warning("cut %s: no audio file for the VAD; cut into fixed windows", cut.id)
    if where is None or config.segmenter == "windows":
        window = window or config.segment_window or config.segment_max
        chunk = max(1, round(window / grid)) * grid
        context = round(config.segment_context / grid) * grid
        windows = WindowConfig(chunk=chunk, context=context, search=min(
            chunk / 2, round(config.segment_search / grid) * grid),
            trim_db=config.segment_trim_db)
        # quiet seams read the energy of a whole file: a cut that is the file from its start
        whole_file = where is not None and where[1] == 0.0
        seg = window_segments(where[0], windows, grid) if whole_file and windows.search \
            else fixed_windows(cut.duration, windows)
    else:
        seg = vad_segments(where[0], VadConfig(max_segment=config.segment_max), where[1],
                           cut.duration)
        seg = replace(seg, segments=tuple(s for s in seg.segments if s.start < cut.duration))
    return _on_grid(seg, grid)


def _features(cut: Cut, seg: Segment) -> np.ndarray:
    """The utterance's feature frames of ``seg`` (only those are read)."""
    piece = cut.truncate(offset=seg.start, duration=seg.duration, keep_excessive_supervisions=False,
                         preserve_id=True)
    feats = load_feature_range(piece)
    if not np.isfinite(feats).all():
        raise ValueError("its features contain NaN or inf")
    return feats


def builds_lattice(method: Method, method_config: Any) -> bool:
    """Whether ``method`` builds a lattice: it intersects a graph (H, HLG, LG, G) with the
    network output, or runs fast_beam_search (its config has a ``search`` part)."""
    return bool(_LATTICE_GRAPHS.intersection(method.requires)) or isinstance(
        getattr(method_config, "search", None), FastBeamSearchConfig)


def long_batch_seconds(config: DecodeConfig, lattice: bool = False) -> float:
    """Seconds of segments decoded in one batch: ``max_duration``, but at most
    ``LONG_BATCH_FACTOR * segment_max`` (a segment of a long recording is up to
    ``segment_max`` seconds, far longer than a typical utterance, and the encoder's memory
    grows with the square of an input's length: 200 s of 30 s segments took the shipped
    model's greedy_search from 0.44 GB loaded to a 1.79 GB peak, 60 s of them to 0.98 GB),
    ``LATTICE_BATCH_FACTOR * segment_max`` for a method that builds a lattice (``lattice``);
    never less than ``segment_max`` (one segment)."""
    factor = LATTICE_BATCH_FACTOR if lattice else LONG_BATCH_FACTOR
    return max(config.segment_max, min(config.max_duration, factor * config.segment_max))


def _batches(segments: Sequence[Segment], max_duration: float) -> Iterator[list[int]]:
    """Indices of segments, at most ``max_duration`` seconds per batch, by length (fewer
    padded frames; each batch's indices ascending)."""
    batch: list[int] = []
    seconds = 0.0
    for i in sorted(range(len(segments)), key=lambda j: (segments[j].duration, j)):
        s = segments[i]
        if batch and seconds + s.duration > max_duration:
            yield sorted(batch)
            batch, seconds = [], 0.0
        batch.append(i)
        seconds += s.duration
    if batch:
        yield sorted(batch)


def _padded(rows: list[np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
    lens = torch.tensor([r.shape[0] for r in rows], dtype=torch.int64)
    feats = torch.full((len(rows), int(lens.max()), rows[0].shape[1]), LOG_EPSILON,
                       dtype=torch.float32)
    for i, r in enumerate(rows):
        feats[i, : r.shape[0]] = torch.from_numpy(r)
    return feats, lens


@dataclass(frozen=True)
class LongDecoded:
    """A long utterance decoded in segments.

    Attributes:
      decoded: ``({setting: (stitched record, words)}, failure reason)`` as for any utterance.
      segments: ``(start, end)`` seconds of each segment decoded, from the utterance's start.
      dropped_speech: seconds of speech the VAD dropped.
      audio_seconds: seconds of audio decoded (the segments' total).
    """

    decoded: Decoded
    segments: tuple[tuple[float, float], ...]
    dropped_speech: float
    audio_seconds: float

    def extra(self) -> dict[str, Any]:
        """The results-file fields of a long utterance besides its hypotheses."""
        return {"segments": [[round(a, 3), round(b, 3)] for a, b in self.segments],
                "dropped_speech": round(self.dropped_speech, 3)}


@functools.lru_cache(maxsize=1)
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or ``None`` where the C library has none (musl, macOS)."""
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None


def _release_freed() -> None:
    """Give the heap's free pages back to the system after a batch of segments. The
    batches' tensors (encoder activations, lattices) come in many sizes; glibc keeps the
    freed ones, fragmented, and a 77-minute recording's peak RSS crept 20 MB above a
    1-minute one's (with the mmap threshold fixed, half of it went away: fragmentation)."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


def _decode_segments(method: Method, method_config: Any, assets: DecodeAssets, cut: Cut,
                     segments: Sequence[Segment], config: DecodeConfig, encoder: JobEncoder,
                     silence: Any, refs: Sequence[list[str]] | None = None) -> list[Decoded]:
    """Each segment's hypotheses (without their word strings: the stitched record's are
    made from its ids) or failure reason, decoded in batches of at most
    :func:`long_batch_seconds` (fewer for a method that builds a lattice); ``refs``: each
    segment's reference words (oracle methods), else none."""
    out: list[Decoded | None] = [None] * len(segments)
    seconds = long_batch_seconds(config, builds_lattice(method, method_config))
    for idx in _batches(segments, seconds):
        rows = []
        for i in idx:
            try:
                rows.append(_features(cut, segments[i]))
            except (ValueError, OSError, RuntimeError) as e:
                rows.append(f"cannot read its features: {type(e).__name__}: {e}")
        read = [r for r in rows if not isinstance(r, str)]
        done: list[Decoded] = []
        if read:
            feats, lens = _padded(read)
            batch_refs = [list(refs[i]) if refs is not None else []
                          for i, r in zip(idx, rows) if not isinstance(r, str)]
            done = silenced(decode_or_split(method, method_config, assets, feats, lens,
                                            batch_refs, encoder), feats, lens, silence)
        done = [({k: (rec, []) for k, (rec, _) in hyps.items()}, error)
                for hyps, error in reversed(done)]
        for i, r in zip(idx, rows):
            out[i] = ({}, r) if isinstance(r, str) else done.pop()
        del rows, read
        _release_freed()
    return out  # type: ignore[return-value]


class _SpilledLogProbs:
    """Per segment, its float16 ``[T, V]`` CTC log-probs, kept in a temporary file between
    the first pass and the scoring of the runs between segments (memory: what one scoring
    batch reads, not a recording's worth: an hour at 256 outputs is about 46 MB)."""

    def __init__(self, file: Any, num_segments: int) -> None:
        self.file = file
        self.where: list[tuple[int, tuple[int, int]] | None] = [None] * num_segments

    def put(self, i: int, log_probs: torch.Tensor) -> None:
        data = log_probs.detach().to("cpu", torch.float16).contiguous().numpy()
        self.where[i] = (self.file.seek(0, 2), tuple(data.shape))
        self.file.write(data.tobytes())

    def __getitem__(self, i: int) -> torch.Tensor:
        offset, shape = self.where[i]  # type: ignore[misc]
        self.file.seek(offset)
        data = self.file.read(2 * shape[0] * shape[1])
        return torch.from_numpy(np.frombuffer(data, dtype=np.float16).reshape(shape).copy())


def _greedy_records(assets: DecodeAssets, feats: torch.Tensor, lens: torch.Tensor,
                    encoder: JobEncoder) -> tuple[list[HypothesisRecord], torch.Tensor | None,
                                                  torch.Tensor]:
    """A batch's first pass: greedy CTC tokens and frames (a model with a CTC head; then
    also its log-probs ``[N, T, V]``), else the transducer's greedy search; and the output
    lengths ``[N]``."""
    out = encoder(assets.model, feats, lens)
    if out.ctc_log_probs is not None:
        hyps = ctc_greedy_search(out.ctc_log_probs, out.encoder_out_lens)
        return ([HypothesisRecord(tokens=h.tokens, token_frames=h.token_frames) for h in hyps],
                out.ctc_log_probs, out.encoder_out_lens)
    if assets.model.transducer is None:
        raise ValueError(f"the first pass that splits the reference needs a CTC head or a "
                         f"transducer; the model has neither ({assets.model.describe()})")
    hyps = greedy_search(assets.model.transducer, out.encoder_out, out.encoder_out_lens)
    return ([HypothesisRecord(tokens=tuple(h.tokens), token_frames=tuple(h.timestamps))
             for h in hyps], None, out.encoder_out_lens)


def _first_pass(assets: DecodeAssets, cut: Cut, segments: Sequence[Segment],
                config: DecodeConfig, encoder: JobEncoder, spill: _SpilledLogProbs
                ) -> tuple[list[list[str]], bool]:
    """Per segment, the first pass's words of its own part (:func:`k2dec.longform.kept_tokens`:
    a window's core), in batches as :func:`_decode_segments`'s; its CTC log-probs go to
    ``spill``. Also whether every segment has log-probs (a CTC head, every segment read)."""
    grid = output_frame_shift(assets, config)
    records: list[HypothesisRecord] = [HypothesisRecord(tokens=(), token_frames=())
                                       for _ in segments]
    scored = True
    for idx in _batches(segments, long_batch_seconds(config)):
        rows = {}
        for i in idx:
            try:
                rows[i] = _features(cut, segments[i])
            except (ValueError, OSError, RuntimeError):  # no words; the second pass says why
                scored = False
        if not rows:
            continue
        feats, lens = _padded(list(rows.values()))
        with torch.no_grad():
            hyps, log_probs, out_lens = _greedy_records(assets, feats, lens, encoder)
        for k, i in enumerate(rows):
            records[i] = hyps[k]
            if log_probs is not None:
                spill.put(i, log_probs[k, : int(out_lens[k])])
        scored = scored and log_probs is not None
        del rows, feats, log_probs
        _release_freed()
    kept = kept_tokens(list(zip(segments, records)), grid, word_start_mask(assets))
    return [_words(HypothesisRecord(tokens=tuple(r.tokens[k] for k in ks)), assets)
            for r, ks in zip(records, kept)], scored


def _scorer(assets: DecodeAssets, reference: Sequence[str], log_probs: _SpilledLogProbs
            ) -> RunScorer | None:
    """The reference's runs between segments scored by each segment's best CTC path through
    the words (:func:`k2dec.lattice.forced_align.path_scores`, as forced alignment does);
    ``None`` without a BPE model to spell them."""
    if assets.sp is None:
        return None
    case = bpe_case(assets.sp)
    pieces = [tuple(int(t) for t in assets.sp.encode(match_case(w, case))) for w in reference]

    def score(jobs: list[tuple[int, list[int]]]) -> list[float]:
        return path_scores(log_probs, [(seg, [pieces[w] for w in words]) for seg, words in jobs])
    return score


def segment_references(assets: DecodeAssets, cut: Cut, segments: Sequence[Segment],
                       config: DecodeConfig, encoder: JobEncoder, reference: Sequence[str]
                       ) -> tuple[list[list[str]], str]:
    """A long utterance's reference cut into one span per segment, for an oracle method:
    every word in exactly one segment, in order (the spans concatenate to ``reference``).

    A first pass (greedy CTC, or the transducer's greedy search without a CTC head; the
    words of each segment's own part, a window's core) anchors the words to segments and the
    runs between two segments' anchors are shared where the segments' CTC paths score best
    (:func:`k2dec.longform.assign_words`, what forced alignment does); words the first pass
    has not (speech the VAD dropped, say) go with their neighbours.

    Returns:
      ``(spans, note)``: per segment its reference words; a note saying how it was split.
    """
    ref = list(reference)
    with tempfile.TemporaryFile() as file:
        spill = _SpilledLogProbs(file, len(segments))
        try:
            words, scored = _first_pass(assets, cut, segments, config, encoder, spill)
        except ValueError as e:
            return [ref] + [[] for _ in segments[1:]], f"the reference went to the first " \
                f"segment (no first pass: {e})"
        score = _scorer(assets, ref, spill) if scored and ref else None
        fold = [[w.casefold() for w in ws] for ws in words]
        try:
            segs = assign_words([w.casefold() for w in ref], fold, score)
        except ValueError as e:  # a word the scorer cannot spell: anchors and neighbours
            logger.warning("cut %s: reference runs not scored: %s", cut.id, e)
            segs = assign_words([w.casefold() for w in ref], fold)
    spans = words_by_segment(ref, segs, len(segments))
    how = "their CTC path scores" if score is not None else "the segment before them"
    note = (f"reference of {len(ref)} words split over the {len(segments)} segments by a "
            f"first greedy pass ({sum(map(bool, spans))} segments got words; words between "
            f"two segments' anchors went by {how})")
    return spans, note


def _words(record: HypothesisRecord, assets: DecodeAssets) -> list[str]:
    """The words of a stitched record (as :func:`k2dec.job.assets.hypothesis_texts`)."""
    result = SimpleNamespace(words=None if record.words is None else [list(record.words)],
                             tokens=[list(record.tokens or ())])
    return hypothesis_texts(result, assets)[0]


def _empty(rec: HypothesisRecord, note: str) -> HypothesisRecord:
    empty = {f.name: () for f in fields(rec) if isinstance(getattr(rec, f.name), tuple)}
    return replace(rec, **empty, score=None, error="", notes=note)


def _stitched(pieces: list[tuple[Segment, Decoded]], grid: float, assets: DecodeAssets,
              notes: str) -> Decoded:
    word_start = word_start_mask(assets)
    failed = [f"segment {seg.start:.2f}-{seg.end:.2f} s: {error}"
              for seg, (_, error) in pieces if error]
    pieces = [p for p in pieces if not p[1][1]]
    if not pieces:
        return {}, failed[0]
    if failed:  # the others are kept; what is missing is said, never silent
        notes = joined_notes(notes, f"{len(failed)} segments failed, their words are missing "
                                    f"({'; '.join(failed)})")
    out = {}
    for key in pieces[0][1][0]:
        rec = stitch_records([(seg, hyps[key][0]) for seg, (hyps, _) in pieces], grid,
                             word_start)
        if notes:
            rec = replace(rec, notes=joined_notes(notes, rec.notes))
        out[key] = (rec, _words(rec, assets))
    return out, ""


def decode_long(method: Method, method_config: Any, assets: DecodeAssets, cut: Cut,
                config: DecodeConfig, encoder: JobEncoder, silence: Any,
                reference: Sequence[str] | None = None) -> LongDecoded:
    """Decode one long utterance (with features) in segments and stitch its hypotheses, as
    the module docstring says; a failure (unreadable audio for the VAD, a failing segment,
    a method that cannot stitch) is the returned record's reason, never an exception.

    Args:
      reference: the utterance's reference words (case matched to the vocabulary), for a
        method that reads one (an oracle): cut into one span per segment
        (:func:`segment_references`); ``None`` fails an oracle's utterance.
    """
    grid = output_frame_shift(assets, config)
    if method.needs_references and reference is None:
        return LongDecoded(({}, f"method {method.name!r} reads the utterance's reference; "
                                "it has none"), (), 0.0, 0.0)
    try:
        window = window_seconds(assets.model, config) if config.segmenter == "windows" else None
        seg = segment_utterance(cut, config, grid, window)
    except ValueError as e:
        return LongDecoded(({}, f"cannot segment it: {e}"), (), 0.0, 0.0)
    if seg.dropped:
        logger.warning("cut %s: %s", cut.id, seg.notes)
    segments = list(seg.segments)
    if not segments:  # no speech: an empty hypothesis for every setting, saying so
        probe = [Segment(0.0, min(cut.duration, 1.0))]
        decoded = _decode_segments(method, method_config, assets, cut, probe, config,
                                   encoder, silence, [[]])
        hyps, error = decoded[0]
        decoded = ({k: (_empty(r, seg.notes), []) for k, (r, _) in hyps.items()}, error)
        return LongDecoded(decoded, (), seg.dropped_speech, 0.0)
    refs, notes = None, seg.notes
    if method.needs_references:
        refs, split = segment_references(assets, cut, segments, config, encoder, reference)
        notes = joined_notes(notes, split)
    decoded = _decode_segments(method, method_config, assets, cut, segments, config, encoder,
                               silence, refs)
    for s, (_, error) in zip(segments, decoded):
        if error:
            logger.warning("cut %s: segment %.2f-%.2f s failed, its words are missing: %s",
                           cut.id, s.start, s.end, error)
    try:
        result = _stitched(list(zip(segments, decoded)), grid, assets, notes)
    except ValueError as e:
        result = ({}, f"cannot stitch its segments: {e}")
    return LongDecoded(result, tuple((s.start, s.end) for s in segments), seg.dropped_speech,
                       sum(s.duration for s in segments))
