"""Long recordings decoded whole by the job (k2dec.job.longform): the shipped test utterances
joined with pauses (scripts/make_long_recording.py) decoded in segments with several methods,
against the same utterances decoded one by one (WER, word starts vs the true utterance
starts); window seams through the middle of a word (neither doubled nor lost); speech the
VAD drops and a recording without speech; the --output-format files read back by their
libraries."""

from __future__ import annotations

import json
import logging
import shutil
import statistics
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pysubs2
import pytest
import soundfile as sf
from lhotse import CutSet, Recording, SupervisionSet
from praatio import textgrid

from k2dec.data import compute_cut_features, cuts_from_audio_dir
from k2dec.demo import ASSETS
from k2dec.job import DecodeConfig, decode_cuts, load_assets, plan_methods, read_settings
from k2dec.job.longform import segment_utterance
from k2dec.results import read_ctm, read_results
from tests.scripts.loader import load_script

REPO = Path(__file__).resolve().parents[2]
CORPUS = ASSETS / "corpus" / "test-clean"
NUM_UTTS = 8
METHODS = ("greedy_search", "modified_beam_search", "1best", "fast_beam_search_nbest_LG")
#: WER points long-form may be worse than utterance by utterance (measured: better or equal
#: for every method; one word of the 90 is 1.1 points).
WER_MARGIN = 2.5


@pytest.fixture(scope="module")
def long_setup(shipped_demo, tmp_path_factory):
    """``(assets, long cuts, utterance cuts, supervisions, runs)``: the first 8 shipped
    test-clean utterances joined into one 33 s WAV, and the same utterances as files."""
    _, lang, graphs, _ = shipped_demo
    d = tmp_path_factory.mktemp("longform")
    make = load_script("make_long_recording").make_long_recording
    sups = make(CORPUS, d / "long", num_utterances=NUM_UTTS)
    text = (d / "long" / "text").read_text().split(maxsplit=1)
    long = cuts_from_audio_dir(d / "long", d / "feats_long", {text[0]: text[1]},
                               progress=False).cuts
    utt_dir = d / "utts"
    utt_dir.mkdir()
    refs = {}
    for utt, path, words in load_script("make_long_recording").corpus_utterances(CORPUS)[
            :NUM_UTTS]:
        shutil.copy(path, utt_dir / path.name)
        refs[utt] = words
    utts = cuts_from_audio_dir(utt_dir, d / "feats_utts", refs, progress=False).cuts
    assets = load_assets(ASSETS / "model.pt", lang, graph_dir=graphs)
    settings = read_settings(ASSETS / "decode.json")
    runs = {r.method.name: r for r in plan_methods(list(METHODS), settings=settings)}
    return assets, long, utts, sups, runs


def _decode(setup, cuts, method, out, **config):
    assets, *_, runs = setup
    run = runs[method]
    return decode_cuts(assets, cuts, run.method, out, "t", run.config,
                       DecodeConfig(**config), calibration=run.calibration)


@pytest.fixture(scope="module")
def decoded(long_setup, tmp_path_factory):
    """Per method: (long-form summary and record, per-utterance summary)."""
    out = tmp_path_factory.mktemp("decoded")
    got = {}
    for method in METHODS:
        long = _decode(long_setup, long_setup[1], method, out / "long", segment_max=10.0)
        utts = _decode(long_setup, long_setup[2], method, out / "utts")
        got[method] = (long, read_results(long.results_path)["long"], utts)
    return got


@pytest.mark.parametrize("method", METHODS)
def test_long_form_wer_is_that_of_the_utterances(decoded, method):
    long, rec, utts = decoded[method]
    assert rec["status"] == "ok", rec.get("error")
    # at most segment_max (a split run's last sliver under 1 s joins the piece before it)
    assert len(rec["segments"]) >= 4 and all(b - a <= 11.0 for a, b in rec["segments"])
    assert long.num_cuts == 1 and utts.num_cuts == NUM_UTTS and not long.failed
    assert long.headline[1] <= utts.headline[1] + WER_MARGIN, (long.wers, utts.wers)
    assert rec["dropped_speech"] == 0 and long.dropped_speech == 0


def _ctm_words(summary, key):
    return read_ctm(summary.results_path.parent / f"ctm-t-{key}.ctm")["long"]


@pytest.mark.parametrize("method", ["greedy_search", "fast_beam_search_nbest_LG"])
def test_word_starts_match_the_utterance_starts(long_setup, decoded, method):
    """The first word decoded of each utterance starts near its true start (the recording's
    clock, through the segments' offsets): median and 95th percentile of the error."""
    long, rec, _ = decoded[method]
    words = _ctm_words(long, next(iter(rec["hyps"])))
    errors = []
    for sup in long_setup[3]:
        inside = [w for w in words if sup.start - 0.5 <= w.start <= sup.end]
        assert inside, sup.id
        errors.append(abs(inside[0].start - sup.start))
    assert statistics.median(errors) < 0.25 and np.percentile(errors, 95) < 0.5, errors


def _window_words(setup, cut, segments, out):
    """Each window decoded alone (a cut of its own), its words in the recording's clock."""
    pieces = CutSet.from_cuts(cut.truncate(offset=a, duration=b - a).with_id(f"w{i}")
                              for i, (a, b) in enumerate(segments))
    summary = _decode(setup, pieces, "greedy_search", out, segment_max=600.0)
    ctm = read_ctm(summary.results_path.parent / "ctm-t-greedy_search.ctm")
    return [[replace(w, start=w.start + a) for w in ctm.get(f"w{i}", [])]
            for i, (a, _) in enumerate(segments)]


def _same(a, b):
    return a.word == b.word and abs(a.start - b.start) <= 0.2


def test_window_seams_neither_double_nor_lose_words(long_setup, tmp_path):
    """Windows of 4 s with 1 s of context (eight seams, several through words), each also
    decoded alone: a word both neighbours decode alike in their overlap comes out exactly
    once, and every word that comes out is one its window decoded."""
    cut = next(iter(long_setup[1]))
    win = _decode(long_setup, long_setup[1], "greedy_search", tmp_path / "win",
                  segmenter="windows", segment_max=4.0, segment_context=1.0)
    rec = read_results(win.results_path)["long"]
    segments = rec["segments"]
    assert len(segments) == 9 and segments[1][0] == pytest.approx(3.0)
    got = _ctm_words(win, "greedy_search")
    alone = _window_words(long_setup, cut, segments, tmp_path / "alone")
    checked = 0
    for k in range(len(segments) - 1):
        lo, hi = segments[k + 1][0], segments[k][1]  # the overlap
        for w in alone[k]:
            if lo <= w.start <= hi and any(_same(w, v) for v in alone[k + 1]):
                assert sum(_same(w, g) for g in got) == 1, (k, w)
                checked += 1
    assert checked >= 8
    for g in got:
        assert any(_same(g, w) for ws in alone for w in ws), g


def test_a_seam_through_the_middle_of_a_word(long_setup, tmp_path):
    """A window seam placed at the midpoint of a long word of the whole decode: that word
    comes out exactly once, at its time."""
    whole = _decode(long_setup, long_setup[1], "greedy_search", tmp_path / "whole",
                    segment_max=600.0)
    words = _ctm_words(whole, "greedy_search")
    grid = 0.04
    target = next(w for w in words if w.duration >= 0.3 and w.start > 3.0)
    seam = round((target.start + target.duration / 2) / grid) * grid
    win = _decode(long_setup, long_setup[1], "greedy_search", tmp_path / "win",
                  segmenter="windows", segment_max=seam, segment_context=2.0)
    rec = read_results(win.results_path)["long"]
    assert rec["segments"][1][0] == pytest.approx(seam - 2.0)
    got = _ctm_words(win, "greedy_search")
    near = [w for w in got if w.word == target.word and abs(w.start - target.start) < 0.5]
    assert len(near) == 1, (target, near)


def test_segments_start_on_the_model_frame_grid(long_setup):
    assets, long, *_ = long_setup
    seg = segment_utterance(next(iter(long)), DecodeConfig(segment_max=10.0), 0.04)
    assert seg.segments
    for s in seg.segments:
        assert abs(s.start / 0.04 - round(s.start / 0.04)) < 1e-6, s
        assert s.duration <= 10.0 + 1.0
    assert all(a.end <= b.start for a, b in zip(seg.segments, seg.segments[1:]))


def test_a_failing_segment_leaves_the_others_and_says_so(long_setup, tmp_path, monkeypatch,
                                                        caplog):
    """The features of the third segment cannot be read: its words are missing, the other
    segments' are kept, and the record's notes and the log say which segment failed."""
    import k2dec.job.longform as longform

    real = longform._features

    def third_fails(cut, seg):
        if 8.0 <= seg.start < 13.0:
            raise OSError("disk error")
        return real(cut, seg)

    monkeypatch.setattr(longform, "_features", third_fails)
    summary = _decode(long_setup, long_setup[1], "greedy_search", tmp_path / "out",
                      segment_max=10.0)
    rec = read_results(summary.results_path)["long"]
    assert rec["status"] == "ok" and len(rec["hyp"]) > 40, rec.get("error")
    notes = rec["hyps"]["greedy_search"]["notes"]
    assert "1 segments failed" in notes and "disk error" in notes
    assert "failed, its words are missing" in caplog.text
    words = _ctm_words(summary, "greedy_search")
    assert not any(8.4 <= w.start < 12.5 for w in words)


def test_a_recording_without_speech_has_an_empty_result(long_setup, tmp_path):
    d = tmp_path / "quiet"
    d.mkdir()
    rng = np.random.default_rng(0)
    sf.write(d / "quiet.wav", (rng.standard_normal(16000 * 35) * 1e-4).astype(np.float32),
             16000)
    cuts = cuts_from_audio_dir(d, tmp_path / "feats", progress=False).cuts
    summary = _decode(long_setup, cuts, "greedy_search", tmp_path / "out")
    rec = read_results(summary.results_path)["quiet"]
    assert rec["status"] == "ok" and rec["hyp"] == [] and rec["segments"] == []
    assert "no speech found" in rec["hyps"]["greedy_search"]["notes"]


def test_dropped_speech_is_reported(long_setup, tmp_path, caplog):
    """A 0.2 s blip of speech in 35 s of near silence: the VAD drops it as too short; its
    duration is in the record, the summary and the log."""
    d = tmp_path / "blip"
    d.mkdir()
    speech, rate = sf.read(next(iter(sorted(CORPUS.rglob("*.flac")))), dtype="float32")
    rng = np.random.default_rng(1)
    audio = (rng.standard_normal(rate * 35) * 1e-4).astype(np.float32)
    audio[rate * 5: rate * 5 + len(speech)] = speech
    blip = int(0.2 * rate)
    audio[rate * 20: rate * 20 + blip] = speech[rate: rate + blip]
    sf.write(d / "blip.wav", audio, rate)
    cuts = cuts_from_audio_dir(d, tmp_path / "feats", progress=False).cuts
    summary = _decode(long_setup, cuts, "greedy_search", tmp_path / "out")
    rec = read_results(summary.results_path)["blip"]
    assert rec["status"] == "ok" and rec["hyp"]
    assert 0.05 < rec["dropped_speech"] < 0.25
    assert summary.dropped_speech == pytest.approx(rec["dropped_speech"])
    assert "dropped" in caplog.text and "dropped" in rec["hyps"]["greedy_search"]["notes"]


def test_output_formats_are_read_back_by_their_libraries(long_setup, tmp_path):
    """k2dec decode --audio-dir with every --output-format: each file read back by the
    library that owns its format holds the record's words and times."""
    _, long, *_ = long_setup
    wav = Path(next(iter(long)).recording.sources[0].source)
    d = tmp_path / "in"
    d.mkdir()
    shutil.copy(wav, d / "long.wav")
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "k2dec.cli", "decode", "--audio-dir", str(d), "--model",
           str(ASSETS / "model.pt"), "--lang-dir", str(ASSETS / "lang"), "--method",
           "greedy_search", "--segment-max", "10", "--out-dir", str(out)]
    for fmt in ("srt", "vtt", "ctm", "jsonl", "textgrid", "lhotse"):
        cmd += ["--output-format", fmt]
    r = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    folder = out / "greedy_search"
    rec = read_results(folder / "results-in.jsonl")["long"]
    ctm = read_ctm(folder / "ctm-in-greedy_search.ctm")["long"]
    assert [w.word for w in ctm] == rec["hyp"] and len(ctm) > 40
    for ext in ("srt", "vtt"):
        subs = pysubs2.load(str(folder / f"{ext}-in" / f"long.{ext}"))
        assert " ".join(e.plaintext for e in subs).split() == rec["hyp"]
        assert subs[0].start == pytest.approx(ctm[0].start * 1000, abs=1)
        assert all(e.end - e.start <= 7000 and len(e.plaintext) <= 42 for e in subs)
    grid = textgrid.openTextgrid(str(folder / "textgrid-in" / "long.TextGrid"),
                                 includeEmptyIntervals=False)
    tier = grid.getTier("words")
    assert [e.label for e in tier.entries] == rec["hyp"]
    assert grid.maxTimestamp == pytest.approx(sf.info(str(wav)).duration, abs=0.01)
    lines = (folder / "words-in-greedy_search.jsonl").read_text().splitlines()
    words = json.loads(lines[0])
    assert len(lines) == 1 and [w["word"] for w in words["words"]] == rec["hyp"]
    assert words["segments"] == rec["segments"]
    sups = SupervisionSet.from_file(folder / "supervisions-in-greedy_search.jsonl.gz")
    (sup,) = list(sups)
    assert [a.symbol for a in sup.alignment["word"]] == rec["hyp"]
    assert sup.alignment["word"][0].start == pytest.approx(ctm[0].start, abs=1e-3)


def test_the_config_refuses_bad_segment_settings():
    with pytest.raises(ValueError, match="segmenter"):
        DecodeConfig(segmenter="silero")
    with pytest.raises(ValueError, match="segment_max"):
        DecodeConfig(segment_max=0.5)
    with pytest.raises(ValueError, match="output_formats"):
        DecodeConfig(output_formats=("pdf",))


def _spy_batches(monkeypatch) -> list[float]:
    """Seconds of features (10 ms frames) of each batch of segments the job decodes."""
    import k2dec.job.longform as longform

    seen: list[float] = []
    real = longform.decode_or_split

    def spy(method, method_config, assets, feats, lens, *rest):
        seen.append(float(lens.sum()) * 0.01)
        return real(method, method_config, assets, feats, lens, *rest)

    monkeypatch.setattr(longform, "decode_or_split", spy)
    return seen


@pytest.mark.parametrize("method", ["1best", "fast_beam_search_nbest_LG", "greedy_search"])
def test_a_lattice_methods_batches_stay_within_their_bound(long_setup, tmp_path, monkeypatch,
                                                           method):
    """A method that builds a lattice decodes at most segment_max seconds (10 s) per batch,
    the others up to twice that (the segments of 1.5-10 s fill batches past 10 s)."""
    from k2dec.job.longform import long_batch_seconds

    seen = _spy_batches(monkeypatch)
    config = DecodeConfig(segment_max=10.0)
    summary = _decode(long_setup, long_setup[1], method, tmp_path, segment_max=10.0)
    assert read_results(summary.results_path)["long"]["status"] == "ok"
    lattice = method != "greedy_search"
    assert long_batch_seconds(config, lattice) == (10.0 if lattice else 20.0)
    assert len(seen) >= 2 and sum(seen) > 20.0, seen
    assert max(seen) <= long_batch_seconds(config, lattice) + 0.05, seen
    assert lattice or max(seen) > 10.5, seen


def test_same_words_at_any_batch_size_and_after_a_rerun(long_setup, decoded, tmp_path, caplog,
                                                        monkeypatch):
    """All segments in one batch (a lattice method's bound raised past the recording) give
    the words, times and segments of the default batches (at most 10 s each); a rerun
    decodes nothing again."""
    import k2dec.job.longform as longform

    _, rec, _ = decoded["fast_beam_search_nbest_LG"]
    monkeypatch.setattr(longform, "LATTICE_BATCH_FACTOR", 100.0)
    seen = _spy_batches(monkeypatch)
    big = _decode(long_setup, long_setup[1], "fast_beam_search_nbest_LG", tmp_path,
                  segment_max=10.0)
    assert len(seen) == 1 and seen[0] > 20.0, seen
    got = read_results(big.results_path)["long"]
    assert got["hyp"] == rec["hyp"] and got["segments"] == rec["segments"]
    key = next(iter(rec["hyps"]))
    assert got["hyps"][key]["word_frames"] == rec["hyps"][key]["word_frames"]
    with caplog.at_level(logging.INFO, logger="k2dec.job"):
        again = _decode(long_setup, long_setup[1], "fast_beam_search_nbest_LG", tmp_path,
                        segment_max=10.0)
    assert "1 utterances, 0 to decode" in caplog.text
    assert again.results_path.read_bytes() == big.results_path.read_bytes()


def test_a_stereo_file_is_segmented_by_the_vad(long_setup, decoded, tmp_path, caplog):
    """A stereo file (its features downmixed, the cut without a recording) is still cut by
    the VAD, which reads the file named in the cut: the same segments as the mono file, not
    fixed windows."""
    mono, rate = sf.read(next(iter(long_setup[1])).recording.sources[0].source,
                         dtype="float32")
    d = tmp_path / "stereo"
    d.mkdir()
    sf.write(d / "long.wav", np.stack([mono, mono], axis=1), rate)
    cuts = cuts_from_audio_dir(d, tmp_path / "feats", progress=False).cuts
    assert next(iter(cuts)).custom["audio_file"].endswith("long.wav")
    with caplog.at_level(logging.WARNING):
        summary = _decode(long_setup, cuts, "greedy_search", tmp_path / "out", segment_max=10.0)
    assert "fixed windows" not in caplog.text
    rec = read_results(summary.results_path)["long"]
    assert rec["segments"] == decoded["greedy_search"][1]["segments"]
    assert rec["hyp"] == decoded["greedy_search"][1]["hyp"]


def test_a_cut_that_is_part_of_a_recording_is_segmented_by_the_vad(long_setup, tmp_path,
                                                                     caplog):
    """A recordings-only manifest whose long cut is a part of its recording (from 3.1 s to
    3 s before the end): the VAD runs over the cut's range, not fixed windows, and the
    segments, words and times are those of a file holding only that range (mono and
    stereo)."""
    rec = next(iter(long_setup[1])).recording
    samples, rate = sf.read(rec.sources[0].source, dtype="float32")
    first, last = round(3.1 * rate), len(samples) - 3 * rate
    for channels in (1, 2):
        d = tmp_path / f"c{channels}"
        d.mkdir()
        data = samples if channels == 1 else np.stack([samples, samples], axis=1)
        sf.write(d / "whole.wav", data, rate)
        (d / "part").mkdir()
        sf.write(d / "part" / "long.wav", data[first:last], rate)
        part = Recording.from_file(d / "whole.wav").to_cut().truncate(
            offset=first / rate, duration=(last - first) / rate)
        cuts, failed = compute_cut_features(CutSet.from_cuts([part]), d / "f1",
                                            progress=False)
        assert not failed
        at = next(iter(cuts))  # stereo: downmixed, the file's range named in custom
        assert (at.start if channels == 1 else at.custom["audio_offset"]) == \
            pytest.approx(first / rate)
        alone = cuts_from_audio_dir(d / "part", d / "f2", progress=False).cuts
        with caplog.at_level(logging.WARNING):
            got = _decode(long_setup, cuts, "greedy_search", d / "o1", segment_max=10.0)
        assert "fixed windows" not in caplog.text
        want = _decode(long_setup, alone, "greedy_search", d / "o2", segment_max=10.0)
        got_rec = read_results(got.results_path)[part.id]
        want_rec = read_results(want.results_path)["long"]
        assert got_rec["segments"] == want_rec["segments"] and got_rec["segments"]
        assert got_rec["hyp"] == want_rec["hyp"]
        assert got_rec["hyps"] == want_rec["hyps"]  # words, times, confidences
