"""LatticeCache: a kept lattice is the very lattice a new search gives (arcs, scores, every
attribute, reports), keyed by graph object, settings and log-prob contents; it is handed out
as a copy, bounded by its budget, and its saved search seconds are handed back once."""

from __future__ import annotations

import k2
import numpy as np
import pytest
import torch

from k2dec.lattice import LatticeCache, LatticeConfig, get_lattice
from k2dec.lattice.cache import lattice_nbytes
from k2dec.testing.graphs import peaked_log_probs
from tests.lattice.graphs import to_k2
from tests.reference.viterbi import random_graph


def _case(seed: int, device, ragged: bool = False, n: int | None = None):
    rng = np.random.default_rng(seed)
    vocab = int(rng.integers(2, 6))
    graph = random_graph(rng, int(rng.integers(2, 7)), vocab, num_words=6, ragged_aux=ragged)
    n = int(rng.integers(1, 5)) if n is None else n
    lengths = rng.integers(1, 9, size=n)
    log_probs = peaked_log_probs(rng, n, int(lengths.max()), vocab,
                                 scale=float(rng.uniform(1, 4)))
    return to_k2(graph, device, ragged=ragged), log_probs.to(device), torch.from_numpy(lengths)


def _same(a, b) -> bool:
    """Two LatticeResults hold the same lattices (bit for bit) and reports."""
    la, lb = a.lattice, b.lattice
    if a.reports != b.reports or not torch.equal(la.arcs.values(), lb.arcs.values()):
        return False
    if not torch.equal(la.arcs.shape().row_splits(1), lb.arcs.shape().row_splits(1)):
        return False
    names_a = dict(la.named_tensor_attr(include_scores=True))
    names_b = dict(lb.named_tensor_attr(include_scores=True))
    if names_a.keys() != names_b.keys():
        return False
    for name, va in names_a.items():
        vb = names_b[name]
        if isinstance(va, torch.Tensor):
            if not torch.equal(va, vb):
                return False
        elif va.tolist() != vb.tolist():
            return False
    return True


@pytest.mark.parametrize("ragged", [False, True])
def test_kept_lattices_equal_a_new_search(device, ragged):
    config = LatticeConfig(output_beam=6.0)
    for seed in range(25):
        graph, log_probs, lengths = _case(seed, device, ragged, n=1 if seed < 5 else None)
        cache = LatticeCache(64)
        fresh = get_lattice(log_probs, lengths, graph, config)
        first = cache.get_lattice(log_probs, lengths, graph, config)
        second = cache.get_lattice(log_probs.clone(), lengths.clone(), graph, config)
        assert (cache.hits, cache.misses) == (1, 1), seed
        assert _same(fresh, first) and _same(fresh, second), seed


def test_other_inputs_settings_or_graphs_are_searched(device):
    graph, log_probs, lengths = _case(3, device, n=3)
    lengths = torch.full_like(lengths, log_probs.size(1))
    assert log_probs.size(1) >= 2
    other_graph = to_k2(random_graph(np.random.default_rng(99), 4, log_probs.size(2),
                                     num_words=6), device)
    config = LatticeConfig(output_beam=6.0)
    cache = LatticeCache(64)
    cache.get_lattice(log_probs, lengths, graph, config)
    changed = log_probs.clone()
    changed[0, 0, 0] += 1e-3
    cache.get_lattice(changed, lengths, graph, config)  # other log-probs
    shorter = lengths.clone()
    shorter[0] -= 1
    cache.get_lattice(log_probs, shorter, graph, config)  # other lengths
    cache.get_lattice(log_probs, lengths, graph, LatticeConfig(output_beam=5.0))
    cache.get_lattice(log_probs, lengths, other_graph, config)
    cache.get_lattice(log_probs, lengths, graph, config, subsampling_factor=2)
    assert (cache.hits, cache.misses) == (0, 6)
    assert _same(cache.get_lattice(changed, lengths, graph, config),
                 get_lattice(changed, lengths, graph, config))
    assert cache.hits == 1


def test_handed_out_lattices_are_copies(device):
    graph, log_probs, lengths = _case(5, device, n=2)
    cache = LatticeCache(64)
    fresh = get_lattice(log_probs, lengths, graph)
    first = cache.get_lattice(log_probs, lengths, graph)
    first.lattice.scores.zero_()
    first.lattice.aux_labels.zero_()
    assert _same(cache.get_lattice(log_probs, lengths, graph), fresh)


def test_saved_seconds_are_handed_back_once(device):
    graph, log_probs, lengths = _case(7, device, n=3)
    cache = LatticeCache(64)
    cache.get_lattice(log_probs, lengths, graph)
    assert cache.take_saved_seconds() == 0.0
    cache.get_lattice(log_probs, lengths, graph)
    cache.get_lattice(log_probs, lengths, graph)
    saved = cache.take_saved_seconds()
    assert saved > 0.0 and cache.take_saved_seconds() == 0.0


def test_the_budget_bounds_what_is_kept(device):
    cases = [_case(20 + i, device, n=3) for i in range(6)]
    sizes = [lattice_nbytes(get_lattice(lp, ln, g).lattice) for g, lp, ln in cases]
    assert min(sizes) > 0
    cache = LatticeCache((sizes[0] + sizes[1]) / 2**20)  # room for the first two
    for g, lp, ln in cases:
        cache.get_lattice(lp, ln, g)
    assert 0 < cache.used_bytes <= cache.max_bytes
    kept = len(cache._entries)
    assert 2 <= kept < len(cases)
    for g, lp, ln in cases:  # hits for the kept ones only, the same lattices for all
        assert _same(cache.get_lattice(lp, ln, g), get_lattice(lp, ln, g))
    assert cache.hits == kept and cache.misses == 2 * len(cases) - kept
    cache.clear()
    assert cache.used_bytes == 0 and not cache._entries
    off = LatticeCache(0)
    g, lp, ln = cases[0]
    off.get_lattice(lp, ln, g)
    off.get_lattice(lp, ln, g)
    assert (off.hits, off.used_bytes) == (0, 0)


def test_a_graph_is_held_while_its_lattices_are_kept(device):
    """Keys use the graph's id: the entry keeps the graph alive, so a new graph never gets
    the id of one with kept lattices."""
    graph, log_probs, lengths = _case(11, device, n=2)
    cache = LatticeCache(64)
    cache.get_lattice(log_probs, lengths, graph)
    key = id(graph)
    del graph
    assert any(e.graph is not None and id(e.graph) == key for e in cache._entries.values())


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf"), "1"])
def test_bad_budgets_are_refused(bad):
    with pytest.raises(ValueError, match="max_mb must be a finite number >= 0"):
        LatticeCache(bad)


def test_lattice_nbytes_counts_ragged_attributes():
    fsa = k2.Fsa.from_str("0 1 1 0.5\n1 2 -1 0\n2")
    plain = lattice_nbytes(fsa)
    fsa.aux_labels = k2.RaggedTensor([[1], [2, 3]])
    assert lattice_nbytes(fsa) > plain > 0
