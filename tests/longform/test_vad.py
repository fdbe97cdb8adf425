"""The VAD segmenter on real speech (shipped test utterances joined with pauses by
scripts/make_long_recording.py), on silence, on 8 kHz stereo, on a file cut mid-word, and
its memory on a long file (a subprocess, measured with getrusage)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from lhotse import SupervisionSet
from lhotse.augmentation import Resample

from k2dec.demo import ASSETS
from k2dec.longform import VadConfig, read_blocks, vad_segments
from tests.scripts.loader import load_script

CORPUS = ASSETS / "corpus" / "test-clean"
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def joined(tmp_path_factory) -> tuple[Path, SupervisionSet]:
    """8 shipped utterances (about 25 s) joined with 0.3-1.5 s pauses."""
    out = tmp_path_factory.mktemp("long")
    sups = load_script("make_long_recording").make_long_recording(
        CORPUS, out, num_utterances=8, seed=3)
    return out / "long.wav", sups


def _covered(sup, segments) -> float:
    """The fraction of a supervision's time inside the segments."""
    inside = sum(max(0.0, min(sup.end, s.end) - max(sup.start, s.start)) for s in segments)
    return inside / sup.duration


def test_segments_cover_every_utterance(joined):
    wav, sups = joined
    seg = vad_segments(wav)
    assert seg.segments and seg.notes == "" and seg.dropped == ()
    assert seg.duration == pytest.approx(sf.info(str(wav)).duration)
    for sup in sups:
        assert _covered(sup, seg.segments) >= 0.9, sup.id
    starts = [s.start for s in seg.segments]
    assert starts == sorted(starts)
    assert all(a.end <= b.start for a, b in zip(seg.segments, seg.segments[1:]))
    # the pauses are not all speech: the segments leave some of the recording out
    assert seg.kept_speech < seg.duration - 3.0


def test_the_cap_splits_a_long_segment(joined):
    wav, sups = joined
    merged = vad_segments(wav, VadConfig(min_gap=3.0, max_segment=60.0))  # one segment
    assert len(merged.segments) == 1 and merged.segments[0].duration > 20
    capped = vad_segments(wav, VadConfig(min_gap=3.0, max_segment=4.0))
    assert len(capped.segments) >= 6
    assert all(s.duration <= 4.0 + 1e-9 for s in capped.segments)
    # split, not cut: the pieces adjoin and still hold every utterance
    assert all(a.end == pytest.approx(b.start) for a, b in zip(capped.segments,
                                                                 capped.segments[1:]))
    for sup in sups:
        assert _covered(sup, capped.segments) >= 0.9, sup.id


def test_dropped_speech_is_reported(joined):
    wav, _ = joined
    seg = vad_segments(wav, VadConfig(min_speech=2.5, min_gap=0.0))
    assert seg.dropped and seg.dropped_speech > 0.5
    assert f"{seg.dropped_speech:.2f} s of speech dropped" in seg.notes
    assert all(d.duration < 2.5 for d in seg.dropped)


def test_silence_has_no_segments_and_says_so(tmp_path):
    path = tmp_path / "silence.wav"
    sf.write(str(path), np.zeros(16000 * 5, dtype=np.float32), 16000)
    seg = vad_segments(path)
    assert seg.segments == () and seg.dropped == ()
    assert seg.notes == "no speech found in 5.00 s of audio"


def test_8khz_stereo_finds_the_same_speech(joined, tmp_path):
    wav, sups = joined
    samples, rate = sf.read(str(wav), dtype="float32")
    low = Resample(rate, 8000)(samples[None, :], rate)[0]
    path = tmp_path / "stereo8k.flac"
    sf.write(str(path), np.stack([low, 0.5 * low], axis=1), 8000)
    assert next(read_blocks(path, 1.0)).shape == (16000,)  # one second, mono, at 16 kHz
    seg = vad_segments(path)
    assert seg.duration == pytest.approx(len(low) / 8000)
    for sup in sups:
        assert _covered(sup, seg.segments) >= 0.9, sup.id


def test_a_file_that_ends_mid_word(joined, tmp_path):
    wav, sups = joined
    last = sorted(sups, key=lambda s: s.start)[-1]
    cut = last.start + last.duration / 2  # in the middle of the last utterance
    samples, rate = sf.read(str(wav), dtype="float32")
    path = tmp_path / "cut.wav"
    sf.write(str(path), samples[:round(cut * rate)], rate)
    seg = vad_segments(path)
    assert seg.segments[-1].end == pytest.approx(seg.duration)
    assert seg.segments[-1].start < last.start + 0.5


def test_bad_input_is_refused(tmp_path):
    bad = tmp_path / "not_audio.wav"
    bad.write_text("hello")
    with pytest.raises(ValueError, match="not_audio.wav.*cannot be read"):
        vad_segments(bad)
    with pytest.raises(TypeError, match="VadConfig"):
        vad_segments(bad, {"threshold": 0.5})
    with pytest.raises(ValueError, match="VadConfig.max_segment"):
        VadConfig(max_segment=0.5)
    with pytest.raises(ValueError, match="VadConfig.neg_threshold"):
        VadConfig(threshold=0.4, neg_threshold=0.6)


_PEAK = """
import json, resource, sys, tracemalloc
from k2dec.longform import vad_segments
vad_segments(sys.argv[1])  # imports and the model loaded
tracemalloc.start()  # numpy's arrays (the samples) are traced
seg = vad_segments(sys.argv[2])
traced = tracemalloc.get_traced_memory()[1]
print(json.dumps([resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, traced, len(seg.segments)]))
"""


def _peaks(warm: Path, path: Path) -> tuple[int, int]:
    """Peak RSS (KiB) of a process that segments ``warm`` then ``path``, and the peak of the
    memory traced while segmenting ``path`` (bytes)."""
    out = subprocess.run([sys.executable, "-c", _PEAK, str(warm), str(path)], cwd=REPO,
                         check=True, capture_output=True, text=True, timeout=900).stdout
    rss, traced, num = json.loads(out.strip().splitlines()[-1])
    assert num > 0
    return rss, traced


def test_memory_does_not_grow_with_the_recording(tmp_path):
    """10 minutes of audio (float32: 38 MB in memory) need no more memory than 1 minute:
    the traced peak stays within a few blocks, and so does the process's peak RSS."""
    make = load_script("make_long_recording").make_long_recording
    short, long = tmp_path / "short" / "long.wav", tmp_path / "long" / "long.wav"
    make(CORPUS, short.parent, min_duration=60.0)
    make(CORPUS, long.parent, min_duration=520.0)
    assert sf.info(str(long)).duration > 600
    rss_short, traced_short = _peaks(short, short)
    rss_long, traced_long = _peaks(short, long)
    assert traced_long < 12 * 2**20, traced_long  # 30 s blocks: about 2 MB each
    assert traced_long < 2 * traced_short + 2**20, (traced_short, traced_long)
    assert rss_long - rss_short < 20 * 1024, (rss_short, rss_long)


def test_blocks_at_44_1_khz_stereo_are_16_khz_mono_without_drift(tmp_path):
    rate, seconds = 44100, 7.5
    t = np.arange(round(rate * seconds)) / rate
    tone = 0.3 * np.sin(2 * np.pi * 440 * t).astype(np.float32)
    path = tmp_path / "tone.wav"
    sf.write(str(path), np.stack([tone, -tone * 0], axis=1), rate)
    blocks = list(read_blocks(path, block_seconds=2.0))
    assert [len(b) for b in blocks[:-1]] == [32000, 32000, 32000]
    assert sum(len(b) for b in blocks) == pytest.approx(16000 * seconds, abs=2)
    assert all(b.dtype == np.float32 for b in blocks)
    # channels averaged: the tone at half its amplitude
    assert np.abs(blocks[1]).max() == pytest.approx(0.15, abs=0.01)


@pytest.mark.parametrize("seed", range(4))
def test_a_range_of_a_file_is_segmented_as_that_range_alone(joined, tmp_path, seed):
    """vad_segments(offset, duration) (a cut that is part of a recording) gives the
    segments of a file holding only that range, in seconds from its start: random ranges,
    one to the file's end, a range of less than one VAD frame; at 16 kHz and at 8 kHz
    stereo; blocks smaller than the range."""
    wav, _ = joined
    samples, rate = sf.read(str(wav), dtype="float32")
    rng = np.random.default_rng(seed)
    total = len(samples) / rate
    a = float(rng.uniform(0, total - 1))
    b = {0: min(total, a + float(rng.uniform(0.01, 12))), 1: total, 2: a + 0.02}.get(
        seed, float(rng.uniform(a + 0.5, total)))
    first, last = round(a * rate), round(b * rate)
    part = tmp_path / "part.wav"
    sf.write(str(part), samples[first:last], rate)
    want = vad_segments(part, VadConfig(block_seconds=3.0))
    got = vad_segments(wav, VadConfig(block_seconds=3.0), first / rate, (last - first) / rate)
    assert got == want, (a, b)
    if seed == 1:  # 8 kHz stereo: the same range of the same speech
        low = Resample(rate, 8000)(samples[None, :], rate)[0]
        wav8 = tmp_path / "low.wav"
        sf.write(str(wav8), np.stack([low, low], axis=1), 8000)
        a8, b8 = round(a * 8000), round(b * 8000)
        sf.write(str(part), np.stack([low, low], axis=1)[a8:b8], 8000)
        assert vad_segments(wav8, offset=a8 / 8000, duration=(b8 - a8) / 8000) == \
            vad_segments(part)


def test_a_bad_range_is_refused(joined):
    wav, _ = joined
    for offset, duration in ((-1.0, None), (0.0, 0.0), (float("nan"), 1.0), (1.0, -2.0)):
        with pytest.raises(ValueError, match="long.wav.*offset >= 0 and duration > 0"):
            vad_segments(wav, offset=offset, duration=duration)


def _reference_runs(probs, on, off):
    """Speech runs by hysteresis, frame by frame over the whole list."""
    runs, speaking = [], False
    for i, p in enumerate(probs):
        if speaking and p < off:
            speaking = False
        elif speaking:
            runs[-1][1] = i + 1
        elif p >= on:
            runs.append([i, i + 1])
            speaking = True
    return runs


@pytest.mark.parametrize("chunk", [1, 7, 1 << 16])
def test_speech_runs_read_in_chunks_are_those_of_the_whole(monkeypatch, chunk):
    """_runs reads the probabilities a chunk at a time (bounded memory on a 10-hour file):
    the same runs as a frame-by-frame reference for any chunk size, runs across chunk edges,
    empty and length-1 inputs."""
    from k2dec.longform import vad

    monkeypatch.setattr(vad, "_RUN_CHUNK", chunk)
    rng = np.random.default_rng(chunk)
    for n in (0, 1, 2, 13, 500, 70001):
        probs = np.repeat(rng.random(max(1, n // 5)), 5)[:n].astype(np.float32)
        assert vad._runs(probs, 0.5, 0.35) == _reference_runs(probs.tolist(), 0.5, 0.35), n


def test_pads_before_and_after_a_segment(joined):
    """speech_pad_start / speech_pad_end widen a segment on one side each (the other side as
    with speech_pad); speech_pad alone is both; each side at most half the gap to a
    neighbour."""
    wav, _ = joined
    bare = vad_segments(wav, VadConfig(speech_pad=0.0)).segments
    wide = vad_segments(wav, VadConfig(speech_pad=0.3)).segments
    assert len(bare) == len(wide) >= 6
    front = vad_segments(wav, VadConfig(speech_pad=0.3, speech_pad_end=0.0)).segments
    back = vad_segments(wav, VadConfig(speech_pad=0.3, speech_pad_start=0.0)).segments
    assert [s.start for s in front] == [s.start for s in wide]
    assert [s.end for s in front] == [s.end for s in bare]
    assert [s.start for s in back] == [s.start for s in bare]
    assert [s.end for s in back] == [s.end for s in wide]
    assert vad_segments(wav, VadConfig(speech_pad=0.1, speech_pad_start=0.2,
                                       speech_pad_end=0.2)).segments == \
        vad_segments(wav, VadConfig(speech_pad=0.2)).segments
    frame = 512 / 16000
    for b, w in zip(bare, wide):  # pauses of 0.3-1.5 s: some pads are cut to half the gap
        assert 0 <= b.start - w.start <= 0.3 + 1e-6 and 0 <= w.end - b.end <= 0.3 + 1e-6
    gaps = [(b.start - a.end) for a, b in zip(bare, bare[1:])]
    assert any(g < 0.6 for g in gaps)  # the half-gap rule is exercised
    for a, b, wa, wb in zip(bare, bare[1:], wide, wide[1:]):
        pad = min(round(0.3 / frame), round((b.start - a.end) / frame) // 2) * frame
        assert wa.end - a.end == pytest.approx(pad, abs=1e-6), (a, b)
        assert b.start - wb.start == pytest.approx(pad, abs=1e-6), (a, b)
    with pytest.raises(ValueError, match="VadConfig.speech_pad_start"):
        VadConfig(speech_pad_start=-0.1)
    with pytest.raises(ValueError, match="VadConfig.speech_pad_end"):
        VadConfig(speech_pad_end=11.0)
