"""A tiny synthesized corpus through manifests, fbank and the sampler (needs espeak-ng)."""

import shutil

import pytest
import soundfile as sf
import torch
from lhotse import CutSet

from k2dec.data import (
    SpecAugmentConfig,
    compute_fbank,
    corpus_parts,
    make_dataloader,
    prepare_manifests,
)
from k2dec.train.synth import (
    CorpusConfig,
    Voice,
    available_voices,
    load_sentences,
    make_corpus,
    synthesize,
)

pytestmark = pytest.mark.skipif(
    shutil.which("espeak-ng") is None,
    reason="espeak-ng is not installed (Debian: apt-get install espeak-ng)")

TEXT = """The old man walked to the market in the morning.
He bought bread and a small jar of honey.
%
The children played near the river all day long.
%
She said that the weather would change soon.
We should never trust a cat with a secret.
%
Every good story needs a beginning and an end.
The train was late again this evening.
"""
VOICES = [Voice(201, "espeak-ng", "en-us", 1.0), Voice(212, "espeak-ng", "en-gb", 0.9)]
CONFIG = CorpusConfig(seed=1, num_train=3, num_dev=1, num_test=1, num_test_other=1,
                      held_out=("espeak-ng:en-gb@0.9",), voices=None)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    text_dir = tmp_path_factory.mktemp("text")
    (text_dir / "stories").write_text(TEXT)
    voices = available_voices(VOICES)
    if voices != VOICES:
        pytest.skip(f"espeak-ng voices en-us / en-gb not available (found {voices})")
    root = tmp_path_factory.mktemp("corpus")
    summary = make_corpus(root, CONFIG, text_dirs=[text_dir], num_workers=2, progress=False,
                          voices=voices)
    return root, text_dir, summary


def test_synthesize_writes_16k_mono_flac(tmp_path):
    out = tmp_path / "x.flac"
    seconds = synthesize(VOICES[0], "hello there my friend", out)
    info = sf.info(str(out))
    assert (info.samplerate, info.channels, info.format, info.subtype) == (
        16000, 1, "FLAC", "PCM_16")
    assert 0.5 < seconds < 5 and info.duration == pytest.approx(seconds, abs=1e-3)
    assert not list(tmp_path.glob("*.partial"))
    with pytest.raises(ValueError, match="text must not be empty"):
        synthesize(VOICES[0], "  ", out)
    with pytest.raises(ValueError, match="must be a .flac path"):
        synthesize(VOICES[0], "hi", tmp_path / "x.wav")


def test_available_voices_rejects_missing_voices():
    bogus = [Voice(990, "espeak-ng", "en-us+no-such-variant", 1.0),
             Voice(991, "espeak-ng", "xx-nolang", 1.0),
             Voice(992, "flite", "no_such_flite_voice", 1.0)]
    assert available_voices(bogus + VOICES[:1]) == VOICES[:1]


def test_corpus_layout(corpus):
    root, text_dir, summary = corpus
    assert summary.num_utts == {"train": 3, "dev-clean": 1, "test-clean": 1, "test-other": 1}
    assert summary.failed == [] and summary.synthesized == 6
    assert summary.voices == {"seen": ["espeak-ng:en-us@1"], "held_out": ["espeak-ng:en-gb@0.9"]}
    assert corpus_parts(root) == ["dev-clean", "test-clean", "test-other", "train"]
    flacs = sorted(root.rglob("*.flac"))
    assert len(flacs) == 6
    for f in flacs:
        spk, chap, _ = f.stem.split("-")
        assert f.parent.name == chap and f.parent.parent.name == spk
        assert spk == ("212" if f.parts[-4] == "test-other" else "201")
    trans = {}
    for t in root.rglob("*.trans.txt"):
        for line in t.read_text().splitlines():
            utt, text = line.split(" ", 1)
            trans[utt] = text
            assert (t.parent / f"{utt}.flac").is_file()
    assert len(trans) == 6
    assert all(t == t.upper() and "." not in t for t in trans.values())
    lm = (root / "lm" / "lm-norm.txt").read_text().splitlines()
    assert len(load_sentences([text_dir])) == 7
    assert len(lm) == 7 - 3  # every sentence but the three evaluation ones
    eval_texts = {trans[f.stem] for f in flacs if f.parts[-4] != "train"}
    assert not eval_texts & set(lm)
    assert "201" in (root / "SPEAKERS.TXT").read_text()


def test_corpus_rerun_is_idempotent(corpus):
    root, text_dir, _ = corpus
    before = {f: f.stat().st_mtime_ns for f in root.rglob("*.flac")}
    again = make_corpus(root, CONFIG, text_dirs=[text_dir], progress=False, voices=VOICES)
    assert again.synthesized == 0 and again.skipped_existing == 6
    assert {f: f.stat().st_mtime_ns for f in root.rglob("*.flac")} == before
    # A bigger train budget in the same directory adds one utterance and keeps the rest.
    bigger = CorpusConfig(seed=1, num_train=4, num_dev=1, num_test=1, num_test_other=1,
                          held_out=CONFIG.held_out)
    grown = make_corpus(root, bigger, text_dirs=[text_dir], progress=False, voices=VOICES)
    assert grown.synthesized == 1 and grown.skipped_existing == 6
    assert grown.num_utts["train"] == 4
    after = {f: f.stat().st_mtime_ns for f in root.rglob("*.flac")}
    assert len(after) == 7 and all(after[f] == t for f, t in before.items())
    new = (set(after) - set(before)).pop()
    new.unlink()  # back to the module fixture's corpus
    make_corpus(root, CONFIG, text_dirs=[text_dir], progress=False, voices=VOICES)
    with pytest.raises(ValueError, match="made with other settings"):
        make_corpus(root, CorpusConfig(seed=2, num_train=3, num_dev=1, num_test=1,
                                       num_test_other=1, held_out=CONFIG.held_out),
                    text_dirs=[text_dir], progress=False, voices=VOICES)


def test_manifests_fbank_and_batches(corpus, tmp_path):
    root, _, _ = corpus
    manifests = prepare_manifests(root, tmp_path / "manifests")
    assert sorted(manifests) == ["dev-clean", "test-clean", "test-other", "train"]
    train_sups = manifests["train"]["supervisions"]
    assert len(manifests["train"]["recordings"]) == 3 and len(train_sups) == 3
    assert all(s.speaker == "201" for s in train_sups)
    # Second call: lhotse skips the parts, we still return them.
    again = prepare_manifests(root, tmp_path / "manifests", dataset_parts=["train"])
    assert sorted(s.id for s in again["train"]["supervisions"]) == sorted(s.id for s in train_sups)

    cuts = compute_fbank(tmp_path / "manifests", tmp_path / "fbank", progress=False)
    assert sorted(cuts) == sorted(manifests)
    for cut in cuts["train"]:
        feats = cut.load_features()
        assert feats.shape[1] == 80
        assert abs(feats.shape[0] - round(cut.duration * 100)) <= 2
    cuts_file = tmp_path / "fbank" / "librispeech_cuts_train.jsonl.gz"
    mtime = cuts_file.stat().st_mtime_ns
    reloaded = compute_fbank(tmp_path / "manifests", tmp_path / "fbank", ["train"],
                             progress=False)
    assert cuts_file.stat().st_mtime_ns == mtime
    assert [c.id for c in reloaded["train"]] == [c.id for c in cuts["train"]]

    train = CutSet.from_file(cuts_file)
    dl = make_dataloader(train, max_duration=100.0, shuffle=False, num_buckets=2)
    batches = list(dl)
    texts = [t for b in batches for t in b["supervisions"]["text"]]
    assert sorted(texts) == sorted(s.text for s in train_sups)
    b = batches[0]
    n = len(b["supervisions"]["text"])
    assert b["inputs"].dtype == torch.float32 and b["inputs"].shape[0] == n
    assert b["inputs"].shape[2] == 80
    assert b["inputs"].shape[1] == int(b["supervisions"]["num_frames"].max())
    assert len(b["supervisions"]["cut"]) == n

    def order(seed):
        dl = make_dataloader(train, max_duration=3.0, shuffle=True, num_buckets=2, seed=seed)
        return [c.id for b in dl for c in b["supervisions"]["cut"]]

    assert order(5) == order(5)
    assert sorted(order(5)) == sorted(c.id for c in train)

    aug = make_dataloader(train, max_duration=100.0, shuffle=False, num_buckets=2,
                          spec_augment=SpecAugmentConfig(p=1.0, time_warp_factor=None))
    b_aug = next(iter(aug))
    assert b_aug["inputs"].shape == b["inputs"].shape
    assert not torch.equal(b_aug["inputs"], b["inputs"])


def test_bad_arguments(corpus, tmp_path):
    root, _, _ = corpus
    with pytest.raises(ValueError, match="no such directory"):
        prepare_manifests(tmp_path / "nope", tmp_path / "m")
    with pytest.raises(ValueError, match=r"\['train-clean-100'\] not found"):
        prepare_manifests(root, tmp_path / "m", dataset_parts=["train-clean-100"])
    with pytest.raises(ValueError, match="no such directory"):
        compute_fbank(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="have no manifests"):
        compute_fbank(tmp_path / "empty")
    manifests = prepare_manifests(root, tmp_path / "m", dataset_parts=["dev-clean"])
    raw = CutSet.from_manifests(**manifests["dev-clean"])
    with pytest.raises(ValueError, match="precomputed features"):
        make_dataloader(raw, max_duration=10.0, shuffle=False)
    with pytest.raises(ValueError, match="max_duration must be > 0"):
        make_dataloader(raw, max_duration=0.0, shuffle=False)
    with pytest.raises(ValueError, match="num_buckets must be >= 2"):
        make_dataloader(raw, max_duration=10.0, shuffle=False, num_buckets=1)
    with pytest.raises(TypeError, match="CutSet"):
        make_dataloader(list(raw), max_duration=10.0, shuffle=False)


@pytest.mark.parametrize("voice", [
    Voice(104, "flite", "slt", 1.0),
    Voice(301, "festival", "kal_diphone", 1.0),
    Voice(303, "festival", "cmu_us_slt_arctic_hts", 1.0),
], ids=lambda v: v.name)
def test_other_engines(voice, tmp_path):
    if not available_voices([voice]):
        pytest.skip(f"{voice.name} is not installed here (Debian packages flite, festival, "
                    "festvox-us-slt-hts)")
    out = tmp_path / "x.flac"
    seconds = synthesize(voice, "the weather is fine today", out)
    info = sf.info(str(out))
    assert (info.samplerate, info.channels) == (16000, 1)
    assert 0.8 < seconds < 5
    assert available_voices([Voice(399, voice.engine, "no_such_voice", 1.0)]) == []
