"""A resumable JSONL file of per-cut results: one line per cut, appended and flushed at once.

A decoding job killed at any point and run again with the same file continues where it stopped:
:class:`ResultWriter` reads the lines already there, drops a line cut short by the kill, and
reports which cuts are done, so the job skips them. Nothing is written twice and nothing is lost:

- one writer per file: the writer holds an OS lock on the file (``flock``; the kernel drops it
  when the process dies), so a second writer is refused (:class:`~k2dec.results.LockedError`);
- a line that is not a result record, anywhere in the file (e.g. two writers' lines mixed by an
  older version, or a disk that corrupted a block), is skipped with a warning: its cut counts as
  not done and is decoded again;
- a write that finds the disk full raises an ``OSError`` that names the file and says to rerun
  (:func:`~k2dec.results.lock.disk_full_error`); the writer first removes the part of the line
  it wrote, so the file stays whole and the rerun continues it.

Each line is a JSON object with ``"cut_id"`` and ``"status"``:

- ``"ok"``: ``"hyp"`` (list of words), ``"ref"`` (list of words or null) and any extra fields
  the caller adds (e.g. ``"duration"``, ``"decode_seconds"``);
- ``"error"``: ``"error"``, the exception type and message, so a failed cut does not stop the job.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .lock import disk_full_error, flock_or_raise
from .paths import replace_file, unusable_path

__all__ = ["ResultWriter", "merge_results", "read_results", "wer_results", "write_results"]

logger = logging.getLogger(__name__)

_RESERVED = ("cut_id", "status", "hyp", "ref", "error")


def _parse(path: Path, data: bytes) -> list[dict[str, Any]]:
    """The records in ``data`` (complete lines of ``path``) in file order; a line that is not a
    result record is skipped with a warning."""
    records = []
    for lineno, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        try:
            rec = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            rec, why = None, str(e)
        else:
            why = "not a result record (needs a string cut_id and status ok or error)"
        if (not isinstance(rec, dict) or not isinstance(rec.get("cut_id"), str)
                or rec.get("status") not in ("ok", "error")):
            logger.warning("%s:%d: skipping a corrupt line (%s): %r; its cut will be decoded "
                           "again", path, lineno, why, raw[:80])
            continue
        records.append(rec)
    return records


def _complete(path: Path, data: bytes) -> int:
    """Length of ``data`` up to its last newline (the bytes after it: a write cut short)."""
    end = data.rfind(b"\n") + 1
    if end < len(data):
        logger.warning("%s: dropping an unfinished last line (%d bytes)", path, len(data) - end)
    return end


def _read_all(fd: int) -> bytes:
    chunks, offset = [], 0
    while chunk := os.pread(fd, 1 << 20, offset):
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def read_results(path: str | Path) -> dict[str, dict[str, Any]]:
    """``{cut_id: record}`` of a results file (the last record of a cut wins, which matters only
    for failed cuts retried with ``retry_failed=True``). A missing file gives ``{}``; corrupt
    lines are skipped with a warning."""
    path = Path(path)
    if not path.is_file():
        return {}
    data = path.read_bytes()
    return {rec["cut_id"]: rec for rec in _parse(path, data[:_complete(path, data)])}


class ResultWriter:
    """Append per-cut results to a JSONL file, resuming a previous run.

    Args:
      path: the ``.jsonl`` file (created with its directory if missing).
      retry_failed: treat cuts recorded as failed as not done, so a rerun tries them again (their
        new record is appended and wins in :func:`read_results`).

    Raises:
      LockedError: another writer (another process, or another writer object here) has the
        file open.

    Usage::

        with ResultWriter("results.jsonl") as out:
            for cut in cuts:
                if cut.id in out:
                    continue
                try:
                    out.write(cut.id, hyp=decode(cut), ref=cut.supervisions[0].text.split())
                except ValueError as e:
                    out.write_failure(cut.id, e)
    """

    def __init__(self, path: str | Path, retry_failed: bool = False) -> None:
        self.path = Path(path)
        self.retry_failed = retry_failed
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:  # never through a symlink (it could lead out of the out dir)
            self._fd: int | None = os.open(
                self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        except OSError as e:
            raise unusable_path(e, self.path) from None
        try:
            flock_or_raise(self._fd, self.path, f"results file {self.path}")
            data = _read_all(self._fd)
            end = _complete(self.path, data)
            if end < len(data):
                os.ftruncate(self._fd, end)
            self._records = {rec["cut_id"]: rec for rec in _parse(self.path, data[:end])}
        except BaseException:
            os.close(self._fd)
            self._fd = None
            raise

    def __contains__(self, cut_id: str) -> bool:
        """True if ``cut_id`` needs no more work (done, or failed and not retried)."""
        rec = self._records.get(cut_id)
        if rec is None:
            return False
        return not (self.retry_failed and rec["status"] == "error")

    def get(self, cut_id: str) -> dict[str, Any] | None:
        """The record of ``cut_id`` (the last one in the file), ``None`` if there is none."""
        return self._records.get(cut_id)

    def forget(self, cut_id: str) -> None:
        """Treat ``cut_id`` as not done, so that it can be written again (e.g. its inputs
        changed); its new record is appended and wins in :func:`read_results`."""
        self._records.pop(cut_id, None)

    @property
    def records(self) -> dict[str, dict[str, Any]]:
        """``{cut_id: record}`` of everything in the file (a copy)."""
        return dict(self._records)

    def _append(self, record: dict[str, Any]) -> None:
        cut_id = record["cut_id"]
        if not isinstance(cut_id, str) or not cut_id:
            raise ValueError(f"cut_id must be a non-empty str, got {cut_id!r}")
        if cut_id in self:
            raise ValueError(f"cut {cut_id!r} is already in {self.path}; skip cuts that are "
                             "`in` the writer")
        if self._fd is None:
            raise ValueError(f"the writer of {self.path} is closed")
        line = (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8")
        size = os.fstat(self._fd).st_size
        try:
            view = memoryview(line)
            while view:
                view = view[os.write(self._fd, view):]
        except OSError as e:
            try:  # keep the file whole: drop the part of the line that made it
                os.ftruncate(self._fd, size)
            except OSError:
                pass  # the next writer drops it (an unfinished last line)
            raise disk_full_error(e, self.path) from e
        self._records[cut_id] = record

    def write(
        self,
        cut_id: str,
        hyp: Sequence[str],
        ref: Sequence[str] | None = None,
        **extra: Any,
    ) -> None:
        """Record a decoded cut: ``hyp`` and optional ``ref`` are word lists; ``extra`` fields
        must be JSON-serializable.

        Raises:
          ValueError: if the cut is already recorded, or ``extra`` uses a reserved key.
          TypeError: if ``hyp``/``ref`` is a plain string, or ``extra`` is not serializable.
        """
        for name, words in (("hyp", hyp), ("ref", ref)):
            if isinstance(words, str):
                raise TypeError(f"{name} must be a list of words, got the string {words!r}")
        bad = [k for k in extra if k in _RESERVED]
        if bad:
            raise ValueError(f"extra fields {bad} clash with reserved keys {_RESERVED}")
        record = {"cut_id": cut_id, "status": "ok", "hyp": list(hyp),
                  "ref": None if ref is None else list(ref), **extra}
        self._append(record)

    def write_failure(self, cut_id: str, error: BaseException | str, **extra: Any) -> None:
        """Record that decoding ``cut_id`` failed with ``error`` (an exception or a message);
        ``extra`` fields as in :meth:`write`."""
        if isinstance(error, BaseException):
            error = f"{type(error).__name__}: {error}"
        bad = [k for k in extra if k in _RESERVED]
        if bad:
            raise ValueError(f"extra fields {bad} clash with reserved keys {_RESERVED}")
        self._append({"cut_id": cut_id, "status": "error", "error": str(error), **extra})

    def close(self) -> None:
        """Sync the file to disk and release it (and its lock)."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            try:
                os.fsync(fd)
            except OSError as e:
                raise disk_full_error(e, self.path) from e
            finally:
                os.close(fd)

    def __enter__(self) -> ResultWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def wer_results(
    records: Mapping[str, Mapping[str, Any]],
) -> tuple[list[tuple[str, list[str], list[str]]], list[str]]:
    """Split ``{cut_id: record}`` (from :func:`read_results`) into WER input and failures.

    Returns:
      ``(results, failed)``: ``[(cut_id, ref, hyp)]`` of the successful cuts that have a
      reference, sorted by cut id (ready for :func:`k2dec.results.save_results`), and the sorted
      ids of failed cuts.
    """
    results, failed = [], []
    for cut_id in sorted(records):
        rec = records[cut_id]
        if rec["status"] == "error":
            failed.append(cut_id)
        elif rec.get("ref") is not None:
            results.append((cut_id, list(rec["ref"]), list(rec["hyp"])))
    return results, failed


def merge_results(paths: Iterable[str | Path], output: str | Path) -> dict[str, dict[str, Any]]:
    """Merge the result files of several shards (e.g. one per rank) into ``output``.

    A cut in several files keeps its successful record over a failed one. ``output`` is
    rewritten by :func:`write_results` (one line per cut, sorted by cut id).

    Returns:
      ``{cut_id: record}`` as written.

    Raises:
      ValueError: if a cut has two successful records that differ.
      OSError: writing failed (a full disk: see :func:`~k2dec.results.lock.disk_full_error`).
    """
    merged: dict[str, dict[str, Any]] = {}
    for path in paths:
        for cut_id, rec in read_results(path).items():
            old = merged.get(cut_id)
            if old is None or (old["status"] == "error" and rec["status"] == "ok"):
                merged[cut_id] = rec
            elif old["status"] == "ok" and rec["status"] == "ok" and old != rec:
                raise ValueError(f"cut {cut_id!r} has two different results ({path}): "
                                 f"{old} vs {rec}")
    return write_results(merged, output)


def write_results(records: Mapping[str, Mapping[str, Any]], output: str | Path
                  ) -> dict[str, dict[str, Any]]:
    """Write ``{cut_id: record}`` to ``output`` in canonical form: one line per cut, sorted by
    cut id. The file is replaced at once (written to a temporary name first), so a kill leaves
    the old file or the new one.

    Returns:
      the records as written (sorted by cut id).

    Raises:
      OSError: writing failed (a full disk: see :func:`~k2dec.results.lock.disk_full_error`).
    """
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    ordered = {cut_id: dict(records[cut_id]) for cut_id in sorted(records)}
    replace_file(output, lambda f: f.writelines(json.dumps(rec, ensure_ascii=False) + "\n"
                                                for rec in ordered.values()))
    return ordered
