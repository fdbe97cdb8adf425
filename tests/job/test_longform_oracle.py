"""Oracle methods on long recordings (k2dec.job.longform.segment_references): the shipped
test utterances joined with pauses (scripts/make_long_recording.py) decoded in segments by
nbest-oracle and fast_beam_search_nbest_oracle, the recording's one reference cut into one
span per segment by a greedy first pass: the job exits with the recording decoded, its WER
not above the non-oracle method's, the same words at any batch size, and, for a recording
decoded as one segment, the per-utterance oracle's words."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from k2dec.data import cuts_from_audio_dir
from k2dec.demo import ASSETS
from k2dec.job import (
    DecodeConfig,
    decode_cuts,
    load_assets,
    plan_methods,
    read_settings,
)
from k2dec.job.encoder import JobEncoder
from k2dec.job.longform import (
    decode_long,
    output_frame_shift,
    segment_references,
    segment_utterance,
)
from k2dec.longform import Segment, Segmentation
from k2dec.results import read_results
from tests.scripts.loader import load_script

CORPUS = ASSETS / "corpus" / "test-clean"
NUM_UTTS = 8
#: (oracle, the method whose lattice / n-best it picks from)
PAIRS = (("nbest-oracle", "nbest"), ("fast_beam_search_nbest_oracle", "fast_beam_search_nbest"))
METHODS = tuple(m for pair in PAIRS for m in pair)


@pytest.fixture(scope="module")
def setup(shipped_demo, tmp_path_factory):
    """``(assets, long cuts, utterance cuts, runs by method, the joined reference)``: the
    first 8 shipped test-clean utterances joined into one 33 s WAV, and the same utterances
    as files."""
    _, lang, graphs, _ = shipped_demo
    d = tmp_path_factory.mktemp("oracle_long")
    load_script("make_long_recording").make_long_recording(CORPUS, d / "long",
                                                           num_utterances=NUM_UTTS)
    rid, text = (d / "long" / "text").read_text().split(maxsplit=1)
    long = cuts_from_audio_dir(d / "long", d / "feats_long", {rid: text}, progress=False).cuts
    utt_dir = d / "utts"
    utt_dir.mkdir()
    refs = {}
    for utt, path, words in load_script("make_long_recording").corpus_utterances(CORPUS)[
            :NUM_UTTS]:
        (utt_dir / path.name).write_bytes(path.read_bytes())
        refs[utt] = words
    utts = cuts_from_audio_dir(utt_dir, d / "feats_utts", refs, progress=False).cuts
    assets = load_assets(ASSETS / "model.pt", lang, graph_dir=graphs)
    runs = {r.method.name: r for r in plan_methods(list(METHODS),
                                                   settings=read_settings(ASSETS / "decode.json"))}
    return assets, long, utts, runs, text.split()


def _decode(setup, cuts, method, out: Path, **config):
    assets, _, _, runs, _ = setup
    run = runs[method]
    summary = decode_cuts(assets, cuts, run.method, out, "t", run.config, DecodeConfig(**config),
                          calibration=run.calibration)
    return summary, read_results(summary.results_path)


@pytest.fixture(scope="module")
def long_decoded(setup, tmp_path_factory):
    """Per method: the long recording's summary and record (segments of at most 10 s)."""
    out = tmp_path_factory.mktemp("decoded")
    got = {}
    for method in METHODS:
        summary, records = _decode(setup, setup[1], method, out, segment_max=10.0)
        got[method] = (summary, records[setup[1][0].id])
    return got


@pytest.mark.parametrize("oracle, peer", PAIRS)
def test_an_oracle_decodes_a_long_recording_no_worse_than_its_peer(long_decoded, oracle, peer):
    summary, rec = long_decoded[oracle]
    peer_summary, _ = long_decoded[peer]
    assert rec["status"] == "ok", rec.get("error")
    assert not summary.failed and summary.num_cuts == 1
    assert len(rec["segments"]) >= 4
    assert "reference of" in rec["hyps"][next(iter(rec["hyps"]))]["notes"]
    assert math.isfinite(summary.headline[1])
    assert summary.headline[1] <= peer_summary.headline[1], (summary.wers, peer_summary.wers)


def test_the_reference_spans_concatenate_to_the_reference(setup):
    """Windows and VAD segments: each segment's reference words, in order, are the
    recording's reference; every segment of the VAD's gets words (each holds an utterance's
    speech or part of it)."""
    assets, long, _, _, ref = setup
    cut = long[0]
    for segmenter in ("vad", "windows"):
        config = DecodeConfig(segment_max=10.0, segmenter=segmenter, segment_window=8.0)
        segments = segment_utterance(cut, config, output_frame_shift(assets, config)).segments
        spans, note = segment_references(assets, cut, segments, config, JobEncoder(), ref)
        assert len(spans) == len(segments) >= 4
        assert [w for span in spans for w in span] == ref, segmenter
        assert "CTC path scores" in note
        assert segmenter == "windows" or all(spans), spans
        empty, _ = segment_references(assets, cut, segments, config, JobEncoder(), [])
        assert empty == [[] for _ in segments]


@pytest.mark.parametrize("oracle", [p[0] for p in PAIRS])
def test_same_words_at_any_batch_size(setup, long_decoded, tmp_path, monkeypatch, oracle):
    import k2dec.job.longform as longform

    _, rec = long_decoded[oracle]
    monkeypatch.setattr(longform, "LATTICE_BATCH_FACTOR", 100.0)
    monkeypatch.setattr(longform, "LONG_BATCH_FACTOR", 100.0)
    _, records = _decode(setup, setup[1], oracle, tmp_path, segment_max=10.0)
    got = records[setup[1][0].id]
    assert got["hyp"] == rec["hyp"] and got["segments"] == rec["segments"]


@pytest.mark.parametrize("oracle", [p[0] for p in PAIRS])
def test_one_segment_gives_the_per_utterance_oracles_words(setup, tmp_path, monkeypatch,
                                                           oracle):
    """An utterance over segment_max decoded as one segment (the whole of it) reads its
    whole reference: the words of the same utterance decoded as a short one."""
    import k2dec.job.longform as longform

    monkeypatch.setattr(longform, "segment_utterance", lambda cut, *a: Segmentation(
        (Segment(0.0, cut.duration),), cut.duration))
    utts = setup[2]
    short, _ = _decode(setup, utts, oracle, tmp_path / "short")
    whole, _ = _decode(setup, utts, oracle, tmp_path / "whole", segment_max=1.0)
    short_recs, whole_recs = read_results(short.results_path), read_results(whole.results_path)
    assert whole.num_cuts == NUM_UTTS and not whole.failed
    for cut_id, rec in short_recs.items():
        assert whole_recs[cut_id]["segments"] == [[0.0, round(utts[cut_id].duration, 3)]]
        assert whole_recs[cut_id]["hyp"] == rec["hyp"], cut_id
    assert whole.headline[1] == short.headline[1]


def test_an_oracle_without_a_reference_fails_the_recording(setup):
    assets, long, _, runs, _ = setup
    run = runs["nbest-oracle"]
    done = decode_long(run.method, run.config, assets, long[0], DecodeConfig(segment_max=10.0),
                       JobEncoder(), None)
    assert done.decoded == ({}, "method 'nbest-oracle' reads the utterance's reference; it "
                                "has none")
