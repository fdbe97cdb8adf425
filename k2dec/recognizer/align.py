"""Forced alignment of recordings: audio + its transcript -> the time of every word and token
(``k2dec align``, :meth:`k2dec.Recognizer.align`).

How a recording is aligned:

1. **Transcript**: split at whitespace; punctuation at a word's edges is kept for display
   but not aligned (a word that is only punctuation, ``"--"``, joins the word before it);
   each word is spelled in the model's BPE pieces (sentencepiece spells any word, in the
   vocabulary or not; words missing from the lang dir's ``words.txt`` are flagged ``oov``).
2. **Segments**: a recording no longer than :attr:`AlignConfig.max_segment` is one segment.
   A longer one is cut by the VAD (:func:`k2dec.longform.vad_segments`, segments of at most
   ``max_segment`` seconds) and each segment is decoded once by greedy CTC; the transcript
   is matched to the concatenated greedy words with kaldialign's edit-distance alignment,
   and each transcript word the greedy pass got right goes to that greedy word's segment.
   A run of other words between words of two segments (the greedy pass often misses or
   garbles a segment's first or last word, or a whole short segment) is shared among those
   two segments and the ones between them, in order, where the sum of their best CTC path
   scores is highest (dynamic programming over the split points, the alignments batched);
   other unmatched words go with the word before them. Memory is bounded by the
   segment length: the CTC log-probs of the segments are kept in float16 between the two
   passes (about 46 MB per hour at 256 outputs), the audio of one batch
   (:attr:`AlignConfig.batch_seconds`) at once.
3. **Alignment**: each segment's words are force-aligned to its CTC log-probs
   (:func:`k2dec.lattice.align_words`, batched over segments), with a garbage path allowed
   between words, before the first and after the last: on each frame it takes the
   frame's best label (what an unconstrained CTC pass would say), at
   :attr:`AlignConfig.untranscribed_penalty` per run. Where the audio has words the
   transcript lacks, the free labels beat the transcript's path by more than that, and the
   run is reported as **speech not in the transcript**
   (:attr:`AlignmentResult.untranscribed`, with its times); a segment given no words is
   aligned too, so its speech is reported rather than dropped. A transcript word may also be
   **skipped** (:attr:`AlignConfig.skip_penalty` per word, at most
   :data:`k2dec.lattice.forced_align.MAX_SKIPPED_RUN` in a row): a word the audio lacks
   costs that penalty instead of squeezing into frames its neighbours said, so the
   neighbours keep their times; it is reported as not in the audio
   (:attr:`AlignedWord.skipped`, missing, no start or end).
4. **Flags**: each word gets the time of its frames, a confidence and a score (the sum
   over its frames of how much worse the word's path scores than the frame's best label:
   a goodness-of-pronunciation ratio). A word under :attr:`AlignConfig.min_word_score`
   (or :attr:`AlignConfig.min_confidence`), or one a segment has too few frames for, is
   **missing**: reported (:attr:`AlignmentResult.missing`), never given invented times (an
   unaligned word has no times and is left out of the written files). The thresholds were
   chosen on dev material, not the test sets (:class:`AlignConfig`).

Times are in seconds of the recording's clock: a frame ``f`` of a segment starting at ``s``
starts at ``s + f * model.output_frame_shift``.
"""

from __future__ import annotations

import json
import logging
import math
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf
import torch
from lhotse import Recording
from tqdm import tqdm

from ..data.audio_io import AudioLimits, probe_recording
from ..lang import bpe_case, match_case
from ..lattice import ctc_greedy_search
from ..lattice.forced_align import Untranscribed, align_words, path_scores
from ..longform import Segment, Segmentation, VadConfig, vad_segments
from ..longform.anchor import assign_words
from ..primitives.sizes import check_float_range
from ..results import (
    CtmWord,
    SubtitleConfig,
    write_alignments,
    write_ctm,
    write_subtitles,
    write_textgrid,
)
from ..results.paths import replace_text
from ..results.text import scoring_words
from .inputs import check_sample_rate, waveform_samples

logger = logging.getLogger(__name__)

__all__ = ["ALIGN_FORMATS", "AlignConfig", "AlignedToken", "AlignedWord", "AlignmentResult",
           "TranscriptWord", "align_audio", "align_files", "align_recording", "flag_word",
           "read_transcripts", "transcript_units", "write_align_summary",
           "write_alignment_files"]

ALIGN_FORMATS = ("srt", "vtt", "ctm", "jsonl", "textgrid", "lhotse")
"""The ``--output-format`` values of ``k2dec align``."""


GARBAGE_FRAME_PENALTY = 0.05
"""Log-prob paid per frame of speech not in the transcript (keeps a garbage run tight
around the frames the network gives to tokens; the run's entry penalty is
:attr:`AlignConfig.untranscribed_penalty`)."""


UNTRANSCRIBED_WIDEN = 0.3
"""Seconds a reported stretch of speech not in the transcript is widened by on each side,
over blank frames (not past the transcript's tokens around it): the garbage run itself
covers only the frames the network spikes on (see :func:`_widened`)."""


SKIP_PENALTY_DEFAULT = 20.0
""":attr:`AlignConfig.skip_penalty`'s default (chosen on dev material, see
:class:`AlignConfig`)."""


@dataclass(frozen=True)
class AlignConfig:
    """How recordings are aligned and what is flagged (seconds unless said).

    The flag thresholds were chosen on dev material (the shipped corpus' held-out dev-clean
    split, ``scripts/make_align_dev.py``), not on the test sets, by
    ``python -m scripts.bench.align_flags`` (RESULTS.md, "Forced alignment: flags").

    Attributes:
      min_word_score: a word whose score (:attr:`AlignedWord.score`, the sum over its
        frames of how much worse its path's label scores than the frame's best label, in
        natural-log units) is below this is missing (reported), ``<= 0``.
      min_confidence: a word whose confidence (the same gap's mean, as ``exp``) is below
        this is missing too, in ``[0, 1)`` (0: only ``min_word_score`` flags; a word the
        audio lacks squeezed into a frame or two has a small sum but a very low mean).
      untranscribed_penalty: the log-prob a stretch of speech the transcript lacks must
        win by to be reported (the entry penalty of the garbage path between words), in
        ``[0, 1000]``; ``None``: no garbage path (plain forced alignment, nothing
        reported as untranscribed, no word skipped).
      skip_penalty: the log-prob a transcript word the audio lacks costs when it is
        skipped (reported as not in the audio, with no times) rather than aligned, in
        ``[0, 1000]``; ``None``: every word is aligned (with the garbage path only).
      max_segment: recordings up to this long are aligned whole; longer ones segment by
        segment (VAD segments of at most this length), in ``[1, 600]``.
      batch_seconds: audio per network batch, in ``[1, 3600]`` (memory: one batch).
      vad: the VAD's settings for long recordings (its ``max_segment`` is replaced by this
        config's).
    """

    min_word_score: float = -25.0
    min_confidence: float = 0.001
    untranscribed_penalty: float | None = 4.0
    skip_penalty: float | None = SKIP_PENALTY_DEFAULT
    max_segment: float = 30.0
    batch_seconds: float = 60.0
    vad: VadConfig = field(default_factory=VadConfig)

    def __post_init__(self) -> None:
        check_float_range(self, "min_word_score", -1e6, 0.0, low_open=False)
        check_float_range(self, "min_confidence", 0.0, 1.0, low_open=False)
        if self.min_confidence >= 1.0:
            raise ValueError(f"AlignConfig.min_confidence must be below 1, got "
                             f"{self.min_confidence!r}")
        check_float_range(self, "untranscribed_penalty", 0.0, 1000.0, low_open=False,
                          optional=True)
        check_float_range(self, "skip_penalty", 0.0, 1000.0, low_open=False, optional=True)
        check_float_range(self, "max_segment", 1.0, 600.0, low_open=False)
        check_float_range(self, "batch_seconds", 1.0, 3600.0, low_open=False)
        if not isinstance(self.vad, VadConfig):
            raise TypeError(f"AlignConfig.vad must be a VadConfig, got "
                            f"{type(self.vad).__name__}")


@dataclass(frozen=True)
class AlignedToken:
    """One BPE piece of an aligned word: ``piece`` (e.g. ``"▁THE"``) and its frames' times
    ``start <= t < end`` (seconds)."""

    piece: str
    start: float
    end: float


@dataclass(frozen=True)
class AlignedWord:
    """One transcript word.

    Attributes:
      word: the word as the transcript writes it (punctuation kept).
      start, end: its time in seconds, ``None`` when it could not be aligned.
      confidence: in ``[0, 1]`` (0 when not aligned).
      oov: the word is not in the lang dir's ``words.txt`` (spelled through BPE pieces).
      missing: not aligned, or flagged by :func:`flag_word` (its score under
        ``min_word_score`` or its confidence under ``min_confidence``): the audio likely
        lacks it (or says another word).
      tokens: its pieces with their times (empty when not aligned).
      segment: the index of the segment it was aligned in.
      score: ``<= 0``: minus how much better the unconstrained CTC labels of its frames
        score than the word's path (the sum over its frames of the log-prob gap;
        :attr:`k2dec.lattice.forced_align.WordAlignment.word_score`); ``-inf`` when not
        aligned or skipped.
      skipped: the alignment skipped the word (:attr:`AlignConfig.skip_penalty`): the
        audio lacks it. It is ``missing``, has no times (``start``, ``end`` ``None``, no
        tokens; left out of the written files but for ``jsonl``) and confidence 0.
    """

    word: str
    start: float | None
    end: float | None
    confidence: float
    oov: bool
    missing: bool
    tokens: tuple[AlignedToken, ...] = ()
    segment: int = 0
    score: float = 0.0
    skipped: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"word": self.word, "start": None if self.start is None else round(self.start, 3),
                "end": None if self.end is None else round(self.end, 3),
                "confidence": round(self.confidence, 4),
                "score": None if math.isinf(self.score) else round(self.score, 2),
                "oov": self.oov,
                "missing": self.missing, "skipped": self.skipped,
                "tokens": [[t.piece, round(t.start, 3), round(t.end, 3)] for t in self.tokens]}


@dataclass(frozen=True)
class AlignmentResult:
    """One recording's alignment.

    Attributes:
      id: the recording's id.
      words: every transcript word, in order.
      duration: the recording's length in seconds.
      segments: the segments it was aligned in.
      dropped_speech: seconds of speech the VAD dropped (long recordings).
      error: why nothing was aligned (unreadable audio, no speech found); ``""`` otherwise.
      untranscribed: stretches of speech the transcript does not cover (the garbage path's
        runs widened over the blank frames around them by up to
        :data:`UNTRANSCRIBED_WIDEN`; seconds), in order.
    """

    id: str
    words: tuple[AlignedWord, ...]
    duration: float
    segments: tuple[Segment, ...] = ()
    dropped_speech: float = 0.0
    error: str = ""
    untranscribed: tuple[Segment, ...] = ()

    @property
    def missing(self) -> list[AlignedWord]:
        """The words not aligned or under the confidence threshold."""
        return [w for w in self.words if w.missing]

    @property
    def ok(self) -> bool:
        """No error, no missing word and no speech outside the transcript."""
        return not self.error and not self.missing and not self.untranscribed

    def problems(self) -> str:
        """One line saying what is wrong (``""`` when :attr:`ok`): the error, or the missing
        words and the speech not in the transcript, with times."""
        if self.error:
            return self.error
        out = []
        if self.missing:
            skipped = sum(w.skipped for w in self.missing)
            out.append(f"{len(self.missing)} of {len(self.words)} words missing"
                       + (f" ({skipped} not in the audio)" if skipped else "") + ": "
                       + " ".join(w.word for w in self.missing[:10])
                       + (" ..." if len(self.missing) > 10 else ""))
        if self.untranscribed:
            out.append("speech not in the transcript at " + ", ".join(
                f"{s.start:.2f}-{s.end:.2f} s" for s in self.untranscribed[:10])
                + (" ..." if len(self.untranscribed) > 10 else ""))
        return "; ".join(out)

    def ctm_words(self) -> list[CtmWord]:
        """The aligned words (with times) for the CTM / subtitle / TextGrid writers."""
        return [CtmWord(w.word, w.start, max(0.0, w.end - w.start), w.confidence)
                for w in self.words if w.start is not None and w.end is not None]

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "duration": round(self.duration, 3), "ok": self.ok,
                "error": self.error, "num_missing": len(self.missing),
                "dropped_speech": round(self.dropped_speech, 3),
                "segments": [[round(s.start, 3), round(s.end, 3)] for s in self.segments],
                "untranscribed": [[round(s.start, 3), round(s.end, 3)]
                                  for s in self.untranscribed],
                "words": [w.to_json() for w in self.words]}


@dataclass(frozen=True)
class TranscriptWord:
    """A transcript word: its text as written (``display``), its BPE piece ids, whether the
    lang dir's words.txt lacks it (``oov``)."""

    display: str
    pieces: tuple[int, ...]
    oov: bool


def transcript_units(text: str, sp: Any, vocabulary: Any = None) -> list[TranscriptWord]:
    """The transcript's words with their BPE piece ids (see the module docstring).

    Args:
      text: the transcript.
      sp: the sentencepiece model (its ids are the model's output ids).
      vocabulary: the lang dir's word table (``k2.SymbolTable``) to flag words outside it,
        or ``None`` (nothing flagged).
    """
    if not isinstance(text, str):
        raise TypeError(f"transcript must be a string, got {type(text).__name__}")
    case = bpe_case(sp)
    units: list[TranscriptWord] = []
    pending = ""
    for raw in text.split():
        core = scoring_words([raw])
        if not core:  # only punctuation: shown with the word before (or after) it
            if units:
                units[-1] = TranscriptWord(units[-1].display + raw, units[-1].pieces,
                                           units[-1].oov)
            else:
                pending += raw
            continue
        word = match_case(core[0], case)
        pieces = tuple(int(i) for i in sp.encode(word))
        oov = vocabulary is not None and word not in vocabulary
        units.append(TranscriptWord((pending + raw) if pending else raw, pieces, oov))
        pending = ""
    return units


def _read(cut: Any, segment: Segment, rate: int) -> np.ndarray:
    piece = cut.truncate(offset=segment.start, duration=min(segment.duration,
                                                            cut.duration - segment.start),
                         preserve_id=True)
    samples = np.asarray(piece.load_audio(), dtype=np.float32)
    return samples.mean(axis=0) if samples.ndim == 2 else samples


def _batches(segments: Sequence[Segment], seconds: float) -> list[list[int]]:
    out: list[list[int]] = []
    total = math.inf
    for i, s in enumerate(segments):
        if total + s.duration > seconds:
            out.append([])
            total = 0.0
        out[-1].append(i)
        total += s.duration
    return out


def _log_probs(model: Any, cut: Any, segments: Sequence[Segment], batch: list[int]
               ) -> tuple[torch.Tensor, torch.Tensor]:
    """CTC log-probs ``(B, T, V)`` and lengths ``(B,)`` of a batch of segments."""
    config = model.feature_config
    extractor = config.extractor()
    feats = [torch.from_numpy(extractor.extract(_read(cut, segments[i], config.sampling_rate),
                                                config.sampling_rate)) for i in batch]
    lens = torch.tensor([f.shape[0] for f in feats], dtype=torch.int64)
    padded = torch.nn.utils.rnn.pad_sequence(feats, batch_first=True,
                                             padding_value=math.log(1e-10))
    out = model.encode(padded, lens)
    if out.ctc_log_probs is None:
        raise ValueError(f"alignment needs a model with a CTC head; this one has none "
                         f"({model.describe()})")
    return out.ctc_log_probs, out.encoder_out_lens


def _usable(segments: Sequence[Segment], config: Any, model: Any) -> list[Segment]:
    """Segments long enough to give one output frame."""
    need = (model.min_input_frames + 1) * config.frame_shift + config.frame_length
    return [s for s in segments if s.duration >= need]


def _frame_bounds(model: Any, segments: Sequence[Segment]) -> list[int]:
    """At least as many rows as each segment's network output frames."""
    fc = model.feature_config
    return [fc.num_frames(int(math.ceil(s.duration * fc.sampling_rate)) + 1)
            // model.subsampling_factor + 2 for s in segments]


def _network_pass(model: Any, cut: Any, segments: Sequence[Segment], seconds: float,
                  greedy: bool) -> tuple[list[torch.Tensor], list[list[int]]]:
    """Per segment: its CTC log-probs (float16 CPU ``[T, V]``, views of one buffer
    allocated once, so that a long recording's many segments do not fragment the heap) and,
    with ``greedy``, its greedy CTC tokens."""
    log_probs: list[torch.Tensor] = [torch.empty(0)] * len(segments)
    tokens: list[list[int]] = [[] for _ in segments]
    bounds = _frame_bounds(model, segments)
    offsets = np.concatenate([[0], np.cumsum(bounds)]).tolist()
    buffer: torch.Tensor | None = None
    for batch in _batches(segments, seconds):
        lp, lens = _log_probs(model, cut, segments, batch)
        if buffer is None:
            buffer = torch.empty(int(offsets[-1]), lp.shape[2], dtype=torch.float16)
        hyps = ctc_greedy_search(lp, lens) if greedy else None
        for k, i in enumerate(batch):
            n = min(int(lens[k]), bounds[i])
            view = buffer[int(offsets[i]): int(offsets[i]) + n]
            view.copy_(lp[k, :n])
            log_probs[i] = view
            if hyps is not None:
                tokens[i] = list(hyps[k].tokens)
    return log_probs, tokens


def _segment_words(tokens: Sequence[list[int]], sp: Any) -> list[list[str]]:
    """Each segment's greedy words."""
    return [sp.decode(toks).split() for toks in tokens]


def _reference(units: Sequence[TranscriptWord], sp: Any) -> list[str]:
    """The transcript's words as the BPE model spells them (what the greedy words are)."""
    return [sp.decode(list(u.pieces)).replace(" ", "") for u in units]


def _scorer(units: Sequence[TranscriptWord], log_probs: Sequence[torch.Tensor]) -> Any:
    """The :data:`k2dec.longform.RunScorer` of a run's shares: each segment's best CTC path
    through its words (:func:`k2dec.lattice.forced_align.path_scores`)."""
    def score(jobs: list[tuple[int, list[int]]]) -> list[float]:
        return path_scores(log_probs, [(seg, [units[w].pieces for w in words])
                                       for seg, words in jobs])
    return score


def _assign(units: Sequence[TranscriptWord], tokens: Sequence[list[int]], sp: Any,
            log_probs: Sequence[torch.Tensor]) -> list[int]:
    """The segment of each transcript word (:func:`k2dec.longform.assign_words`): matched by
    kaldialign to the greedy words, the words matched with nothing between two segments
    split where the CTC paths score best."""
    return assign_words(_reference(units, sp), _segment_words(tokens, sp),
                        _scorer(units, log_probs))


def _timed_word(unit: TranscriptWord, segment: int, start: float, frames: dict[str, Any],
                sp: Any, config: AlignConfig) -> AlignedWord:
    shift = frames["shift"]
    tokens = tuple(AlignedToken(sp.id_to_piece(p), start + b * shift, start + e * shift)
                   for p, b, e in zip(unit.pieces, frames["token_begin"], frames["token_end"]))
    conf, score = float(frames["confidence"]), float(frames["score"])
    return AlignedWord(unit.display, start + frames["begin"] * shift, start + frames["end"] * shift,
                       conf, unit.oov, flag_word(conf, score, config), tokens, segment, score)


def flag_word(confidence: float, score: float, config: AlignConfig) -> bool:
    """The rule that makes an aligned word **missing**: its confidence under
    :attr:`AlignConfig.min_confidence` or its score under
    :attr:`AlignConfig.min_word_score`."""
    return confidence < config.min_confidence or score < config.min_word_score


def _unaligned(unit: TranscriptWord, segment: int, skipped: bool = False) -> AlignedWord:
    return AlignedWord(unit.display, None, None, 0.0, unit.oov, True, (), segment, -math.inf,
                       skipped)


def _align_batch(batch: list[int], log_probs: Sequence[torch.Tensor],
                 words_of: dict[int, list[int]], units: Sequence[TranscriptWord],
                 config: AlignConfig) -> Any:
    lp = torch.nn.utils.rnn.pad_sequence([log_probs[i].float() for i in batch],
                                         batch_first=True)
    lens = torch.tensor([log_probs[i].shape[0] for i in batch], dtype=torch.int64)
    garbage = (None if config.untranscribed_penalty is None
               else Untranscribed(config.untranscribed_penalty, GARBAGE_FRAME_PENALTY,
                                  config.skip_penalty))
    return align_words(lp, lens, [[list(units[w].pieces) for w in words_of.get(i, ())]
                                  for i in batch], garbage)


def _widened(runs: list[tuple[int, int]], token_begin: list[int], token_end: list[int],
             num_frames: int, cap: int) -> list[tuple[int, int]]:
    """Garbage runs (frames ``[b, e)``) widened to the blank frames around them, up to the
    tokens before and after (or the segment's edges), at most ``cap`` frames each side: a
    CTC network marks a word by a spike or two, the word's sound spans the blanks around."""
    out = []
    for b, e in runs:
        before = max([x for x in token_end if x <= b], default=0)
        after = min([x for x in token_begin if x >= e], default=num_frames)
        out.append((max(before, b - cap), min(after, e + cap)))
    return out


def _align_segments(log_probs: Sequence[torch.Tensor], segments: Sequence[Segment],
                    units: Sequence[TranscriptWord], seg_of: Sequence[int], sp: Any,
                    config: AlignConfig, shift: float
                    ) -> tuple[list[AlignedWord], list[Segment]]:
    """Force-align each segment's words (batched over segments; a segment without words
    too, so that its speech is reported); the words and the speech not in the
    transcript."""
    words_of: dict[int, list[int]] = {}
    for w, s in enumerate(seg_of):
        words_of.setdefault(s, []).append(w)
    out: dict[int, AlignedWord] = {}
    extra: list[Segment] = []
    for batch in _batches(segments, config.batch_seconds):
        a = _align_batch(batch, log_probs, words_of, units, config)
        tb, te = a.token_begin.tolist(), a.token_end.tolist()
        wb, we = a.word_begin.tolist(), a.word_end.tolist()
        wc, ws = a.word_confidence.tolist(), a.word_score.tolist()
        gb, ge = a.garbage_begin.tolist(), a.garbage_end.tolist()
        skipped = a.word_skipped.tolist()
        for k, i in enumerate(batch):
            start = segments[i].start
            runs = _widened(list(zip(gb[k], ge[k])), tb[k], te[k], log_probs[i].shape[0],
                            round(UNTRANSCRIBED_WIDEN / shift))
            extra += [Segment(start + b * shift, start + e * shift) for b, e in runs]
            pos = 0
            for j, w in enumerate(words_of.get(i, ())):
                n = len(units[w].pieces)
                if not bool(a.aligned[k]) or skipped[k][j]:
                    out[w] = _unaligned(units[w], i, skipped=bool(a.aligned[k]))
                    pos += n
                    continue
                frames = {"shift": shift, "begin": wb[k][j], "end": we[k][j],
                          "confidence": wc[k][j], "score": ws[k][j],
                          "token_begin": tb[k][pos:pos + n], "token_end": te[k][pos:pos + n]}
                out[w] = _timed_word(units[w], i, start, frames, sp, config)
                pos += n
    return [out[w] for w in range(len(units))], extra


def _open_recording(audio: str | Path, recording_id: str) -> Any:
    path = Path(audio)
    if not path.is_file():
        raise ValueError(f"{audio}: no such audio file")
    try:  # read in pieces: no bound on the samples held at once beyond a batch
        rec: Recording = probe_recording(path, recording_id, AudioLimits(max_audio_mb=1e12))
    except ValueError as e:
        raise ValueError(f"{audio}: {e}") from None
    return rec


def _segmentation(path: Path, duration: float, config: AlignConfig) -> Segmentation:
    if duration <= config.max_segment:
        return Segmentation((Segment(0.0, duration),), duration)
    vad = VadConfig(**{**config.vad.__dict__, "max_segment": config.max_segment})
    return vad_segments(path, vad)


def align_recording(model: Any, sp: Any, audio: str | Path, transcript: str, *,
                    config: AlignConfig = AlignConfig(),  # noqa: B008
                    vocabulary: Any = None, recording_id: str | None = None
                    ) -> AlignmentResult:
    """Align one recording to its transcript (see the module docstring).

    Args:
      model: the acoustic model (:class:`k2dec.model.AcousticModel` with a CTC head).
      sp: its sentencepiece model (ids = the model's output ids).
      audio: an audio file (any format ``k2dec decode`` reads; channels averaged,
        resampled to the model's rate).
      transcript: the words said, whitespace-separated.
      config: :class:`AlignConfig`.
      vocabulary: the lang dir's word table, to flag out-of-vocabulary words.
      recording_id: the result's id (default: the file's stem).

    Raises:
      ValueError, TypeError: an unreadable file, a model without CTC, a bad transcript.
    """
    if not model.has_ctc:
        raise ValueError(f"alignment needs a model with a CTC head; this one has none "
                         f"({model.describe()})")
    rid = recording_id or Path(audio).stem
    units = transcript_units(transcript, sp, vocabulary)
    rec = _open_recording(audio, rid)
    fc = model.feature_config
    cut = (rec if rec.sampling_rate == fc.sampling_rate else rec.resample(fc.sampling_rate)
           ).to_cut()
    seg = _segmentation(Path(audio), rec.duration, config)
    segments = _usable(seg.segments, fc, model)
    if not segments:
        error = "no speech found" if units else ""
        return AlignmentResult(rid, tuple(_unaligned(u, 0) for u in units), rec.duration, (),
                               seg.dropped_speech, error)
    long = len(segments) > 1
    log_probs, tokens = _network_pass(model, cut, segments, config.batch_seconds, long)
    seg_of = _assign(units, tokens, sp, log_probs) if long else [0] * len(units)
    words, extra = _align_segments(log_probs, segments, units, seg_of, sp, config,
                                   model.output_frame_shift)
    return AlignmentResult(rid, tuple(words), rec.duration, tuple(segments),
                           seg.dropped_speech, untranscribed=tuple(extra))


def read_transcripts(path: str | Path) -> dict[str, str]:
    """A Kaldi ``text`` file: one recording per line, its id (the audio file's stem), a
    space, its transcript (may be empty). Raises ``ValueError`` naming the line of a
    repeated id."""
    out: dict[str, str] = {}
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, start=1):
            parts = line.strip().split(maxsplit=1)
            if not parts:
                continue
            if parts[0] in out:
                raise ValueError(f"{path}:{n}: recording id {parts[0]!r} appears twice")
            out[parts[0]] = parts[1] if len(parts) > 1 else ""
    return out


def write_alignment_files(result: AlignmentResult, out_dir: str | Path,
                          formats: Sequence[str],
                          subtitles: SubtitleConfig = SubtitleConfig()  # noqa: B008
                          ) -> list[Path]:
    """Write one recording's alignment as ``<out_dir>/<id>.<ext>`` in each format of
    :data:`ALIGN_FORMATS` (``lhotse``: ``<id>.supervisions.jsonl.gz``; ``jsonl``: one line
    with every word, its tokens and flags); the written paths."""
    out_dir = Path(out_dir)
    words = result.ctm_words()
    paths = []
    for fmt in dict.fromkeys(formats):
        if fmt not in ALIGN_FORMATS:
            raise ValueError(f"output format {fmt!r} is not one of {', '.join(ALIGN_FORMATS)}")
        if fmt in ("srt", "vtt"):
            paths.append(write_subtitles(out_dir / f"{result.id}.{fmt}", words, subtitles))
        elif fmt == "ctm":
            paths.append(write_ctm(out_dir / f"{result.id}.ctm", [(result.id, words)]))
        elif fmt == "textgrid":
            paths.append(write_textgrid(out_dir / f"{result.id}.TextGrid", words,
                                        result.duration))
        elif fmt == "lhotse":
            paths.append(write_alignments(out_dir / f"{result.id}.supervisions.jsonl.gz",
                                          result.id, words, result.duration))
        else:
            path = out_dir / f"{result.id}.jsonl"
            path.parent.mkdir(parents=True, exist_ok=True)
            replace_text(path, json.dumps(result.to_json(), ensure_ascii=False) + "\n")
            paths.append(path)
    return paths


def align_files(model: Any, sp: Any, files: dict[str, Path], transcripts: dict[str, str],
                out_dir: str | Path | None = None, formats: Sequence[str] = (),
                config: AlignConfig = AlignConfig(),  # noqa: B008
                vocabulary: Any = None) -> list[AlignmentResult]:
    """Align every recording of ``files`` (``{id: path}``) to ``transcripts[id]`` and write
    each one's files (:func:`write_alignment_files`) as soon as it is aligned. A recording
    without a transcript, or one that cannot be read, is a result with ``error`` set (never
    skipped); transcripts of other ids are not aligned (a warning counts them).

    Returns:
      one :class:`AlignmentResult` per id of ``files``, sorted by id.
    """
    extra = sorted(set(transcripts) - set(files))
    if extra:
        logger.warning("%d transcripts have no audio file to align (e.g. %r); not aligned",
                       len(extra), extra[0])
    results = []
    for rid in tqdm(sorted(files), desc="align", unit="recording", disable=len(files) < 2):
        if rid not in transcripts:
            results.append(AlignmentResult(rid, (), 0.0, error="no transcript line for this "
                                           "recording"))
            continue
        try:
            result = align_recording(model, sp, files[rid], transcripts[rid], config=config,
                                     vocabulary=vocabulary, recording_id=rid)
        except ValueError as e:
            result = AlignmentResult(rid, (), 0.0, error=str(e))
        if out_dir is not None and not result.error:
            write_alignment_files(result, out_dir, formats)
        results.append(result)
    return results


def write_align_summary(path: str | Path, results: Sequence[AlignmentResult]) -> Path:
    """One JSON line per recording: its id, ``ok``, ``error``, the number of words, the
    missing words (text, index, confidence, score, skipped), the speech not in the transcript
    (``[start, end]`` seconds) and the VAD's dropped speech."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = []
    for r in results:
        missing = [{"index": i, "word": w.word, "confidence": round(w.confidence, 4),
                    "score": None if math.isinf(w.score) else round(w.score, 2),
                    "skipped": w.skipped}
                   for i, w in enumerate(r.words) if w.missing]
        lines.append(json.dumps({
            "id": r.id, "ok": r.ok, "error": r.error, "num_words": len(r.words),
            "missing": missing,
            "untranscribed": [[round(s.start, 3), round(s.end, 3)] for s in r.untranscribed],
            "dropped_speech": round(r.dropped_speech, 3)}, ensure_ascii=False) + "\n")
    replace_text(path, "".join(lines))
    return path


def align_audio(assets: Any, audio: Any, text: str, sample_rate: int | None = None,
                config: AlignConfig = AlignConfig()  # noqa: B008
                ) -> AlignmentResult:
    """:meth:`k2dec.Recognizer.align`: one audio file or float waveform (``[S]`` samples
    in ``[-1, 1]`` at ``sample_rate``; written to a temporary WAV file so that long ones are
    read in pieces as files are) aligned to ``text``; ``assets``: the recognizer's
    :class:`k2dec.job.DecodeAssets` (a model with CTC, a BPE model)."""
    if assets.sp is None:
        raise ValueError("alignment spells words in BPE pieces: load the recognizer with a "
                         "lang dir that has bpe.model")
    vocabulary = assets.lang.word_table if assets.lang is not None else None
    if isinstance(audio, str | Path):
        if sample_rate is not None:
            raise ValueError("sample_rate is for waveforms; a file carries its own")
        return align_recording(assets.model, assets.sp, audio, text, config=config,
                               vocabulary=vocabulary)
    if sample_rate is None:
        raise ValueError("a waveform needs its sample_rate (Hz)")
    rate = check_sample_rate(sample_rate)
    samples = waveform_samples(audio, "audio")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "waveform.wav"
        sf.write(path, samples, rate, subtype="FLOAT")
        return align_recording(assets.model, assets.sp, path, text, config=config,
                               vocabulary=vocabulary, recording_id="0")
