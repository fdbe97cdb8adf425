"""Cuts for the decode job from a folder of audio files."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from lhotse import CutSet

__all__ = ["cuts_from_audio_dir"]


def cuts_from_audio_dir(audio_dir: str | Path, feature_dir: str | Path,
                        patterns: Sequence[str] = ("*.flac", "*.wav")) -> CutSet:
    """Cuts with 80-bin fbank for every audio file under ``audio_dir`` (no references)."""
    from lhotse import (
        Fbank,
        FbankConfig,
        LilcomChunkyWriter,
        Recording,
        RecordingSet,
        SupervisionSegment,
    )
    from lhotse.utils import fastcopy

    audio_dir = Path(audio_dir)
    files = sorted(p for pat in patterns for p in audio_dir.rglob(pat))
    if not files:
        raise ValueError(f"no audio files ({', '.join(patterns)}) under {audio_dir}")
    recordings = RecordingSet.from_recordings(Recording.from_file(p) for p in files)
    cuts = CutSet.from_manifests(recordings=recordings)
    cuts = CutSet.from_cuts(
        fastcopy(c, supervisions=[SupervisionSegment(c.id, c.recording_id, 0.0, c.duration,
                                                     channel=0, text="")])
        if not c.supervisions else c for c in cuts)
    Path(feature_dir).parent.mkdir(parents=True, exist_ok=True)
    return cuts.compute_and_store_features(
        extractor=Fbank(FbankConfig(num_mel_bins=80)), storage_path=str(feature_dir),
        storage_type=LilcomChunkyWriter)
