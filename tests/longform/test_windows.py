"""Fixed windows with overlap (icefall's long_file_recog layout)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import soundfile as sf

from k2dec.longform import (
    Segment,
    WindowConfig,
    fixed_windows,
    frame_energy,
    quiet_windows,
    window_segments,
)
from k2dec.longform.windows import QUIET_SPAN, TRIM_PAD
from tests.reference.quiet_windows import quiet_seams


def test_cores_tile_the_recording_and_context_stays_inside():
    seg = fixed_windows(70.0)
    assert [(s.start, s.end, s.own_start, s.own_end) for s in seg.segments] == [
        (0.0, 32.0, 0.0, 30.0), (28.0, 62.0, 30.0, 60.0), (58.0, 70.0, 60.0, 70.0)]
    assert seg.kept_speech == 70.0 and seg.dropped_speech == 0 and seg.notes == ""
    one = fixed_windows(10.0, WindowConfig(chunk=30.0, context=2.0)).segments
    assert one == (Segment(0.0, 10.0, 0.0, 10.0),)


def test_an_empty_recording_has_no_windows_and_says_so():
    seg = fixed_windows(0.0)
    assert seg.segments == () and "empty" in seg.notes


def test_window_segments_reads_the_duration_from_the_header(tmp_path):
    path = tmp_path / "a.wav"
    sf.write(str(path), np.zeros(8000 * 45, dtype=np.float32), 8000)
    assert len(window_segments(path, WindowConfig(chunk=20.0, context=1.0)).segments) == 3


def test_bad_input_is_refused(tmp_path):
    with pytest.raises(ValueError, match="WindowConfig.chunk"):
        WindowConfig(chunk=0.0)
    with pytest.raises(ValueError, match="WindowConfig.context"):
        WindowConfig(context=-1.0)
    with pytest.raises(ValueError, match="duration"):
        fixed_windows(float("inf"))
    with pytest.raises(TypeError, match="WindowConfig"):
        fixed_windows(10.0, {"chunk": 5})
    bad = tmp_path / "bad.flac"
    bad.write_bytes(b"\0" * 100)
    with pytest.raises(ValueError, match="bad.flac.*cannot be read"):
        window_segments(bad)


# ----------------------------------------------------------------- seams at quiet points


def _seams(seg):
    return [s.own_start for s in seg.segments] + ([seg.segments[-1].own_end]
                                                  if seg.segments else [])


def test_quiet_seams_agree_with_the_brute_force_reference():
    """Random energies (runs of loud and quiet frames, ties included), durations from 0 and
    one frame to several windows, several chunk / search / context settings."""
    rng = np.random.default_rng(0)
    frame = 0.04
    for case in range(300):
        num = int(rng.choice([0, 1, 2, rng.integers(3, 40), rng.integers(40, 1500)]))
        duration = round(num * frame - rng.choice([0.0, 0.013]), 6) if num else 0.0
        if duration <= 0:
            duration = 0.0 if num == 0 else frame
        energy = np.repeat(rng.choice([0.0, 1e-4, 0.01, 0.3], size=num // 5 + 1),
                           5)[:num].astype(np.float32)
        energy += (rng.random(num) < 0.3) * rng.random(num).astype(np.float32) * 0.01
        chunk = float(rng.choice([0.4, 1.0, 2.0, 5.0]))
        search = round(float(rng.uniform(0, chunk / 2)) / frame) * frame
        config = WindowConfig(chunk=chunk, context=float(rng.choice([0.0, 0.08, 1.0])),
                              search=search)
        got = quiet_windows(energy, frame, duration, config)
        want = quiet_seams(energy.astype(np.float64).tolist(), frame, duration, chunk,
                           search, round(QUIET_SPAN / frame))
        assert _seams(got) == pytest.approx(want), case
        for s in got.segments:  # windows inside the recording, context on both sides
            assert s.start == pytest.approx(max(0.0, s.own_start - config.context))
            assert s.end == pytest.approx(min(duration, s.own_end + config.context))
        assert got.kept_speech == pytest.approx(duration)
        assert (got.notes != "") == (duration == 0)


def test_a_seam_moves_into_the_pause_near_the_nominal_edge():
    """Speech everywhere but a 0.4 s pause at 11-11.4 s: windows of 10 s with a 2 s search
    put the seam in the pause (fixed windows put it at 10 s, in speech)."""
    frame = 0.04
    energy = np.full(round(25 / frame), 0.1, dtype=np.float32)
    energy[round(11 / frame):round(11.4 / frame)] = 0.0
    seg = quiet_windows(energy, frame, 25.0, WindowConfig(chunk=10.0, context=1.0, search=2.0))
    first = seg.segments[0].own_end
    assert 11.0 <= first <= 11.4
    assert fixed_windows(25.0, WindowConfig(chunk=10.0, context=1.0)).segments[0].own_end == 10.0
    # on the grid: every seam and every window start a whole number of frames
    for s in seg.segments:
        for t in (s.start, s.own_start):
            assert abs(t / frame - round(t / frame)) < 1e-6


def test_trimming_drops_the_silence_at_window_edges_and_silent_windows():
    """A window keeps TRIM_PAD of the silence at a trimmed edge; a window whose core is all
    silence is left out (and said); nothing loud is ever outside every window."""
    frame = 0.04
    energy = np.zeros(round(30 / frame), dtype=np.float32)
    energy[round(2 / frame):round(6 / frame)] = 0.1  # sound at 2-6 s and 21-24 s
    energy[round(21 / frame):round(24 / frame)] = 0.1
    config = WindowConfig(chunk=8.0, context=1.0, search=2.0, trim_db=-60.0)
    seg = quiet_windows(energy, frame, 30.0, config)
    untrimmed = quiet_windows(energy, frame, 30.0, replace(config, trim_db=None))
    assert len(untrimmed.segments) > len(seg.segments)
    spans = [(s.start, s.end) for s in seg.segments]
    assert spans[0] == pytest.approx((2 - TRIM_PAD, 6 + TRIM_PAD))
    assert spans[-1] == pytest.approx((21 - TRIM_PAD, 24 + TRIM_PAD))
    assert "left out" in seg.notes
    loud = np.flatnonzero(energy > 1e-6) * frame
    assert all(any(s.start <= t < s.end for s in seg.segments) for t in loud)
    silent = quiet_windows(np.zeros(100, dtype=np.float32), frame, 4.0,
                           WindowConfig(chunk=1.0, search=0.2, trim_db=-60.0))
    assert silent.segments == () and "no sound" in silent.notes


def test_frame_energy_and_window_segments_read_the_audio(tmp_path):
    """frame_energy matches numpy on the samples (the file read in blocks shorter than it);
    window_segments with a search puts the seam in the file's pause."""
    rate = 16000
    rng = np.random.default_rng(1)
    x = (0.3 * rng.standard_normal(rate * 12)).astype(np.float32).clip(-1, 1)
    x[round(5.6 * rate):round(6.0 * rate)] = 0.0
    path = tmp_path / "a.wav"
    sf.write(str(path), x, rate, subtype="FLOAT")
    energy, duration = frame_energy(path, 0.04, block_seconds=1.0)
    step = 640
    want = [float(np.mean(x[i:i + step].astype(np.float64) ** 2)) for i in range(0, len(x), step)]
    assert duration == pytest.approx(12.0)
    assert energy == pytest.approx(np.array(want, dtype=np.float32), rel=1e-4, abs=1e-9)
    seg = window_segments(path, WindowConfig(chunk=5.0, context=0.5, search=1.5))
    assert 5.6 <= seg.segments[0].own_end <= 6.0
    assert window_segments(path, WindowConfig(chunk=5.0, context=0.5)).segments[0].own_end \
        == 5.0


def test_quiet_windows_refuses_bad_input():
    with pytest.raises(ValueError, match="WindowConfig.search"):
        WindowConfig(chunk=4.0, search=2.5)
    with pytest.raises(ValueError, match="WindowConfig.trim_db"):
        WindowConfig(trim_db=3.0)
    with pytest.raises(ValueError, match="frame"):
        quiet_windows(np.zeros(4), 0.0, 1.0)
    with pytest.raises(ValueError, match="energy"):
        quiet_windows(np.zeros((2, 2)), 0.04, 1.0)
    with pytest.raises(ValueError, match="duration"):
        quiet_windows(np.zeros(4), 0.04, -1.0)
    with pytest.raises(TypeError, match="WindowConfig"):
        quiet_windows(np.zeros(4), 0.04, 1.0, {"chunk": 1.0})
