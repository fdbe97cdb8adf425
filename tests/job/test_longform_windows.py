"""The windows segmenter in the decode job: the window length from the model's training
utterances (or segment_window, or segment_max, said in the log) and seams at quiet points
read from the cut's audio file."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import soundfile as sf
from lhotse import MonoCut, Recording

from k2dec.demo import ASSETS
from k2dec.job import DecodeConfig
from k2dec.job.longform import long_key, segment_utterance, window_seconds
from k2dec.results import read_results

REPO = Path(__file__).resolve().parents[2]


def _model(p99=None):
    seconds = None if p99 is None else {"count": 9.0, "median": 2.0, "p99": p99, "max": 9.0}
    return SimpleNamespace(utterance_seconds=seconds)


def test_the_window_is_the_models_p99_unless_given(caplog):
    config = DecodeConfig(segmenter="windows")
    assert window_seconds(_model(6.3), config) == 6.3
    assert window_seconds(_model(45.0), config) == 30.0  # at most segment_max
    assert window_seconds(_model(6.3), DecodeConfig(segment_window=12.0)) == 12.0
    with caplog.at_level(logging.INFO, logger="k2dec.job.longform"):
        assert window_seconds(_model(), config) == 30.0
    assert "records no training utterance durations" in caplog.text
    with pytest.raises(ValueError, match="segment_window"):
        DecodeConfig(segment_max=10.0, segment_window=11.0)
    with pytest.raises(ValueError, match="segment_search"):
        DecodeConfig(segment_max=10.0, segment_search=6.0)
    keys = {long_key(DecodeConfig(**kw)) for kw in (
        {}, {"segment_window": 6.0}, {"segment_search": 1.0}, {"segment_trim_db": -60.0})}
    assert len(keys) == 4


def _cut(tmp_path, x, rate=16000):
    path = tmp_path / "long.wav"
    sf.write(str(path), x, rate)
    rec = Recording.from_file(path, recording_id="long")
    return MonoCut("long", 0.0, rec.duration, 0, recording=rec)


def test_segment_utterance_uses_the_window_and_finds_the_pause(tmp_path):
    rate = 16000
    x = (0.2 * np.random.default_rng(0).standard_normal(rate * 20)).astype(np.float32)
    x[round(7.0 * rate):round(7.4 * rate)] = 0.0
    cut = _cut(tmp_path, x)
    grid = 0.04
    fixed = segment_utterance(cut, DecodeConfig(segmenter="windows", segment_context=1.0),
                              grid, window=6.3)
    assert [round(s.own_start, 2) for s in fixed.segments] == [0.0, 6.32, 12.64, 18.96]
    quiet = segment_utterance(cut, DecodeConfig(segmenter="windows", segment_context=1.0,
                                                segment_search=2.0), grid, window=6.3)
    assert 7.0 <= quiet.segments[1].own_start <= 7.4
    for s in quiet.segments:
        assert abs(s.start / grid - round(s.start / grid)) < 1e-6


def test_segment_window_from_the_command_line(tmp_path):
    """k2dec decode --segment-window sets the windows' core length (checked against
    --segment-max before any audio is read)."""
    audio = tmp_path / "in"
    audio.mkdir()
    x = 0.05 * np.random.default_rng(1).standard_normal(16000 * 14)
    sf.write(str(audio / "noise.wav"), x.astype(np.float32), 16000)
    base = [sys.executable, "-m", "k2dec.cli", "decode", "--audio-dir", str(audio),
            "--model", str(ASSETS / "model.pt"), "--lang-dir", str(ASSETS / "lang"),
            "--method", "greedy_search", "--segmenter", "windows", "--segment-max", "10"]
    bad = subprocess.run(base + ["--segment-window", "12", "--out-dir", str(tmp_path / "b")],
                         cwd=REPO, capture_output=True, text=True)
    assert bad.returncode == 2 and "segment_window" in bad.stderr
    out = tmp_path / "out"
    r = subprocess.run(base + ["--segment-window", "4", "--out-dir", str(out)], cwd=REPO,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    rec = read_results(out / "greedy_search" / "results-in.jsonl")["noise"]
    assert len(rec["segments"]) == 4  # cores of 4 s over 14 s (with --segment-max: 2)
