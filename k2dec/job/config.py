"""The settings of a decode job (:class:`DecodeConfig`), its outcome for one test set and
method (:class:`DecodeSummary`) and torchrun's sharding (:func:`dist_info`)."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

from ..primitives.sizes import MAX_DURATION, check_float_range, check_int_range, check_positive
from ..results.ctm import FRAME_SHIFT

__all__ = ["OUTPUT_FORMATS", "SEGMENTERS", "DecodeConfig", "DecodeSummary", "dist_info"]

#: The formats of :attr:`DecodeConfig.output_formats` (:mod:`k2dec.job.exports`).
OUTPUT_FORMATS = ("srt", "vtt", "ctm", "jsonl", "textgrid", "lhotse")
#: The segmenters of long utterances (:attr:`DecodeConfig.segmenter`).
SEGMENTERS = ("vad", "windows")


@dataclass(frozen=True)
class DecodeConfig:
    """Settings of a decode job.

    Attributes:
      max_duration: seconds of audio per batch; a longer cut is recorded as failed, since
        memory grows with the square of a cut's length. The default,
        :data:`k2dec.primitives.sizes.MAX_DURATION` (200 s), is sized for a 2-core CPU machine with
        a few GB of memory (icefall's decode scripts batch 600 s on a GPU). What it decides
        there is the longest recording a job takes whole: one of 200 s stays within a few GB
        (figures: the README's "Bounded memory", BENCHMARKS.md ``memory``). For short
        utterances it matters little: the shipped test sets decoded with the same peak memory
        and CPU time in batches of 100 s and of 200 s (a job's peak is its graphs, LMs and
        caches; k2's CPU searches go through a batch an utterance at a time), and results do
        not depend on it (each utterance goes through the network alone).
      num_buckets: duration buckets of the sampler.
      retry_failed: decode again cuts a previous run recorded as failed.
      batch_encoder: run the model's encoder on whole padded batches (faster on a GPU) instead
        of on each utterance alone; results then depend on the batch composition through float
        rounding (scores in the last digits, rarely a near-tie decided the other way).
      encoder_cache_mb: MiB of per-utterance encoder outputs :func:`k2dec.job.run_decode`
        keeps while it decodes the same cuts with several methods, so that each utterance
        goes through the network once (each method is still charged the encoder's time in
        its RTF); 0 turns it off; not used with ``batch_encoder``.
      lattice_cache_mb: MiB of HLG/HCLG lattices :func:`k2dec.job.run_decode` keeps for a
        job's later methods (:class:`k2dec.lattice.LatticeCache`): a batch is searched once
        per graph and lattice setting, not once per method (each method is still charged the
        search's time in its RTF); 0 turns it off.
      world_size, rank: sharding (``torchrun``); rank ``r`` decodes cuts ``r, r + W, ...``.
      frame_shift: seconds between feature frames (CTM times).
      subsampling_factor: feature frames per network output frame (CTM times); ``None``:
        the model's (:attr:`k2dec.model.AcousticModel.subsampling_factor`).
      silence_db: an utterance none of whose feature frames is louder than white noise at
        this level (dBFS RMS; :func:`k2dec.data.silence_energy`, with the model's feature
        settings) is silent: every method gives it an empty hypothesis (an ``ok`` record
        whose ``notes`` say so) instead of what a model may hallucinate from digital silence
        or faint hiss. -60 dBFS catches digital silence and noise near the quantization
        floor; speech counts as silent below about -53 dBFS RMS. ``None`` turns it off.
      segmenter: how an utterance longer than ``segment_max`` is cut into segments
        (:mod:`k2dec.job.longform`): ``"vad"`` (silero-vad over its audio file, segments of at
        most ``segment_max`` seconds split at the quietest point; where the cut has no whole
        audio file, fixed windows) or ``"windows"`` (cores of ``segment_max`` seconds with
        ``segment_context`` seconds of context on each side, as icefall's
        ``long_file_recog``). Such an utterance is never refused for its length: its segments
        are decoded in batches and stitched into one record.
      segment_max: seconds; utterances up to this long are decoded whole (as before), longer
        ones in segments of at most this long (plus context for windows; a VAD segment may
        exceed it by the last sliver, under 1 s, of a run split at the cap), in ``[1, 600]``.
      segment_context: seconds of extra audio on each side of a window (``"windows"``).
      segment_window: seconds of each window's core (``"windows"``), in ``[1, segment_max]``;
        ``None`` (the default): the 99th percentile of the model's training utterances'
        durations when its file records them
        (:attr:`k2dec.model.AcousticModel.utterance_seconds`), at most ``segment_max``; else
        ``segment_max`` (said in the log). A model decodes best what it was trained on: on
        the shipped model's dev set windows of its training p99 cost about half the errors
        that icefall's 30 s add (BENCHMARKS.md, ``longform``).
      segment_search: seconds on each side of a window seam within which it moves to the
        quietest point of the audio (``"windows"``; :func:`k2dec.longform.quiet_windows`),
        at most ``segment_max / 2``; 0: seams at the fixed stride (icefall's layout).
      output_formats: further files to write from the results (:mod:`k2dec.job.exports`):
        any of ``srt``, ``vtt``, ``ctm``, ``jsonl``, ``textgrid``, ``lhotse``.
    """

    max_duration: float = MAX_DURATION
    num_buckets: int = 10
    retry_failed: bool = False
    batch_encoder: bool = False
    encoder_cache_mb: float = 1024.0
    lattice_cache_mb: float = 512.0
    world_size: int = 1
    rank: int = 0
    frame_shift: float = FRAME_SHIFT
    subsampling_factor: int | None = None
    silence_db: float | None = -60.0
    segmenter: str = "vad"
    segment_max: float = 30.0
    segment_context: float = 2.0
    segment_window: float | None = None
    segment_search: float = 0.0
    segment_trim_db: float | None = None
    output_formats: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        check_float_range(self, "max_duration", 0.0, 100_000.0)
        check_int_range(self, "num_buckets", 1, 1000)
        check_float_range(self, "silence_db", -200.0, 0.0, low_open=False, optional=True)
        check_positive("frame_shift", self.frame_shift)
        if self.segmenter not in SEGMENTERS:
            raise ValueError(f"segmenter must be one of {SEGMENTERS}, got {self.segmenter!r}")
        check_float_range(self, "segment_max", 1.0, 600.0, low_open=False)
        check_float_range(self, "segment_context", 0.0, 30.0, low_open=False)
        check_float_range(self, "segment_window", 1.0, self.segment_max, low_open=False,
                          optional=True)
        check_float_range(self, "segment_search", 0.0, self.segment_max / 2, low_open=False)
        check_float_range(self, "segment_trim_db", -200.0, 0.0, low_open=False, optional=True)
        if not isinstance(self.output_formats, tuple) or any(
                f not in OUTPUT_FORMATS for f in self.output_formats):
            raise ValueError(f"output_formats must be a tuple of {OUTPUT_FORMATS}, got "
                             f"{self.output_formats!r}")
        if self.subsampling_factor is not None and (
                isinstance(self.subsampling_factor, bool)
                or not isinstance(self.subsampling_factor, int) or self.subsampling_factor < 1):
            raise ValueError(f"subsampling_factor must be an int >= 1 or None, got "
                             f"{self.subsampling_factor!r}")
        for name in ("encoder_cache_mb", "lattice_cache_mb"):
            value = getattr(self, name)
            if not (value >= 0 and math.isfinite(value)):
                raise ValueError(f"{name} must be >= 0 and finite, got {value}")
        if not 0 <= self.rank < self.world_size:
            raise ValueError(f"need 0 <= rank < world_size, got rank={self.rank}, "
                             f"world_size={self.world_size}")


@dataclass(frozen=True)
class DecodeSummary:
    """Outcome of :func:`decode_cuts` for one test set and method: one row of a results table.

    Attributes:
      method: the method's name.
      test_set: the test set's name.
      wers: ``{key: WER %}`` (one key per setting of the method, in the method's order: the
        configured setting first; empty without references).
      rtf: decode seconds / audio seconds of the cuts in the results file, as timed when
        they were decoded (a resumed job reports the recorded time; NaN if none was timed;
        under torchrun: this rank's shard).
      num_cuts: utterances in the test set (this rank's shard), see
        :func:`k2dec.data.utterance_cuts`.
      failed: ids of utterances that could not be decoded (with reasons in the JSONL file);
        they are not in the WERs.
      results_path: the JSONL file.
      first_failure: the reason the first of ``failed`` (by id) could not be decoded.
      degenerate: decoded utterances whose hypothesis (the configured setting's) holds a
        word or token, or an n-gram of them, repeated 4 times in a row
        (:func:`k2dec.results.is_degenerate`: a search looping on audio it does not know).
      dropped_speech: seconds of speech the VAD found but dropped (runs shorter than its
        minimum) in the utterances decoded in segments (:mod:`k2dec.job.longform`).
    """

    method: str
    test_set: str
    wers: dict[str, float]
    rtf: float
    num_cuts: int
    failed: list[str]
    results_path: Path
    first_failure: str = ""
    degenerate: int = 0
    dropped_speech: float = 0.0

    @property
    def headline(self) -> tuple[str, float]:
        """``(setting, WER %)`` of the configured setting (the method's first; never the one
        with the lowest WER, which would pick a setting on the test set); ``("-", nan)``
        without WERs."""
        if not self.wers:
            return "-", math.nan
        return next(iter(self.wers.items()))


def dist_info() -> tuple[int, int]:
    """``(world_size, rank)`` from torchrun's environment (``(1, 0)`` outside torchrun)."""
    return int(os.environ.get("WORLD_SIZE", "1")), int(os.environ.get("RANK", "0"))
