"""80-bin log-mel filterbank features with lhotse, stored lilcom-compressed.

Output layout (icefall's names)::

    <output_dir>/librispeech_cuts_<part>.jsonl.gz     the CutSet, features attached
    <output_dir>/librispeech_feats_<part>/            lilcom-chunky feature archives
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from lhotse import CutSet, Fbank, FbankConfig, LilcomChunkyWriter, RecordingSet, SupervisionSet

from .manifests import MANIFEST_PREFIX, manifest_path

__all__ = ["NUM_MEL_BINS", "compute_fbank", "manifest_parts"]

logger = logging.getLogger(__name__)

NUM_MEL_BINS = 80
"""Filterbank size of the features k2dec computes (icefall's LibriSpeech recipes use 80)."""


def manifest_parts(manifest_dir: str | Path) -> list[str]:
    """The parts that have both recording and supervision manifests in ``manifest_dir``."""
    manifest_dir = Path(manifest_dir)
    head = f"{MANIFEST_PREFIX}_recordings_"
    parts = []
    for p in sorted(manifest_dir.glob(f"{head}*.jsonl.gz")):
        part = p.name[len(head):-len(".jsonl.gz")]
        if manifest_path(manifest_dir, "supervisions", part).is_file():
            parts.append(part)
    return parts


def compute_fbank(
    manifest_dir: str | Path,
    output_dir: str | Path | None = None,
    dataset_parts: Sequence[str] | None = None,
    num_mel_bins: int = NUM_MEL_BINS,
    num_jobs: int = 1,
    progress: bool = True,
) -> dict[str, CutSet]:
    """Compute fbank features for each part and write a CutSet manifest per part.

    Idempotent: a part whose cuts manifest exists is loaded, not recomputed. One cut per
    recording (a LibriSpeech recording is one utterance), as in icefall.

    Args:
      manifest_dir: where :func:`k2dec.data.prepare_manifests` wrote the recordings and
        supervisions.
      output_dir: where cuts and features go; defaults to ``manifest_dir``.
      dataset_parts: parts to process; ``None`` means every part with manifests.
      num_mel_bins: filterbank size (:data:`NUM_MEL_BINS`).
      num_jobs: extraction processes (1 runs in this process).
      progress: show lhotse's progress bar.

    Returns:
      ``{part: CutSet}``, features of shape ``[num_frames, num_mel_bins]`` (float32, 100 frames
      per second) attached to each cut.

    Raises:
      ValueError: no such directory, no parts, a requested part without manifests, or
        ``num_mel_bins`` / ``num_jobs`` < 1.
    """
    manifest_dir = Path(manifest_dir)
    if not manifest_dir.is_dir():
        raise ValueError(f"manifest_dir: no such directory: {manifest_dir}")
    if num_mel_bins < 1:
        raise ValueError(f"num_mel_bins must be >= 1, got {num_mel_bins}")
    if num_jobs < 1:
        raise ValueError(f"num_jobs must be >= 1, got {num_jobs}")
    output_dir = manifest_dir if output_dir is None else Path(output_dir)
    available = manifest_parts(manifest_dir)
    parts = available if dataset_parts is None else list(dataset_parts)
    missing = [p for p in parts if p not in available]
    if missing or not parts:
        raise ValueError(
            f"dataset_parts {missing or parts} have no manifests in {manifest_dir} "
            f"(found: {available})")
    output_dir.mkdir(parents=True, exist_ok=True)
    extractor = Fbank(FbankConfig(num_mel_bins=num_mel_bins))
    out = {}
    for part in parts:
        cuts_path = manifest_path(output_dir, "cuts", part)
        if cuts_path.is_file():
            logger.info("%s: %s exists, skipping", part, cuts_path)
            out[part] = CutSet.from_file(cuts_path)
            continue
        logger.info("%s: computing fbank", part)
        recordings = RecordingSet.from_file(manifest_path(manifest_dir, "recordings", part))
        supervisions = SupervisionSet.from_file(manifest_path(manifest_dir, "supervisions", part))
        cuts = CutSet.from_manifests(recordings=recordings, supervisions=supervisions)
        cuts = cuts.compute_and_store_features(
            extractor=extractor,
            storage_path=output_dir / f"{MANIFEST_PREFIX}_feats_{part}",
            num_jobs=num_jobs,
            storage_type=LilcomChunkyWriter,
            progress_bar=progress,
        )
        # Write to a temporary name first: an interrupted run must not look finished.
        partial = cuts_path.with_name("partial-" + cuts_path.name)
        cuts.to_file(partial)
        partial.replace(cuts_path)
        out[part] = cuts
    return out
