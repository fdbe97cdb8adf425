"""The decode job and inputs it cannot decode: utterances that never became cuts, cuts longer
than a batch, and oracle methods without references."""

from __future__ import annotations

import pytest
from lhotse import CutSet
from lhotse.utils import fastcopy

from k2dec.job import DecodeConfig, check_references, decode_cuts, load_assets
from k2dec.results import read_results


def test_failed_inputs_are_failed_cuts(decode_setup, tmp_path):
    s = decode_setup
    assets = load_assets(s["model_path"], s["lang_dir"])
    failed = {"gone": "x.wav: AudioLoadingError: Format not recognised"}
    cfg = DecodeConfig(max_duration=3.0, num_buckets=2)
    summary = decode_cuts(assets, s["cuts"], "greedy_search", tmp_path, "tiny", config=cfg,
                          failed=failed)
    records = read_results(summary.results_path)
    assert set(records) == {c.id for c in s["cuts"]} | {"gone"}
    assert {k: v for k, v in records["gone"].items() if k != "input"} == {
        "cut_id": "gone", "status": "error", "error": failed["gone"]}
    assert summary.failed == ["gone", "utt5"] and summary.num_cuts == len(s["cuts"]) + 1
    # a rerun neither duplicates nor loses it
    again = decode_cuts(assets, s["cuts"], "greedy_search", tmp_path, "tiny", config=cfg,
                        failed=failed)
    lines = again.results_path.read_text().splitlines()
    assert len(lines) == len(records) and read_results(again.results_path) == records


def test_cuts_longer_than_max_duration_are_failed_cuts(decode_setup, tmp_path):
    s = decode_setup
    assets = load_assets(s["model_path"], s["lang_dir"])
    summary = decode_cuts(assets, s["cuts"], "ctc-greedy-search", tmp_path, "tiny",
                          config=DecodeConfig(max_duration=1.15, num_buckets=2))
    records = read_results(summary.results_path)
    long = {c.id for c in s["cuts"] if c.duration > 1.15}
    assert long == {"utt0", "utt2"}
    for cut_id in long:
        assert records[cut_id]["status"] == "error"
        assert "too long" in records[cut_id]["error"]
        assert "max_duration=1.15 s" in records[cut_id]["error"]
    assert all(records[c]["status"] == "ok" for c in ("utt1", "utt3", "utt4"))


@pytest.mark.parametrize("method", ["nbest-oracle", "fast_beam_search_nbest_oracle"])
def test_oracle_methods_need_every_reference(decode_setup, tmp_path, method):
    s = decode_setup
    cuts = list(s["cuts"])
    check_references(["greedy_search", method], s["cuts"])  # every cut has a reference
    blank = CutSet.from_cuts([fastcopy(cuts[0], supervisions=[
        fastcopy(cuts[0].supervisions[0], text=None)])] + cuts[1:])  # "": a reference
    check_references(["greedy_search", "1best"], blank)  # no oracle: fine
    with pytest.raises(ValueError, match=rf"{method}.*1 of 6 cuts have none \(e\.g\. utt0\)"):
        check_references(["greedy_search", method], blank)
    assets = load_assets(s["model_path"], s["lang_dir"])
    with pytest.raises(ValueError, match="have none"):
        decode_cuts(assets, blank, method, tmp_path, "tiny")
    assert not list(tmp_path.rglob("*.jsonl"))
