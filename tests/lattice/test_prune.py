"""prune_lattice against brute force: the paths of the pruned lattice are exactly the paths of
the original whose every arc lies on some path within the reported beam of the best one."""

from __future__ import annotations

import math

import k2
import pytest
import torch

from k2dec.lattice import prune_lattice
from k2dec.testing.lattices import make_lattices
from tests.nbest.conftest import tiny_hlg  # noqa: F401 (fixture)
from tests.reference.lattice_paths import enumerate_paths


def _gaps(paths) -> dict[int, float]:
    """Arc index -> how far the best path through it is below the best path."""
    best = max(p.score for p in paths)
    through: dict[int, float] = {}
    for p in paths:
        for a in p.arcs:
            through[a] = max(through.get(a, -math.inf), p.score)
    return {a: best - s for a, s in through.items()}


def _path_set(fsa: k2.Fsa, keep=None) -> set:
    paths = enumerate_paths(fsa)
    gaps = _gaps(paths) if paths else {}
    return {(p.labels, p.words, round(p.score, 4)) for p in paths
            if keep is None or all(gaps[a] <= keep for a in p.arcs)}


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("max_arcs", [1, 12, 40, 10_000])
def test_max_arcs_keeps_the_paths_within_the_reported_beam(tiny_hlg, device, seed,  # noqa: F811
                                                           max_arcs):
    lang, HLG, _ = tiny_hlg
    lattice = make_lattices(HLG, 3, 5, seed, device, lang.max_token_id + 1)
    before = lattice.scores.clone()
    pruned, reports = prune_lattice(lattice, max_arcs)
    assert torch.equal(lattice.scores, before)
    assert len(reports) == 3
    for u, rep in enumerate(reports):
        orig, new = lattice[u], pruned[u]
        live = sum(1 for a in _gaps(enumerate_paths(orig)))
        assert rep.arcs_before == orig.num_arcs and rep.arcs_after == new.num_arcs
        if rep.pruned:
            assert rep.arcs_after < live
            # at most max_arcs arcs, unless the equally best paths alone have more
            best_arcs = {a for a, g in _gaps(enumerate_paths(orig)).items() if g == 0}
            assert rep.arcs_after <= max(max_arcs, len(best_arcs))
            # (arcs exactly at the cut-off are dropped: compare up to float noise)
            assert _path_set(orig, keep=rep.beam - 1e-6) <= _path_set(new) \
                <= _path_set(orig, keep=rep.beam + 1e-6)
            assert rep.describe().startswith(f"lattice pruned from {rep.arcs_before} to")
        else:  # untouched, or only the arcs on no complete path dropped
            assert new.num_arcs in (orig.num_arcs, live) and max_arcs >= live
            assert _path_set(new) == _path_set(orig)
            assert rep.describe() == ""
        # the best path survives with its words and attributes
        b0 = k2.shortest_path(k2.create_fsa_vec([orig]), True)
        b1 = k2.shortest_path(k2.create_fsa_vec([new]), True)
        assert float(b1.scores.sum()) == pytest.approx(float(b0.scores.sum()), abs=1e-5)
        assert torch.equal(b1.lm_scores, b0.lm_scores)


def test_beam_and_batch_independence(tiny_hlg, device):  # noqa: F811
    lang, HLG, _ = tiny_hlg
    lattice = make_lattices(HLG, 4, 6, 7, device, lang.max_token_id + 1)
    pruned, reports = prune_lattice(lattice, beam=1.5)
    for u in range(4):
        assert _path_set(lattice[u], keep=1.5 - 1e-6) <= _path_set(pruned[u]) \
            <= _path_set(lattice[u], keep=1.5 + 1e-6)
        alone, rep = prune_lattice(k2.create_fsa_vec([lattice[u]]), beam=1.5)
        assert rep[0] == reports[u]
        assert torch.equal(alone[0].arcs.values(), pruned[u].arcs.values())
    per_utt = [5, 1000, 20, 1]
    mixed, reps = prune_lattice(lattice, per_utt)
    for u in range(4):
        alone, rep = prune_lattice(k2.create_fsa_vec([lattice[u]]), per_utt[u])
        assert rep[0] == reps[u]
        assert torch.equal(alone[0].arcs.values(), mixed[u].arcs.values())


def test_connect_and_bad_arguments(tiny_hlg, device):  # noqa: F811
    lang, HLG, _ = tiny_hlg
    lattice = make_lattices(HLG, 2, 5, 1, device, lang.max_token_id + 1)
    same, reports = prune_lattice(lattice)
    assert same is lattice and not any(r.pruned for r in reports)
    connected, reports = prune_lattice(lattice, connect=True)
    assert not any(r.pruned for r in reports)
    for u in range(2):
        assert _path_set(connected[u]) == _path_set(lattice[u])
        assert connected[u].num_arcs <= lattice[u].num_arcs
    with pytest.raises(ValueError, match="max_arcs must be >= 1"):
        prune_lattice(lattice, 0)
    with pytest.raises(ValueError, match="max_arcs has 1 bounds for 2 utterances"):
        prune_lattice(lattice, [3])
    with pytest.raises(TypeError, match="max_arcs must be an int"):
        prune_lattice(lattice, 2.5)
    with pytest.raises(ValueError, match="beam must be > 0"):
        prune_lattice(lattice, beam=0.0)
    with pytest.raises(TypeError, match="FsaVec"):
        prune_lattice(lattice[0], 3)
