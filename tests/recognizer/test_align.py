"""Forced alignment of recordings with the shipped model (Recognizer.align, k2dec align):
words get times inside their utterances, a long recording aligned segment by segment puts
every utterance's first word at its true start, words the audio lacks are reported (and the
command's exit status says so), speech the transcript lacks is reported with its time span,
correct transcripts are not flagged, one-word and empty transcripts align, OOV words are
spelled and flagged, results do not depend on the batch size, and every output file is read
back by its library."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pysubs2
import pytest
import soundfile as sf
from lhotse import SupervisionSet
from praatio import textgrid

from k2dec.demo import ASSETS
from k2dec.longform.anchor import match_words, split_run
from k2dec.recognizer.align import (
    AlignConfig,
    align_recording,
    read_transcripts,
    transcript_units,
    write_alignment_files,
)
from k2dec.results import read_ctm
from tests.scripts.loader import load_script

pytestmark = pytest.mark.skipif(not (ASSETS / "model.pt").is_file(),
                                reason="no shipped model in this checkout")
CORPUS = ASSETS / "corpus" / "test-clean"
UTT_DIR = CORPUS / "101" / "3000"
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def rec():
    from k2dec import Recognizer

    return Recognizer.from_files(ASSETS / "model.pt", ASSETS / "lang", method="ctc-greedy-search")


@pytest.fixture(scope="module")
def texts() -> dict[str, str]:
    return read_transcripts(UTT_DIR / "101-3000.trans.txt")


@pytest.fixture(scope="module")
def joined(tmp_path_factory):
    """8 shipped utterances (about 25 s) joined with 0.3-1.5 s pauses."""
    out = tmp_path_factory.mktemp("long")
    sups = load_script("make_long_recording").make_long_recording(
        CORPUS, out, num_utterances=8, seed=3)
    return out / "long.wav", sups, (out / "text").read_text().split(maxsplit=1)[1]


def test_words_of_an_utterance_are_aligned_in_order(rec, texts):
    path = UTT_DIR / "101-3000-0000.flac"
    result = rec.align(path, texts["101-3000-0000"])
    duration = sf.info(str(path)).duration
    assert result.ok and len(result.words) == len(texts["101-3000-0000"].split())
    starts = [w.start for w in result.words]
    assert starts == sorted(starts) and starts[0] >= 0 and result.words[-1].end <= duration
    for w in result.words:
        assert w.start < w.end and w.tokens and w.tokens[0].start == w.start
        assert "".join(t.piece for t in w.tokens).replace("\u2581", "") == w.word


def test_a_waveform_aligns_as_its_file(rec, texts):
    path = UTT_DIR / "101-3000-0001.flac"
    samples, rate = sf.read(str(path), dtype="float32")
    a = rec.align(path, texts["101-3000-0001"])
    b = rec.align(samples, texts["101-3000-0001"], sample_rate=rate)
    assert [(w.word, w.start, w.end) for w in a.words] == \
        [(w.word, w.start, w.end) for w in b.words]
    with pytest.raises(ValueError, match="sample_rate"):
        rec.align(samples, "A")
    with pytest.raises(ValueError, match="no such audio file"):
        rec.align(UTT_DIR / "nothing.flac", "A")


def test_words_the_audio_lacks_are_reported_not_invented(rec, texts):
    text = texts["101-3000-0000"]
    result = rec.align(UTT_DIR / "101-3000-0000.flac", f"{text} ELEPHANTS SWIM QUICKLY")
    missing = {w.word for w in result.missing}
    assert {"ELEPHANTS", "SWIM", "QUICKLY"} <= missing and not result.ok
    other = rec.align(UTT_DIR / "101-3000-0002.flac", text)  # another utterance's words
    assert len(other.missing) >= len(text.split()) // 2


def test_oov_words_are_spelled_and_flagged(rec):
    units = transcript_units("Hello, -- ZQXJV world!", rec.assets.sp,
                             rec.assets.lang.word_table)
    assert [u.display for u in units] == ["Hello,--", "ZQXJV", "world!"]
    assert [u.oov for u in units] == [False, True, False]
    assert all(u.pieces for u in units)
    with pytest.raises(TypeError, match="transcript"):
        transcript_units(None, rec.assets.sp)


def test_a_long_recording_is_aligned_segment_by_segment(rec, joined):
    path, sups, text = joined
    config = AlignConfig(max_segment=6.0)
    result = rec.align(path, text, config=config)
    assert len(result.segments) > 2 and len(result.words) == len(text.split())
    firsts = np.cumsum([0] + [len(s.text.split()) for s in sups])[:-1]
    errors = [abs(result.words[k].start - s.start) for k, s in zip(firsts, sups)]
    assert max(errors) < 0.5, errors
    # the batch size changes nothing
    small = rec.align(path, text, config=AlignConfig(max_segment=6.0, batch_seconds=1.0))
    assert [(w.start, w.end, w.confidence) for w in small.words] == \
        [(w.start, w.end, w.confidence) for w in result.words]
    assert small.untranscribed == result.untranscribed
    # a word deleted from the transcript of a long recording: its speech is reported
    words = text.split()
    k = int(firsts[4]) + 2
    cut = rec.align(path, " ".join(words[:k] + words[k + 1:]), config=config)
    one = rec.align(path, " ".join(words[:k] + words[k + 1:]),
                    config=AlignConfig(max_segment=6.0, batch_seconds=1.0))
    assert one.untranscribed == cut.untranscribed
    assert any(s.start <= result.words[k].end and s.end >= result.words[k].start
               for s in cut.untranscribed), (cut.untranscribed, result.words[k])


def test_every_output_file_is_read_back(rec, texts, tmp_path):
    result = rec.align(UTT_DIR / "101-3000-0000.flac", texts["101-3000-0000"])
    paths = write_alignment_files(result, tmp_path, ("srt", "vtt", "ctm", "jsonl", "textgrid",
                                                      "lhotse"))
    words = result.ctm_words()
    assert len(paths) == 6
    subs = pysubs2.load(str(tmp_path / f"{result.id}.srt"))
    assert " ".join(e.plaintext.replace("\n", " ") for e in subs) == " ".join(
        w.word for w in words)
    assert len(pysubs2.load(str(tmp_path / f"{result.id}.vtt"))) == len(subs)
    ctm = read_ctm(tmp_path / f"{result.id}.ctm")
    assert [w.word for w in ctm[result.id]] == [w.word for w in words]
    tg = textgrid.openTextgrid(str(tmp_path / f"{result.id}.TextGrid"), includeEmptyIntervals=False)
    assert [e.label for e in tg.getTier("words").entries] == [w.word for w in words]
    (sup,) = SupervisionSet.from_file(tmp_path / f"{result.id}.supervisions.jsonl.gz")
    assert [a.symbol for a in sup.alignment["word"]] == [w.word for w in words]
    line = json.loads((tmp_path / f"{result.id}.jsonl").read_text())
    assert [w["word"] for w in line["words"]] == [w.word for w in result.words]
    assert gzip.open(tmp_path / f"{result.id}.supervisions.jsonl.gz").read()
    with pytest.raises(ValueError, match="output format"):
        write_alignment_files(result, tmp_path, ("doc",))


def test_a_silent_recording_has_no_speech(rec, tmp_path):
    path = tmp_path / "silence.wav"
    sf.write(path, np.zeros(16000 * 40, dtype=np.float32), 16000)
    result = align_recording(rec.model, rec.assets.sp, path, "SOME WORDS",
                             config=AlignConfig(max_segment=10.0))
    assert result.error == "no speech found" and len(result.missing) == 2
    assert result.ctm_words() == []


def test_bad_config_is_refused():
    with pytest.raises(ValueError, match="min_confidence"):
        AlignConfig(min_confidence=1.0)
    with pytest.raises(ValueError, match="max_segment"):
        AlignConfig(max_segment=0.5)


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "k2dec.cli", "align", "--model",
                           str(ASSETS / "model.pt"), "--lang-dir", str(ASSETS / "lang"), *args],
                          capture_output=True, text=True, env=env, cwd=REPO)


def test_the_command_exit_status_says_what_was_aligned(tmp_path, texts):
    good = tmp_path / "text"
    good.write_text("".join(f"{k} {v}\n" for k, v in texts.items()))
    audio = [a for k in ("101-3000-0000", "101-3000-0001")
             for a in ("--audio", str(UTT_DIR / f"{k}.flac"))]
    ok = _cli(*audio, "--text", str(good), "--out-dir", str(tmp_path / "ok"),
              "--output-format", "srt", "--output-format", "textgrid")
    assert ok.returncode == 0, ok.stderr
    assert (tmp_path / "ok" / "101-3000-0001.srt").is_file()
    assert (tmp_path / "ok" / "101-3000-0000.TextGrid").is_file()
    bad = tmp_path / "bad"
    said = texts["101-3000-0002"].split()
    bad.write_text(f"101-3000-0000 {texts['101-3000-0000']} ELEPHANTS SWIM QUICKLY\n"
                   f"101-3000-0001 {texts['101-3000-0001']}\n"
                   f"101-3000-0002 {' '.join(said[:8] + said[9:])}\n")
    out = _cli(*audio, "--audio", str(UTT_DIR / "101-3000-0002.flac"), "--text", str(bad),
               "--out-dir", str(tmp_path / "bad-out"))
    assert out.returncode == 3 and "101-3000-0000:" in out.stderr and "ELEPHANTS" in out.stderr
    assert "101-3000-0002: speech not in the transcript at " in out.stderr, out.stderr
    summary = [json.loads(x) for x in (tmp_path / "bad-out" / "align-summary.jsonl")
               .read_text().splitlines()]
    assert [s["ok"] for s in summary] == [False, True, False]
    assert summary[2]["untranscribed"] and not summary[2]["missing"]
    assert summary[0]["untranscribed"] == [] and summary[0]["missing"][-1]["skipped"]
    assert summary[0]["missing"][-1]["score"] is None  # skipped: no frames, no score
    (tmp_path / "x").write_text("other-id A B\n")
    none = _cli("--audio", str(UTT_DIR / "101-3000-0000.flac"), "--text", str(tmp_path / "x"),
                "--out-dir", str(tmp_path / "none"))
    assert none.returncode == 4 and "no transcript line" in none.stderr


def test_the_command_without_the_garbage_path(tmp_path, texts):
    """--no-untranscribed: a deleted word goes unnoticed (exit 0), as plain forced alignment;
    contradicting options are refused before the model loads."""
    said = texts["101-3000-0002"].split()
    text = tmp_path / "text"
    text.write_text(f"101-3000-0002 {' '.join(said[:8] + said[9:])}\n")
    audio = ("--audio", str(UTT_DIR / "101-3000-0002.flac"), "--text", str(text))
    plain = _cli(*audio, "--out-dir", str(tmp_path / "plain"), "--no-untranscribed")
    assert plain.returncode == 0, plain.stderr
    both = _cli(*audio, "--out-dir", str(tmp_path / "both"), "--no-untranscribed",
                "--untranscribed-penalty", "3")
    assert both.returncode == 2 and "contradict" in both.stderr
    skip = _cli(*audio, "--out-dir", str(tmp_path / "skip"), "--no-skip-words",
                "--skip-penalty", "3")
    assert skip.returncode == 2 and "contradicts" in skip.stderr


def test_the_command_without_word_skips(tmp_path, texts):
    """An inserted word: skipped by default (no times in the jsonl, exit 3, "not in the
    audio" on stderr); --no-skip-words aligns it (times, flagged by its score)."""
    said = texts["101-3000-0002"].split()
    text = tmp_path / "text"
    text.write_text(f"101-3000-0002 {' '.join(said[:4] + ['ELEPHANTS'] + said[4:])}\n")
    audio = ("--audio", str(UTT_DIR / "101-3000-0002.flac"), "--text", str(text))
    runs = {name: _cli(*audio, "--out-dir", str(tmp_path / name), *flags)
            for name, flags in (("skip", ()), ("noskip", ("--no-skip-words",)))}
    for name, run in runs.items():
        assert run.returncode == 3, (name, run.stderr)
    words = {name: json.loads((tmp_path / name / "101-3000-0002.jsonl").read_text())["words"]
             for name in runs}
    assert words["skip"][4]["skipped"] and words["skip"][4]["start"] is None
    assert "not in the audio" in runs["skip"].stderr
    assert not words["noskip"][4]["skipped"] and words["noskip"][4]["start"] is not None
    assert words["noskip"][4]["missing"]


def test_transcripts_file_refuses_a_repeated_id(tmp_path):
    path = tmp_path / "text"
    path.write_text("a X Y\nb\na Z\n")
    with pytest.raises(ValueError, match=":3: recording id 'a' appears twice"):
        read_transcripts(path)
    path.write_text("a X Y\nb\n")
    assert read_transcripts(path) == {"a": "X Y", "b": ""}


def _shares(num_words: int, num_segments: int):
    """Every way to give ``num_words`` words, in order, to ``num_segments`` segments."""
    import itertools

    for cuts in itertools.combinations_with_replacement(range(num_words + 1),
                                                        num_segments - 1):
        bounds = (0, *cuts, num_words)
        yield [j for j in range(num_segments) for _ in range(bounds[j], bounds[j + 1])]


def test_words_between_anchors_are_shared_as_a_brute_force_search_would(rec):
    """A run of unmatched words between the anchors of segments 0 and S-1 goes to the
    segments 0 .. S-1 (in order) with the highest total path score: the dynamic program
    against every possible share."""
    import torch

    from k2dec.recognizer import align as al

    sp = rec.assets.sp
    units = al.transcript_units("THE YOU HAVE A GOOD TIME", sp)
    gen = torch.Generator().manual_seed(0)
    for trial in range(6):
        num_segments = 3 + trial % 2
        lps = [torch.randn(int(torch.randint(4, 12, (1,), generator=gen)), 256, generator=gen)
               .mul(3).log_softmax(-1) for _ in range(num_segments)]
        # words 0 and 5 anchor the first and last segment; 1..4 are the run
        segs = [0] * 5 + [num_segments - 1]
        split_run((1, 5, 0, num_segments - 1), segs, al._scorer(units, lps))
        best, arg = -float("inf"), None
        for share in _shares(4, num_segments):
            owner = [0] + share + [num_segments - 1]
            total = 0.0
            for j in range(num_segments):
                words = [[list(units[w].pieces) for w in range(6) if owner[w] == j]]
                lp = lps[j].unsqueeze(0)
                total += float(al.align_words(lp, torch.tensor([lp.shape[1]]), words).score[0])
            if total > best:
                best, arg = total, owner
        assert segs == arg, (trial, segs, arg)


def test_windowed_anchor_matches_the_whole_alignment():
    """The transcript is matched to the greedy words a window at a time (bounded memory);
    on transcripts with sparse errors that gives the matches of one whole alignment."""
    import kaldialign


    rng = np.random.default_rng(0)
    for n, window in [(1, 4), (7, 4), (150, 20), (400, 50), (400, 1000)]:
        ref = [f"W{int(x)}" for x in rng.integers(0, 10_000, size=n)]
        hyp = []
        for w in ref:
            roll = rng.random()
            if roll < 0.05:
                continue  # deleted
            hyp.append(f"X{int(rng.integers(0, 100))}" if roll < 0.1 else w)
            if roll > 0.95:
                hyp.append("INSERTED")
        whole, h = [], 0
        for r, y in kaldialign.align(ref, hyp, "*"):
            if r == "*":
                h += 1
                continue
            whole.append(h if y == r else None)
            h += y != "*"
        assert match_words(ref, hyp, window) == whole, (n, window)
    assert match_words(["A", "B"], []) == [None, None]


def _five(texts):
    return [(UTT_DIR / f"{k}.flac", v) for k, v in sorted(texts.items())]


def test_correct_transcripts_are_not_flagged(rec, texts):
    for path, text in _five(texts):
        result = rec.align(path, text)
        assert result.ok and not result.untranscribed and not result.missing, \
            (path.name, result.problems())
        assert result.problems() == ""


def test_a_deleted_word_is_reported_as_speech_not_in_the_transcript(rec, texts):
    """The audio says a word the transcript lacks: a span of speech not in the transcript
    is reported over that word's time (on the right transcript's alignment), the words
    around it are not flagged."""
    caught = 0
    for path, text in _five(texts):
        words = text.split()
        k = len(words) // 2
        right = rec.align(path, text)
        cut = rec.align(path, " ".join(words[:k] + words[k + 1:]))
        spans = [s for s in cut.untranscribed
                 if s.start <= right.words[k].end and s.end >= right.words[k].start]
        if spans:
            caught += 1
            assert not cut.ok and "speech not in the transcript at" in cut.problems()
            assert spans[0].end - spans[0].start <= 2 * 0.3 + 0.5
            # widened over blanks, not past the transcript's words around it
            assert cut.words[k - 1].end - 1e-6 <= spans[0].start
            assert spans[0].end <= cut.words[k].start + 1e-6
            assert spans[0].end - spans[0].start >= 0.2
        assert len(cut.missing) <= 1
    assert caught >= 4


def test_a_word_the_audio_lacks_is_skipped_and_its_neighbours_keep_their_times(rec, texts):
    """A word inserted into each right transcript (at the start, inside, at the end): it is
    skipped (missing, no times, not in the CTM words) and every other word keeps its
    right-transcript times, unflagged; the right transcript skips nothing;
    skip_penalty=None aligns the inserted word."""
    for n, (path, text) in enumerate(_five(texts)[:3]):
        words = text.split()
        right = rec.align(path, text)
        assert right.ok and not any(w.skipped for w in right.words), right.problems()
        at = (0, len(words) // 2, len(words))[n]
        result = rec.align(path, " ".join(words[:at] + ["ELEPHANTS"] + words[at:]))
        inserted = result.words[at]
        assert inserted.skipped and inserted.missing and inserted.start is None \
            and inserted.end is None and inserted.tokens == () and inserted.confidence == 0
        others = result.words[:at] + result.words[at + 1:]
        assert not any(w.missing for w in others), result.problems()
        assert [(w.start, w.end) for w in others] == \
            [(w.start, w.end) for w in right.words]
        assert "not in the audio" in result.problems()
        assert [w.word for w in result.ctm_words()] == words
        assert result.to_json()["words"][at]["skipped"] is True
        squeezed = rec.align(path, " ".join(words[:at] + ["ELEPHANTS"] + words[at:]),
                             config=AlignConfig(skip_penalty=None))
        assert not squeezed.words[at].skipped and squeezed.words[at].start is not None


def test_a_one_word_transcript(rec, texts, tmp_path):
    """The audio of one word (cut from an utterance at its aligned times): its transcript
    aligns clean, another word is flagged, an empty transcript reports the speech."""
    path, text = _five(texts)[0]
    right = rec.align(path, text)
    samples, rate = sf.read(str(path), dtype="float32")
    end = right.words[1].start
    piece = tmp_path / "one.wav"
    sf.write(piece, samples[: int(end * rate)], rate)
    one = rec.align(piece, text.split()[0])
    assert one.ok and len(one.words) == 1 and one.words[0].end <= end + 1e-6
    other = rec.align(piece, "ELEPHANTS")
    assert [w.word for w in other.missing] == ["ELEPHANTS"] and other.words[0].skipped
    assert other.words[0].start is None and other.untranscribed
    empty = rec.align(piece, "")
    assert not empty.ok and not empty.error and empty.words == ()
    assert empty.untranscribed and empty.untranscribed[0].start < one.words[0].end


def test_an_empty_transcript_of_silence_is_clean(rec, tmp_path):
    path = tmp_path / "quiet.wav"
    sf.write(path, np.zeros(16000 * 2, dtype=np.float32), 16000)
    result = rec.align(path, "")
    assert result.ok and result.words == () and result.untranscribed == ()


def test_the_flag_rule_on_constructed_posteriors(rec):
    """Frames spelling THE DOG, transcripts THE CAT DOG and THE DOG: each aligned word's
    score is the sum of its frames' gaps (recomputed here from its token frames), and a word
    is missing exactly when the rule says; CAT is missing."""
    import torch

    from k2dec.longform import Segment
    from k2dec.recognizer import align as al

    sp = rec.assets.sp
    said = [p for w in ("THE", "DOG") for p in sp.encode(w)]
    frames = [0, 0] + [x for p in said for x in (p, 0, 0, 0)] + [0, 0]
    lp = torch.full((len(frames), 256), -15.0)
    lp[torch.arange(len(frames)), torch.tensor(frames)] = 0.0
    lp = lp.log_softmax(-1)
    shift = 0.04
    plain = {"skip_penalty": None}  # every word aligned: the flag rule alone
    for text, config in [("THE CAT DOG", AlignConfig(**plain)), ("THE DOG", AlignConfig()),
                         ("THE CAT DOG", AlignConfig(min_confidence=0.0, **plain)),  # score
                         ("THE CAT DOG", AlignConfig(min_word_score=-1e5, **plain)),
                         ("THE CAT DOG", AlignConfig(min_word_score=-1e5,
                                                     min_confidence=0.0, **plain))]:
        units = al.transcript_units(text, sp)
        words, _ = al._align_segments([lp], [Segment(0.0, len(frames) * shift)], units,
                                      [0] * len(units), sp, config, shift)
        for u, w in zip(units, words):
            gaps = []
            for piece, tok in zip(u.pieces, w.tokens):
                b, e = round(tok.start / shift), round(tok.end / shift)
                gaps += [float(lp[t, piece] - lp[t].max()) for t in range(b, e)]
            b, e = round(w.start / shift), round(w.end / shift)
            inside = {t for tok in w.tokens for t in range(round(tok.start / shift),
                                                           round(tok.end / shift))}
            gaps += [float(lp[t, 0] - lp[t].max()) for t in range(b, e) if t not in inside]
            assert w.score == pytest.approx(sum(gaps), abs=1e-3)
            assert w.missing == (w.confidence < config.min_confidence
                                 or sum(gaps) < config.min_word_score)
        missing = [w.word for w in words if w.missing]
        on = config.min_word_score > -1e5 or config.min_confidence > 0
        expect = ["CAT"] if "CAT" in text and on else []
        assert missing == expect, (text, [(w.word, w.score) for w in words])
