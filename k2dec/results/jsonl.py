"""A resumable JSONL file of per-cut results: one line per cut, appended and flushed at once.

A decoding job killed at any point and run again with the same file continues where it stopped:
:class:`ResultWriter` reads the lines already there, drops a line cut short by the kill, and
reports which cuts are done, so the job skips them. Nothing is written twice and nothing is lost.

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

__all__ = ["ResultWriter", "merge_results", "read_results", "wer_results"]

logger = logging.getLogger(__name__)

_RESERVED = ("cut_id", "status", "hyp", "ref", "error")


def _load(path: Path, repair: bool) -> list[dict[str, Any]]:
    """Records of ``path`` in file order. A last line without its newline (a write cut short) is
    ignored, and with ``repair`` removed from the file."""
    if not path.is_file():
        return []
    data = path.read_bytes()
    end = data.rfind(b"\n") + 1
    if end < len(data):
        logger.warning("%s: dropping an unfinished last line (%d bytes)", path, len(data) - end)
        if repair:
            with open(path, "r+b") as f:
                f.truncate(end)
    records = []
    for lineno, line in enumerate(data[:end].decode("utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}:{lineno}: not a JSON line ({e}): {line[:80]!r}") from e
        if not isinstance(rec, dict) or "cut_id" not in rec or "status" not in rec:
            raise ValueError(f"{path}:{lineno}: not a result record: {line[:80]!r}")
        records.append(rec)
    return records


def read_results(path: str | Path) -> dict[str, dict[str, Any]]:
    """``{cut_id: record}`` of a results file (the last record of a cut wins, which matters only
    for failed cuts retried with ``retry_failed=True``). A missing file gives ``{}``."""
    return {rec["cut_id"]: rec for rec in _load(Path(path), repair=False)}


class ResultWriter:
    """Append per-cut results to a JSONL file, resuming a previous run.

    Args:
      path: the ``.jsonl`` file (created with its directory if missing).
      retry_failed: treat cuts recorded as failed as not done, so a rerun tries them again (their
        new record is appended and wins in :func:`read_results`).

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
        self._records = {rec["cut_id"]: rec for rec in _load(self.path, repair=True)}
        self._file = open(self.path, "a", encoding="utf-8")

    def __contains__(self, cut_id: str) -> bool:
        """True if ``cut_id`` needs no more work (done, or failed and not retried)."""
        rec = self._records.get(cut_id)
        if rec is None:
            return False
        return not (self.retry_failed and rec["status"] == "error")

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
        line = json.dumps(record, ensure_ascii=False)
        self._file.write(line + "\n")
        self._file.flush()
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

    def write_failure(self, cut_id: str, error: BaseException | str) -> None:
        """Record that decoding ``cut_id`` failed with ``error`` (an exception or a message)."""
        if isinstance(error, BaseException):
            error = f"{type(error).__name__}: {error}"
        self._append({"cut_id": cut_id, "status": "error", "error": str(error)})

    def close(self) -> None:
        if not self._file.closed:
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()

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
    rewritten, one line per cut, sorted by cut id.

    Returns:
      ``{cut_id: record}`` as written.

    Raises:
      ValueError: if a cut has two successful records that differ.
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
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    partial = output.with_name(output.name + ".partial")
    with open(partial, "w", encoding="utf-8") as f:
        for cut_id in sorted(merged):
            f.write(json.dumps(merged[cut_id], ensure_ascii=False) + "\n")
    partial.replace(output)
    return dict(sorted(merged.items()))
