"""Fixed windows with overlap (icefall's long_file_recog layout)."""

from __future__ import annotations

import numpy as np
import pytest
import soundfile as sf

from k2dec.longform import Segment, WindowConfig, fixed_windows, window_segments


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
