"""One bad cut never stops the job: a manifest with one malformed cut (a field of the wrong
type, a channel the recording lacks, an unknown storage or source type, a missing recording
file) decodes its good cuts; the bad one is a failed cut whose reason names the cut and the
field, and the exit status says some failed."""

from __future__ import annotations

import gzip
import json

import pytest
from click.testing import CliRunner

from k2dec.cli import FAILED_CUTS_STATUS, main
from k2dec.data import split_bad_cuts, utterance_cuts
from k2dec.job import DecodeConfig, decode_cuts, load_assets, plan_methods, run_decode
from k2dec.results import read_results

METHOD = "greedy_search"


def _drop_features(d: dict) -> None:
    d.pop("features", None)


def _channel(d: dict) -> None:
    d["channel"] = 3


def _source_type(d: dict) -> None:
    d["recording"]["sources"][0]["type"] = "carrier-pigeon"


def _missing_file(d: dict) -> None:
    d["recording"]["sources"][0]["source"] = "/nonexistent/k2dec-test/gone.wav"


#: (what, change of the first cut's JSON, needs the features dropped, words in the reason)
BAD = [
    ("duration string", lambda d: d.update(duration="1.0"), False, ["duration", "'1.0'"]),
    ("duration negative", lambda d: d.update(duration=-1), False, ["duration", "-1"]),
    ("duration bool", lambda d: d.update(duration=True), False, ["duration", "True"]),
    ("text number", lambda d: d["supervisions"][0].update(text=42), False, ["text", "42"]),
    ("sup start string", lambda d: d["supervisions"][0].update(start="0"), False, ["start"]),
    ("sup outside", lambda d: d["supervisions"][0].update(start=99.0), False, ["outside"]),
    ("storage type", lambda d: d["features"].update(storage_type="nosuch"), False,
     ["storage_type", "'nosuch'"]),
    ("num_frames string", lambda d: d["features"].update(num_frames="9"), False,
     ["num_frames"]),
    ("channel", _channel, True, ["channel 3", "channels"]),
    ("source type", _source_type, True, ["source type", "carrier-pigeon"]),
    ("missing file", _missing_file, True, ["gone.wav", "does not exist"]),  # when read
]


def _manifest(s, tmp_path, change, drop_features):
    lines = []
    for i, cut in enumerate(s["cuts"].subset(first=3)):
        d = cut.to_dict()
        if drop_features:
            _drop_features(d)
        if i == 0:
            change(d)
        lines.append(json.dumps(d))
    path = tmp_path / "cuts.jsonl.gz"
    path.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    return path, next(iter(s["cuts"])).id


@pytest.mark.parametrize("what, change, drop, words", BAD, ids=[b[0] for b in BAD])
def test_one_bad_cut_fails_alone_on_the_cli(decode_setup, tmp_path, what, change, drop, words):
    s = decode_setup
    path, bad_id = _manifest(s, tmp_path, change, drop)
    out = tmp_path / "out"
    r = CliRunner().invoke(main, [
        "decode", "--cuts", str(path), "--model", str(s["model_path"]), "--lang-dir",
        str(s["lang_dir"]), "--method", METHOD, "--out-dir", str(out), "--test-set", "t",
        "--max-duration", "3"])
    assert r.exit_code == FAILED_CUTS_STATUS, (r.output, r.exception)
    assert "Traceback" not in r.output and "1 of 3 cuts failed" in r.output
    records = read_results(out / METHOD / "results-t.jsonl")
    assert len(records) == 3
    assert records[bad_id]["status"] == "error"
    assert f"cut {bad_id!r}" in records[bad_id]["error"] or what == "missing file"
    assert all(w in records[bad_id]["error"] for w in words), records[bad_id]["error"]
    assert [r["status"] for k, r in sorted(records.items()) if k != bad_id] == ["ok", "ok"]


def test_split_bad_cuts_names_cut_and_field(decode_setup):
    cuts = decode_setup["cuts"].subset(first=2)
    good, bad = split_bad_cuts(cuts)
    assert list(good.ids) == list(cuts.ids) and bad == {}
    first = next(iter(cuts))
    broken = cuts.modify_ids(lambda i: i)  # a copy
    d = first.to_dict()
    d["supervisions"][0]["text"] = 7
    from lhotse import CutSet
    from lhotse.cut.set import deserialize_cut

    broken = CutSet.from_cuts([deserialize_cut(d), *list(cuts)[1:]])
    good, bad = split_bad_cuts(broken)
    assert list(good.ids) == list(cuts.ids)[1:]
    assert list(bad) == [first.id] and "text 7 must be a string" in bad[first.id]
    with pytest.raises(ValueError, match="text 7 must be a string"):
        utterance_cuts(broken)  # the checks of a test set refuse it, naming cut and field
    with pytest.raises(TypeError, match="cuts must be a lhotse CutSet"):
        split_bad_cuts(list(cuts))


def test_the_api_records_bad_cuts_as_failed(decode_setup, tmp_path):
    s = decode_setup
    d = next(iter(s["cuts"])).to_dict()
    d["duration"] = "1.2"
    from lhotse import CutSet
    from lhotse.cut.set import deserialize_cut

    cuts = CutSet.from_cuts([deserialize_cut(d), *list(s["cuts"].subset(first=3))[1:]])
    assets = load_assets(s["model_path"], s["lang_dir"])
    summary = decode_cuts(assets, cuts, METHOD, tmp_path / "a", "t", config=DecodeConfig(3.0))
    assert summary.failed == [d["id"]] and "duration '1.2'" in summary.first_failure
    assert summary.num_cuts == 3
    rows = run_decode(assets, {"t": cuts}, plan_methods([METHOD]), tmp_path / "b",
                      DecodeConfig(3.0))
    assert rows[0].failed == [d["id"]] and rows[0].num_cuts == 3
