"""``k2dec decode`` on malformed cuts manifests, manifests without features, out dirs it cannot
write, file names with spaces or bytes that are not UTF-8, and silent recordings: each gets the
exact outcome a careful user expects (decoded; a failed cut with its reason; or a usage error
before anything is decoded, naming the file / cut / field), never a traceback."""

from __future__ import annotations

import gzip
import json
import math
import os
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from click.testing import CliRunner

from k2dec.cli import main
from k2dec.job import load_assets, split_available
from k2dec.methods import list_methods
from k2dec.results import read_results

RATE = 16000


def _decode(s, out: Path, *args: str, method: str = "greedy_search"):
    return CliRunner().invoke(main, [
        "decode", "--model", str(s["model_path"]), "--lang-dir", str(s["lang_dir"]),
        "--method", method, "--out-dir", str(out), *args])


def _lines(s) -> list[dict]:
    with gzip.open(s["cuts_path"], "rt") as f:
        return [json.loads(line) for line in f if line.strip()]


def _manifest(tmp_path: Path, lines: list, name: str = "cuts.jsonl") -> Path:
    path = tmp_path / name
    text = "".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines)
    if name.endswith(".gz"):
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path


def _edit(cut: dict, **changes) -> dict:
    """A copy of the cut with changes to its fields, ``sup_*`` ones to its supervision."""
    cut = json.loads(json.dumps(cut))
    for key, value in changes.items():
        if key.startswith("sup_"):
            cut["supervisions"][0][key[4:]] = value
        else:
            cut[key] = value
    return cut


# -- manifests that decode, whatever their blank lines ------------------------------------

@pytest.mark.parametrize("layout", ["blank-between", "whitespace-lines", "trailing-blanks",
                                    "crlf", "gzip-with-blanks"])
def test_blank_lines_in_a_manifest_are_skipped(decode_setup, tmp_path, layout):
    lines = _lines(decode_setup)
    if layout == "blank-between":
        rows = [lines[0], "", *lines[1:3], "", "", *lines[3:]]
    elif layout == "whitespace-lines":
        rows = [lines[0], "   ", "\t", *lines[1:]]
    elif layout == "trailing-blanks":
        rows = [*lines, "", ""]
    elif layout == "crlf":
        rows = [json.dumps(x) + "\r" for x in lines] + ["\r"]
    else:
        rows = [lines[0], "", *lines[1:]]
    name = "cuts.jsonl.gz" if layout.startswith("gzip") else "cuts.jsonl"
    r = _decode(decode_setup, tmp_path / "out", "--cuts", str(_manifest(tmp_path, rows, name)),
                "--max-duration", "3")
    assert r.exit_code == 3, r.output  # some cuts failed
    records = read_results(tmp_path / "out" / "greedy_search" / "results-cuts.jsonl")
    assert sorted(records) == sorted(x["id"] for x in lines)


# -- a cut with a bad field fails alone, naming the cut and the field ---------------------

BAD_FIELDS = {
    "negative-supervision-duration": (dict(sup_duration=-1.0),
                                      "supervision 'utt1' has start 0.0 and duration -1.0"),
    "zero-supervision-duration": (dict(sup_duration=0.0), "a duration > 0"),
    "nan-supervision-duration": (dict(sup_duration=math.nan), "duration nan"),
    "infinite-supervision-start": (dict(sup_start=math.inf), "a finite start"),
    "supervision-after-the-cut": (dict(sup_start=50.0), "lies outside the cut"),
    "supervision-before-the-cut": (dict(sup_start=-5.0, sup_duration=1.0),
                                   "lies outside the cut"),
    "zero-cut-duration": (dict(duration=0.0), "duration 0.0: a cut needs a number > 0"),
    "negative-cut-duration": (dict(duration=-2.0), "a cut needs a number > 0"),
}


def _decode_second_changed(s, tmp_path, changes: dict):
    """Decode the setup's cuts with the second one (utt1) changed by ``changes``."""
    lines = _lines(s)
    lines[1] = _edit(lines[1], **changes)
    return _decode(s, tmp_path / "out", "--cuts", str(_manifest(tmp_path, lines)))


@pytest.mark.parametrize("name", BAD_FIELDS)
def test_a_cut_with_a_bad_field_fails_alone_naming_it(decode_setup, tmp_path, name):
    changes, message = BAD_FIELDS[name]
    r = _decode_second_changed(decode_setup, tmp_path, changes)
    assert r.exit_code == 3, r.output  # some cuts failed
    assert "Traceback" not in r.output, r.output
    records = read_results(tmp_path / "out" / "greedy_search" / "results-cuts.jsonl")
    assert records["utt1"]["status"] == "error", records["utt1"]
    assert "cut 'utt1'" in records["utt1"]["error"] and message in records["utt1"]["error"]
    assert records["utt0"]["status"] == "ok"


# -- manifests refused before decoding, naming the cut and the id -------------------------

BAD_CUTS = {
    "cut-id-with-space": (dict(id="utt 1"), "cut id 'utt 1' contains ' '"),
    "cut-id-with-tab": (dict(id="utt\t1"), "contains '\\t'"),
    "empty-cut-id": (dict(id=""), "cut id '' must be a non-empty string"),
    "supervision-id-with-space": (dict(sup_id="sup one"),
                                  "supervision id 'sup one' contains ' '"),
    "cut-id-with-slash": (dict(id="../utt1"), "cut id '../utt1' cannot be part of a file name"),
}


@pytest.mark.parametrize("name", BAD_CUTS)
def test_a_bad_cut_is_a_usage_error_naming_it(decode_setup, tmp_path, name):
    changes, message = BAD_CUTS[name]
    r = _decode_second_changed(decode_setup, tmp_path, changes)
    assert r.exit_code == 2, r.output
    assert message in r.output and "Traceback" not in r.output, r.output
    assert not list(tmp_path.rglob("results-*.jsonl"))


@pytest.mark.parametrize("line, message", [
    ({"id": "rec1", "sources": [], "sampling_rate": 16000, "num_samples": 10, "duration": 1},
     "cuts.jsonl:2: cut 'rec1' is not a lhotse cut"),
    ({"id": "c", "type": "NoSuchCut"}, "cuts.jsonl:2: cut 'c' is not a lhotse cut"),
    ({"id": "c", "start": 0}, "cuts.jsonl:2: cut 'c' is not a lhotse cut"),
    ("[1, 2, 3]", "cuts.jsonl:2: expected a JSON object describing a cut"),
    ('{"id": "c", ', "cuts.jsonl:2: cuts manifest line is not JSON"),
], ids=["a-recording", "unknown-type", "no-duration", "a-list", "half-a-line"])
def test_a_line_that_is_no_cut_is_named(decode_setup, tmp_path, line, message):
    lines = _lines(decode_setup)
    r = _decode(decode_setup, tmp_path / "out", "--cuts",
                str(_manifest(tmp_path, [lines[0], line, *lines[1:]])))
    assert r.exit_code == 2 and message in r.output, r.output


# -- manifests without features: computed on the fly ---------------------------------------

def _audio_cuts(s, tmp_path: Path, recording_changes: dict | None = None) -> list[dict]:
    """The setup's cuts without features (their recordings only), optionally changed."""
    out = []
    for x in _lines(s):
        x = json.loads(json.dumps(x))
        x.pop("features", None)
        if recording_changes and x["id"] in recording_changes:
            x["recording"].update(recording_changes[x["id"]])
        out.append(x)
    assert all("recording" in x for x in out)
    return out


def test_cuts_without_features_are_decoded(decode_setup, tmp_path):
    s = decode_setup
    manifest = _manifest(tmp_path, _audio_cuts(s, tmp_path))
    r = _decode(s, tmp_path / "out", "--cuts", str(manifest), "--max-duration", "3")
    assert r.exit_code == 3, r.output  # some cuts failed
    records = read_results(tmp_path / "out" / "greedy_search" / "results-cuts.jsonl")
    assert {k for k, v in records.items() if v["status"] == "ok"} == {f"utt{i}" for i in range(5)}
    assert "too short" in records["utt5"]["error"]
    assert list((tmp_path / "out" / "features").glob("cuts*/*/*.npy"))
    # the same hypotheses as from the precomputed features
    r = _decode(s, tmp_path / "pre", "--cuts", str(s["cuts_path"]), "--max-duration", "3")
    assert r.exit_code == 3, r.output  # some cuts failed
    pre = read_results(tmp_path / "pre" / "greedy_search" / "results-cuts.jsonl")
    assert {k: v.get("hyp") for k, v in records.items()} == \
        {k: v.get("hyp") for k, v in pre.items()}


@pytest.mark.parametrize("change, message", [
    ({"sources": [{"type": "file", "channels": [0], "source": "nowhere/utt1.wav"}]},
     "its audio file nowhere/utt1.wav does not exist (a relative path: looked for from the "
     "current directory"),
    ({"sampling_rate": 1}, "implausible sampling rate 1 Hz"),
    ({"sampling_rate": 10_000_000}, "implausible sampling rate 10000000 Hz"),
], ids=["missing-audio", "1-Hz", "10-MHz"])
def test_a_recording_that_cannot_be_used_fails_its_cut_only(decode_setup, tmp_path, change,
                                                            message):
    s = decode_setup
    manifest = _manifest(tmp_path, _audio_cuts(s, tmp_path, {"utt1": change}))
    r = _decode(s, tmp_path / "out", "--cuts", str(manifest), "--max-duration", "3")
    assert r.exit_code == 3, r.output  # some cuts failed
    records = read_results(tmp_path / "out" / "greedy_search" / "results-cuts.jsonl")
    assert records["utt1"]["status"] == "error" and message in records["utt1"]["error"]
    assert records["utt1"]["error"].startswith("cut utt1")
    assert all(records[f"utt{i}"]["status"] == "ok" for i in (0, 2, 3, 4))


def test_a_cut_with_neither_features_nor_recording_fails(decode_setup, tmp_path):
    s = decode_setup
    lines = _audio_cuts(s, tmp_path)
    del lines[2]["recording"]
    r = _decode(s, tmp_path / "out", "--cuts", str(_manifest(tmp_path, lines)),
                "--max-duration", "3")
    assert r.exit_code == 3, r.output  # some cuts failed
    records = read_results(tmp_path / "out" / "greedy_search" / "results-cuts.jsonl")
    assert "neither features nor a recording" in records["utt2"]["error"]


# -- out dirs that cannot be written --------------------------------------------------------

def test_an_out_dir_that_is_a_file(decode_setup, tmp_path):
    (tmp_path / "afile").write_text("x")
    for out in (tmp_path / "afile", tmp_path / "afile" / "sub"):
        r = _decode(decode_setup, out, "--cuts", str(decode_setup["cuts_path"]))
        assert r.exit_code == 1, r.output
        assert f"cannot use out dir {out}: {tmp_path / 'afile'} is a file, not a folder" \
            in r.output and "Traceback" not in r.output


def test_a_read_only_out_dir(decode_setup, tmp_path):
    if os.geteuid() == 0:  # root writes anywhere: use a read-only file system instead
        out = Path("/proc/k2dec-out")
    else:
        (tmp_path / "ro").mkdir()
        os.chmod(tmp_path / "ro", 0o500)
        out = tmp_path / "ro" / "out"
    r = _decode(decode_setup, out, "--cuts", str(decode_setup["cuts_path"]))
    assert r.exit_code == 1, r.output
    assert f"cannot use out dir {out}" in r.output and "Traceback" not in r.output


@pytest.mark.parametrize("extra, message", [
    (["--method", "modified_beam_search", "--set", "beam_size=1000000000"],
     "ModifiedBeamSearchConfig.beam_size must be an int in [1, 1000], got 1000000000"),
    (["--method", "nbest", "--set", "num_paths=10000000"],
     "NbestConfig.num_paths must be an int in [1, 10000], got 10000000"),
    (["--method", "nbest", "--set", "num_paths=1000000000"],
     "NbestConfig.num_paths must be an int in [1, 10000], got 1000000000"),
    (["--method", "fast_beam_search", "--set", "max_states=0"],
     "FastBeamSearchConfig.max_states must be an int in [1, 4096], got 0"),
], ids=["beam-1e9", "num-paths-1e7", "num-paths-1e9", "max-states-0"])
def test_the_command_line_refuses_sizes_before_decoding(decode_setup, tmp_path, extra, message):
    s = decode_setup
    r = CliRunner().invoke(main, ["decode", "--cuts", str(s["cuts_path"]), "--model",
                                  str(s["model_path"]), "--lang-dir", str(s["lang_dir"]),
                                  "--out-dir", str(tmp_path / "out"), *extra])
    assert r.exit_code == 2 and message in r.output, r.output
    assert not (tmp_path / "out").exists()


# -- audio folders: names, silence ---------------------------------------------------------

def _noise(seconds: float, db: float, seed: int = 0) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal(int(RATE * seconds))
    return (x * 10 ** (db / 20)).astype(np.float32)


def test_names_with_spaces_and_non_utf8_bytes_decode_with_ctm(decode_setup, tmp_path):
    """Both crashed a job (UnicodeEncodeError after the first cut; the CTM writer after
    everything was decoded): now their ids are safe and every file is in every result file;
    a folder named so gives a safe test-set name for the result files' names."""
    d = os.path.join(os.fsencode(tmp_path), b"my recs \xe9")
    os.mkdir(d)
    for i, name in enumerate([b"my talk.wav", b"caf\xe9.wav", b"plain.wav"]):
        sf.write(os.path.join(d, name), _noise(1.0, -20, seed=i), RATE)
    text = tmp_path / "text"
    text.write_text("my_talk THE CAT\ncaf%E9 A DOG\nplain HOME\n")
    r = _decode(decode_setup, tmp_path / "out", "--audio-dir", os.fsdecode(d), "--text",
                str(text), method="modified_beam_search")
    assert r.exit_code == 0, (r.output, r.exception)
    out = tmp_path / "out" / "modified_beam_search"
    records = read_results(out / "results-my_recs_%E9.jsonl")
    assert sorted(records) == ["caf%E9", "my_talk", "plain"]
    assert all(v["status"] == "ok" for v in records.values())
    ctm = (out / "ctm-my_recs_%E9-modified_beam_search.ctm").read_text().splitlines()
    assert all(len(line.split()) == 6 for line in ctm)
    recogs = (out / "recogs-my_recs_%E9-modified_beam_search.txt").read_text()
    assert "caf%E9:" in recogs and "my_talk:" in recogs
    assert "| my_recs_%E9 | modified_beam_search |" in r.output


@pytest.fixture(scope="module")
def silent_folder(tmp_path_factory):
    d = tmp_path_factory.mktemp("silence") / "in"
    d.mkdir()
    sf.write(d / "zeros.wav", np.zeros(2 * RATE, np.float32), RATE)
    sf.write(d / "lsb.wav", np.round(_noise(2.0, -100) * 32768) / 32768, RATE, subtype="PCM_16")
    sf.write(d / "hiss80.wav", _noise(2.0, -80), RATE, subtype="FLOAT")
    sf.write(d / "loud.wav", _noise(2.0, -20), RATE)
    text = d.parent / "text"
    text.write_text("zeros\nlsb\nhiss80\nloud THE CAT SAT\n")
    return d, text


def _methods(s) -> list[str]:
    assets = load_assets(s["model_path"], s["lang_dir"])
    runnable = [m for m in list_methods() if assets.model.supports(m)]
    ok, _ = split_available(runnable, assets.resources)
    return sorted(m.name for m in ok if not m.needs_references)  # silence has no words


def test_silence_gives_every_method_an_empty_hypothesis(decode_setup, silent_folder, tmp_path):
    d, text = silent_folder
    methods = _methods(decode_setup)
    assert len(methods) >= 15, methods
    args = ["--audio-dir", str(d), "--text", str(text)]
    for m in methods[1:]:
        args += ["--method", m]
    r = _decode(decode_setup, tmp_path / "out", *args, method=methods[0])
    assert r.exit_code == 0, (r.output, r.exception)
    for m in methods:
        records = read_results(tmp_path / "out" / m / "results-in.jsonl")
        for utt in ("zeros", "lsb", "hiss80"):
            rec = records[utt]
            assert rec["status"] == "ok" and rec["hyp"] == [], (m, utt, rec)
            for hyp in rec["hyps"].values():
                assert hyp["text"] == [] and "silent input" in hyp["notes"], (m, utt, hyp)
        assert records["loud"]["status"] == "ok", (m, records["loud"])
        assert "silent input" not in json.dumps(records["loud"]), m


def test_silence_check_can_be_turned_off(decode_setup, silent_folder, tmp_path):
    d, text = silent_folder
    r = _decode(decode_setup, tmp_path / "out", "--audio-dir", str(d), "--silence-db", "-200")
    assert r.exit_code == 0, r.output
    records = read_results(tmp_path / "out" / "greedy_search" / "results-in.jsonl")
    assert "silent input" not in json.dumps(records)
    r = _decode(decode_setup, tmp_path / "out2", "--audio-dir", str(d), "--silence-db", "-10")
    assert r.exit_code == 0, r.output
    records = read_results(tmp_path / "out2" / "greedy_search" / "results-in.jsonl")
    assert "silent input" in json.dumps(records["loud"])  # -20 dBFS noise is below -10
    r = _decode(decode_setup, tmp_path / "out3", "--audio-dir", str(d), "--silence-db", "5")
    assert r.exit_code == 2 and "--silence-db" in r.output


def test_tune_takes_the_silence_threshold(decode_setup, silent_folder, tmp_path):
    d, _ = silent_folder
    s = decode_setup
    text = tmp_path / "text"  # tuning needs a reference for every cut
    text.write_text("zeros THE\nlsb THE\nhiss80 THE\nloud THE CAT SAT\n")

    def tune(work, *extra):
        return CliRunner().invoke(main, [
            "tune", "--model", str(s["model_path"]), "--lang-dir", str(s["lang_dir"]),
            "--audio-dir", str(d), "--text", str(text), "--method", "greedy_search",
            "--grid", "blank_penalty=0,0.5", "--out", str(tmp_path / f"{work}.json"),
            "--work-dir", str(tmp_path / work),
            *extra])

    def loud_is_silent(work):  # per decode of the dev set (one per grid point)
        paths = sorted((tmp_path / work).rglob("results-in.jsonl"))
        assert paths, work
        return {"silent input" in json.dumps(read_results(p)["loud"]) for p in paths}

    r = tune("default")
    assert r.exit_code == 0, r.output
    assert loud_is_silent("default") == {False}
    r = tune("strict", "--silence-db", "-10")  # -20 dBFS noise is below -10: silent too
    assert r.exit_code == 0, r.output
    assert loud_is_silent("strict") == {True}
    r = tune("bad", "--silence-db", "5")
    assert r.exit_code == 2 and "--silence-db" in r.output


def test_audio_failures_reach_the_results_with_one_line_reasons(decode_setup, tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    sf.write(d / "good.wav", _noise(1.0, -20), RATE)
    (d / "corrupt.wav").write_bytes(b"RIFF" + bytes(range(256)) * 8)
    os.symlink(d / "gone.wav", d / "dangling.wav")
    x = _noise(1.0, -20)
    x[10] = np.nan
    sf.write(d / "nan.wav", x, RATE, subtype="FLOAT")
    data = (d / "good.wav").read_bytes()
    (d / "half.wav").write_bytes(data[: len(data) // 2])
    r = _decode(decode_setup, tmp_path / "out", "--audio-dir", str(d))
    assert r.exit_code == 3, r.output  # some cuts failed
    records = read_results(tmp_path / "out" / "greedy_search" / "results-in.jsonl")
    assert records["good"]["status"] == "ok"
    expect = {"corrupt": "not audio that soundfile", "dangling": "dangling symlink",
              "nan": "NaN or infinite", "half": "truncated"}
    for utt, text in expect.items():
        err = records[utt]["error"]
        assert err.startswith(str(d)) and text in err and "\n" not in err, err
        assert len(err) < 400, err


@pytest.mark.parametrize("value", ["0", "-5", "inf"])
def test_a_max_duration_out_of_range_is_refused_before_anything(decode_setup, tmp_path, value):
    r = _decode(decode_setup, tmp_path / "out", "--cuts", str(decode_setup["cuts_path"]),
                "--max-duration", value)
    assert r.exit_code == 2 and f"{float(value)} is not in the range 0.0<x<=100000.0" \
        in r.output, r.output
    assert not (tmp_path / "out").exists()
