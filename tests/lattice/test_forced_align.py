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

from k2dec.lattice.forced_align import MAX_SKIPPED_RUN, Untranscribed, align_words
from tests.reference.ctc_align import align_words_reference
from tests.reference.ctc_align_garbage import align_garbage_reference, align_skip_reference


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


def _check_garbage(lp, lens, words, got, i, penalty, ref=None):
    if ref is None:
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


def _distinct_words(rng: np.random.Generator, n: int, vocab: int = 5, max_t: int = 4):
    """Random log-probs and transcripts of 0-4 words of one or two tokens, no token twice in
    a transcript (so that no two choices of skipped words spell the same tokens: the best
    path is unique); four words make runs longer than MAX_SKIPPED_RUN possible."""
    lp, lens, _ = _random_case(rng, n, vocab=vocab, max_t=max_t)
    words = []
    for _ in range(n):
        tokens = [int(x) for x in rng.permutation(np.arange(1, vocab))[:int(rng.integers(0, 5))]]
        cut = int(rng.integers(0, len(tokens) + 1))
        group = [tokens[cut - 1:cut + 1]] if 0 < cut < len(tokens) and rng.random() < 0.3 \
            else []
        rest = [[x] for k, x in enumerate(tokens) if not (group and k in (cut - 1, cut))]
        words.append(rest[:max(cut - 1, 0)] + group + rest[max(cut - 1, 0):] if group
                     else rest)
    return lp, lens, words


@pytest.mark.parametrize("n", [1, 3])
def test_skip_path_matches_brute_force(n, device):
    """Words may be skipped (at most MAX_SKIPPED_RUN in a row): score, token runs (a skipped
    token zero-length at its gap), garbage runs, word frames, confidences and the skipped
    words are the brute force's over every choice of skipped words; some cases skip."""
    rng = np.random.default_rng(30 + n)
    skipped = 0
    for _ in range(12 if n == 1 else 4):
        lp, lens, words = _distinct_words(rng, n)
        penalty = Untranscribed(float(rng.uniform(0.2, 3.0)), float(rng.uniform(0.01, 1.0)),
                                float(rng.uniform(0.05, 3.0)))
        got = align_words(lp.to(device), lens, words, penalty)
        for i in range(n):
            ref = align_skip_reference(lp[i, : int(lens[i])].double().numpy(), words[i],
                                       penalty.entry_penalty, penalty.frame_penalty,
                                       penalty.skip_penalty, MAX_SKIPPED_RUN)
            _check_garbage(lp, lens, words, got, i, penalty, ref)
            if ref is not None:
                assert got.word_skipped.tolist()[i] == [int(s) for s in ref["skipped"]]
                skipped += sum(ref["skipped"])
    assert skipped > 0


def test_an_inserted_word_is_skipped_and_its_neighbours_keep_their_frames():
    """Frames say A A B B; the transcript says A C B: without skips C must take a frame
    from a neighbour; with them C is skipped (zero-length at the gap, confidence 0, score
    -inf) and A and B keep their frames and confidences, in a batch with other cases."""
    lp = _peaks([1, 1, 2, 2])
    lens = torch.tensor([4])
    plain = align_words(lp, lens, [[[1], [3], [2]]], Untranscribed(4.0, 0.05))
    assert list(zip(plain.word_begin.tolist()[0], plain.word_end.tolist()[0])) != \
        [(0, 2), (2, 2), (2, 4)]
    got = align_words(lp, lens, [[[1], [3], [2]]], Untranscribed(4.0, 0.05, 3.0))
    assert got.word_skipped.tolist() == [[0, 1, 0]]
    assert list(zip(got.word_begin.tolist()[0], got.word_end.tolist()[0])) == \
        [(0, 2), (2, 2), (2, 4)]
    conf = got.word_confidence.tolist()[0]
    assert conf[0] > 0.9 and conf[2] > 0.9 and conf[1] == 0.0
    assert math.isinf(got.word_score.tolist()[0][1]) and got.garbage_begin.tolist() == [[]]
    # a skip dearer than the squeeze keeps the word
    dear = align_words(lp, lens, [[[1], [3], [2]]], Untranscribed(4.0, 0.05, 30.0))
    assert dear.word_skipped.tolist() == [[0, 0, 0]]
    # batch > 1: the same case among a one-word transcript the audio lacks (skipped, its
    # mark at frame 0), a right one-word transcript and an empty one
    lp3 = torch.cat([lp, _peaks([0, 3, 3, 0]), _peaks([0, 3, 3, 0])])
    batch = align_words(lp3, torch.tensor([4, 4, 4]), [[[1], [3], [2]], [[1]], [[3]]],
                        Untranscribed(4.0, 0.05, 3.0))
    assert batch.word_skipped.tolist() == [[0, 1, 0], [1], [0]]
    assert batch.word_begin.tolist() == [[0, 2, 2], [0], [1]]
    assert batch.word_end.tolist() == [[2, 2, 4], [0], [3]]


def test_a_right_transcript_is_never_skipped(device):
    """Peaky random log-probs and the transcript they spell, batches of 1 and 4: no word is
    skipped and no garbage used at any skip penalty, and the alignment is the plain one."""
    rng = np.random.default_rng(7)
    for n in (1, 4):
        for skip in (0.01, 0.5, 4.0):
            labels = rng.integers(0, 5, size=(n, 12))
            lp = torch.cat([_peaks([int(x) for x in row]) for row in labels])
            words = []
            for row in labels:
                spelled = [int(x) for x, prev in zip(row, [-1, *row[:-1]]) if x != 0 and x != prev]
                words.append([[x] for x in spelled])
            lens = torch.full((n,), 12)
            got = align_words(lp.to(device), lens, words, Untranscribed(4.0, 0.05, skip))
            plain = align_words(lp.to(device), lens, words)
            assert got.word_skipped.tolist() == [[0] * len(w) for w in words]
            assert got.garbage_begin.tolist() == [[]] * n
            assert got.word_begin.tolist() == plain.word_begin.tolist()
            assert got.word_end.tolist() == plain.word_end.tolist()
