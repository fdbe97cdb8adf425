"""Forced alignment of words (k2dec.lattice.align_words) against a brute-force search over
every frame labelling: the same path, score, word frames, word confidences and scores, batch 1
and >1, one-frame utterances, one-token words and empty transcripts; with the garbage path
between words (speech a transcript lacks) against a brute force over labellings with a
garbage label; too few frames and bad input refused or reported."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from k2dec.lattice.forced_align import Untranscribed, align_words
from tests.reference.ctc_align import align_words_reference
from tests.reference.ctc_align_garbage import align_garbage_reference


def _random_case(rng: np.random.Generator, n: int, vocab: int = 4, max_t: int = 6):
    lens = rng.integers(1, max_t + 1, size=n)
    t = int(lens.max())
    lp = torch.from_numpy(rng.normal(size=(n, t, vocab)) * 2).log_softmax(-1).float()
    words = []
    for i in range(n):
        num_tokens = int(rng.integers(0, min(int(lens[i]), 4) + 1))
        tokens = [int(x) for x in rng.integers(1, vocab, size=num_tokens)]
        cuts = sorted(set(int(c) for c in rng.integers(1, max(num_tokens, 1), size=2))) \
            if num_tokens > 1 else []
        bounds = [0] + cuts + [num_tokens]
        words.append([tokens[a:b] for a, b in zip(bounds, bounds[1:]) if b > a])
    return lp, torch.from_numpy(lens), words


def _check(lp, lens, words, got, i):
    ref = align_words_reference(lp[i, : int(lens[i])].double().numpy(), words[i])
    if ref is None:
        assert not bool(got.aligned[i]) and math.isinf(float(got.score[i]))
        assert got.word_begin.tolist()[i] == []
        return
    assert bool(got.aligned[i])
    assert float(got.score[i]) == pytest.approx(ref["score"], abs=1e-4)
    runs = list(zip(got.token_begin.tolist()[i], got.token_end.tolist()[i]))
    assert runs == ref["token_runs"]
    spans = list(zip(got.word_begin.tolist()[i], got.word_end.tolist()[i]))
    assert spans == [(b, e) for b, e, _ in ref["words"]]
    assert got.word_confidence.tolist()[i] == pytest.approx([c for _, _, c in ref["words"]],
                                                            rel=1e-4, abs=1e-6)
    sums = [math.log(c) * (e - b) for b, e, c in ref["words"]]
    assert got.word_score.tolist()[i] == pytest.approx(sums, rel=1e-4, abs=1e-4)
    assert got.garbage_begin.tolist()[i] == [] and got.garbage_end.tolist()[i] == []


@pytest.mark.parametrize("n", [1, 2, 5])
def test_matches_brute_force(n, device):
    rng = np.random.default_rng(n)
    for _ in range(6 if n < 5 else 3):
        lp, lens, words = _random_case(rng, n)
        got = align_words(lp.to(device), lens, words)
        for i in range(n):
            _check(lp, lens, words, got, i)


def test_one_frame_and_repeated_tokens(device):
    lp = torch.tensor([[[-3.0, -0.1, -4.0], [-0.2, -2.0, -3.0], [-3.0, -0.1, -4.0]]])
    lp = lp.log_softmax(-1)
    # one frame, one one-token word
    one = align_words(lp[:, :1].to(device), torch.tensor([1]), [[[1]]])
    assert one.word_begin.tolist() == [[0]] and one.word_end.tolist() == [[1]]
    # a repeated token needs a blank between: A A in 3 frames is A _ A
    rep = align_words(lp.to(device), torch.tensor([3]), [[[1], [1]]])
    assert rep.word_begin.tolist() == [[0, 2]] and rep.word_end.tolist() == [[1, 3]]
    # ... and cannot fit in 2 frames: reported, not invented
    short = align_words(lp.to(device), torch.tensor([2]), [[[1], [1]]])
    assert not bool(short.aligned[0]) and short.word_begin.tolist() == [[]]


def test_a_word_the_audio_lacks_scores_low():
    # frames say 1 1 _ 2 2 _ ; the transcript adds token 3 between: it must get a frame, and
    # that frame's label is far from the network's choice
    peaks = [1, 1, 0, 2, 2, 0]
    lp = torch.full((1, 6, 4), -9.0)
    for t, x in enumerate(peaks):
        lp[0, t, x] = 0.0
    lp = lp.log_softmax(-1)
    got = align_words(lp, torch.tensor([6]), [[[1], [3], [2]]])
    conf = got.word_confidence.tolist()[0]
    assert conf[0] > 0.9 and conf[2] > 0.9 and conf[1] < 0.01


def test_bad_input_is_refused():
    lp = torch.zeros(1, 3, 4).log_softmax(-1)
    with pytest.raises(ValueError, match="no tokens"):
        align_words(lp, torch.tensor([3]), [[[1], []]])
    with pytest.raises(ValueError, match=r"\[1, 4\)"):
        align_words(lp, torch.tensor([3]), [[[5]]])
    with pytest.raises(ValueError, match="2 transcripts"):
        align_words(lp, torch.tensor([3]), [[[1]], [[2]]])
    with pytest.raises(TypeError, match="log_probs"):
        align_words(lp[0], torch.tensor([3]), [[[1]]])


def _check_garbage(lp, lens, words, got, i, penalty):
    ref = align_garbage_reference(lp[i, : int(lens[i])].double().numpy(), words[i],
                                  penalty.entry_penalty, penalty.frame_penalty)
    if ref is None:
        assert not bool(got.aligned[i]) and got.word_begin.tolist()[i] == []
        return 0
    assert bool(got.aligned[i])
    assert float(got.score[i]) == pytest.approx(ref["score"], abs=1e-4)
    assert list(zip(got.token_begin.tolist()[i], got.token_end.tolist()[i])) == \
        ref["token_runs"]
    assert list(zip(got.garbage_begin.tolist()[i], got.garbage_end.tolist()[i])) == \
        ref["garbage_runs"]
    spans = list(zip(got.word_begin.tolist()[i], got.word_end.tolist()[i]))
    assert spans == [(b, e) for b, e, _ in ref["words"]]
    assert got.word_confidence.tolist()[i] == pytest.approx([c for _, _, c in ref["words"]],
                                                            rel=1e-4, abs=1e-6)
    return len(ref["garbage_runs"])


@pytest.mark.parametrize("n", [1, 3])
def test_garbage_path_matches_brute_force(n, device):
    """Random log-probs, transcripts (empty ones included) and penalties (positive, so the
    best path is unique): the garbage path's score, token runs, garbage runs and words are
    the brute force's; some cases do use garbage."""
    rng = np.random.default_rng(10 + n)
    used = 0
    for _ in range(14 if n == 1 else 6):
        lp, lens, words = _random_case(rng, n, vocab=3, max_t=5)
        penalty = Untranscribed(float(rng.uniform(0.2, 3.0)), float(rng.uniform(0.01, 1.0)))
        got = align_words(lp.to(device), lens, words, penalty)
        for i in range(n):
            used += _check_garbage(lp, lens, words, got, i, penalty)
    assert used > 0


def _peaks(labels, vocab=5):
    lp = torch.full((1, len(labels), vocab), -12.0)
    for t, x in enumerate(labels):
        lp[0, t, x] = 0.0
    return lp.log_softmax(-1)


def test_speech_the_transcript_lacks_is_a_garbage_run():
    """Frames say A A _ C _ B B; the transcript says A B: C's frame is garbage (a run at
    frame 3), A and B keep their frames and confidences. A penalty above what C's frame
    gains keeps the plain alignment; a matching transcript never uses garbage."""
    lp = _peaks([1, 1, 0, 3, 0, 2, 2])
    lens = torch.tensor([7])
    got = align_words(lp, lens, [[[1], [2]]], Untranscribed(4.0, 0.05))
    assert list(zip(got.garbage_begin.tolist()[0], got.garbage_end.tolist()[0])) == [(3, 4)]
    assert got.word_begin.tolist() == [[0, 5]] and got.word_end.tolist() == [[2, 7]]
    assert min(got.word_confidence.tolist()[0]) > 0.9
    strict = align_words(lp, lens, [[[1], [2]]], Untranscribed(20.0, 0.05))
    assert strict.garbage_begin.tolist() == [[]]
    right = align_words(lp, lens, [[[1], [3], [2]]], Untranscribed(0.5, 0.05))
    assert right.garbage_begin.tolist() == [[]]
    # at the edges and for an empty transcript too
    edge = align_words(_peaks([3, 0, 1, 1, 0, 3]), torch.tensor([6]), [[[1]]],
                       Untranscribed(4.0, 0.05))
    assert list(zip(edge.garbage_begin.tolist()[0], edge.garbage_end.tolist()[0])) == \
        [(0, 1), (5, 6)]
    empty = align_words(_peaks([0, 2, 0]), torch.tensor([3]), [[]], Untranscribed(4.0, 0.05))
    assert empty.garbage_begin.tolist() == [[1]] and empty.word_begin.tolist() == [[]]
    silent = align_words(_peaks([0, 0, 0]), torch.tensor([3]), [[]], Untranscribed(0.0, 0.05))
    assert silent.garbage_begin.tolist() == [[]] and bool(silent.aligned[0])


def test_word_score_sums_the_gaps():
    """A word the audio lacks squeezed into one frame: its score is that frame's gap."""
    lp = _peaks([1, 1, 0, 2, 2, 0])
    got = align_words(lp, torch.tensor([6]), [[[1], [3], [2]]])
    scores = got.word_score.tolist()[0]
    b, e = got.word_begin.tolist()[0][1], got.word_end.tolist()[0][1]
    labels = [3] * (e - b)
    expect = sum(float(lp[0, t, x] - lp[0, t].max()) for t, x in zip(range(b, e), labels))
    assert scores[1] == pytest.approx(expect, abs=1e-4) and scores[1] < -10
    assert scores[0] == pytest.approx(0.0, abs=1e-3) and scores[2] == pytest.approx(0.0, abs=1e-3)


def test_bad_penalties_are_refused():
    with pytest.raises(ValueError, match="entry_penalty"):
        Untranscribed(-1.0)
    with pytest.raises(ValueError, match="frame_penalty"):
        Untranscribed(1.0, float("inf"))
    lp = torch.zeros(1, 3, 4).log_softmax(-1)
    with pytest.raises(TypeError, match="untranscribed"):
        align_words(lp, torch.tensor([3]), [[[1]]], 4.0)
    with pytest.raises(ValueError, match=r"\[1, 4\)"):
        align_words(lp, torch.tensor([3]), [[[4]]], Untranscribed())
