"""Forced alignment of words (k2dec.lattice.align_words) against a brute-force search over
every frame labelling: the same path, score, word frames and word confidences, batch 1 and >1,
one-frame utterances and one-token words; too few frames and bad input refused or reported."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from k2dec.lattice.forced_align import align_words
from tests.reference.ctc_align import align_words_reference


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
