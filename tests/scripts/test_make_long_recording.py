"""scripts/make_long_recording.py on a few shipped utterances: the WAV holds each utterance
at its written start, the reference is their texts joined, the same seed gives the same
files."""

from __future__ import annotations

import numpy as np
import pytest
import soundfile as sf
from click.testing import CliRunner
from lhotse import SupervisionSet

from k2dec.data import read_kaldi_text
from k2dec.demo import ASSETS
from tests.scripts.loader import load_script

CORPUS = ASSETS / "corpus" / "test-other"


def test_utterances_sit_at_their_written_times(tmp_path):
    script = load_script("make_long_recording")
    result = CliRunner().invoke(script.main, ["--corpus-dir", str(CORPUS), "--output-dir",
                                              str(tmp_path), "--num-utterances", "4",
                                              "--seed", "7"])
    assert result.exit_code == 0, result.output
    sups = SupervisionSet.from_file(tmp_path / "supervisions.jsonl")
    utts = script.corpus_utterances(CORPUS)[:4]
    assert [s.id for s in sups] == [u for u, _, _ in utts]
    audio, rate = sf.read(str(tmp_path / "long.wav"), dtype="float32")
    previous_end = 0.0
    for sup, (_, flac, text) in zip(sups, utts):
        pause = sup.start - previous_end
        assert 0.3 - 1e-3 <= pause <= 1.5 + 1e-3
        samples, _ = sf.read(str(flac), dtype="float32")
        start = round(sup.start * rate)
        np.testing.assert_allclose(audio[start:start + len(samples)], samples, atol=1e-4)
        assert sup.text == text and sup.recording_id == "long"
        previous_end = sup.end
    assert len(audio) / rate - previous_end >= 0.3 - 1e-3  # a closing pause
    ref = read_kaldi_text(tmp_path / "text")
    assert ref == {"long": " ".join(t for _, _, t in utts)}


def test_the_same_seed_makes_the_same_files_and_repeats_reach_min_duration(tmp_path):
    make = load_script("make_long_recording").make_long_recording
    a = make(CORPUS, tmp_path / "a", num_utterances=2, min_duration=12.0, seed=1)
    b = make(CORPUS, tmp_path / "b", num_utterances=2, min_duration=12.0, seed=1)
    assert [(s.id, s.start) for s in a] == [(s.id, s.start) for s in b]
    assert (tmp_path / "a" / "long.wav").read_bytes() == (tmp_path / "b" / "long.wav").read_bytes()
    assert sum(s.duration for s in a) >= 12.0 and any(s.id.endswith("_r1") for s in a)
    with pytest.raises(ValueError, match="min_pause"):
        make(CORPUS, tmp_path / "c", min_pause=2.0, max_pause=1.0)
    with pytest.raises(ValueError, match="no .*trans.txt"):
        make(tmp_path / "a", tmp_path / "d")


def test_a_sparse_recording_is_low_noise_with_the_utterances_at_their_times(tmp_path):
    """--sparse-duration: the length asked for, the utterances where the supervisions say,
    low noise (-60 dBFS) everywhere else."""
    script = load_script("make_long_recording")
    result = CliRunner().invoke(script.main, ["--corpus-dir", str(CORPUS), "--output-dir",
                                              str(tmp_path), "--num-utterances", "3",
                                              "--sparse-duration", "130"])
    assert result.exit_code == 0, result.output
    audio, rate = sf.read(str(tmp_path / "long.wav"), dtype="float32")
    assert len(audio) == 130 * rate
    sups = sorted(SupervisionSet.from_file(tmp_path / "supervisions.jsonl"),
                  key=lambda s: s.start)
    utts = script.corpus_utterances(CORPUS)[:3]
    assert [s.id for s in sups] == [u for u, _, _ in utts]
    quiet = np.ones(len(audio), dtype=bool)
    for sup, (_, flac, _) in zip(sups, utts):
        samples, _ = sf.read(str(flac), dtype="float32")
        start = round(sup.start * rate)
        np.testing.assert_allclose(audio[start:start + len(samples)], samples, atol=1e-4)
        quiet[start:start + len(samples)] = False
    rms_db = 10 * np.log10(np.mean(audio[quiet] ** 2))
    assert -61.5 < rms_db < -58.5, rms_db
    assert read_kaldi_text(tmp_path / "text") == {"long": " ".join(t for _, _, t in utts)}
