"""remove_epsilon_keep_words against brute-force path enumeration on random acyclic FSAs."""

from __future__ import annotations

import random

import k2
import pytest
import torch

from k2dec.graph import remove_epsilon_keep_words
from tests.reference.lattice_paths import (
    best_by_key,
    best_per_word_sequence,
    enumerate_paths,
)


def _random_fsa(seed: int) -> k2.Fsa:
    """Acyclic, with epsilon arcs (some with one or two words, some parallel with different
    words, some leaving the start state, some in chains) and word-carrying label arcs."""
    rng = random.Random(seed)
    n = rng.randint(3, 7)
    final = n
    arcs = []
    for src in range(n):
        for _ in range(rng.randint(1, 3)):
            dst = rng.randint(src + 1, n)
            if dst == final:
                arcs.append((src, final, -1, [], rng.uniform(-2, 0)))
                continue
            label = 0 if rng.random() < 0.45 else rng.randint(1, 3)
            words = [rng.randint(1, 5) for _ in range(rng.choice([0, 1, 1, 2]))]
            arcs.append((src, dst, label, words, round(rng.uniform(-2, 0), 3)))
            if label == 0 and words and rng.random() < 0.5:  # a "homophone" arc
                arcs.append((src, dst, 0, [w % 5 + 1 for w in words], rng.uniform(-2, 0)))
    arcs.append((n - 1, final, -1, [], 0.0))
    arcs.sort(key=lambda a: a[0])
    t = torch.tensor([[a[0], a[1], a[2]] for a in arcs], dtype=torch.int32)
    scores = torch.tensor([a[4] for a in arcs], dtype=torch.float32)
    fsa = k2.Fsa(torch.cat([t, scores.view(-1, 1).view(torch.int32)], dim=1))
    fsa.aux_labels = k2.RaggedTensor([a[3] for a in arcs])
    return fsa


def _best_per_labels_and_words(fsa: k2.Fsa) -> dict:
    best: dict = {}
    for p in enumerate_paths(fsa):
        key = (tuple(x for x in p.labels if x > 0), p.words)
        best[key] = max(best.get(key, -float("inf")), p.score)
    return best


@pytest.mark.parametrize("seed", range(200))
def test_keeps_every_labels_and_words_pair_with_its_best_score(seed):
    fsa = _random_fsa(seed)
    want = _best_per_labels_and_words(fsa)
    # the two references agree (the DP one serves the graph tests)
    by_words = best_by_key(enumerate_paths(fsa), "words")
    assert best_per_word_sequence(fsa) == pytest.approx(by_words)
    out = remove_epsilon_keep_words(fsa)
    assert not bool((out.labels == 0).any())
    got = _best_per_labels_and_words(out) if out.num_arcs else {}
    assert set(got) == set(want)
    for key, score in want.items():
        assert got[key] == pytest.approx(score, abs=1e-4), key
    # nothing is duplicated: no more paths than the input has
    if out.num_arcs:
        assert len(enumerate_paths(out)) <= len(enumerate_paths(fsa))


def test_plain_remove_epsilon_loses_homophones():
    """The case of issue 14: two epsilon arcs with different words that meet again."""
    text = "\n".join([
        "0 1 5 0 0",
        "1 2 0 7 -1",   # #1:READ -> G state after READ
        "1 3 0 8 -2",   # #2:REED -> G state after REED
        "2 4 0 0 -0.5",  # both back off (#0) to the unigram state
        "3 4 0 0 -0.5",
        "4 5 6 9 0",
        "5 6 -1 -1 0",
        "6",
    ])
    fsa = k2.Fsa.from_str(text, acceptor=False)
    words = {p.words for p in enumerate_paths(k2.remove_epsilon(fsa.clone()))}
    assert words == {(7, 9)}  # REED is gone
    kept = {(p.words, round(p.score, 4)) for p in enumerate_paths(remove_epsilon_keep_words(fsa))}
    assert kept == {((7, 9), -1.5), ((8, 9), -2.5)}


def test_words_on_the_start_state_epsilons_are_folded_forward():
    fsa = k2.Fsa.from_str("\n".join([
        "0 1 0 3 -1", "0 1 0 4 -2", "1 2 0 0 -0.5", "1 2 2 5 0", "2 3 1 0 0", "2 4 -1 -1 0",
        "3 4 -1 -1 0", "4"]), acceptor=False)
    want = _best_per_labels_and_words(fsa)
    out = remove_epsilon_keep_words(fsa)
    assert _best_per_labels_and_words(out) == pytest.approx(want)
    assert ((), (3,)) in want and ((), (4,)) in want  # words with no input at all


def test_epsilon_cycle_with_words_is_an_error():
    fsa = k2.Fsa.from_str("0 1 1 0 0\n1 2 0 3 -1\n1 3 -1 -1 0\n2 1 0 0 -1\n3",
                          acceptor=False)
    with pytest.raises(ValueError, match="epsilon cycle"):
        remove_epsilon_keep_words(fsa, max_rounds=8)


def test_input_validation():
    fsa = k2.Fsa.from_str("0 1 1 0\n1 2 -1 0\n2", acceptor=True)
    with pytest.raises(ValueError, match="aux_labels"):
        remove_epsilon_keep_words(fsa)
    with pytest.raises(ValueError, match="FsaVec"):
        remove_epsilon_keep_words(k2.create_fsa_vec([fsa]))
    with pytest.raises(TypeError, match="k2.Fsa"):
        remove_epsilon_keep_words("HLG.pt")
