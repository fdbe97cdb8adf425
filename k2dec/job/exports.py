"""The ``--output-format`` files of a decode job (:attr:`k2dec.job.DecodeConfig.output_formats`),
written from the finished results file through the libraries that own the formats.

For the method's configured setting (its first; a sweep's other settings have their CTM
files), under ``out_dir/<method>/``:

- ``srt``, ``vtt``: ``srt-<test_set>/<utt>.srt``, ``vtt-<test_set>/<utt>.vtt``, one file per
  recording (:func:`k2dec.results.write_subtitles`: lines cut at pauses, at most 42
  characters and 7 s);
- ``textgrid``: ``textgrid-<test_set>/<utt>.TextGrid``, one per recording (praatio);
- ``jsonl``: ``words-<test_set>-<key>.jsonl``, one line per recording: ``id``, ``text``,
  ``words`` (``word``, ``start``, ``end``, ``confidence``), ``segments`` (a long recording's,
  else ``[]``);
- ``lhotse``: ``supervisions-<test_set>-<key>.jsonl.gz``, a lhotse ``SupervisionSet``: one
  supervision per recording, its words as ``alignment["word"]`` ``AlignmentItem`` s;
- ``ctm``: ``ctm-<test_set>-<key>.ctm`` (with confidences), which every job writes anyway
  for every setting with word times and confidences.

Per-test-set files (jsonl, lhotse, ctm) keep one file per job like icefall's ``recogs-``;
the per-recording formats are those one opens in a player or in Praat. A setting whose
hypotheses carry no word times and confidences (``1best`` and the other lattice best-path
methods without posteriors) gets none of these files: that is logged.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lhotse import SupervisionSet

from ..results import CtmWord
from ..results.alignments import word_dicts, word_supervision
from ..results.paths import check_component, replace_saved, replace_text
from ..results.subtitles import write_subtitles
from ..results.textgrid import write_textgrid
from .config import OUTPUT_FORMATS
from .outputs import CtmSettings, ctm_words

__all__ = ["OUTPUT_FORMATS", "write_outputs"]

logger = logging.getLogger(__name__)

_SUFFIX = {"srt": ".srt", "vtt": ".vtt", "textgrid": ".TextGrid"}


def _first_key(records: Mapping[str, Mapping[str, Any]]) -> str | None:
    for cut_id in sorted(records):
        rec = records[cut_id]
        if rec["status"] == "ok" and isinstance(rec.get("hyps"), Mapping) and rec["hyps"]:
            return next(iter(rec["hyps"]))
    return None


def _end(cut_id: str, words: Sequence[CtmWord], durations: Mapping[str, float]) -> float:
    """A recording's end in seconds: its duration, or its last word's end when that is later."""
    return max(durations.get(cut_id, 0.0), max((w.start + w.duration for w in words),
                                               default=0.0))


def _per_recording(folder: Path, fmt: str, words: Mapping[str, list[CtmWord]],
                   durations: Mapping[str, float]) -> None:
    for cut_id, ws in words.items():
        check_component(cut_id, "utterance id")
        path = folder / f"{cut_id}{_SUFFIX[fmt]}"
        if fmt == "textgrid":
            write_textgrid(path, ws, max(_end(cut_id, ws, durations), 0.001))
        else:
            write_subtitles(path, ws)


def _jsonl(path: Path, records: Mapping[str, Mapping[str, Any]], key: str,
           words: Mapping[str, list[CtmWord]]) -> None:
    lines = []
    for cut_id in sorted(words):
        rec = records[cut_id]
        lines.append(json.dumps({"id": cut_id, "text": " ".join(rec["hyps"][key]["text"]),
                                 "words": word_dicts(words[cut_id]),
                                 "segments": rec.get("segments", [])}, ensure_ascii=False))
    replace_text(path, "".join(line + "\n" for line in lines))


def write_outputs(records: Mapping[str, Mapping[str, Any]], out_dir: Path, test_set: str,
                  suffix: str, ctm: CtmSettings, formats: Sequence[str],
                  durations: Mapping[str, float]) -> list[Path]:
    """Write the ``formats`` of the module docstring for the records of a finished results
    file (``durations``: ``{utterance id: seconds}``, the TextGrids' and supervisions' ends).
    Returns the files and folders written."""
    key = _first_key(records)
    if not formats or key is None:
        return []
    words = ctm_words(records, ctm)[0].get(key)
    if words is None:
        logger.warning("%s: setting %s has no word times and confidences: no %s files",
                       test_set, key, ", ".join(formats))
        return []
    tail = f"-{suffix}" if suffix else ""
    written = []
    for fmt in dict.fromkeys(formats):
        if fmt in _SUFFIX:
            folder = out_dir / f"{fmt}-{test_set}{tail}"
            _per_recording(folder, fmt, words, durations)
            written.append(folder)
        elif fmt == "jsonl":
            written.append(out_dir / f"words-{test_set}-{key}{tail}.jsonl")
            _jsonl(written[-1], records, key, words)
        elif fmt == "lhotse":
            written.append(out_dir / f"supervisions-{test_set}-{key}{tail}.jsonl.gz")
            replace_saved(written[-1], SupervisionSet.from_segments(
                [word_supervision(c, ws, _end(c, ws, durations))
                 for c, ws in sorted(words.items())]).to_file)
        elif fmt == "ctm":
            written.append(out_dir / f"ctm-{test_set}-{key}{tail}.ctm")
    return written
