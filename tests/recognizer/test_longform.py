"""k2dec.Recognizer on long recordings: a file longer than segment_max is decoded in
segments and stitched into one result, the very words, times and segments `k2dec decode`
writes for it; given cuts with one malformed cut, that cut alone fails, naming the cut and
the field."""

from __future__ import annotations

import pytest
import soundfile as sf
from lhotse import CutSet, Recording
from lhotse.utils import fastcopy

from k2dec import Recognizer
from k2dec.data import cuts_from_audio_dir
from k2dec.demo import ASSETS
from k2dec.job import DecodeConfig, decode_cuts, load_assets
from k2dec.results import read_ctm, read_results
from tests.scripts.loader import load_script

pytestmark = pytest.mark.skipif(not (ASSETS / "model.pt").is_file(),
                                reason="no shipped model in this checkout")


@pytest.fixture(scope="module")
def long_wav(tmp_path_factory):
    """The first 8 shipped test-clean utterances joined with pauses: 33 s, over the 30 s
    segment_max."""
    d = tmp_path_factory.mktemp("long")
    load_script("make_long_recording").make_long_recording(
        ASSETS / "corpus" / "test-clean", d, num_utterances=8)
    assert sf.info(str(d / "long.wav")).duration > DecodeConfig().segment_max
    return d / "long.wav"


def test_a_long_file_gives_the_result_of_k2dec_decode(long_wav, tmp_path):
    rec = Recognizer.from_files(ASSETS / "model.pt", ASSETS / "lang", method="greedy_search")
    (got,) = rec.decode(str(long_wav))
    assert got.error == "" and len(got.segments) >= 4 and len(got.words) > 50
    cuts = cuts_from_audio_dir(long_wav.parent, tmp_path / "feats", progress=False).cuts
    job = decode_cuts(load_assets(ASSETS / "model.pt", ASSETS / "lang"), cuts, "greedy_search",
                      tmp_path / "out", "t")
    line = read_results(job.results_path)["long"]
    assert list(got.words) == line["hyp"]
    assert [list(s) for s in got.segments] == line["segments"]
    ctm = read_ctm(job.results_path.parent / "ctm-t-greedy_search.ctm")["long"]
    assert [(w.word, round(w.start, 2)) for w in got.timed_words] == \
        [(w.word, round(w.start, 2)) for w in ctm]
    assert got.timed_words[-1].start > 25.0  # the recording's clock, not a segment's


def test_one_malformed_cut_fails_alone(tmp_path):
    rec = Recognizer.from_files(ASSETS / "model.pt", ASSETS / "lang", method="greedy_search")
    path = sorted((ASSETS / "corpus" / "test-clean").rglob("*.flac"))[0]
    good = Recording.from_file(path).to_cut()
    bad = fastcopy(good, id="bad", duration=-1.0)
    out = rec.decode(CutSet.from_cuts([good, bad]))
    assert [r.id for r in out] == [good.id, "bad"]
    assert out[0].error == "" and out[0].words
    assert out[1].words == () and "cut 'bad'" in out[1].error and "duration" in out[1].error
