"""``scripts/bench/aed_defaults.py``: the real recordings it decodes (Debian's codec2-examples and
alsa-utils) are copied as 16-bit wav with the words alsa-utils' files say as references."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import soundfile as sf

from k2dec.data import load_references
from scripts.bench.aed_defaults import REAL, real_recordings

MISSING = sorted({package for package, path in REAL if not Path(path).is_file()})


@pytest.mark.skipif(bool(MISSING) or shutil.which("sox") is None,
                    reason=f"needs sox and apt-get install {' '.join(MISSING) or 'sox'}")
def test_real_recordings_are_copied_with_alsa_references(tmp_path):
    out = real_recordings(tmp_path, peer=False)
    wavs = sorted((out / "audio").glob("*.wav"))
    assert len(wavs) == len(REAL)
    info = sf.info(out / "audio" / "codec2-kristoff.wav")  # from 8 kHz raw samples
    assert (info.samplerate, info.subtype) == (8000, "PCM_16")
    assert 4.9 < info.duration < 5.1
    refs = load_references(out / "audio", out / "text")
    assert refs == {f"alsa-{side}_{place}": f"{side.upper()} {place.upper()}"
                    for side, place in (p.rsplit("/", 1)[1][:-4].split("_") for _, p in REAL
                                        if "/alsa/" in p)}
    mtime = (out / "text").stat().st_mtime_ns
    real_recordings(tmp_path, peer=False)  # made once
    assert (out / "text").stat().st_mtime_ns == mtime
