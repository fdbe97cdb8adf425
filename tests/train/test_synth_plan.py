"""Sentence selection and corpus planning (no synthesis)."""

from collections import Counter

import pytest

from k2dec.train.synth import (
    FORTUNES_DIR,
    CorpusConfig,
    Voice,
    load_sentences,
    plan_corpus,
)

VOICES = [Voice(201, "espeak-ng", "en-us", 1.0), Voice(202, "espeak-ng", "en-us+f2", 0.85),
          Voice(101, "flite", "slt", 1.0)]
HELD = ("flite:slt@1",)


def _sentences(n):
    return [f"SENTENCE NUMBER {i:04d}" for i in range(n)]


def test_load_sentences_filters(tmp_path):
    (tmp_path / "a").write_text(
        "The cat sat on the mat. It was happy!\n"          # second: too short (3 words)
        "We met in 1999 at the park gate.\n"               # digits: skipped
        "%\n"
        "I think that the dog is very old.\n"
        "\t\t-- Some Author, the book that is famous\n"     # attribution: dropped
        "%\n"
        "The zorblaxian quux jumped over the fence.\n"      # not in CMUdict
        "%\n"
        "X Y Z W are the letters.\n"                        # one-letter words
        "The cat sat on the mat.\n")                        # duplicate
    (tmp_path / "off").mkdir()
    (tmp_path / "off" / "rude").write_text("This should never be read at all.\n")
    (tmp_path / "a.dat").write_bytes(b"\x00\x01binary")
    got = load_sentences([tmp_path], min_words=4, max_words=20)
    assert got == ["I THINK THAT THE DOG IS VERY OLD", "THE CAT SAT ON THE MAT"]
    assert load_sentences([tmp_path], min_words=7, max_words=8) == [
        "I THINK THAT THE DOG IS VERY OLD"]


def test_load_sentences_bad_args(tmp_path):
    with pytest.raises(ValueError, match="min_words"):
        load_sentences([tmp_path], min_words=5, max_words=4)
    with pytest.raises(ValueError, match="no such directory"):
        load_sentences([tmp_path / "missing"])


@pytest.mark.skipif(not FORTUNES_DIR.is_dir(),
                    reason="Debian package 'fortunes' not installed (no /usr/share/games/fortunes)")
def test_fortunes_give_enough_text():
    sents = load_sentences()
    assert len(sents) > 5000
    assert all(4 <= len(s.split()) <= 20 for s in sents)
    assert all(s == s.upper() and not any(c.isdigit() for c in s) for s in sents)


def test_plan_splits_are_disjoint_and_deterministic():
    config = CorpusConfig(seed=3, num_train=40, num_dev=5, num_test=6, num_test_other=7,
                          held_out=HELD, utts_per_chapter=4)
    sents = _sentences(100)
    utts, lm = plan_corpus(sents, VOICES, config)
    assert plan_corpus(list(reversed(sents)), VOICES, config) == (utts, lm)
    by_split = {}
    for u in utts:
        by_split.setdefault(u.split, []).append(u)
    assert {k: len(v) for k, v in by_split.items()} == {
        "train": 40, "dev-clean": 5, "test-clean": 6, "test-other": 7}
    texts = {k: {u.text for u in v} for k, v in by_split.items()}
    assert sum(len(t) for t in texts.values()) == 58  # no sentence in two splits
    assert texts["train"] <= set(lm)
    for split in ("dev-clean", "test-clean", "test-other"):
        assert not texts[split] & set(lm)
    assert len(lm) == 100 - 18
    # Held-out voice only in test-other, and test-other only has it.
    assert {u.speaker_id for u in by_split["test-other"]} == {101}
    assert 101 not in {u.speaker_id for s in ("train", "dev-clean", "test-clean")
                       for u in by_split[s]}
    # Round robin over the seen voices; chapters of at most 4; LibriSpeech ids.
    assert Counter(u.speaker_id for u in by_split["train"]) == {201: 20, 202: 20}
    assert max(Counter((u.speaker_id, u.chapter_id) for u in utts).values()) == 4
    ids = [u.utt_id for u in utts]
    assert len(set(ids)) == len(ids)
    for u in utts:
        assert u.utt_id.startswith(f"{u.speaker_id}-{u.chapter_id}-")
        assert len(u.utt_id.split("-")[2]) == 4
    # Another seed, other sentences in test.
    other, _ = plan_corpus(sents, VOICES, CorpusConfig(
        seed=4, num_train=40, num_dev=5, num_test=6, num_test_other=7, held_out=HELD))
    assert {u.text for u in other if u.split == "test-clean"} != texts["test-clean"]


def test_plan_hours_budget_grows_train_only():
    sents = _sentences(300)  # 3 words each: 0.5 + 3 * 0.26 = 1.28 s estimated
    small, _ = plan_corpus(sents, VOICES, CorpusConfig(hours=0.01, num_dev=3, num_test=3,
                                                       num_test_other=3, held_out=HELD))
    big, _ = plan_corpus(sents, VOICES, CorpusConfig(hours=0.05, num_dev=3, num_test=3,
                                                     num_test_other=3, held_out=HELD))
    n_small = sum(u.split == "train" for u in small)
    n_big = sum(u.split == "train" for u in big)
    assert n_small == 29  # ceil(36 s / 1.28 s)
    assert n_big == 141  # ceil(180 s / 1.28 s)
    eval_small = {(u.split, u.text) for u in small if u.split != "train"}
    eval_big = {(u.split, u.text) for u in big if u.split != "train"}
    assert eval_small == eval_big


def test_plan_errors():
    with pytest.raises(ValueError, match="need 30 sentences"):
        plan_corpus(_sentences(20), VOICES, CorpusConfig(num_dev=10, num_test=10,
                                                         num_test_other=10, held_out=HELD))
    with pytest.raises(ValueError, match="none of the held-out voices"):
        plan_corpus(_sentences(20), VOICES[:2], CorpusConfig(num_dev=1, num_test=1,
                                                             num_test_other=1, held_out=HELD))
    with pytest.raises(ValueError, match="no voice left"):
        plan_corpus(_sentences(20), VOICES[2:], CorpusConfig(num_dev=1, num_test=1,
                                                             num_test_other=1, held_out=HELD))
    with pytest.raises(ValueError, match="unknown voice"):
        CorpusConfig(held_out=("espeak-ng:klingon@1",))
    with pytest.raises(ValueError, match="num_dev must be >= 0"):
        CorpusConfig(num_dev=-1)
    with pytest.raises(ValueError, match="utts_per_chapter"):
        CorpusConfig(utts_per_chapter=0)
