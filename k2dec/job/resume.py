"""What a decode job's results depend on, so that a rerun resumes only what is still true.

A method's results file (``<out_dir>/<method>/results-<test_set>.jsonl``) is kept beside a
record of what produced it, ``job-<test_set>.json``: the digests of everything that
determines the method's hypotheses (:meth:`JobInputs.key`: k2dec's version, the method and
its resolved config, the feature settings, the silence threshold, the contents of the model,
the graphs, LMs, token and word tables, BPE model, hotwords and LODR n-gram the method
reads), the decoding time
spent on it and the result settings written. On a rerun:

- the same key: the file resumes; each utterance's line also carries the digest of its cut
  (:func:`cut_digest`: the manifest entry without its text), and a cut whose manifest
  changed is decoded again; a failed cut is tried again when its cut or the job settings it
  failed under (``max_duration``) changed, since the reason may be gone;
- another key: the old results and their files are moved to ``replaced/<test_set>/`` beside
  them (one log line says which inputs changed) and the test set is decoded again;
- changed references re-score only (:func:`update_references`): the hypotheses stay; except
  for the oracle methods (``needs_references``), whose hypotheses depend on the reference: a
  cut whose reference changed is decoded again (its digest holds the text).

Contents are hashed (BLAKE2b) from the loaded objects once per job (:class:`JobInputs`),
never judged by file sizes or times.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
import logging
import math
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import k2
import torch
from lhotse import CutSet

from .. import __version__
from ..data import too_long
from ..results import ResultWriter
from ..results.paths import job_folder, path_component, replace_text

__all__ = ["JobInputs", "JobRecord", "changed_inputs", "content_digest", "cut_digest",
           "is_done", "job_record_path", "move_aside", "no_cut_digest", "open_job_record",
           "read_job_record", "todo_cuts", "update_references", "write_job_record"]

logger = logging.getLogger(__name__)

_MAX_DEPTH = 8


def _feed(h: Any, obj: Any, seen: set[int], depth: int) -> None:
    """Feed ``obj``'s content to the hash ``h`` (tensors by their bytes, modules by their
    state, k2 objects by their arrays, files by their bytes, other objects by their public
    attributes)."""
    h.update(type(obj).__name__.encode())
    if obj is None or isinstance(obj, bool | int | float | str | bytes):
        h.update(repr(obj).encode())
    elif isinstance(obj, torch.Tensor):
        t = obj.detach().to("cpu").contiguous()
        h.update(f"{t.dtype}{tuple(t.shape)}".encode())
        h.update(t.flatten().view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    elif isinstance(obj, Path):
        _feed_file(h, obj)
    elif id(obj) in seen or depth > _MAX_DEPTH:
        return
    else:
        seen.add(id(obj))
        _feed_container(h, obj, seen, depth + 1)


def _feed_container(h: Any, obj: Any, seen: set[int], depth: int) -> None:
    if isinstance(obj, k2.RaggedTensor):
        parts: Any = [obj.values] + [obj.shape.row_splits(i) for i in range(1, obj.num_axes)]
    elif isinstance(obj, k2.Fsa):
        parts = sorted(obj.as_dict().items())
    elif isinstance(obj, k2.SymbolTable):
        parts = [obj.to_str()]
    elif isinstance(obj, torch.nn.Module):
        parts = list(obj.state_dict().items())
    elif hasattr(obj, "serialized_model_proto"):  # a sentencepiece model
        parts = [obj.serialized_model_proto()]
    elif isinstance(obj, Mapping):
        parts = [(repr(k), v) for k, v in sorted(obj.items(), key=lambda kv: repr(kv[0]))]
    elif isinstance(obj, list | tuple):
        parts = obj
    elif isinstance(obj, set | frozenset):
        parts = sorted(obj, key=repr)
    elif dataclasses.is_dataclass(obj):
        parts = [(f.name, getattr(obj, f.name)) for f in dataclasses.fields(obj)]
    elif isinstance(obj, enum.Enum):
        parts = [repr(obj.value)]
    elif hasattr(obj, "__dict__"):
        parts = [(k, v) for k, v in sorted(vars(obj).items()) if not k.startswith("_")]
    else:  # no content to read (a runtime session, a device): its type only, never its
        parts = []  # repr, which may hold a memory address
    for item in parts:
        _feed(h, item, seen, depth)


def _feed_file(h: Any, path: Path) -> None:
    """A file's bytes (a folder: its files' relative names and bytes, in name order)."""
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for f in files:
        h.update(str(f.relative_to(path) if path.is_dir() else f.name).encode())
        if f.is_file():
            with open(f, "rb") as fh:
                while chunk := fh.read(1 << 24):
                    h.update(chunk)


def content_digest(obj: Any) -> str:
    """A hex digest of ``obj``'s content (see the module docstring); equal objects loaded
    twice have equal digests."""
    h = hashlib.blake2b(digest_size=16)
    _feed(h, obj, set(), 0)
    return h.hexdigest()


def cut_digest(cut: Any, with_text: bool = False) -> str:
    """The digest of a cut's manifest entry (recording, features, times, channels) without
    its supervisions' texts (kept with ``with_text``: an oracle method's hypotheses depend on
    them) and lhotse's data-loading notes: what the cut's hypotheses depend on besides the
    job."""
    data = cut.to_dict()
    for sup in data.get("supervisions") or []:
        if not with_text:
            sup.pop("text", None)
    custom = data.get("custom") or {}
    custom.pop("dataloading_info", None)  # lhotse's sampler adds it to the cuts it yields
    if not custom:
        data.pop("custom", None)
    return hashlib.blake2b(json.dumps(data, sort_keys=True, default=str).encode(),
                           digest_size=16).hexdigest()


def no_cut_digest(reason: str) -> str:
    """The digest of an utterance that never became a cut (an unreadable audio file), from
    the reason: a rerun records it again when the reason changed, and decodes it when the
    file became a cut."""
    return _short("no cut: " + reason)


def is_done(record: Mapping[str, Any] | None, digest: str, retry_failures: bool) -> bool:
    """True if a results line (``None``: none) stands for an utterance whose input digest is
    now ``digest``: decoded from the same input, or failed on it and ``retry_failures`` is
    off."""
    if record is None or record.get("input") != digest:
        return False
    return not (retry_failures and record["status"] == "error")


class JobInputs:
    """The digests of a job's assets, each computed once (share one object between the
    methods and test sets of a job).

    Args:
      assets: the :class:`~k2dec.job.DecodeAssets`.
    """

    def __init__(self, assets: Any) -> None:
        self.assets = assets
        self._memo: dict[str, str] = {}

    def _part(self, name: str, obj: Any) -> str:
        if name not in self._memo:
            self._memo[name] = content_digest(obj)
        return self._memo[name]

    def _tables(self, method: Any) -> dict[str, Any]:
        """The token / word tables and BPE model that turn ``method``'s ids into words."""
        a, out = self.assets, {}
        lang = a.lang
        if lang is not None and (lang.path / "words.txt").is_file() and (
                method.outputs_words or method.needs_references or method.hotwords):
            out["words"] = lang.word_table
        if lang is not None and (lang.path / "tokens.txt").is_file():
            out["tokens"] = lang.token_table
        out["model_tokens"] = a.tokens
        out["bpe"] = a.sp
        return out

    def key(self, method: Any, config: Any, batch_encoder: bool = False,
            silence_db: float | None = None) -> dict[str, str]:
        """``{input: digest}`` of everything that determines ``method``'s hypotheses with
        ``config`` and the job's silence threshold (see the module docstring)."""
        a, res = self.assets, self.assets.resources
        parts = {"k2dec": __version__, "method": method.name,
                 "config": _short(repr(config)),
                 "features": _short(repr(a.model.feature_config)),
                 "batch_encoder": str(bool(batch_encoder)),
                 "silence_db": repr(silence_db),
                 "model": self._part("model", a.model)}
        for name, obj in self._tables(method).items():
            parts[name] = self._part(name, obj)
        for need in method.requires:
            obj = {"lm": dict(res.lms), "lodr": res.lodr, "token_words": res.token_words,
                   "attention_decoder": None}.get(need, res.graphs.get(need))
            if need != "attention_decoder":  # part of the model
                parts[need] = self._part(need, obj)
        if method.hotwords and (res.hotwords or res.hotword_words):
            parts["hotwords"] = self._part("hotwords", (res.hotwords, res.hotword_words))
        return parts


def _short(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


@dataclasses.dataclass
class JobRecord:
    """The content of ``job-<test_set>.json`` beside a results file.

    Attributes:
      inputs: the :meth:`JobInputs.key` the results were decoded with.
      decode_seconds, audio_seconds: decoding time spent on the file's cuts and their audio
        (added when a job ends: the real-time factor of a resumed job is the recorded one,
        over the cuts of the jobs that finished).
      files: the names of the icefall, CTM and summary files written for the test set.
      max_duration: the ``max_duration`` under which the file's failed cuts failed (``None``
        until a job finished): under another one a rerun tries them again.
    """

    inputs: dict[str, str]
    decode_seconds: float = 0.0
    audio_seconds: float = 0.0
    files: list[str] = dataclasses.field(default_factory=list)
    max_duration: float | None = None

    @property
    def rtf(self) -> float:
        """``decode_seconds / audio_seconds`` (NaN before any audio was decoded)."""
        return self.decode_seconds / self.audio_seconds if self.audio_seconds > 0 else math.nan


def job_record_path(results: Path) -> Path:
    """``job-<test_set>[.rankN].json`` beside ``results-<test_set>[.rankN].jsonl``."""
    return results.with_name("job-" + results.name[len("results-"):-len(".jsonl")] + ".json")


def read_job_record(results: Path) -> JobRecord | None:
    """The record beside ``results``; ``None`` when there is none or it is unreadable."""
    path = job_record_path(results)
    try:
        data = json.loads(path.read_text())
        md = data["max_duration"]
        return JobRecord({str(k): str(v) for k, v in data["inputs"].items()},
                         float(data["decode_seconds"]), float(data["audio_seconds"]),
                         [str(f) for f in data["files"]], None if md is None else float(md))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def write_job_record(results: Path, record: JobRecord) -> None:
    """Write the record beside ``results`` (atomically)."""
    path = job_record_path(results)
    replace_text(path, json.dumps(dataclasses.asdict(record), indent=1, sort_keys=True) + "\n")


def changed_inputs(old: JobRecord | None, new: Mapping[str, str]) -> list[str]:
    """The names of the inputs that differ between ``old`` and ``new`` (``["unknown
    inputs"]`` when there is no record, e.g. results of an older k2dec)."""
    if old is None:
        return ["unknown inputs (no job record)"]
    return sorted(k for k in set(old.inputs) | set(new) if old.inputs.get(k) != new.get(k))


def open_job_record(results: Path, key: dict[str, str], what: str) -> JobRecord:
    """The record of ``results`` for a job with inputs ``key``: the existing one when it has
    the same inputs; else, if there are results, they and their files are moved aside
    (:func:`move_aside`, said in one logged line naming what changed) and a new record is
    written."""
    old = read_job_record(results)
    if old is not None and old.inputs == key:
        return old
    if results.is_file():
        files = [results.parent / name for name in (old.files if old is not None else [])
                 if path_component(name, "file name") == name]  # never outside the folder
        aside = move_aside(results, files)
        logger.warning("%s: %s changed since %s was decoded: decoding it again (the old "
                       "results are in %s)", what, ", ".join(changed_inputs(old, key)),
                       results, aside)
    record = JobRecord(dict(key))
    results.parent.mkdir(parents=True, exist_ok=True)
    write_job_record(results, record)
    return record


def move_aside(results: Path, files: Iterable[Path]) -> Path:
    """Move ``results``, its job record and ``files`` (the test set's result files) into
    ``replaced/<name>/`` beside them (replacing an earlier copy there); returns that folder."""
    name = results.name[len("results-"):-len(".jsonl")]
    aside = job_folder(job_folder(results.parent / "replaced") / name)
    shutil.rmtree(aside)  # a real folder (not a symlink): its links are removed, not followed
    aside.mkdir()
    for path in [results, job_record_path(results), *files]:
        if path.is_file():
            path.replace(aside / path.name)
    return aside


def update_references(records: dict[str, dict[str, Any]], refs: Mapping[str, list[str] | None]
                      ) -> int:
    """Give each decoded record of ``records`` (``{cut_id: record}``, changed in place) the
    reference of ``refs`` (``{cut_id: words or None}``; ids not in it are left as they are);
    returns how many changed. Hypotheses stay: references only change the scores."""
    changed = 0
    for cut_id, rec in records.items():
        if rec["status"] != "ok" or cut_id not in refs:
            continue
        ref = refs[cut_id]
        if rec.get("ref") != ref:
            rec["ref"] = ref
            changed += 1
    return changed


def todo_cuts(cuts: CutSet, failed: Mapping[str, str], writer: ResultWriter, min_frames: int,
          max_duration: float, retry_failures: bool, segment_max: float | None = None,
          long_key: str = "", with_text: bool = False) -> tuple[CutSet, dict[str, str]]:
    """The cuts to decode: those not in the results file, or whose line is of another input
    (:func:`~k2dec.job.resume.cut_digest`), or failed while ``retry_failures``; cuts too
    short for the model or longer than a batch, and the utterances of ``failed``, are
    recorded as failed. Returns them and every cut's input digest.

    A cut longer than ``segment_max`` (not ``None``) is decoded in segments
    (:mod:`k2dec.job.longform`): never too long, and its digest also holds ``long_key``
    (the segmenter's settings), so a rerun with other settings decodes it again.
    ``with_text``: the digests hold the cuts' reference texts (the methods that read them,
    ``needs_references``), so a changed reference decodes the cut again instead of only
    re-scoring it.

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
        long = segment_max is not None and c.duration > segment_max
        digest = cut_digest(c, with_text)
        if long:
            digest = content_digest([digest, long_key])
        digests[c.id] = digest
        if is_done(writer.get(c.id), digest, retry_failures):
            continue
        writer.forget(c.id)
        if c.num_frames is not None and c.num_frames < min_frames:
            writer.write_failure(c.id, f"too short: {c.num_frames} feature frames, the "
                                       f"model needs at least {min_frames}", input=digest)
            continue
        if c.duration > max_duration and not long:
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
