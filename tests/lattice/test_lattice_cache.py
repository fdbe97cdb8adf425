"""LatticeCache: a kept lattice is the very lattice a new search gives (arcs, scores, every
attribute, reports; on CUDA up to the numbering of states), keyed by graph object, settings and
log-prob contents; it is handed out as a copy, bounded by its budget, and its saved search
seconds are handed back once."""

from __future__ import annotations

import k2
import numpy as np
import pytest
import torch

from k2dec.lattice import LatticeCache, LatticeConfig, get_lattice
from k2dec.lattice.cache import lattice_nbytes
from k2dec.testing.graphs import peaked_log_probs
from tests.lattice.graphs import lattice_arc_frames, to_k2
from tests.reference.viterbi import random_graph


def _case(seed: int, device, ragged: bool = False, n: int | None = None):
    rng = np.random.default_rng(seed)
    vocab = int(rng.integers(2, 6))
    graph = random_graph(rng, int(rng.integers(2, 7)), vocab, num_words=6, ragged_aux=ragged)
    n = int(rng.integers(1, 5)) if n is None else n
    lengths = rng.integers(1, 9, size=n)
    log_probs = peaked_log_probs(rng, n, int(lengths.max()), vocab,
                                 scale=float(rng.uniform(1, 4)))
    fsa = to_k2(graph, device, ragged=ragged)
    fsa.graph_dest = fsa.arcs.values()[:, 1].clone()  # names the lattice states for _same
    return fsa, log_probs.to(device), torch.from_numpy(lengths)


def _same(a, b) -> bool:
    """Two LatticeResults hold the same lattices and reports: bit for bit on CPU; on CUDA up
    to the numbering of states (k2's CUDA search numbers the states of a frame in the order
    in which its threads insert them into a hash map, so two searches of the same input can
    number them differently)."""
    if a.reports != b.reports:
        return False
    if a.lattice.device.type == "cpu":
        return _bitwise_same(a.lattice, b.lattice)
    return _named_arcs(a.lattice) == _named_arcs(b.lattice)


def _named_arcs(lattice: k2.Fsa) -> list[list[tuple]]:
    """Per FSA, its sorted arcs with every attribute, each state named by (frame, state of the
    graph) instead of its number: equal exactly for lattices that differ only in how their
    states are numbered. Needs the ``graph_dest`` attribute (see ``_case``)."""
    out = []
    for i in range(lattice.shape[0]):
        fsa = lattice[i]
        named = sorted(fsa.named_tensor_attr(include_scores=True), key=lambda nv: nv[0])
        attrs = [v.tolist() for _, v in named]
        arcs = fsa.arcs.values()[:, :3].tolist()
        name = {0: (0, 0)}
        for (_, dst, _), frame, graph_dst in zip(arcs, lattice_arc_frames(fsa),
                                                fsa.graph_dest.tolist()):
            name[dst] = (frame + 1, graph_dst)
        out.append([n for n, _ in named] + sorted(
            (name[src], name[dst], label, *(values[j] for values in attrs))
            for j, (src, dst, label) in enumerate(arcs)
        ))
    return out


def _renumbered(lattice: k2.Fsa) -> k2.Fsa:
    """The same lattices with the states of every frame numbered in reverse order."""
    fsas = []
    for i in range(lattice.shape[0]):
        fsa = lattice[i]
        arcs = fsa.arcs.values()
        frame_of = {0: 0}
        for (_, dst), frame in zip(arcs[:, :2].tolist(), lattice_arc_frames(fsa)):
            frame_of[dst] = frame + 1
        by_frame: dict[int, list[int]] = {}
        for state in sorted(frame_of):
            by_frame.setdefault(frame_of[state], []).append(state)
        new = torch.empty(len(frame_of), dtype=torch.int32)
        for states in by_frame.values():
            new[torch.tensor(states)] = torch.tensor(states[::-1], dtype=torch.int32)
        new = new.to(arcs.device)
        moved = torch.cat([new[arcs[:, :2].long()], arcs[:, 2:]], dim=1)
        order = torch.sort(moved[:, 0], stable=True).indices
        fsas.append(k2.utils.fsa_from_unary_function_tensor(
            fsa, k2.Fsa(moved[order]).arcs, order.to(torch.int32)))
    return k2.create_fsa_vec(fsas)


def test_the_comparison_allows_only_other_state_numbers(device):
    """What _same accepts on CUDA: a lattice whose states are numbered differently, and no
    lattice with another score."""
    graph, log_probs, lengths = _case(9, device, n=3)
    lattice = get_lattice(log_probs, lengths, graph, LatticeConfig(output_beam=6.0)).lattice
    other = _renumbered(lattice)
    assert not _bitwise_same(lattice, other)  # some frame has several states
    assert _named_arcs(other) == _named_arcs(lattice)
    scores = other.scores.clone()
    scores[0] += 0.5
    other.scores = scores
    assert _named_arcs(other) != _named_arcs(lattice)


def _bitwise_same(la: k2.Fsa, lb: k2.Fsa) -> bool:
    if not torch.equal(la.arcs.values(), lb.arcs.values()):
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
