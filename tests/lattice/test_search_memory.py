"""The memory bound of the lattice search on CPU: every ``k2.intersect_dense_pruned`` call gets at
most ``CPU_STATES_PER_CALL // max_active_states`` utterances (one at least, at most
``CPU_GROUP_SIZE``), on the first pass and on every retry with its scaled settings, and the
lattices, reports and hypotheses are those of one call per pass."""

from __future__ import annotations

import k2
import numpy as np
import pytest
import torch

import k2dec.lattice.search as search
from k2dec.lattice import LatticeConfig, LatticeStatus, get_lattice, one_best_decoding
from k2dec.lattice.search import CPU_GROUP_SIZE, CPU_STATES_PER_CALL, cpu_group_size
from k2dec.testing.graphs import peaked_log_probs
from tests.lattice.graphs import to_k2
from tests.reference.dead_end import DEAD_END
from tests.reference.viterbi import random_graph

CPU = torch.device("cpu")


def test_group_size_follows_the_state_budget():
    assert CPU_STATES_PER_CALL == 10_000 and CPU_GROUP_SIZE == 4
    assert cpu_group_size(10_000) == 1  # icefall's default: one utterance per call
    assert cpu_group_size(5_000) == 2
    assert cpu_group_size(3_000) == 3
    assert cpu_group_size(2_500) == 4
    assert cpu_group_size(7) == 4  # never more than CPU_GROUP_SIZE
    assert cpu_group_size(1_000_000) == 1  # never fewer than one


def _spy(monkeypatch) -> list[tuple[int, int]]:
    """``(utterances, max_active_states)`` of every k2.intersect_dense_pruned call."""
    calls: list[tuple[int, int]] = []
    real = k2.intersect_dense_pruned

    def spy(graph, dense, search_beam, output_beam, min_active_states, max_active_states,
            **kwargs):
        calls.append((dense.dim0(), max_active_states))
        return real(graph, dense, search_beam, output_beam, min_active_states,
                    max_active_states, **kwargs)

    monkeypatch.setattr(k2, "intersect_dense_pruned", spy)
    return calls


def _dead_end_batch(n: int, rng) -> tuple[k2.Fsa, torch.Tensor, torch.Tensor, list[int]]:
    """``n`` utterances through the dead-end graph: a third prefer the complete path, the
    others its dead end (they fail at narrow beams and are retried)."""
    graph = k2.Fsa.from_str(DEAD_END, acceptor=False)
    lengths = torch.from_numpy(rng.integers(21, 41, size=n))
    lp = torch.full((n, int(lengths.max()), 3), -10.0)
    lp[:, :, 1] = 0.0
    lp[:, :, 2] = -3.0
    good = list(range(0, n, 3))
    lp[good, :, 2] = 0.0
    lp[good, :, 1] = -3.0
    return graph, lp, lengths, good


def _run(cases) -> list:
    out = []
    for graph, lp, lens, config in cases:
        res = get_lattice(lp, lens, graph, config)
        n = lens.numel()
        arcs = [res.lattice[i].num_arcs for i in range(n)]
        scores = res.lattice.get_tot_scores(True, False).tolist()
        out.append((res.reports, arcs, scores, one_best_decoding(lp, lens, graph, config)))
    return out


@pytest.mark.parametrize("seed", range(4))
def test_every_call_stays_within_the_state_budget(monkeypatch, seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 12))
    lengths = torch.from_numpy(rng.integers(1, 12, size=n))
    lengths[0] = 1
    fsa = to_k2(random_graph(rng, 6, 4, num_words=5), CPU)
    log_probs = peaked_log_probs(rng, n, int(lengths.max()), 4)
    one = (log_probs[:1, :1], torch.tensor([1]))
    dead, dead_lp, dead_lens, good = _dead_end_batch(n, rng)
    cases = [(fsa, log_probs, lengths, LatticeConfig()),
             (fsa, log_probs, lengths, LatticeConfig(max_active_states=3000)),
             (fsa, log_probs, lengths, LatticeConfig(min_active_states=0, max_active_states=20)),
             (fsa, *one, LatticeConfig()),
             # retried at 2500 (four per call) and 50000 (one per call) active states
             (dead, dead_lp, dead_lens, LatticeConfig(
                 search_beam=1.0, output_beam=1.0, min_active_states=0,
                 max_active_states=1250, retry_scales=(2.0, 40.0)))]
    calls = _spy(monkeypatch)
    got = _run(cases)
    # the bound, written out: 10000 // max_active_states utterances, within [1, 4]
    assert calls and all(utts <= max(1, min(4, 10_000 // states)) for utts, states in calls), \
        calls
    assert {states for _, states in calls} >= {10_000, 3000, 20, 1250, 2500, 50_000}, calls
    reports = got[-1][0]
    assert [r.status is LatticeStatus.OK for r in reports] == [i in good for i in range(n)]
    # one call per pass (the bound lifted): the same lattices, reports and hypotheses
    monkeypatch.setattr(search, "CPU_STATES_PER_CALL", 10**9)
    monkeypatch.setattr(search, "CPU_GROUP_SIZE", 1000)
    calls.clear()
    assert _run(cases) == got
    assert max(utts for utts, _ in calls) == n, calls
