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
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
from lhotse import CutSet
from tqdm import tqdm

from ..data import make_decode_loader, split_bad_cuts
from ..lang import match_case
from ..methods import Method
from ..results import (
    DISK_FULL_ERRNOS,
    Calibration,
    DiskFullError,
    ResultWriter,
    disk_full_error,
    lock_out_dir,
    merge_results,
    read_results,
)
from ..results.paths import job_folder, path_component
from .assets import DecodeAssets, reference_case
from .batches import decode_or_split, silence_check, silenced
from .checks import as_method, check_cuts, check_names
from .config import DecodeConfig, DecodeSummary
from .encoder import JobEncoder
from .exports import write_outputs
from .longform import decode_long, dropped_speech, is_long, long_key
from .outputs import (
    CtmSettings,
    ctm_settings,
    result_files,
    write_canonical,
    write_ctms,
    write_decoded,
)
from .resume import JobInputs, JobRecord, open_job_record, todo_cuts, write_job_record
from .scoring import score_results

__all__ = ["decode_cuts", "shard_cuts"]

logger = logging.getLogger(__name__)


def shard_cuts(cuts: CutSet, world_size: int, rank: int) -> CutSet:
    """Every ``world_size``-th cut starting at ``rank`` (deterministic, order kept)."""
    return CutSet.from_cuts(c for i, c in enumerate(cuts) if i % world_size == rank)


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
    method = as_method(method)
    check_names(test_set, suffix)
    utterances, failed = _utterances(assets, method, cuts, failed, config.rank)
    method_config = method.default_config() if method_config is None else method_config
    refs = {c.id: _ref(c) for c in utterances} | {cut_id: None for cut_id in failed}
    durations = {c.id: c.duration for c in utterances}
    if config.world_size > 1:
        utterances = shard_cuts(utterances, config.world_size, config.rank)
    job = _Job(method, method_config, config, test_set, suffix,
               (inputs or JobInputs(assets)).key(method, method_config, config.batch_encoder,
                                                 config.silence_db),
               refs, reference_case(assets), durations)
    return _decode_in(out_dir, assets, utterances, job, failed, encoder, calibration)


def _decode_in(out_dir: str | Path, assets: DecodeAssets, utterances: CutSet, job: _Job,
               failed: Mapping[str, str], encoder: JobEncoder | None,
               calibration: Mapping[str, Calibration] | None) -> DecodeSummary:
    """:func:`_decode_locked` with ``out_dir`` locked, a full disk raised as what to do."""
    try:
        with lock_out_dir(out_dir, job.config.rank):
            return _decode_locked(assets, utterances, job, _method_folder(out_dir, job.method),
                                  failed, encoder or JobEncoder(job.config.batch_encoder),
                                  ctm_settings(assets, job.config, calibration))
    except OSError as e:  # results, icefall files: a full disk says what to do
        if e.errno in DISK_FULL_ERRNOS and not isinstance(e, DiskFullError):
            raise disk_full_error(e, e.filename or out_dir) from e
        raise


def _method_folder(out_dir: str | Path, method: Method) -> Path:
    """``out_dir/<method name>``, created (a symlink or a file there is refused)."""
    return job_folder(Path(out_dir) / path_component(method.name, "method name"))


def _utterances(assets: DecodeAssets, method: Method, cuts: CutSet,
                failed: Mapping[str, str] | None, rank: int) -> tuple[CutSet, dict[str, str]]:
    """The utterances of ``cuts`` (:func:`check_cuts`) whose fields can be decoded, and the
    failures to record: ``failed`` and the cuts whose fields cannot be decoded
    (:func:`k2dec.data.split_bad_cuts`: one bad cut fails alone), by rank 0 only; once the
    model runs ``method`` and no failed id is one of the utterances' (``ValueError``
    otherwise)."""
    cuts, bad = split_bad_cuts(cuts)
    failed = {**dict(failed or {}), **bad} if rank == 0 else {}
    utterances = check_cuts([method], cuts)
    if not assets.model.supports(method):
        raise ValueError(f"method {method.name!r} ({method.family.value}) needs what this "
                         f"model lacks: {assets.model.describe()}")
    clash = sorted(set(failed) & set(utterances.ids))
    if clash:
        raise ValueError(f"failed: ids {clash[:5]} are also ids of cuts to decode; each "
                         "utterance needs its own id")
    return utterances, failed


def _ref(cut: Any) -> list[str] | None:
    """An utterance's reference words (``None`` without one; ``[]`` for the empty reference
    of a silent recording, which is scored: its insertions count)."""
    text = cut.supervisions[0].text if cut.supervisions else None
    return None if text is None else text.split()


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
    durations: dict[str, float] = field(default_factory=dict)

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
                                  config.max_duration, retry, config.segment_max,
                                  long_key(config), job.method.needs_references)
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
    write_canonical(records, job.refs, job.name, merged)
    final = read_results(merged)
    summary = score_results(final, merged, out_dir, job.method.name, job.test_set, record.rtf,
                            job.suffix)
    summary = replace(summary, dropped_speech=dropped_speech(final, job.name))
    write_ctms(final, out_dir, job.test_set, job.suffix, ctm)
    write_outputs(final, out_dir, job.test_set, job.suffix, ctm, job.config.output_formats,
                  job.durations)
    record.files = result_files(out_dir, job.test_set, job.suffix, final)
    write_job_record(merged, record)
    return summary


def _decode_todo(assets: DecodeAssets, todo: CutSet, job: _Job, writer: ResultWriter,
                 digests: Mapping[str, str], encoder: JobEncoder, record: JobRecord) -> None:
    """Decode ``todo`` in batches into ``writer``, adding the time to the job record (written
    when the job ends: the time of a killed job's cuts is not in it, nor their audio)."""
    config = job.config
    frames_per_second = assets.model.feature_config.frames_per_second
    silence = silence_check(assets, config)
    long = CutSet.from_cuts(c for c in todo if is_long(c, config))
    todo = CutSet.from_cuts(c for c in todo if not is_long(c, config))
    for cut in tqdm(long, desc=f"{job.name} (long, in segments)", unit="recording",
                    disable=not len(long)):  # no bar for a job of short recordings
        start = time.perf_counter()
        ref = job.refs.get(cut.id)
        done = decode_long(job.method, job.method_config, assets, cut, config, encoder, silence,
                           None if ref is None else match_case(" ".join(ref), job.case).split())
        record.decode_seconds += time.perf_counter() - start + encoder.take_saved_seconds()
        record.audio_seconds += cut.duration
        write_decoded(writer, cut.id, job.refs.get(cut.id) or [], done.decoded,
                      digests[cut.id], done.extra())
    if not len(todo):
        return
    loader = make_decode_loader(todo, config.max_duration, config.num_buckets)
    with tqdm(total=len(todo), desc=job.name, unit="cut") as bar:
        for batch in loader:
            for cut_id, reason in batch.failed.items():
                writer.write_failure(cut_id, reason, input=digests[cut_id])
            bar.update(len(batch.failed))
            if not batch.cut_ids:
                continue
            refs = [None if t is None else t.split() for t in batch.texts]
            matched = [match_case(t or "", job.case).split() for t in batch.texts]
            start = time.perf_counter()
            decoded = decode_or_split(job.method, job.method_config, assets, batch.features,
                                       batch.num_frames, matched, encoder)
            decoded = silenced(decoded, batch.features, batch.num_frames, silence)
            # a cached encoder pass is charged as if it ran (RTFs stay comparable)
            record.decode_seconds += time.perf_counter() - start + encoder.take_saved_seconds()
            record.audio_seconds += float(batch.num_frames.sum()) / frames_per_second
            for cut_id, ref, d in zip(batch.cut_ids, refs, decoded):
                write_decoded(writer, cut_id, ref, d, digests[cut_id])
            bar.update(len(batch.cut_ids))


def _barrier() -> None:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.barrier()
