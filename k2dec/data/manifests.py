"""lhotse manifests for a LibriSpeech-layout corpus (the real download or the synthetic one).

File names follow icefall's LibriSpeech recipe, so manifests made here and there are
interchangeable::

    <output_dir>/librispeech_recordings_<part>.jsonl.gz
    <output_dir>/librispeech_supervisions_<part>.jsonl.gz
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from lhotse import CutSet, RecordingSet, SupervisionSet

from ..primitives.files import text_lines

__all__ = ["MANIFEST_PREFIX", "corpus_parts", "load_cuts", "manifest_path", "prepare_manifests"]

logger = logging.getLogger(__name__)

MANIFEST_PREFIX = "librispeech"


def manifest_path(output_dir: str | Path, kind: str, part: str) -> Path:
    """``<output_dir>/librispeech_<kind>_<part>.jsonl.gz`` (``kind``: recordings, supervisions,
    cuts)."""
    return Path(output_dir) / f"{MANIFEST_PREFIX}_{kind}_{part}.jsonl.gz"


def corpus_parts(corpus_dir: str | Path) -> list[str]:
    """The subdirectories of ``corpus_dir`` that hold ``*.trans.txt`` files (sorted): the dataset
    parts (``train-clean-100``, ``dev-clean``, ... or the synthetic ``train``, ...).

    Raises:
      ValueError: if ``corpus_dir`` is not a directory.
    """
    corpus_dir = Path(corpus_dir)
    if not corpus_dir.is_dir():
        raise ValueError(f"corpus_dir: no such directory: {corpus_dir}")
    return sorted(
        d.name for d in corpus_dir.iterdir()
        if d.is_dir() and next(d.rglob("*.trans.txt"), None) is not None
    )


def prepare_manifests(
    corpus_dir: str | Path,
    output_dir: str | Path,
    dataset_parts: Sequence[str] | None = None,
    num_jobs: int = 1,
) -> dict[str, dict[str, RecordingSet | SupervisionSet]]:
    """Write and return recording and supervision manifests for each dataset part.

    A thin wrapper over ``lhotse.recipes.prepare_librispeech``: it finds the parts present (any
    name, not only LibriSpeech's), and returns every part, also those lhotse skipped because their
    manifests already existed (the call is idempotent).

    Args:
      corpus_dir: the corpus root, holding ``<part>/<spk>/<chapter>/*.flac`` and
        ``*.trans.txt``.
      output_dir: where the manifests go (created).
      dataset_parts: the parts to prepare; ``None`` means every part found by
        :func:`corpus_parts`.
      num_jobs: threads lhotse uses to read audio headers.

    Returns:
      ``{part: {"recordings": RecordingSet, "supervisions": SupervisionSet}}``.

    Raises:
      ValueError: if ``corpus_dir`` is missing, has no parts, or a requested part is missing.
    """
    from lhotse.recipes import prepare_librispeech

    corpus_dir = Path(corpus_dir)
    found = corpus_parts(corpus_dir)
    if dataset_parts is None:
        parts = found
    else:
        if isinstance(dataset_parts, str):
            raise TypeError(f"dataset_parts must be a sequence of names, got {dataset_parts!r}")
        parts = list(dataset_parts)
        missing = [p for p in parts if p not in found]
        if missing:
            raise ValueError(
                f"dataset_parts {missing} not found in {corpus_dir} (found: {found})")
    if not parts:
        raise ValueError(f"no dataset parts (folders with *.trans.txt) in {corpus_dir}")
    if num_jobs < 1:
        raise ValueError(f"num_jobs must be >= 1, got {num_jobs}")
    output_dir = Path(output_dir)
    manifests = prepare_librispeech(
        corpus_dir, dataset_parts=parts, output_dir=output_dir, num_jobs=num_jobs)
    out = {}
    for part in parts:
        if part in manifests:
            out[part] = dict(manifests[part])
        else:
            logger.info("%s: manifests exist, loading them", part)
            out[part] = {
                "recordings": RecordingSet.from_file(manifest_path(output_dir, "recordings", part)),
                "supervisions": SupervisionSet.from_file(
                    manifest_path(output_dir, "supervisions", part)),
            }
    return out


def _jsonl_cuts(path: Path) -> list:
    """The cuts of a JSON-lines manifest, blank lines skipped, each line checked and
    deserialized with an error naming the file and line."""
    import json

    from lhotse.cut.set import deserialize_cut

    cuts = []
    for lineno, line in text_lines(path, "cuts manifest"):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}:{lineno}: cuts manifest line is not JSON "
                             f"({e.msg})") from None
        if not isinstance(item, dict) or "id" not in item:
            raise ValueError(f"{path}:{lineno}: expected a JSON object describing a cut "
                             f"(with an 'id'), got {line.strip()[:80]!r}")
        try:
            cuts.append(deserialize_cut(dict(item, type=item.get("type", "MonoCut"))))
        except Exception as e:  # lhotse raises anything from KeyError to AssertionError
            raise ValueError(f"{path}:{lineno}: cut {item['id']!r} is not a lhotse cut "
                             f"({type(e).__name__}: {str(e)[:200]})") from None
    return cuts


def load_cuts(path: str | Path) -> CutSet:
    """Read a lhotse cuts manifest (``.jsonl`` or ``.jsonl.gz``: one JSON object per line,
    blank lines allowed; other formats lhotse reads are passed to it) with errors that name
    the file (and line).

    Raises:
      ValueError: a missing or unreadable file, one that is not UTF-8 JSON lines (naming the
        line), a line lhotse cannot read as a cut (naming the line and the cut), an empty
        manifest, or another format lhotse cannot read as cuts (e.g. a recordings manifest).
    """
    path = Path(path)
    if path.name.endswith((".jsonl", ".jsonl.gz")) or not path.is_file():
        cuts = CutSet.from_cuts(_jsonl_cuts(path))
    else:
        try:
            cuts = CutSet.from_file(path)
        except Exception as e:  # lhotse raises anything from KeyError to AssertionError
            raise ValueError(f"{path}: not a lhotse cuts manifest ({type(e).__name__}: "
                             f"{str(e)[:200]})") from None
    if cuts is None or len(cuts) == 0:
        raise ValueError(f"cuts manifest {path} is empty: there is nothing to decode")
    return cuts
