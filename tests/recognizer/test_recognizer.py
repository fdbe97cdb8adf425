"""k2dec.Recognizer on the shipped model: every input kind gives the same hypotheses as the
audio file it holds, at any batching; bad inputs and settings are refused with errors that
name them; on the shipped test cuts it gives the words of `k2dec decode`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch
from click.testing import CliRunner
from lhotse import CutSet, NumpyFilesWriter, Recording, SupervisionSegment
from lhotse.utils import fastcopy

from k2dec import RecognitionResult, Recognizer
from k2dec.data import FeatureConfig
from k2dec.demo import ASSETS
from k2dec.methods import get_method

pytestmark = pytest.mark.skipif(not (ASSETS / "model.pt").is_file(),
                                reason="no shipped model in this checkout")

#: short shipped test-clean recordings (0.9 - 1.3 s) and a longer one (3.2 s)
FILES = [ASSETS / "corpus" / "test-clean" / p for p in (
    "216/3000/216-3000-0000.flac", "215/3000/215-3000-0003.flac",
    "215/3000/215-3000-0001.flac", "203/3000/203-3000-0002.flac",
    "101/3000/101-3000-0000.flac")]


@pytest.fixture(scope="module")
def rec() -> Recognizer:
    return Recognizer.from_files(ASSETS / "model.pt", ASSETS / "lang", method="greedy_search")


@pytest.fixture(scope="module")
def by_file(rec) -> list[RecognitionResult]:
    return rec.decode([str(f) for f in FILES])


def _same(a: RecognitionResult, b: RecognitionResult, score_tol: float = 0.0) -> None:
    assert (a.words, a.tokens, a.timestamps, a.error) == (b.words, b.tokens, b.timestamps,
                                                          b.error)
    assert a.record.tokens == b.record.tokens
    assert a.record.score == pytest.approx(b.record.score, abs=score_tol)


def test_files_give_text_tokens_times_and_confidences(rec, by_file):
    # a file's id is its stem, as k2dec decode --audio-dir names it
    assert [r.id for r in by_file] == [f.stem for f in FILES]
    paths = {f.stem: f for f in FILES}
    assert all(not r.error and r.words for r in by_file)
    for r in by_file:
        assert r.text == " ".join(r.words)
        assert len(r.tokens) == len(r.timestamps) == len(r.record.tokens)
        assert "".join(r.tokens).replace("\u2581", " ").split() == list(r.words)
        assert all(b >= a for a, b in zip(r.timestamps, r.timestamps[1:]))
        assert r.timestamps[-1] <= sf.info(paths[r.id]).duration  # seconds of 40 ms frames
        assert [w.word for w in r.timed_words] == list(r.words)
        assert all(0.0 <= c <= 1.0 for c in r.confidences)
    assert rec.model.vocab_size == 256 and rec.method == "greedy_search"
    assert repr(rec).startswith("Recognizer(method='greedy_search', model='k2dec model: ")


@pytest.mark.parametrize("kind", ["numpy", "numpy [1, S]", "torch", "recording", "cut",
                                  "cutset"])
def test_every_input_kind_gives_the_file_result(rec, by_file, kind):
    waves = [sf.read(f, dtype="float32")[0] for f in FILES]
    if kind == "numpy":
        out = rec.decode(waves, sample_rate=16000)
    elif kind == "numpy [1, S]":
        out = rec.decode([w[None] for w in waves], sample_rate=np.int64(16000))
    elif kind == "torch":
        out = rec.decode([torch.from_numpy(w) for w in waves], sample_rate=16000)
    elif kind == "recording":
        recordings = [Recording.from_file(f) for f in FILES]
        out = rec.decode(recordings)
        assert [r.id for r in out] == [r.id for r in recordings]
    else:
        cuts = [Recording.from_file(f).to_cut() for f in FILES]
        out = rec.decode(CutSet.from_cuts(cuts) if kind == "cutset" else cuts)
        assert [r.id for r in out] == [c.id for c in cuts]
    if kind.startswith(("numpy", "torch")):
        assert [r.id for r in out] == [str(i) for i in range(len(FILES))]
    for a, b in zip(out, by_file):
        _same(a, b, 1e-4)


def test_mixed_inputs_keep_their_order(rec, by_file):
    wave = sf.read(FILES[1], dtype="float32")[0]
    out = rec.decode([str(FILES[0]), wave, Recording.from_file(FILES[2]).to_cut()],
                     sample_rate=16000)
    assert [r.id for r in out][:2] == [FILES[0].stem, "1"]
    for a, b in zip(out, by_file[:3]):
        _same(a, b, 1e-4)
    assert rec.decode([]) == []
    single = rec.decode(str(FILES[3]))  # one input: a list of one result
    assert len(single) == 1
    _same(single[0], by_file[3], 1e-4)


@pytest.mark.parametrize("max_duration", [1.5, 4.0, 1000.0])
def test_results_do_not_depend_on_the_batches(by_file, max_duration):
    """At 1.5 s every batch holds one recording (the 3.2 s one is too long); at 1000 s one
    batch holds all."""
    rec = Recognizer.from_files(ASSETS / "model.pt", ASSETS / "lang", method="greedy_search",
                                max_duration=max_duration)
    out = rec.decode([str(f) for f in FILES[::-1]])[::-1]
    for a, b in zip(out[:4], by_file[:4]):
        _same(a, b, 1e-4)
    if max_duration < 3.2:
        assert out[4].error.startswith("too long: 3.2 s of audio") and out[4].words == ()
    else:
        _same(out[4], by_file[4], 1e-4)


def test_a_cut_with_two_supervisions_gives_two_utterances(rec):
    cut = Recording.from_file(FILES[4]).to_cut()
    sups = [SupervisionSegment("first", cut.recording_id, 0.0, 1.5),
            SupervisionSegment("second", cut.recording_id, 1.5, cut.duration - 1.5)]
    out = rec.decode(fastcopy(cut, supervisions=sups))
    assert [r.id for r in out] == ["first", "second"]
    assert all(r.words and not r.error for r in out)


def test_other_sample_rates_are_resampled(rec, by_file):
    wave = sf.read(FILES[4], dtype="float32")[0]
    slow = torch.nn.functional.interpolate(torch.from_numpy(wave)[None, None], scale_factor=1.5,
                                           mode="linear", align_corners=False)[0, 0]
    (out,) = rec.decode(slow, sample_rate=24000)
    assert not out.error and len(out.words) >= len(by_file[4].words) - 2


def test_features_of_cuts_are_used_as_they_are(rec, tmp_path):
    cut = Recording.from_file(FILES[0]).to_cut()
    with_feats = cut.compute_and_store_features(rec.model.feature_config.extractor(),
                                                NumpyFilesWriter(tmp_path / "feats"))
    (a,) = rec.decode(with_feats)
    (b,) = rec.decode(cut)
    _same(a, b)
    forty = cut.compute_and_store_features(
        rec.model.feature_config.override(num_mel_bins=40).extractor(),
        NumpyFilesWriter(tmp_path / "f40"))
    with pytest.raises(ValueError, match=r"40-dim features every 0.01 s; the model takes "
                                         r"80-dim"):
        rec.decode(forty)


def test_too_short_inputs_fail_with_the_reason(rec):
    out = rec.decode([np.full(100, 0.01, dtype=np.float32), str(FILES[0])], sample_rate=16000)
    assert out[0].error.startswith("too short: 100 samples at 16000 Hz")
    assert out[0].text == "" and out[0].tokens is None
    assert not out[1].error


def _wave(n: int = 16000) -> np.ndarray:
    return (np.random.default_rng(0).standard_normal(n) * 0.1).astype(np.float32)


BAD_WAVEFORMS = [
    (dict(sample_rate=16000.0), TypeError, "sample_rate must be an int .* got float 16000.0"),
    (dict(sample_rate="16000"), TypeError, "sample_rate must be an int .* got str"),
    (dict(sample_rate=True), TypeError, "sample_rate must be an int"),
    (dict(sample_rate=None), ValueError, "waveform inputs need their sample_rate"),
    # the check k2dec decode makes of a file's header (not "too long: 48000 s" at 1 Hz)
    (dict(sample_rate=0), ValueError, "implausible sampling rate 0 Hz given as sample_rate"),
    (dict(sample_rate=1), ValueError, r"implausible sampling rate 1 Hz .*\(accepted: "),
    (dict(sample_rate=10_000_000), ValueError, "implausible sampling rate 10000000 Hz"),
    (dict(x=np.zeros(0, dtype=np.float32)), ValueError, r"inputs\[0\]: the waveform is empty"),
    (dict(x=np.zeros((2, 16000), dtype=np.float32)), ValueError,
     r"inputs\[0\]: a waveform must be one channel .* got shape \(2, 16000\); average"),
    (dict(x=np.zeros((16000, 2), dtype=np.float32)), ValueError, "one channel"),
    (dict(x=np.zeros(16000, dtype=np.int16)), TypeError, "dtype int16 .*divide by 32768"),
    (dict(x=np.zeros(16000, dtype=np.complex64)), TypeError, "floats in"),
    (dict(x=np.array([0.1, np.nan] * 8000, dtype=np.float32)), ValueError, "NaN or inf"),
    (dict(x=[0.1, 0.2, 0.3]), TypeError, r"inputs\[0\]: expected an audio file path"),
    (dict(x={"a": 1}), TypeError, "inputs must be an audio file path"),
    (dict(x=42), TypeError, "got int"),
]


def test_two_files_with_one_stem_are_refused_naming_both(rec, tmp_path):
    (tmp_path / "a").mkdir()
    copy = tmp_path / "a" / FILES[0].name
    copy.write_bytes(FILES[0].read_bytes())
    with pytest.raises(ValueError, match=f"and '{copy}' have one result id '{FILES[0].stem}'"):
        rec.decode([FILES[0], copy])


@pytest.mark.parametrize("given, error, match", BAD_WAVEFORMS)
def test_bad_waveforms_are_refused_naming_the_input(rec, given, error, match):
    x = given.get("x", _wave())
    kwargs = {"sample_rate": given.get("sample_rate", 16000)}
    with pytest.raises(error, match=match):
        rec.decode(x, **kwargs)


def test_bad_files_are_refused_naming_them(rec, tmp_path):
    corrupt = tmp_path / "corrupt.wav"
    corrupt.write_bytes(b"RIFF" + bytes(range(200)))
    for path, match in ((tmp_path / "nothere.wav", "nothere.wav: no such audio file"),
                        (tmp_path, "not a file"),
                        (corrupt, "corrupt.wav: cannot read the audio: ")):
        with pytest.raises(ValueError, match=match):
            rec.decode([str(FILES[0]), path])
    with pytest.raises(ValueError, match="has neither features nor a recording"):
        rec.decode(fastcopy(Recording.from_file(FILES[0]).to_cut(), recording=None))


BAD_SETTINGS = [
    (dict(method="no_such_method"), ValueError, "unknown decoding method 'no_such_method'"),
    (dict(method=3), TypeError, "method must be a method name"),
    (dict(method="greedy_search", nosuch=3), ValueError,
     "method 'greedy_search' has no setting 'nosuch'; its settings are search.max_sym_per_frame"),
    (dict(method="modified_beam_search", beam_size=2.5), ValueError, "does not fit the field"),
    (dict(method="modified_beam_search", beam=4), ValueError,
     "'beam' was renamed in k2dec 0.2: use search.beam_size"),
    (dict(method="fast_beam_search", num_paths=10), ValueError, "no setting 'num_paths'"),
    (dict(method="greedy_search", max_sym_per_frame=0), ValueError, "max_sym_per_frame"),
    (dict(method="1best"), ValueError, "method '1best' needs the HLG graph"),
    (dict(method="greedy_search", max_duration=0), ValueError, "max_duration must be"),
    (dict(method="rnn-lm"), ValueError, "needs .*a neural LM"),
]


@pytest.mark.parametrize("given, error, match", BAD_SETTINGS)
def test_bad_methods_and_settings_are_refused(rec, given, error, match):
    given = dict(given)
    method = given.pop("method")
    max_duration = given.pop("max_duration", 200.0)
    with pytest.raises(error, match=match):
        Recognizer(rec.assets, method, given, max_duration=max_duration)


def test_settings_reach_the_method_config(rec):
    fbs = rec.with_method("fast_beam_search", beam=8, max_contexts=16)
    assert fbs.config.search.beam == 8.0 and fbs.config.search.max_contexts == 16
    mbs = rec.with_method("modified_beam_search", **{"search.beam_size": 6})
    assert mbs.config.search.beam_size == 6
    compat = Recognizer(rec.assets, "fast_beam_search", icefall_compat=True)
    assert compat.config.search.termination_frame is False
    assert fbs.assets is rec.assets


def test_a_settings_file_applies_like_decode_config(rec, tmp_path):
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"set": ["beam_size=5"], "methods": {
        "modified_beam_search": ["beam_size=7"]}}))
    mbs = Recognizer(rec.assets, "modified_beam_search", settings_file=path)
    assert mbs.config.search.beam_size == 7
    over = Recognizer(rec.assets, "modified_beam_search", {"beam_size": 3},
                      settings_file=path)
    assert over.config.search.beam_size == 3


# --- the same words as `k2dec decode` ----------------------------------------------------

NUM_CUTS = 8


@pytest.fixture(scope="module")
def cli_decoded(shipped_demo, tmp_path_factory):
    """`k2dec decode --cuts` of the first test-clean cuts with three methods:
    ``(cuts, {method: {cut_id: words}})``."""
    from k2dec.cli import main

    _, lang, graphs, cut_paths = shipped_demo
    work = tmp_path_factory.mktemp("cli")
    cuts = CutSet.from_cuts(sorted(CutSet.from_file(cut_paths["test-clean"]),
                                   key=lambda c: c.id)[:NUM_CUTS])
    cuts.to_file(work / "cuts.jsonl.gz")
    methods = ["greedy_search", "fast_beam_search", "1best"]
    args = ["decode", "--cuts", str(work / "cuts.jsonl.gz"), "--model", str(ASSETS / "model.pt"),
            "--lang-dir", str(lang), "--graph-dir", str(graphs), "--out-dir", str(work / "out")]
    result = CliRunner().invoke(main, args + [a for m in methods for a in ("--method", m)])
    assert result.exit_code == 0, result.output
    words = {}
    for m in methods:
        lines = (work / "out" / m / "results-cuts.jsonl").read_text().splitlines()
        words[m] = {d["cut_id"]: d["hyp"] for d in map(json.loads, lines)}
    return cuts, words


@pytest.mark.parametrize("method", ["greedy_search", "fast_beam_search", "1best"])
def test_same_words_as_k2dec_decode_on_the_shipped_test_cuts(shipped_demo, cli_decoded, method):
    _, lang, graphs, _ = shipped_demo
    cuts, words = cli_decoded
    rec = Recognizer.from_files(ASSETS / "model.pt", lang, graphs, method=method)
    out = rec.decode(cuts)
    assert [r.id for r in out] == list(cuts.ids)
    assert {r.id: list(r.words) for r in out} == words[method]
    assert sum(len(w) for w in words[method].values()) > 5 * NUM_CUTS


NEWCOMER = '''\
from k2dec import Recognizer

A = "assets/librispeech-synth"
rec = Recognizer.from_files(f"{A}/model.pt", f"{A}/lang", "exp/graphs", method="1best")
for method in ("1best", "fast_beam_search"):
    for r in rec.with_method(method).decode(["a.wav", "b.wav"]):
        print(method, r.id, r.text)
'''


def test_the_newcomer_script_is_short_runs_and_is_in_the_readme(shipped_demo, tmp_path,
                                                                  capsys, monkeypatch):
    """The guide's script (docs/guide/python.md) decodes two wav files with 1best and
    fast_beam_search in under 10 lines, giving the words of `k2dec decode` on the same files'
    features (stored uncompressed: `--audio-dir` stores them lilcom-compressed, which changes
    the words of 2 of the 200 shipped test files, see the guide)."""
    from k2dec.cli import main

    assert len(NEWCOMER.strip().splitlines()) < 10
    root = Path(__file__).parents[2]
    docs = [(root / page).read_text() for page in ("README.md", "docs/guide/python.md")]
    assert any(NEWCOMER in text for text in docs)
    _, lang, graphs, _ = shipped_demo
    work = tmp_path / "work"
    (work / "exp").mkdir(parents=True)
    for name, src in (("a", FILES[4]), ("b", FILES[3])):
        sf.write(work / f"{name}.wav", sf.read(src, dtype="int16")[0], 16000)
    (work / "assets").symlink_to(ASSETS.parent)
    (work / "exp" / "graphs").symlink_to(graphs)
    monkeypatch.chdir(work)
    exec(compile(NEWCOMER, "newcomer", "exec"), {})
    printed = capsys.readouterr().out.splitlines()
    got = {tuple(line.split()[:2]): line.split()[2:] for line in printed}
    assert len(got) == 4
    cuts = CutSet.from_cuts(Recording.from_file(work / f"{n}.wav").to_cut() for n in "ab")
    cuts = cuts.compute_and_store_features(FeatureConfig().extractor(), tmp_path / "feats",
                                           storage_type=NumpyFilesWriter)
    cuts.to_file(tmp_path / "cuts.jsonl.gz")
    for method in ("1best", "fast_beam_search"):
        args = ["decode", "--cuts", str(tmp_path / "cuts.jsonl.gz"), "--model",
                str(ASSETS / "model.pt"), "--lang-dir", str(lang), "--graph-dir", str(graphs),
                "--method", method, "--out-dir", str(tmp_path / "out")]
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 0, result.output
        lines = (tmp_path / "out" / method / "results-cuts.jsonl").read_text().splitlines()
        cli = {d["cut_id"]: d["hyp"] for d in map(json.loads, lines)}
        # the script prints each file's id: its stem, as the CLI names it
        assert cli == {name: got[(method, name)] for name in ("a", "b")}


def test_the_models_settings_file_is_applied_as_by_k2dec_decode(rec):
    """decode.json beside the shipped model sets attention-beam-search's ctc_weight (0.5);
    model_settings=False and with_method keep to what was chosen."""
    shipped = rec.with_method("attention-beam-search")
    assert shipped.settings_file == ASSETS / "decode.json"
    assert shipped.config.fusion.ctc_weight == 0.5
    bare = Recognizer.from_files(ASSETS / "model.pt", ASSETS / "lang", model_settings=False,
                                 method="attention-beam-search")
    default = get_method("attention-beam-search").default_config()
    assert bare.settings_file is None
    assert bare.config.fusion.ctc_weight == default.fusion.ctc_weight != 0.5
