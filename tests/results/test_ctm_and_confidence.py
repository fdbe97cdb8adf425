"""CTM files and confidence metrics (NCE, AUC, calibration) against direct computations."""

from __future__ import annotations

import math

import numpy as np
import pytest

from k2dec.results import (
    Calibration,
    CtmWord,
    confidence_metrics,
    fit_calibration,
    frames_to_seconds,
    normalized_cross_entropy,
    plot_reliability,
    read_ctm,
    roc_auc,
    timed_words,
    word_correctness,
    write_ctm,
)


def test_ctm_round_trip(tmp_path):
    words = timed_words(["HELLO", "WORLD"], [3, 10], [7, 12], [0.9, 1.0000001],
                        subsampling_factor=4)
    assert (words[0].word, words[0].confidence) == ("HELLO", 0.9)
    assert (words[0].start, words[0].duration) == pytest.approx((0.12, 0.16))
    assert words[1].confidence == 1.0
    path = write_ctm(tmp_path / "sub" / "a.ctm", {"utt-b": words, "utt-a": words[:1]})
    lines = path.read_text().splitlines()
    assert lines == ["utt-a 1 0.120 0.160 HELLO 0.9000", "utt-b 1 0.120 0.160 HELLO 0.9000",
                     "utt-b 1 0.400 0.080 WORLD 1.0000"]
    back = read_ctm(path)
    assert [w.word for w in back["utt-b"]] == ["HELLO", "WORLD"]
    assert back["utt-b"][1].start == pytest.approx(0.4)
    assert frames_to_seconds(25, 4, 0.01) == pytest.approx(1.0)


def test_ctm_bad_inputs(tmp_path):
    with pytest.raises(ValueError, match="same length"):
        timed_words(["A"], [0, 1], [1], [0.5])
    with pytest.raises(ValueError, match="before it begins"):
        timed_words(["A"], [3], [2], [0.5])
    with pytest.raises(ValueError, match="confidence"):
        CtmWord("A", 0.0, 1.0, 1.5)
    with pytest.raises(ValueError, match="spaces"):
        CtmWord("A B", 0.0, 1.0, 0.5)
    with pytest.raises(ValueError, match="utterance ids"):
        write_ctm(tmp_path / "x.ctm", {"a b": []})
    with pytest.raises(TypeError, match="CtmWord"):
        write_ctm(tmp_path / "x.ctm", {"a": [("A", 0, 1, 1)]})
    with pytest.raises(ValueError, match="subsampling_factor"):
        frames_to_seconds(1, 0)
    bad = tmp_path / "bad.ctm"
    bad.write_text("utt 1 0.0\n")
    with pytest.raises(ValueError, match="columns"):
        read_ctm(bad)


def test_word_correctness():
    assert word_correctness("A B C".split(), "A X C D".split()) == [True, False, True, False]
    assert word_correctness("A B".split(), []) == []
    assert word_correctness([], ["A"]) == [False]


def _auc_pairs(c, y):
    pos = [a for a, b in zip(c, y) if b]
    neg = [a for a, b in zip(c, y) if not b]
    s = sum(1.0 if p > q else 0.5 if p == q else 0.0 for p in pos for q in neg)
    return s / (len(pos) * len(neg))


def test_metrics_against_direct_computation():
    rng = np.random.default_rng(0)
    for _ in range(20):
        n = int(rng.integers(2, 40))
        c = np.round(rng.random(n), 1)  # many ties
        y = rng.random(n) < c
        if y.all() or not y.any():
            continue
        assert roc_auc(c, y) == pytest.approx(_auc_pairs(c.tolist(), y.tolist()))
        p = y.mean()
        cc = np.clip(c, 1e-6, 1 - 1e-6)
        h_max = -(y.sum() * math.log2(p) + (~y).sum() * math.log2(1 - p))
        h = -(sum(math.log2(x) for x in cc[y]) + sum(math.log2(1 - x) for x in cc[~y]))
        assert normalized_cross_entropy(c, y) == pytest.approx((h_max - h) / h_max)
        m = confidence_metrics(c, y, num_bins=5)
        assert sum(b.count for b in m.bins) == n
        ece = sum(b.count * abs(b.accuracy - b.mean_confidence) for b in m.bins) / n
        assert m.ece == pytest.approx(ece)
        assert m.num_correct == int(y.sum()) and m.mean_confidence == pytest.approx(c.mean())


def test_metrics_edge_cases(tmp_path):
    # a constant confidence equal to the accuracy has NCE 0; perfect separation has AUC 1
    assert normalized_cross_entropy([0.75] * 4, [True, True, True, False]) == pytest.approx(0)
    assert roc_auc([0.9, 0.8, 0.1], [True, True, False]) == 1.0
    assert math.isnan(roc_auc([0.5, 0.6], [True, True]))
    assert math.isnan(normalized_cross_entropy([0.5], [False]))
    m = confidence_metrics([], [])
    assert m.num_words == 0 and math.isnan(m.nce)
    with pytest.raises(ValueError, match="same length"):
        roc_auc([0.5], [True, False])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        roc_auc([1.5, 0.2], [True, False])
    with pytest.raises(ValueError, match="num_bins"):
        confidence_metrics([0.5], [True], num_bins=0)
    good = confidence_metrics([0.9, 0.8, 0.2, 0.7], [True, True, False, False])
    png = plot_reliability({"a": good, "b": good}, tmp_path / "r.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_calibration():
    rng = np.random.default_rng(1)
    c = rng.uniform(0.02, 0.98, size=4000)
    truth = Calibration(a=0.5, b=-0.7)(c)  # overconfident raw scores
    y = rng.random(c.size) < truth
    cal = fit_calibration(c, y)
    assert cal.a == pytest.approx(0.5, abs=0.1) and cal.b == pytest.approx(-0.7, abs=0.15)
    # on the data it was fit on, the calibrated log loss is at most the identity's
    assert normalized_cross_entropy(cal(c), y) >= normalized_cross_entropy(c, y) - 1e-12
    assert np.allclose(Calibration()(c), c)
    with pytest.raises(ValueError, match="both correct and wrong"):
        fit_calibration([0.5, 0.6], [True, True])
