"""One method over one test set: cuts -> model -> the method -> per-cut JSONL results
(resumable) -> icefall result files, WER and real-time factor.

Nothing dropped, nothing doubled:

- the unit is the utterance (:func:`k2dec.data.utterance_cuts`): a cut with one supervision
  is one utterance (its id), a cut with several gives one per supervision (their ids), a cut
  without supervisions is decoded whole without a reference; two utterances with one id are
  refused before anything is decoded (:func:`check_cuts`);
- every utterance ends up in the results file: decoded, or recorded as failed with the reason
  (features that cannot be read fail their cut alone; a batch that raises is retried cut by cut
  so that one bad cut cannot sink its neighbours; an utterance whose lattice is empty is a
  failure with the lattice report's reason);
- a rerun skips the utterances already recorded, so a killed job resumes where it stopped; a
  corrupt line in the file is skipped with a warning and its cut decoded again; what is
  resumed is keyed on the inputs (:mod:`k2dec.job.resume`: results of another config, model,
  graph, table, feature setting or version are moved aside and decoded again, a changed cut
  is decoded again, changed references are only scored again);
- one job per out dir: :func:`k2dec.results.lock_out_dir` refuses a second job with a clear
  message (an OS lock: a killed job leaves none behind);
- a full disk stops the job with an error that names the file and says to rerun; the rerun
  finishes the file as if nothing had happened;
- the finished results file is canonical: one line per utterance, sorted by id, so the same
  cuts give the same bytes whatever the batch size, the order of the cuts or the resume history
  (as long as each method's hypotheses do not depend on the batch).

Under ``torchrun`` each rank decodes every ``world_size``-th utterance into its own shard file;
rank 0 merges the shards.

A decoded cut's line holds ``hyp`` (the first setting's words, for quick reading), ``ref`` and
``hyps``: per setting, the method's :class:`~k2dec.primitives.hypothesis.HypothesisRecord` as JSON
(token and word ids, frames, score, confidences) plus ``text``, its words.

Settings whose hypotheses have frames and confidences (every method except the lattice
best-path ones without posteriors: ``1best``, ``ctc-decoding``, ``whole-lattice-rescoring``,
``fast_beam_search``, ``fast_beam_search_LG``) also get a Kaldi CTM file
``ctm-<test_set>-<key>.ctm`` beside icefall's files, and, with references, a line in
``confidence-summary-<test_set>.txt`` (NCE, AUC, calibration error of the confidences). A
setting with a calibration (``decode_cuts(calibration=...)``, from a settings file that
``k2dec tune`` wrote) has its confidences Platt-scaled in both; the summary then also gives
the raw confidences' NCE.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import torch
from lhotse import CutSet
from tqdm import tqdm

from ..data import loudest_frames, make_decode_loader, silence_energy, too_long, utterance_cuts
from ..lang import match_case
from ..methods import (
    AedInputs,
    CtcInputs,
    Family,
    Method,
    TransducerInputs,
    get_method,
)
from ..primitives.hypothesis import HypothesisRecord
from ..primitives.sizes import MAX_DURATION, check_float_range, check_int_range, check_positive
from ..results import (
    DISK_FULL_ERRNOS,
    Calibration,
    CtmWord,
    DiskFullError,
    ResultWriter,
    confidence_metrics,
    disk_full_error,
    lock_out_dir,
    merge_results,
    normalized_cross_entropy,
    read_results,
    record_ctm_words,
    save_results,
    word_correctness,
    write_ctm,
    write_results,
)
from ..results.ctm import FRAME_SHIFT
from .assets import DecodeAssets, hypothesis_texts, reference_case
from .encoder import JobEncoder
from .resume import (
    JobInputs,
    JobRecord,
    cut_digest,
    is_done,
    no_cut_digest,
    open_job_record,
    update_references,
    write_job_record,
)

__all__ = [
    "CtmSettings",
    "DecodeConfig",
    "DecodeSummary",
    "check_cuts",
    "check_references",
    "ctm_settings",
    "ctm_words",
    "decode_cuts",
    "dist_info",
    "shard_cuts",
]

logger = logging.getLogger(__name__)


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

    def __post_init__(self) -> None:
        check_float_range(self, "max_duration", 0.0, 100_000.0)
        check_int_range(self, "num_buckets", 1, 1000)
        check_float_range(self, "silence_db", -200.0, 0.0, low_open=False, optional=True)
        check_positive("frame_shift", self.frame_shift)
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
    """

    method: str
    test_set: str
    wers: dict[str, float]
    rtf: float
    num_cuts: int
    failed: list[str]
    results_path: Path
    first_failure: str = ""

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


def shard_cuts(cuts: CutSet, world_size: int, rank: int) -> CutSet:
    """Every ``world_size``-th cut starting at ``rank`` (deterministic, order kept)."""
    return CutSet.from_cuts(c for i, c in enumerate(cuts) if i % world_size == rank)


def check_references(methods: Sequence[str | Method],
                     cuts: CutSet | Mapping[str, str]) -> None:
    """Refuse, before any decoding, methods that read references (oracle methods) when a
    cut has none (an empty supervision text).

    Args:
      methods: names or :class:`~k2dec.methods.Method` objects.
      cuts: the cuts (each utterance of :func:`k2dec.data.utterance_cuts` needs a reference),
        or ``{utterance id: reference text}`` of the utterances to come (e.g. the files of an
        audio folder, before their features are computed).

    Raises:
      ValueError: naming the method and the first utterances without a reference (or two
        utterances with one id, see :func:`k2dec.data.utterance_cuts`).
    """
    oracles = [m.name for m in map(_method, methods) if m.needs_references]
    if not oracles:
        return
    if not isinstance(cuts, Mapping):
        cuts = {c.id: c.supervisions[0].text if c.supervisions else ""
                for c in utterance_cuts(cuts)}
    missing = [utt for utt, text in cuts.items() if not (text or "").strip()]
    if missing:
        raise ValueError(
            f"method {oracles[0]!r} compares hypotheses with the references, but {len(missing)} "
            f"of {len(cuts)} cuts have none (e.g. {', '.join(missing[:5])}); give "
            "references "
            "(k2dec decode --text, or *.trans.txt files in the audio folder) or drop the method")


def check_cuts(methods: Sequence[str | Method], cuts: CutSet) -> CutSet:
    """Everything about a test set that can be refused before decoding: two utterances with one
    id (:func:`k2dec.data.utterance_cuts`) and, for oracle methods, utterances without a
    reference (:func:`check_references`).

    Returns:
      the utterances to decode (:func:`k2dec.data.utterance_cuts`).

    Raises:
      ValueError: naming the problem and some of the utterances concerned.
    """
    utterances = utterance_cuts(cuts)
    check_references(methods, utterances)
    return utterances


def _method(method: str | Method) -> Method:
    return get_method(method) if isinstance(method, str) else method


def _inputs(method: Method, assets: DecodeAssets, feats: torch.Tensor, lens: torch.Tensor,
            refs: list[list[str]], encoder: JobEncoder):
    model = assets.model
    out = encoder(model, feats, lens)
    if method.family is Family.TRANSDUCER:
        ref_tokens = ([assets.sp.encode(" ".join(r)) for r in refs]
                      if assets.sp is not None else None)
        return TransducerInputs(model.transducer, out.encoder_out, out.encoder_out_lens,
                                ref_tokens=ref_tokens)
    if method.family is Family.AED:
        return AedInputs(out.memory, out.memory_lens, ctc_log_probs=out.ctc_log_probs)
    ref_words = None
    if method.needs_references and assets.lang is not None:  # oracles: words.txt ids
        table = assets.lang.word_table
        # without <UNK>, an id no hypothesis has (0 is epsilon, refused by the oracle)
        unk = table.get("<UNK>") if "<UNK>" in table else max(table.ids) + 1
        ref_words = [[table.get(w) if w in table else unk for w in r] for r in refs]
    return CtcInputs(out.ctc_log_probs, out.encoder_out_lens, ref_words=ref_words,
                     memory=out.memory, memory_lens=out.memory_lens, lattices=encoder.lattices)


#: Per utterance: ``{setting: (record, words)}`` and the failure reason (``""`` if fine).
_Decoded = tuple[dict[str, tuple[HypothesisRecord, list[str]]], str]


def _decode_batch(method: Method, config: Any, assets: DecodeAssets, feats, lens, refs,
                  encoder: JobEncoder) -> list[_Decoded]:
    """Decode one batch; per utterance its hypotheses by setting and its failure reason."""
    inputs = _inputs(method, assets, feats, lens, refs, encoder)
    with torch.no_grad():
        results = method(inputs, assets.resources, config)
    out: list[_Decoded] = [({}, "") for _ in refs]
    for r in results:
        for i, (rec, words) in enumerate(zip(r.hyps, hypothesis_texts(r, assets))):
            out[i][0][r.key] = (rec, words)
            if rec.error and not out[i][1]:
                out[i] = (out[i][0], rec.error)
    return out


def decode_or_split(method: Method, config: Any, assets: DecodeAssets, feats, lens, refs,
                     encoder: JobEncoder) -> list[_Decoded]:
    """:func:`_decode_batch`; if the batch raises, each cut alone (a cut that raises fails
    with the exception)."""
    try:
        return _decode_batch(method, config, assets, feats, lens, refs, encoder)
    except (ValueError, RuntimeError) as e:
        logger.warning("batch of %d failed (%s); decoding its cuts one by one", len(refs), e)
    out: list[_Decoded] = []
    for i in range(len(refs)):
        try:
            out += _decode_batch(method, config, assets, feats[i:i + 1, : int(lens[i])],
                                 lens[i:i + 1], refs[i:i + 1], encoder)
        except (ValueError, RuntimeError) as err:
            out.append(({}, f"{type(err).__name__}: {err}"))
    return out


@dataclass(frozen=True)
class _Silence:
    """The frame energy below which an utterance is silent, and the note its records get."""

    energy: float
    note: str


def silence_check(assets: DecodeAssets, config: DecodeConfig) -> _Silence | None:
    if config.silence_db is None:
        return None
    energy = silence_energy(assets.model.feature_config, float(config.silence_db))
    return _Silence(energy, f"silent input: no frame is louder than white noise at "
                            f"{config.silence_db:g} dBFS (DecodeConfig.silence_db, "
                            "--silence-db); empty hypothesis")


def _empty_like(rec: HypothesisRecord, note: str) -> HypothesisRecord:
    """``rec`` with no tokens, words, frames or confidences (where it has them), no score and
    ``note``."""
    empty = {f.name: () for f in fields(rec) if isinstance(getattr(rec, f.name), tuple)}
    return replace(rec, **empty, score=None, error="", notes=note)


def silenced(decoded: list[_Decoded], feats: torch.Tensor, lens: torch.Tensor,
              silence: _Silence | None) -> list[_Decoded]:
    """Silent utterances' results as empty hypotheses (every setting the method gave them)."""
    if silence is None:
        return decoded
    quiet = (loudest_frames(feats, lens) < silence.energy).tolist()
    return [({key: (_empty_like(rec, silence.note), []) for key, (rec, _) in hyps.items()}, "")
            if q and hyps else (hyps, failed) for q, (hyps, failed) in zip(quiet, decoded)]


def _write(writer: ResultWriter, cut_id: str, ref: list[str], decoded: _Decoded,
           digest: str) -> None:
    hyps, failed = decoded
    if failed:
        writer.write_failure(cut_id, failed, input=digest)
        return
    first = next(iter(hyps.values()))[1]
    writer.write(cut_id, hyp=first, ref=ref or None,
                 hyps={key: {"text": words, **rec.to_json()} for key, (rec, words) in
                       hyps.items()}, input=digest)


def todo_cuts(cuts: CutSet, failed: Mapping[str, str], writer: ResultWriter, min_frames: int,
          max_duration: float, retry_failures: bool) -> tuple[CutSet, dict[str, str]]:
    """The cuts to decode: those not in the results file, or whose line is of another input
    (:func:`~k2dec.job.resume.cut_digest`), or failed while ``retry_failures``; cuts too
    short for the model or longer than a batch, and the utterances of ``failed``, are
    recorded as failed. Returns them and every cut's input digest.

    Raises:
      ValueError: if no cut to decode has features (cuts of recordings: compute fbank first).
    """
    for cut_id, reason in failed.items():
        digest = no_cut_digest(reason)
        if not is_done(writer.get(cut_id), digest, retry_failures):
            writer.forget(cut_id)
            writer.write_failure(cut_id, reason, input=digest)
    todo, digests = [], {}
    for c in cuts:
        digests[c.id] = digest = cut_digest(c)
        if is_done(writer.get(c.id), digest, retry_failures):
            continue
        writer.forget(c.id)
        if c.num_frames is not None and c.num_frames < min_frames:
            writer.write_failure(c.id, f"too short: {c.num_frames} feature frames, the "
                                       f"model needs at least {min_frames}", input=digest)
            continue
        if c.duration > max_duration:
            # a batch holds at most max_duration seconds: this bounds memory (the
            # encoder's attention grows with the square of the length)
            writer.write_failure(c.id, too_long(c.duration, max_duration), input=digest)
            continue
        todo.append(c)
    if todo and not any(c.has_features for c in todo):
        raise ValueError(f"cuts must have features (cut {todo[0].id} has none): compute them "
                         "with k2dec.data.compute_cut_features(cuts, storage_path, "
                         "extractor=model.feature_config.extractor()), as k2dec decode --cuts "
                         "does for a manifest without features")
    return CutSet.from_cuts(todo), digests


def decode_cuts(
    assets: DecodeAssets,
    cuts: CutSet,
    method: str | Method,
    out_dir: str | Path,
    test_set: str,
    method_config: Any = None,
    config: DecodeConfig = DecodeConfig(),  # noqa: B008 (frozen)
    suffix: str = "",
    failed: Mapping[str, str] | None = None,
    encoder: JobEncoder | None = None,
    calibration: Mapping[str, Calibration] | None = None,
    inputs: JobInputs | None = None,
) -> DecodeSummary:
    """Decode ``cuts`` with one method, resuming ``out_dir/{method}/results-{test_set}.jsonl``
    (per-rank shard files under torchrun), then write icefall result files for every setting.

    The utterances, the lock on ``out_dir``, resuming (results of other inputs are moved to
    ``replaced/``) and the canonical results file are those of the module docstring; the
    finished file holds one line per utterance of ``cuts`` and ``failed`` (lines of other
    utterances are left out, and the references are the cuts' current ones); a failed cut is
    tried again when its cut or ``max_duration`` changed (or with ``config.retry_failed``).

    Args:
      failed: ``{cut_id: reason}`` of utterances that never became cuts (e.g. unreadable
        audio files, :attr:`k2dec.data.AudioDirCuts.failures`); they are recorded as failed
        cuts of the test set (by rank 0 under torchrun).
      encoder: the network pass, to share a :class:`JobEncoder` cache between the methods
        of one job (:func:`k2dec.job.run_decode` does); default: a new one without cache.
      calibration: ``{setting key: Calibration}``: the CTM file and the confidence summary
        of such a setting hold its calibrated confidences (the summary also its raw NCE);
        the results file keeps the method's own.
      inputs: the digests of the assets (:class:`~k2dec.job.resume.JobInputs`), to share
        between the methods of a job (:func:`k2dec.job.run_decode` does); default: computed
        here.

    Returns:
      :class:`DecodeSummary` (on ranks > 0 the WERs are empty: rank 0 merges and scores).

    Raises:
      ValueError: before anything is decoded: two utterances with one id (also between
        ``cuts`` and ``failed``), an oracle method and an utterance without a reference
        (:func:`check_cuts`), cuts without features.
      k2dec.results.LockedError: another job holds ``out_dir``.
      k2dec.results.DiskFullError: the disk filled up (free space and rerun: it resumes).
    """
    method = _method(method)
    failed = dict(failed or {}) if config.rank == 0 else {}
    utterances = _utterances(assets, method, cuts, failed)
    method_config = method.default_config() if method_config is None else method_config
    refs = {c.id: _ref(c) for c in utterances} | {cut_id: None for cut_id in failed}
    if config.world_size > 1:
        utterances = shard_cuts(utterances, config.world_size, config.rank)
    job = _Job(method, method_config, config, test_set, suffix,
               (inputs or JobInputs(assets)).key(method, method_config, config.batch_encoder,
                                                 config.silence_db),
               refs, reference_case(assets))
    return _decode_in(out_dir, assets, utterances, job, failed, encoder, calibration)


def _decode_in(out_dir: str | Path, assets: DecodeAssets, utterances: CutSet, job: _Job,
               failed: Mapping[str, str], encoder: JobEncoder | None,
               calibration: Mapping[str, Calibration] | None) -> DecodeSummary:
    """:func:`_decode_locked` with ``out_dir`` locked, a full disk raised as what to do."""
    try:
        with lock_out_dir(out_dir, job.config.rank):
            return _decode_locked(assets, utterances, job, Path(out_dir) / job.method.name,
                                  failed, encoder or JobEncoder(job.config.batch_encoder),
                                  ctm_settings(assets, job.config, calibration))
    except OSError as e:  # results, icefall files: a full disk says what to do
        if e.errno in DISK_FULL_ERRNOS and not isinstance(e, DiskFullError):
            raise disk_full_error(e, e.filename or out_dir) from e
        raise


def _utterances(assets: DecodeAssets, method: Method, cuts: CutSet,
                failed: Mapping[str, str]) -> CutSet:
    """The utterances of ``cuts`` (:func:`check_cuts`), once the model runs ``method`` and no
    id of ``failed`` is one of theirs (``ValueError`` otherwise)."""
    utterances = check_cuts([method], cuts)
    if not assets.model.supports(method):
        raise ValueError(f"method {method.name!r} ({method.family.value}) needs what this "
                         f"model lacks: {assets.model.describe()}")
    clash = sorted(set(failed) & set(utterances.ids))
    if clash:
        raise ValueError(f"failed: ids {clash[:5]} are also ids of cuts to decode; each "
                         "utterance needs its own id")
    return utterances


def _ref(cut: Any) -> list[str] | None:
    """An utterance's reference words (``None`` without one)."""
    return (cut.supervisions[0].text or "").split() or None if cut.supervisions else None


@dataclass(frozen=True)
class _Job:
    """One method over one test set: what :func:`_decode_locked` needs besides the cuts.

    Attributes:
      key: the inputs' digests (:meth:`~k2dec.job.resume.JobInputs.key`).
      refs: every utterance of the test set (all ranks' and the failed ones): its reference
        words or ``None``.
      case: the vocabulary's letter case (:func:`k2dec.job.assets.reference_case`): the
        references an oracle method reads are matched to it.
    """

    method: Method
    method_config: Any
    config: DecodeConfig
    test_set: str
    suffix: str
    key: dict[str, str]
    refs: dict[str, list[str] | None]
    case: str | None = None

    @property
    def name(self) -> str:
        return f"{self.test_set} {self.method.name}"


def _decode_locked(assets: DecodeAssets, cuts: CutSet, job: _Job, out_dir: Path,
                   failed: Mapping[str, str], encoder: JobEncoder, ctm: CtmSettings
                   ) -> DecodeSummary:
    """:func:`decode_cuts` once the utterances are checked and the out dir is locked."""
    config = job.config
    merged = out_dir / f"results-{job.test_set}.jsonl"
    path = merged.with_name(f"results-{job.test_set}.rank{config.rank}.jsonl") \
        if config.world_size > 1 else merged
    if path != merged and config.rank == 0:
        open_job_record(merged, job.key, job.name)
    record = open_job_record(path, job.key, job.name)
    with ResultWriter(path, retry_failed=config.retry_failed) as writer:
        retry = config.retry_failed or record.max_duration != config.max_duration
        todo, digests = todo_cuts(cuts, failed, writer, assets.model.min_input_frames,
                              config.max_duration, retry)
        logger.info("%s: %d utterances, %d to decode", job.name, len(cuts) + len(failed),
                    len(todo))
        if len(todo):
            _decode_todo(assets, todo, job, writer, digests, encoder, record)
    record.max_duration = config.max_duration
    write_job_record(path, record)
    if config.world_size > 1:
        _barrier()  # every shard file is complete past this point
        if config.rank != 0:
            return DecodeSummary(job.method.name, job.test_set, {}, record.rtf,
                                 len(cuts) + len(failed), [], path)
        records = merge_results([out_dir / f"results-{job.test_set}.rank{r}.jsonl"
                                 for r in range(config.world_size)], merged)
    else:
        records = writer.records
    _canonical(records, job, merged)
    summary = _score(merged, out_dir, job.method.name, job.test_set, record.rtf, job.suffix,
                     ctm)
    record.files = _result_files(out_dir, job.test_set, job.suffix, read_results(merged))
    write_job_record(merged, record)
    return summary


def _result_files(out_dir: Path, test_set: str, suffix: str,
                  records: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The names of the icefall, CTM and summary files of the settings in ``records`` that
    exist in ``out_dir``."""
    tail = f"-{suffix}" if suffix else ""
    keys = dict.fromkeys(k for r in records.values() if r["status"] == "ok"
                         and isinstance(r.get("hyps"), Mapping) for k in r["hyps"])
    names = [f"{kind}-{test_set}-{key}{tail}.{ext}" for key in keys
             for kind, ext in (("recogs", "txt"), ("errs", "txt"), ("ctm", "ctm"))]
    names += [f"wer-summary-{test_set}{tail}.txt", f"confidence-summary-{test_set}{tail}.txt"]
    return [n for n in names if (out_dir / n).is_file()]


def _decode_todo(assets: DecodeAssets, todo: CutSet, job: _Job, writer: ResultWriter,
                 digests: Mapping[str, str], encoder: JobEncoder, record: JobRecord) -> None:
    """Decode ``todo`` in batches into ``writer``, adding the time to the job record (written
    when the job ends: the time of a killed job's cuts is not in it, nor their audio)."""
    config = job.config
    frames_per_second = assets.model.feature_config.frames_per_second
    silence = silence_check(assets, config)
    loader = make_decode_loader(todo, config.max_duration, config.num_buckets)
    with tqdm(total=len(todo), desc=job.name, unit="cut") as bar:
        for batch in loader:
            for cut_id, reason in batch.failed.items():
                writer.write_failure(cut_id, reason, input=digests[cut_id])
            bar.update(len(batch.failed))
            if not batch.cut_ids:
                continue
            refs = [(t or "").split() for t in batch.texts]
            matched = [match_case(t or "", job.case).split() for t in batch.texts]
            start = time.perf_counter()
            decoded = decode_or_split(job.method, job.method_config, assets, batch.features,
                                       batch.num_frames, matched, encoder)
            decoded = silenced(decoded, batch.features, batch.num_frames, silence)
            # a cached encoder pass is charged as if it ran (RTFs stay comparable)
            record.decode_seconds += time.perf_counter() - start + encoder.take_saved_seconds()
            record.audio_seconds += float(batch.num_frames.sum()) / frames_per_second
            for cut_id, ref, d in zip(batch.cut_ids, refs, decoded):
                _write(writer, cut_id, ref, d, digests[cut_id])
            bar.update(len(batch.cut_ids))


def _canonical(records: dict[str, dict[str, Any]], job: _Job, path: Path) -> None:
    """Write ``records`` to ``path`` in canonical form (one line per utterance, sorted by
    id): the test set's utterances only, with their current references (logged when some
    changed: only the scores change)."""
    others = sorted(set(records) - set(job.refs))
    if others:
        logger.warning("%s: %d results of utterances not in the test set are left out of %s "
                       "(e.g. %s)", job.name, len(others), path, ", ".join(others[:5]))
    kept = {k: dict(v) for k, v in records.items() if k in job.refs}
    changed = update_references(kept, job.refs)
    if changed:
        logger.warning("%s: %d references changed since they were decoded: scoring them "
                       "again", job.name, changed)
    write_results(kept, path)


def _barrier() -> None:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.barrier()


def _words(hyp: Any) -> list[str]:
    """The words of one setting in a results line (older files stored the word list)."""
    return hyp["text"] if isinstance(hyp, dict) else hyp


@dataclass(frozen=True)
class CtmSettings:
    """How a job turns result records into CTM words (:func:`k2dec.results.record_ctm_words`)
    and which settings' confidences it calibrates there (``{setting key: Calibration}``)."""

    word_start: list[bool] | None
    subsampling_factor: int
    frame_shift: float
    calibration: Mapping[str, Calibration] = field(default_factory=dict)


def ctm_settings(assets: DecodeAssets, config: DecodeConfig,
                 calibration: Mapping[str, Calibration] | None = None) -> CtmSettings:
    """The :class:`CtmSettings` of a job with these assets and config."""
    return CtmSettings(_ctm_word_start(assets), _subsampling(assets, config), config.frame_shift,
                       dict(calibration or {}))


def _ctm_word_start(assets: DecodeAssets) -> list[bool] | None:
    """Which token ids begin a word (for CTM words of token-level hypotheses):
    ``Resources.word_start``, else :func:`k2dec.lang.bpe_word_start_mask` of the BPE
    model's pieces or of the tokens.txt beside an icefall / sherpa-onnx model."""
    if assets.resources.word_start is not None:
        return assets.resources.word_start.tolist()
    from ..lang import bpe_token_table, bpe_word_start_mask

    table = bpe_token_table(assets.sp) if assets.sp is not None else assets.tokens
    return None if table is None else bpe_word_start_mask(table).tolist()


def _subsampling(assets: DecodeAssets, config: DecodeConfig) -> int:
    if config.subsampling_factor is not None:
        return config.subsampling_factor
    return int(assets.model.subsampling_factor)


def _scored(words: Sequence[str]) -> list[str]:
    """Words as they are scored: upper case, as icefall scores (a reference in another case
    than the vocabulary is not all wrong)."""
    return [w.upper() for w in words]


def _score(path: Path, out_dir: Path, method: str, test_set: str, rtf: float, suffix: str,
           ctm: CtmSettings | None = None) -> DecodeSummary:
    records = read_results(path)
    failed = sorted(k for k, r in records.items() if r["status"] == "error")
    by_key: dict[str, list] = {}
    for cut_id in sorted(records):
        rec = records[cut_id]
        if rec["status"] != "ok" or rec.get("ref") is None:
            continue
        for key, hyp in rec["hyps"].items():
            by_key.setdefault(key, []).append((cut_id, _scored(rec["ref"]),
                                               _scored(_words(hyp))))
    wers = save_results(out_dir, test_set, by_key, suffix=suffix, failed=failed,
                        num_cuts=len(records)) if by_key else {}
    if ctm is not None:
        _write_ctms(records, out_dir, test_set, suffix, ctm)
    first = records[failed[0]]["error"] if failed else ""
    if failed:  # the summary has them; k2dec decode prints one line per method
        logger.info("%s: %d cuts could not be decoded (see %s): %s", test_set, len(failed),
                    path, ", ".join(failed[:10]))
    return DecodeSummary(method, test_set, wers, rtf, len(records), failed, path, first)


def ctm_words(records: Mapping[str, Mapping[str, Any]], ctm: CtmSettings
              ) -> tuple[dict[str, dict[str, list[CtmWord]]],
                         dict[str, tuple[list[float], list[bool]]]]:
    """The CTM words of every setting of a results file's records (``{key: {cut_id:
    words}}``, raw confidences; settings without frames and confidences are left out) and,
    where the cuts have references, their confidences with whether each word is correct
    (``{key: (confidences, correct)}``)."""
    per_key: dict[str, dict[str, list[CtmWord]]] = {}
    scored: dict[str, tuple[list[float], list[bool]]] = {}
    for cut_id in sorted(records):
        rec = records[cut_id]
        if rec["status"] != "ok" or not isinstance(rec.get("hyps"), Mapping):
            continue
        for key, hyp in rec["hyps"].items():
            if not isinstance(hyp, Mapping):
                continue
            words = record_ctm_words(hyp, ctm.word_start, ctm.subsampling_factor,
                                     ctm.frame_shift)
            if words is None:
                continue
            per_key.setdefault(key, {})[cut_id] = words
            if rec.get("ref") is not None:
                confs, correct = scored.setdefault(key, ([], []))
                confs += [w.confidence for w in words]
                correct += word_correctness(_scored(rec["ref"]),
                                            _scored([w.word for w in words]))
    return per_key, scored


def _write_ctms(records: Mapping[str, Mapping[str, Any]], out_dir: Path, test_set: str,
                suffix: str, ctm: CtmSettings) -> None:
    """``ctm-<test_set>-<key>[-<suffix>].ctm`` for every setting whose hypotheses have frames
    and confidences (calibrated where ``ctm.calibration`` has the setting), and
    ``confidence-summary-<test_set>[-<suffix>].txt`` (words, % correct, mean confidence,
    NCE, AUC, calibration error of the CTM's confidences, the calibration ``a,b`` or ``-``,
    and the NCE of the raw confidences) where the cuts have references."""
    tail = f"-{suffix}" if suffix else ""
    per_key, scored = ctm_words(records, ctm)
    for key, utts in per_key.items():
        cal = ctm.calibration.get(key)
        if cal is not None:
            utts = {cut: [replace(w, confidence=float(c)) for w, c in
                          zip(words, cal([w.confidence for w in words]))]
                    for cut, words in utts.items()}
        write_ctm(out_dir / f"ctm-{test_set}-{key}{tail}.ctm", utts)
    if scored:
        lines = ["setting\twords\tcorrect%\tmean_confidence\tNCE\tAUC\tECE\tcalibration\t"
                 "NCE_raw"]
        for key in sorted(scored):
            confs, correct = scored[key]
            cal = ctm.calibration.get(key)
            m = confidence_metrics(cal(confs).tolist() if cal is not None else confs, correct)
            raw = normalized_cross_entropy(confs, correct) if cal is not None else m.nce
            acc = 100.0 * m.num_correct / max(1, m.num_words)
            how = f"{cal.a:.4f},{cal.b:.4f}" if cal is not None else "-"
            lines.append(f"{key}\t{m.num_words}\t{acc:.2f}\t{m.mean_confidence:.4f}\t"
                         f"{m.nce:.4f}\t{m.auc:.4f}\t{m.ece:.4f}\t{how}\t{raw:.4f}")
        (out_dir / f"confidence-summary-{test_set}{tail}.txt").write_text("\n".join(lines)
                                                                         + "\n")
