"""Multi-pass rescoring: with a budget of every path it equals full rescoring exactly; the
matching statistics recover exact scores of a left-context model."""

from __future__ import annotations

import math

import k2
import pytest
import torch

from k2dec.nbest import Nbest
from k2dec.nbest.multipass import (
    LinearGaussianPredictor,
    MultiPassConfig,
    full_rescore,
    matching_features,
    multi_pass_rescore,
)
from k2dec.testing.lattices import make_lattices


class BigramScorer:
    """A deterministic left-context-1 "neural" model: score(prev, tok) from a random table."""

    def __init__(self, vocab: int, seed: int = 0):
        g = torch.Generator().manual_seed(seed)
        self.table = -torch.rand(vocab + 2, vocab + 2, generator=g, dtype=torch.float64) * 3
        self.eos = vocab + 1
        self.calls = 0
        self.paths_scored = 0

    def score_seq(self, seq: list[int]) -> list[float]:
        prev, out = 0, []
        for t in seq + [self.eos]:
            out.append(float(self.table[prev, t]))
            prev = t
        return out

    def __call__(self, key_seqs: k2.RaggedTensor, path_to_utt: torch.Tensor) -> k2.RaggedTensor:
        self.calls += 1
        self.paths_scored += key_seqs.dim0
        rows = [self.score_seq(s) for s in key_seqs.tolist()]
        return k2.RaggedTensor(rows, dtype=torch.float32)


def _topk(tiny_hlg, seed, num_utts=3, k=12):
    lang, HLG, _ = tiny_hlg
    lattice = make_lattices(HLG, num_utts, 6, seed, torch.device("cpu"), lang.max_token_id + 1)
    nbest = Nbest.from_lattice(lattice, num_paths=40).intersect(lattice)
    top = nbest.top_k(k)
    base = top.nbest.tot_scores().values
    return lang, top, base


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("first_k, batch_k", [(1, 1), (2, 3), (5, 5)])
def test_budget_of_all_paths_equals_full_rescoring(tiny_hlg, seed, first_k, batch_k):
    lang, top, base = _topk(tiny_hlg, seed)
    vocab = len(lang.word_table)
    full = full_rescore(top, base, BigramScorer(vocab, seed), rnn_lm_scale=0.7)
    cfg = MultiPassConfig(first_k=first_k, batch_k=batch_k, max_evaluations=None,
                          stop_sigmas=math.inf, lm_scale=0.7)
    scorer = BigramScorer(vocab, seed)
    multi = multi_pass_rescore(top, base, scorer, cfg)
    assert multi.best.tolist() == full.best.tolist()
    assert multi.hyps == full.hyps
    assert torch.allclose(multi.scores, full.scores, atol=1e-9)
    real = (~top.padded).sum(1)
    assert multi.evaluations.tolist() == real.tolist()
    assert scorer.paths_scored == int(real.sum()), "no path may be scored twice"


def test_full_rescore_against_python_loop(tiny_hlg):
    lang, top, base = _topk(tiny_hlg, 3)
    scorer = BigramScorer(len(lang.word_table), 1)
    res = full_rescore(top, base, scorer, rnn_lm_scale=0.5)
    toks = top.nbest.token_seqs().tolist()  # what a neural model scores
    k = top.padded.shape[1]
    for u in range(top.padded.shape[0]):
        totals = [
            base[u * k + j].item() + 0.5 * sum(scorer.score_seq(toks[u * k + j]))
            if not top.padded[u, j] else -math.inf for j in range(k)
        ]
        j = max(range(k), key=lambda i: (totals[i], -i))
        assert res.best[u].item() == u * k + j
        assert res.scores[u].item() == pytest.approx(totals[j])


def test_budget_limits_evaluations(tiny_hlg):
    lang, top, base = _topk(tiny_hlg, 1, k=15)
    scorer = BigramScorer(len(lang.word_table), 2)
    cfg = MultiPassConfig(first_k=2, batch_k=2, max_evaluations=5, stop_sigmas=math.inf)
    res = multi_pass_rescore(top, base, scorer, cfg)
    real = (~top.padded).sum(1)
    assert res.evaluations.tolist() == torch.minimum(real, torch.tensor(5)).tolist()
    assert res.passes >= 2
    # an early stop with a tight sigma threshold never evaluates more than the budget
    res2 = multi_pass_rescore(top, base, BigramScorer(len(lang.word_table), 2),
                              MultiPassConfig(first_k=2, batch_k=2, stop_sigmas=0.5))
    assert (res2.evaluations >= torch.minimum(real, torch.tensor(2))).all()
    assert (res2.evaluations <= real).all()


def test_matching_stats_recover_a_bigram_model(tiny_hlg):
    lang, top, base = _topk(tiny_hlg, 4, k=12)
    scorer = BigramScorer(len(lang.word_table), 5)
    nbest = top.nbest
    flat = nbest.token_seqs().tolist()
    exact = torch.tensor([x for s in flat for x in scorer.score_seq(s)], dtype=torch.float64)
    k = top.padded.shape[1]
    rescored = torch.zeros(nbest.num_paths, dtype=torch.bool)
    rescored.view(-1, k)[:, :6] = True
    feats = matching_features(nbest, exact, rescored, max_order=5)
    mean, var, counts, order = feats.unbind(1)
    assert counts.min() >= 0
    # query positions matched with a context of >= 2 tokens (token and its predecessor)
    # see only key positions with the same bigram: the mean is exact and the variance zero
    seqs_per_path = torch.tensor([len(s) + 1 for s in flat])
    query = torch.repeat_interleave(~rescored, seqs_per_path)
    sure = (order >= 2) & query
    assert sure.any()
    assert torch.allclose(mean[sure], exact[sure], atol=1e-5)
    # (k2 accumulates in float32: variances of equal values come out within ~1e-5 of 0)
    assert torch.allclose(var[sure], torch.zeros_like(var[sure]), atol=1e-5)


def test_linear_predictor_learns(tiny_hlg):
    lang, top, base = _topk(tiny_hlg, 0, k=12)
    scorer = BigramScorer(len(lang.word_table), 3)
    nbest = top.nbest
    flat = nbest.token_seqs().tolist()
    exact = torch.tensor([x for s in flat for x in scorer.score_seq(s)], dtype=torch.float64)
    rescored = torch.zeros(nbest.num_paths, dtype=torch.bool)
    rescored.view(-1, 12)[:, :4] = True
    feats = matching_features(nbest, exact, rescored, max_order=5)
    pred = LinearGaussianPredictor()
    losses = pred.fit(feats, exact, steps=100)
    assert losses[-1] < losses[0]


def test_config_validation():
    for kwargs in ({"first_k": 0}, {"batch_k": 0}, {"max_evaluations": 0},
                   {"stop_sigmas": 0.0}, {"max_order": 0}):
        with pytest.raises(ValueError):
            MultiPassConfig(**kwargs)
