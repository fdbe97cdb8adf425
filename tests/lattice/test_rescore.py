"""Whole-lattice rescoring and lattice weight sweeps against path-enumeration references."""

from __future__ import annotations

import k2
import numpy as np
import pytest
import torch

from k2dec.lattice import arcs_per_fsa
from k2dec.lattice.rescore import (
    RescoreConfig,
    RescoreStatus,
    rescore_with_whole_lattice,
    split_scores,
    sweep_lattice_weights,
)
from tests.lattice.graphs import G_ARCS, bigram_G, hlg_lattices
from tests.reference.lattice_rescore import (
    g_score,
    lattice_paths,
    levenshtein,
    rescore_reference,
    weighted_best,
)


def _paths(lattice, i):
    lat = lattice[i].to("cpu")
    arcs = lat.arcs.values()[:, :3].tolist()
    aux = lat.aux_labels.tolist()
    return lattice_paths(arcs, lat.scores.double().tolist(), lat.lm_scores.double().tolist(), aux)


@pytest.mark.parametrize("ragged", [False, True])
def test_rescore_matches_path_enumeration(device, ragged):
    G = bigram_G(device)
    checked = two_words = 0
    for seed in range(4):
        result, _ = hlg_lattices(device, seed, ragged=ragged)
        lattice = result.lattice
        before = (lattice.scores.clone(), lattice.lm_scores.clone(), lattice.labels.clone())
        res = rescore_with_whole_lattice(result, G, RescoreConfig(lm_scales=(0.5, 1.0, 2.0)))
        assert res.status is RescoreStatus.OK
        assert all(u.status is RescoreStatus.OK and not u.reason for u in res.utterances)
        assert [s.lm_scale for s in res.per_scale] == [0.5, 1.0, 2.0]
        for i in range(lattice.shape[0]):
            paths = _paths(lattice, i)
            assert paths
            for sr in res.per_scale:
                ref_total, ref_words = rescore_reference(paths, G_ARCS, sr.lm_scale)
                h = sr.hypotheses[i]
                assert h.score == pytest.approx(ref_total, abs=1e-4), (seed, i, sr.lm_scale)
                match = [p for p in paths if [w for w in p[2] if w > 0] == list(h.words)
                         and am_total(p, sr.lm_scale) == pytest.approx(ref_total, abs=1e-4)]
                assert match, (seed, i)  # the words of a best path (== reference unless a tie)
                # tokens and their frames come from the frame-consuming arcs only
                labels = match[0][3]
                tokens = [x for t, x in enumerate(labels)
                          if x > 0 and (t == 0 or labels[t - 1] != x)]
                if len(match) == 1:
                    assert list(h.tokens) == tokens
                two_words += 3 in h.words
                assert all(f < len(labels) - 1 for f in h.token_frames + h.word_frames)
                assert list(h.word_frames) == sorted(h.word_frames)
                checked += 1
        # the caller's lattice is untouched
        assert torch.equal(lattice.scores, before[0])
        assert torch.equal(lattice.lm_scores, before[1])
        assert torch.equal(lattice.labels, before[2])
    assert checked == 4 * 4 * 3
    if ragged:  # the two-word arcs were exercised
        assert two_words > 0


def am_total(path, lm_scale):
    return path[0] / lm_scale + g_score(G_ARCS, path[2])


def test_rescore_prunes_before_composing_and_reports(device):
    result, _ = hlg_lattices(device, seed=1, output_beam=8.0)
    G = bigram_G(device)
    full = rescore_with_whole_lattice(result, G, RescoreConfig(lm_scales=(1.0,)))
    arcs = arcs_per_fsa(k2.connect(k2.invert(result.lattice))).tolist()
    big = max(range(len(arcs)), key=arcs.__getitem__)
    cap = arcs[big] // 2
    cfg = RescoreConfig(lm_scales=(1.0,), max_input_arcs=cap, first_arcs=cap)
    pruned = rescore_with_whole_lattice(result, G, cfg)
    assert pruned.status is RescoreStatus.PRUNED
    for u, rep in enumerate(pruned.utterances):
        if arcs[u] > cap:
            assert rep.status is RescoreStatus.PRUNED and rep.prune.arcs_after <= cap
            assert f"lattice pruned from {arcs[u]} to {rep.prune.arcs_after} arcs" in rep.reason
            assert pruned.notes()[u] == rep.reason
        else:
            assert rep.status is RescoreStatus.OK and rep.reason == ""
    # beam pruning keeps each utterance's best path: its 1best is that of the full lattice
    # when the LM does not change the ranking much; at least the scores never improve
    for h, f in zip(pruned.per_scale[0].hypotheses, full.per_scale[0].hypotheses):
        assert h.score <= f.score + 1e-4
    # a composition budget nothing fits in: every utterance fails, with the reason
    failed = rescore_with_whole_lattice(result, G, RescoreConfig(max_rescored_arcs=1))
    assert failed.status is RescoreStatus.FAILED and failed.per_scale == ()
    assert failed.lattice is None
    assert all(u.reason.startswith("whole-lattice rescoring failed") and
               "max_rescored_arcs=1" in u.reason for u in failed.utterances)


def test_rescore_grows_the_lattice_while_the_composition_fits(device):
    """first_arcs tiny: the lattice doubles round by round until all of it is composed (a
    generous budget), giving exactly the unpruned result."""
    result, _ = hlg_lattices(device, seed=2, output_beam=8.0)
    G = bigram_G(device)
    full = rescore_with_whole_lattice(result, G, RescoreConfig(lm_scales=(0.5,)))
    grown = rescore_with_whole_lattice(result, G, RescoreConfig(lm_scales=(0.5,), first_arcs=2))
    assert grown.status is RescoreStatus.OK
    assert [h.words for h in grown.per_scale[0].hypotheses] == \
        [h.words for h in full.per_scale[0].hypotheses]
    assert [u.rescored_arcs for u in grown.utterances] == \
        [u.rescored_arcs for u in full.utterances]


def test_rescore_bad_inputs(device):
    result, HLG = hlg_lattices(device)
    G = bigram_G(device)
    no_lm = result.lattice.clone()
    del no_lm.lm_scores
    with pytest.raises(ValueError, match="lattice has no lm_scores"):
        rescore_with_whole_lattice(no_lm, G)
    G2 = G.clone()
    del G2.lm_scores
    with pytest.raises(ValueError, match="G has no lm_scores"):
        rescore_with_whole_lattice(result, G2)
    with pytest.raises(TypeError, match="lattice must be a LatticeResult or k2.Fsa"):
        rescore_with_whole_lattice([result.lattice], G)
    with pytest.raises(ValueError, match="lm_scales must be"):
        RescoreConfig(lm_scales=(0.0,))
    with pytest.raises(ValueError, match=r"RescoreConfig.max_rescored_arcs must be an int in "
                                         r"\[1, 10000000\], got 0"):
        RescoreConfig(max_rescored_arcs=0)
    with pytest.raises(ValueError, match="FsaVec"):
        rescore_with_whole_lattice(result.lattice[0], G)


@pytest.mark.parametrize("ragged", [False, True])
def test_sweep_matches_path_enumeration(device, ragged):
    result, _ = hlg_lattices(device, seed=3, n=5, ragged=ragged)
    lattice = result.lattice
    rng = np.random.default_rng(0)
    refs = [list(rng.integers(1, 5, size=int(rng.integers(1, 4)))) for _ in range(5)]
    grid = dict(acoustic_scales=(0.5, 1.0), lm_scales=(0.0, 1.0, 3.0),
                word_insertion_penalties=(-1.0, 0.0, 2.0))
    res = sweep_lattice_weights(result, refs, **grid)
    assert len(res.points) == 2 * 3 * 3
    all_paths = [_paths(lattice, i) for i in range(5)]
    for p in res.points:
        errors = 0
        for ref, paths in zip(refs, all_paths):
            _, words = weighted_best(paths, p.acoustic_scale, p.lm_scale,
                                     p.word_insertion_penalty)
            errors += levenshtein(ref, words)
        assert p.errors == errors, p
        assert p.ref_words == sum(len(r) for r in refs)
    assert res.best.errors == min(p.errors for p in res.points)
    assert len({p.errors for p in res.points}) > 1  # the grid matters for this data
    am, lm = split_scores(result)
    assert torch.allclose(am + lm, lattice.scores)


def test_sweep_bad_inputs(device):
    result, _ = hlg_lattices(device, n=2)
    with pytest.raises(ValueError, match="references has 1 entries but the lattice has 2"):
        sweep_lattice_weights(result, [[1]])
    with pytest.raises(ValueError, match="lm_scales must be a non-empty"):
        sweep_lattice_weights(result, [[1], [2]], lm_scales=())
