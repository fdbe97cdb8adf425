"""The lattice search's memory bound on a long recording's path: a recording decoded in
segments with 1best (HLG, icefall's max_active_states=10000) searches one segment per
``k2.intersect_dense_pruned`` call although its batches hold several segments
(``k2dec.lattice.search.CPU_STATES_PER_CALL``), and gets the words and times of a search with
the bound lifted (a whole batch per call)."""

from __future__ import annotations

import k2
import pytest

import k2dec.job.longform as longform
import k2dec.lattice.search as search
from k2dec.data import cuts_from_audio_dir
from k2dec.demo import ASSETS
from k2dec.job import DecodeConfig, decode_cuts, load_assets, plan_methods, read_settings
from k2dec.results import read_results
from tests.scripts.loader import load_script


@pytest.fixture(scope="module")
def short_long(shipped_demo, tmp_path_factory):
    """``(assets, cuts, run)``: four shipped test-clean utterances joined with pauses into one
    recording, and the 1best run of ``decode.json``."""
    _, lang, graphs, _ = shipped_demo
    d = tmp_path_factory.mktemp("longmem")
    load_script("make_long_recording").make_long_recording(
        ASSETS / "corpus" / "test-clean", d / "long", num_utterances=4)
    cuts = cuts_from_audio_dir(d / "long", d / "feats", progress=False).cuts
    assets = load_assets(ASSETS / "model.pt", lang, graph_dir=graphs)
    run = plan_methods(["1best"], settings=read_settings(ASSETS / "decode.json"))[0]
    return assets, cuts, run


def _decode(setup, out):
    assets, cuts, run = setup
    summary = decode_cuts(assets, cuts, run.method, out, "t", run.config,
                          DecodeConfig(segment_max=8.0), calibration=run.calibration)
    return read_results(summary.results_path)["long"]


def test_one_segment_per_search_call_in_batches_of_several(short_long, tmp_path, monkeypatch):
    calls: list[tuple[int, int]] = []
    batches: list[int] = []
    real_search, real_batch = k2.intersect_dense_pruned, longform.decode_or_split

    def spy_search(graph, dense, **kwargs):
        calls.append((dense.dim0(), kwargs["max_active_states"]))
        return real_search(graph, dense, **kwargs)

    def spy_batch(method, method_config, assets, feats, lens, *rest):
        batches.append(lens.numel())
        return real_batch(method, method_config, assets, feats, lens, *rest)

    monkeypatch.setattr(k2, "intersect_dense_pruned", spy_search)
    monkeypatch.setattr(longform, "decode_or_split", spy_batch)
    rec = _decode(short_long, tmp_path / "bounded")
    assert rec["status"] == "ok" and rec["hyp"], rec
    assert max(batches) > 1, batches  # a batch of several segments was searched
    assert calls and all(states == 10_000 for _, states in calls), calls
    assert all(utts == 1 for utts, _ in calls), calls  # 10000 states per call
    # the bound lifted: a batch per call, the same words and times
    monkeypatch.setattr(search, "CPU_STATES_PER_CALL", 10**9)
    monkeypatch.setattr(search, "CPU_GROUP_SIZE", 1000)
    calls.clear()
    lifted = _decode(short_long, tmp_path / "lifted")
    assert max(utts for utts, _ in calls) == max(batches), calls
    assert lifted["hyp"] == rec["hyp"] and lifted["segments"] == rec["segments"]
    key = next(iter(rec["hyps"]))
    assert lifted["hyps"][key]["word_frames"] == rec["hyps"][key]["word_frames"]
