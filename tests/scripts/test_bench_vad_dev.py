"""The VAD dev sweep (``scripts/bench/vad_dev.py``): the settings it runs, where segments
lie against the true utterances, that a setting reaches the long-form job (and is undone
after), and a whole sweep on a tiny recording: its rows, the summary's means, and the rows
reused from the cases file."""

from __future__ import annotations

import json
import shutil
from types import SimpleNamespace

import pytest

from k2dec.demo import ASSETS
from k2dec.longform import VadConfig
from scripts.bench import vad_dev
from tests.scripts.loader import load_script

CORPUS = ASSETS / "corpus" / "test-clean"


def test_sweep_runs_the_default_first_and_each_value_once():
    got = vad_dev.sweep({"speech_pad": "0, 0.1,0.2,0.1", "threshold": "0.4",
                         "speech_pad_start": ""})
    assert got == [{}, {"speech_pad": 0.0}, {"speech_pad": 0.1}, {"threshold": 0.4}]
    assert [vad_dev.setting_name(s) for s in got] == [
        "default", "speech_pad=0", "speech_pad=0.1", "threshold=0.4"]
    with pytest.raises(ValueError, match="speech_pad: 'x' is not a number"):
        vad_dev.sweep({"speech_pad": "0,x"})
    with pytest.raises(ValueError, match="VadConfig.threshold"):
        vad_dev.sweep({"threshold": "1.5"})
    both = vad_dev.sweep({"speech_pad": "0"}, "speech_pad_start=0.05, speech_pad_end=0.3;"
                         "speech_pad=0; threshold=0.4,min_gap=1")
    assert both == [{}, {"speech_pad": 0.0}, {"speech_pad_start": 0.05, "speech_pad_end": 0.3},
                    {"threshold": 0.4, "min_gap": 1.0}]
    assert vad_dev.setting_name(both[2]) == "speech_pad_end=0.3,speech_pad_start=0.05"
    with pytest.raises(ValueError, match="'pad=0.1' names a field VadConfig lacks"):
        vad_dev.sweep({}, "pad=0.1")
    with pytest.raises(ValueError, match="is not field=value"):
        vad_dev.sweep({}, "speech_pad")


def _sup(start, end):
    return SimpleNamespace(start=start, end=end)


def test_edge_offsets_take_the_segment_that_overlaps_most():
    sups = [_sup(1.0, 3.0), _sup(3.5, 6.0), _sup(8.0, 9.0), _sup(10.0, 11.0)]
    segments = [(0.8, 3.1), (3.2, 3.6), (3.6, 6.3), (10.5, 12.0)]
    starts, ends, missed = vad_dev.edge_offsets(segments, sups)
    assert starts == pytest.approx([-0.2, 0.1, 0.5])
    assert ends == pytest.approx([0.1, 0.3, 1.0])
    assert missed == 1
    assert vad_dev.offset_stats([]) == (None, None)
    med, p95 = vad_dev.offset_stats([-0.3, 0.1, 0.2] + [0.0] * 17)
    assert med == 0.0 and p95 == pytest.approx(0.2)  # nearest rank 19 of 20 magnitudes
    assert vad_dev.offset_stats([-0.5])[1] == 0.5


@pytest.fixture(scope="module")
def dev_dir(tmp_path_factory):
    """A tiny DEV-like folder: 6 shipped utterances joined (about 20 s), their files under
    corpus/."""
    out = tmp_path_factory.mktemp("dev")
    make = load_script("make_long_recording")
    sups = make.make_long_recording(CORPUS, out, num_utterances=6, seed=1)
    (out / "corpus").mkdir()
    ids = {s.id for s in sups}
    for utt, path, _ in make.corpus_utterances(CORPUS):
        if utt in ids:
            shutil.copy(path, out / "corpus" / path.name)
    return out


def test_a_setting_reaches_the_job_and_is_undone(dev_dir):
    """Inside vad_settings the job's segmenter uses the setting (narrower segments with no
    pad), outside it the default again."""
    from lhotse import Recording, SupervisionSet

    from k2dec.job import DecodeConfig
    from k2dec.job import longform as job

    cut = Recording.from_file(dev_dir / "long.wav").to_cut()
    config = DecodeConfig(segment_max=10.0)

    def total():
        return sum(s.duration for s in job.segment_utterance(cut, config, 0.04).segments)

    before = total()
    with vad_dev.vad_settings({"speech_pad": 0.0}):
        narrow = total()
        assert job.VadConfig(max_segment=5.0) == VadConfig(speech_pad=0.0, max_segment=5.0)
    assert job.VadConfig is VadConfig
    assert total() == before
    sups = SupervisionSet.from_file(dev_dir / "supervisions.jsonl")
    assert narrow < before - 0.2 * len(sups)  # 0.2 s less on each side of most segments
    with pytest.raises(ValueError, match="not VadConfig fields: \\['pad'\\]"):
        with vad_dev.vad_settings({"pad": 0.1}):
            pass


def test_a_sweep_on_a_tiny_recording(dev_dir, tmp_path, monkeypatch):
    # torch aborts when the inter-op threads are set after this process used them
    monkeypatch.setattr(vad_dev, "one_thread", lambda: None)
    cases = tmp_path / "cases.jsonl"
    argv = ["--dev-dir", str(dev_dir), "--methods", "greedy_search", "--speech-pads",
            "0,0.2", "--segment-max", "5", "--work", str(tmp_path / "w"), "--cases",
            str(cases)]
    per_method, summary = vad_dev.main(argv)
    rows = [json.loads(line) for line in cases.read_text().splitlines()]
    assert [(r["method"], r["setting"]) for r in rows] == [
        ("greedy_search", "per utterance"), ("greedy_search", "default"),
        ("greedy_search", "speech_pad=0")]
    utt, default, bare = rows
    assert 0 < utt["wer"] < 100 and 0 < default["wer"] < 100 and 0 < bare["wer"] < 100
    assert default["segments"] >= 6 and default["missed"] == 0
    # no pad: segments start after the utterance's file starts (its leading silence)
    assert bare["start"][0] > default["start"][0] and bare["end"][0] < default["end"][0]
    by_setting = {r[1]: r for r in per_method}
    assert float(by_setting["default"][4]) == pytest.approx(default["wer"] - utt["wer"],
                                                             abs=0.01)
    assert [r[0] for r in summary] == ["default", "speech_pad=0"]
    assert float(summary[1][1]) == pytest.approx(bare["wer"], abs=0.01)
    assert float(summary[1][3]) == pytest.approx(bare["wer"] - default["wer"], abs=0.01)
    assert summary[1][4:] == [int(bare["wer"] < default["wer"]),
                              int(bare["wer"] > default["wer"])]

    def boom(*args, **kwargs):
        raise RuntimeError("no decoding here")

    monkeypatch.setattr(vad_dev, "decode", boom)
    monkeypatch.setattr(vad_dev, "_assets", lambda methods: None)
    again = vad_dev.main(argv)
    assert again == (per_method, summary)  # every row read back, none decoded
    failing = vad_dev.main(argv[:-2] + ["--cases", str(tmp_path / "other.jsonl")])
    assert all("RuntimeError: no decoding here" in r[-1] for r in failing[0])
    assert failing[1][0][1] == "n/a"
