"""scripts/record_utterance_seconds.py writes the training utterances' durations into a model
file, which the loader then reads (and the decode job's windows follow)."""

from __future__ import annotations

import numpy as np
import pytest
import soundfile as sf
from click.testing import CliRunner

from k2dec.job import DecodeConfig
from k2dec.job.longform import window_seconds
from k2dec.model import JointModel, export_model, load_joint_model
from tests.model.tiny_joint import SMALL
from tests.scripts.loader import load_script


def test_durations_of_audio_files_are_recorded(tmp_path):
    script = load_script("record_utterance_seconds")
    model = export_model(JointModel(SMALL), tmp_path / "m.pt")
    (tmp_path / "train" / "1").mkdir(parents=True)
    for k, seconds in enumerate([1.0, 2.5, 4.0, 8.0]):
        sf.write(str(tmp_path / "train" / "1" / f"u{k}.flac"),
                 np.zeros(int(16000 * seconds), dtype=np.float32), 16000)
    out = CliRunner().invoke(script.main, ["--model", str(model), "--audio-dir",
                                           str(tmp_path / "train")])
    assert out.exit_code == 0, out.output
    got = load_joint_model(model).utterance_seconds
    assert got["count"] == 4 and got["max"] == pytest.approx(8.0)
    assert got["p99"] == pytest.approx(np.percentile([1.0, 2.5, 4.0, 8.0], 99), abs=1e-3)
    assert window_seconds(load_joint_model(model), DecodeConfig()) == pytest.approx(got["p99"])
    bad = CliRunner().invoke(script.main, ["--model", str(model)])
    assert bad.exit_code != 0 and "exactly one" in bad.output
