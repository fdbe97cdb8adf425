"""N-best posteriors of the chosen hypotheses' words against the per-utterance reference."""

from __future__ import annotations

import math
import random

import k2
import kaldialign
import pytest
import torch

from k2dec.nbest.list_confidences import aligned_matches, list_posteriors, nbest_confidences
from tests.reference import nbest_confidence as ref


def _random_seq(rng: random.Random, max_len: int, vocab: int) -> list[int]:
    return [rng.randint(1, vocab) for _ in range(rng.randint(0, max_len))]


@pytest.mark.parametrize("seed", range(6))
def test_aligned_matches_equal_reference(device, seed):
    rng = random.Random(seed)
    hyps = [_random_seq(rng, 7, 3) for _ in range(60)] + [[], [1], []]
    refs = [_random_seq(rng, 7, 3) for _ in range(60)] + [[2], [], []]
    h = k2.RaggedTensor(hyps, dtype=torch.int32, device=device)
    r = k2.RaggedTensor(refs, dtype=torch.int32, device=device)
    for max_cells in (1, 50, 1 << 20):  # groups of one pair, of a few, all together
        got = aligned_matches(h, r, max_cells=max_cells).tolist()
        want = [m for a, b in zip(hyps, refs) for m in ref.aligned_matches(a, b)]
        assert got == want
    # an alignment with the fewest errors matches at least len(ref) - edit distance symbols
    for a, b in zip(hyps, refs):
        m = ref.aligned_matches(a, b)
        dist = kaldialign.edit_distance(b, a)["total"]
        assert len(b) - dist <= sum(m) <= len(b)


def test_aligned_matches_prefers_matches():
    # (w x) vs (x w): two substitutions or delete+match+insert, both 2 errors: a match wins
    h = k2.RaggedTensor([[5, 6]], dtype=torch.int32)
    r = k2.RaggedTensor([[6, 5]], dtype=torch.int32)
    assert sum(aligned_matches(h, r).tolist()) == 1


def _random_lists(rng: random.Random, num_utts: int):
    lists, scores = [], []
    for _ in range(num_utts):
        m = rng.choice([0, 1, 1, 2, 5, 9])
        base = _random_seq(rng, 6, 4)
        hyps = []
        for _ in range(m):  # variations of one sequence, as n-bests are
            h = [w if rng.random() > 0.3 else rng.randint(1, 4) for w in base]
            if rng.random() < 0.3:
                h.insert(rng.randint(0, len(h)), rng.randint(1, 4))
            if h and rng.random() < 0.3:
                h.pop(rng.randrange(len(h)))
            hyps.append(h)
        lists.append(hyps)
        scores.append([rng.choice([-math.inf]) if rng.random() < 0.1 else rng.uniform(-8, 0)
                       for _ in hyps])
    return lists, scores


@pytest.mark.parametrize("num_utts", [1, 7])
@pytest.mark.parametrize("seed", range(5))
def test_nbest_confidences_equal_reference(device, num_utts, seed):
    rng = random.Random(100 * num_utts + seed)
    lists, scores = _random_lists(rng, num_utts)
    seqs = k2.RaggedTensor([h for hs in lists for h in hs] or [[]], dtype=torch.int32,
                           device=device)
    flat_scores = [s for ss in scores for s in ss]
    if not flat_scores:
        seqs = k2.RaggedTensor(k2.ragged.create_ragged_shape2(
            torch.zeros(1, dtype=torch.int32), None, 0), torch.zeros(0, dtype=torch.int32)
        ).to(device)
    utt = torch.tensor([u for u, hs in enumerate(lists) for _ in hs], dtype=torch.int64,
                       device=device)
    starts = [sum(len(hs) for hs in lists[:u]) for u in range(num_utts)]
    settings = []
    for _ in range(3):  # several settings choose several hypotheses
        chosen = [rng.randrange(len(hs)) if hs else -1 for hs in lists]
        settings.append(chosen)
    score_t = torch.tensor(flat_scores, dtype=torch.float64, device=device)
    for scale in (1.0, 0.3):
        got = nbest_confidences(
            seqs, utt, num_utts, [score_t] * len(settings),
            [torch.tensor([starts[u] + c if c >= 0 else -1 for u, c in enumerate(ch)],
                          device=device) for ch in settings], scale=scale)
        for g, chosen in zip(got, settings):
            want = ref.nbest_confidences(lists, scores, chosen, scale)
            rows = g.tolist()
            assert len(rows) == num_utts
            for a, b in zip(rows, want):
                assert a == pytest.approx(b, abs=1e-12)
                assert all(0.0 <= x <= 1.0 for x in a)


def test_single_hypothesis_is_certain(device):
    seqs = k2.RaggedTensor([[3, 4, 5], []], dtype=torch.int32, device=device)
    utt = torch.tensor([0, 1], device=device)
    out = nbest_confidences(seqs, utt, 2, [torch.tensor([-3.0, -1.0], device=device)],
                            [torch.tensor([0, 1], device=device)])
    assert out[0].tolist() == [[1.0, 1.0, 1.0], []]


def test_list_posteriors_sum_to_one(device):
    s = torch.tensor([0.0, -1.0, -math.inf, 2.0, -math.inf], device=device)
    utt = torch.tensor([0, 0, 0, 1, 2], device=device)
    p = list_posteriors(s, utt, 4)
    assert p[:3].sum().item() == pytest.approx(1.0)
    assert p[3].item() == pytest.approx(1.0) and p[4].item() == 0.0


def test_bad_inputs():
    seqs = k2.RaggedTensor([[1]], dtype=torch.int32)
    with pytest.raises(ValueError, match="scale"):
        nbest_confidences(seqs, torch.tensor([0]), 1, [torch.zeros(1)], [torch.tensor([0])],
                          scale=0.0)
    with pytest.raises(ValueError, match="one entry per setting"):
        nbest_confidences(seqs, torch.tensor([0]), 1, [torch.zeros(1)], [])
