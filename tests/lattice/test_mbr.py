"""MBR decoding (sausages, consensus, confidences) against the plain-Python recursion and
against exhaustive minimum-expected-edit-distance search over every path of tiny lattices."""

from __future__ import annotations

import math

import k2
import numpy as np
import pytest
import torch

from k2dec.lattice.mbr import DELTA, MbrConfig, mbr_decode
from k2dec.lattice.posteriors import PosteriorConfig
from k2dec.testing.lattices import dags_to_vec, random_word_dag
from tests.lattice.graphs import hlg_lattices
from tests.reference.mbr import (
    exhaustive_mbr,
    expected_edit_distance,
    path_distribution,
    ref_acc_stats,
    ref_mbr,
)


def _best_words(dag) -> list[int]:
    fsa = k2.create_fsa_vec([dags_to_vec([dag])[0]])
    best = k2.shortest_path(fsa, use_double_scores=True)
    return [w for w in best.aux_labels.tolist() if w > 0]


def _check_against_reference(res, i, ref, tol=1e-9):
    assert res.words.tolist()[i] == ref["words"]
    assert res.confidences.tolist()[i] == pytest.approx(ref["confidences"], abs=tol)
    assert float(res.expected_errors[i]) == pytest.approx(ref["L"], abs=tol)
    assert int(res.iterations[i]) == ref["iterations"]
    assert bool(res.converged[i]) == ref["converged"]
    bins = res.sausages.tolist()[i]
    assert len(bins) == len(ref["gamma"])
    for q, entries in enumerate(bins, start=1):
        want = ref["gamma"][q]
        assert dict(entries) == pytest.approx(want, abs=tol), (i, q)
        posts = [p for _, p in entries]
        assert posts == sorted(posts, reverse=True)


@pytest.mark.parametrize("decode_mbr", [True, False])
def test_mbr_matches_reference_recursion(device, decode_mbr):
    """Many random lattices, batches of 1 and of several (with an empty lattice and a lattice
    without words), the default initial hypothesis (the best path)."""
    config = MbrConfig(decode_mbr=decode_mbr)
    changed = 0
    for seed in range(30):
        rng = np.random.default_rng(seed)
        num = int(rng.integers(1, 5))
        dags = [random_word_dag(rng, int(rng.integers(3, 8))) for _ in range(num)]
        if seed % 3 == 0:
            dags.insert(int(rng.integers(0, len(dags) + 1)), None)
        if seed % 5 == 0:
            dags.append((2, [(0, 1, 0, 0.5)]))  # only the final arc: no words
        res = mbr_decode(dags_to_vec(dags, device), config)
        assert res.words.dim0 == len(dags)
        for i, dag in enumerate(dags):
            if dag is None:
                assert not bool(res.has_path[i])
                assert res.words.tolist()[i] == [] and res.sausages.tolist()[i] == []
                assert math.isnan(float(res.expected_errors[i]))
                assert int(res.iterations[i]) == 0
                continue
            assert bool(res.has_path[i])
            hyp = _best_words(dag)
            ref = ref_mbr(*dag, hyp, decode_mbr=decode_mbr)
            _check_against_reference(res, i, ref)
            changed += ref["words"] != hyp
        # one utterance at a time gives the same (results do not depend on the batch)
        alone = [mbr_decode(dags_to_vec([d], device), config) for d in dags]
        for i, single in enumerate(alone):
            assert single.words.tolist()[0] == res.words.tolist()[i]
            assert single.sausages.words.tolist()[0] == res.sausages.words.tolist()[i]
            assert single.sausages.posteriors.values.tolist() == pytest.approx(
                res.sausages.posteriors[i].values.tolist(), abs=1e-12)
    if decode_mbr:
        assert changed > 0  # the consensus differed from the best path somewhere
    else:
        assert changed == 0


def test_mbr_given_hypotheses_and_groups(device):
    """Initial hypotheses given by the caller (any word ids, also words not in the lattice),
    and a memory budget small enough to put every utterance in its own group."""
    rng = np.random.default_rng(7)
    dags = [random_word_dag(rng, 6) for _ in range(5)]
    hyps = [[1], [], [4, 2, 2], [3, 1, 2, 3], [5]]
    for decode_mbr in (True, False):
        config = MbrConfig(decode_mbr=decode_mbr)
        big = mbr_decode(dags_to_vec(dags, device), config, hyps=hyps)
        small = mbr_decode(dags_to_vec(dags, device), MbrConfig(decode_mbr=decode_mbr,
                                                                 max_cells=1), hyps=hyps)
        for i, dag in enumerate(dags):
            ref = ref_mbr(*dag, hyps[i], decode_mbr=decode_mbr)
            _check_against_reference(big, i, ref)
            _check_against_reference(small, i, ref)
        if not decode_mbr:
            assert big.words.tolist() == hyps


def test_mbr_max_iterations(device):
    rng = np.random.default_rng(3)
    dags = [random_word_dag(rng, 7) for _ in range(12)]
    hyps = [[5, 5, 5, 5]] * len(dags)  # far from everything: needs several passes
    res = mbr_decode(dags_to_vec(dags, device), MbrConfig(max_iterations=1), hyps=hyps)
    assert int(res.iterations.max()) == 1
    for i, dag in enumerate(dags):
        ref = ref_mbr(*dag, hyps[i], max_iterations=1)
        _check_against_reference(res, i, ref)
    assert not bool(res.converged.all())


def test_mbr_properties_against_exhaustive_search(device):
    """What the recursion guarantees, checked by enumerating every path: bins sum to 1; the
    recursion's value is an upper bound on the true expected edit distance of any hypothesis;
    it does not grow over the iterations (up to DELTA per word)."""
    worse_than_optimum = 0
    for seed in range(40):
        rng = np.random.default_rng(100 + seed)
        dag = random_word_dag(rng, int(rng.integers(3, 8)), num_words=3)
        dist = path_distribution(*dag)
        vec = dags_to_vec([dag], device)
        res = mbr_decode(vec)
        words = res.words.tolist()[0]
        for entries in res.sausages.tolist()[0]:
            assert sum(p for _, p in entries) == pytest.approx(1.0, abs=1e-9)
        true_loss = expected_edit_distance(dist, words)
        bound = float(res.expected_errors[0])
        assert bound >= true_loss - 1e-9
        first = mbr_decode(vec, MbrConfig(decode_mbr=False))
        n_words = max(len(s) for s in dist) + 1
        assert bound <= float(first.expected_errors[0]) + 2 * n_words * DELTA + 1e-12
        # the bound holds for any hypothesis, e.g. every word sequence of the lattice
        for seq in list(dist)[:6]:
            stats = mbr_decode(vec, MbrConfig(decode_mbr=False), hyps=[list(seq)])
            assert float(stats.expected_errors[0]) >= expected_edit_distance(dist, seq) - 1e-9
        best, _ = exhaustive_mbr(dist)
        assert true_loss >= best - 1e-9
        worse_than_optimum += true_loss > best + 1e-9
    # an approximation, but not a poor one on these lattices
    assert worse_than_optimum <= 10


def test_mbr_exact_on_one_word_lattices(device):
    """With at most one word per path the recursion is exact: the bound equals the expected
    edit distance and the result is the exhaustive minimum."""
    for seed in range(30):
        rng = np.random.default_rng(200 + seed)
        dag = random_word_dag(rng, int(rng.integers(3, 7)), num_words=4, one_word=True)
        dist = path_distribution(*dag)
        for hyps in (None, [[]], [[4, 4]]):
            res = mbr_decode(dags_to_vec([dag], device), hyps=hyps)
            words = res.words.tolist()[0]
            loss = expected_edit_distance(dist, words)
            best, argmins = exhaustive_mbr(dist)
            assert loss == pytest.approx(best, abs=1e-9)
            if len(argmins) == 1:
                assert tuple(words) == argmins[0]
            assert float(res.expected_errors[0]) == pytest.approx(loss, abs=1e-9)


def test_single_path_lattice(device):
    dag = (4, [(0, 1, 2, -0.5), (1, 2, 0, -0.1), (2, 3, 0, 0.0)])
    res = mbr_decode(dags_to_vec([dag, dag], device))
    assert res.words.tolist() == [[2], [2]]
    assert res.confidences.tolist() == [[1.0], [1.0]]
    assert res.expected_errors.tolist() == [0.0, 0.0]
    assert res.sausages.tolist()[0] == [[(0, 1.0)], [(2, 1.0)], [(0, 1.0)]]


@pytest.mark.parametrize("ragged", [False, True])
def test_mbr_on_dense_lattices(device, ragged):
    """Lattices from get_lattice (every arc a frame, words on few arcs; ragged word labels
    spelled out), with an acoustic scale: the recursion on k2's expansion of the lattice equals
    the reference, and the guarantees hold against every path."""
    lattice = hlg_lattices(device, 5, n=5, ragged=ragged)[0].lattice
    post = PosteriorConfig(acoustic_scale=0.5, lm_scale=1.0)
    res = mbr_decode(lattice, MbrConfig(posterior=post))
    expanded = k2.expand_ragged_attributes(lattice) if ragged else lattice
    for i in range(lattice.shape[0]):
        lat = expanded[i].to("cpu")
        am = lat.scores.double() - lat.lm_scores.double()
        scaled = (0.5 * am + lat.lm_scores.double()).tolist()
        aux = lat.aux_labels.tolist()
        arcs = [(s, d, max(a, 0), sc)
                for (s, d, _), a, sc in zip(lat.arcs.values()[:, :3].tolist(), aux, scaled)]
        dag = (lat.shape[0], arcs)
        paths = k2.shortest_path(k2.create_fsa_vec([_rescored(lat, scaled)]), True)
        hyp = [w for w in paths.aux_labels.tolist() if w > 0]
        ref = ref_mbr(*dag, hyp)
        _check_against_reference(res, i, ref, tol=1e-6)
        dist = path_distribution(*dag)
        assert float(res.expected_errors[i]) >= expected_edit_distance(
            dist, res.words.tolist()[i]) - 1e-6


def _rescored(lat, scaled):
    out = lat.clone()
    out.scores = torch.tensor(scaled, dtype=torch.float32)
    return out


def test_mbr_bad_inputs(device):
    vec = dags_to_vec([(2, [(0, 1, 0, 0.0)])], device)
    with pytest.raises(TypeError, match="MbrConfig"):
        mbr_decode(vec, config=PosteriorConfig())
    with pytest.raises(ValueError, match="max_iterations"):
        MbrConfig(max_iterations=0)
    with pytest.raises(ValueError, match="max_cells"):
        MbrConfig(max_cells=0)
    with pytest.raises(TypeError, match="posterior"):
        MbrConfig(posterior=1.0)
    with pytest.raises(ValueError, match="2 entries"):
        mbr_decode(vec, hyps=[[1], [2]])
    with pytest.raises(ValueError, match="word ids > 0"):
        mbr_decode(vec, hyps=[[0]])
    with pytest.raises(ValueError, match="FsaVec"):
        mbr_decode(vec[0])
    with pytest.raises(ValueError, match="no 'words' attribute"):
        mbr_decode(vec, attribute="words")
    with pytest.raises(TypeError, match="k2.Fsa"):
        mbr_decode(torch.zeros(3))


def test_reference_recursion_sanity():
    """The reference itself: a two-path lattice, checked by hand."""
    # paths: "1" with p = 0.75, "2" with p = 0.25
    s = math.log(3.0)
    dag = (3, [(0, 1, 1, s), (0, 1, 2, 0.0), (1, 2, 0, 0.0)])
    gamma, big_l = ref_acc_stats(*dag, [1])
    assert gamma[2] == pytest.approx({1: 0.75, 2: 0.25})
    assert gamma[1] == pytest.approx({0: 1.0}) and gamma[3] == pytest.approx({0: 1.0})
    assert big_l == pytest.approx(0.25)
