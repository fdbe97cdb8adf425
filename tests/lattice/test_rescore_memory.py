"""The memory bound of whole-lattice rescoring: a batch's lattices are rescored in groups of at
most ``RescoreConfig.max_group_arcs`` lattice arcs (one utterance at least), and
``search_and_rescore_whole_lattices`` rescores (and drops) the lattices of each run of search
calls before the next call's would take them past that bound, so the batch's lattices are
never held together. Every group stays within the bound (recorded), and the hypotheses,
scores and reports are those of one group for the whole batch."""

from __future__ import annotations

from dataclasses import replace

import k2
import numpy as np
import pytest
import torch

import k2dec.lattice.rescore as rescore
from k2dec.lattice import (
    LatticeConfig,
    RescoreConfig,
    RescoreStatus,
    arcs_per_fsa,
    get_lattice,
    lattice_groups,
    rescore_with_whole_lattice,
    search_and_rescore_whole_lattices,
)
from k2dec.testing.graphs import peaked_log_probs
from tests.lattice.graphs import bigram_G, hlg_lattices

SCALES = (0.5, 1.0, 2.0)
UNBOUNDED = 10**8  # one group for any batch of the tests


def _record_groups(monkeypatch) -> list[tuple[int, int]]:
    """``(utterances, lattice arcs)`` of every group the rescoring composes, in call order."""
    groups: list[tuple[int, int]] = []
    real = rescore._rescore_group

    def spy(G, lat, config, keep_lattice):
        groups.append((lat.shape[0], lat.num_arcs))
        return real(G, lat, config, keep_lattice)

    monkeypatch.setattr(rescore, "_rescore_group", spy)
    return groups


def _within(groups: list[tuple[int, int]], bound: int) -> bool:
    """Every group holds at most ``bound`` arcs or is one utterance (the bound, written out)."""
    return all(arcs <= bound or utts == 1 for utts, arcs in groups)


def _summary(result) -> list:
    """What a caller gets, exactly (scores compared as floats, not approximately)."""
    return [result.status, result.reason, result.utterances,
            [(s.lm_scale, s.hypotheses) for s in result.per_scale]]


def _with_empty(lattice: k2.Fsa, where: int) -> k2.Fsa:
    """``lattice`` with an empty FSA (the search's ``EMPTY`` utterance) inserted at ``where``."""
    empty = k2.index_fsa(k2.connect(lattice), torch.tensor([0], dtype=torch.int32,
                                                           device=lattice.device))
    empty = rescore._empty_like(empty)
    n = lattice.shape[0]
    index = list(range(where)) + [n] + list(range(where, n))
    both = k2.cat([lattice, empty])
    return k2.index_fsa(both, torch.tensor(index, dtype=torch.int32, device=lattice.device))


def _failing_budget(lattice: k2.Fsa, G: k2.Fsa) -> int | None:
    """A ``max_rescored_arcs`` at which some utterances fail and others do not (None if none)."""
    for budget in range(1, 400):
        got = rescore_with_whole_lattice(lattice, G, RescoreConfig(lm_scales=(1.0,),
                                                                   max_rescored_arcs=budget))
        failed = {u.status is RescoreStatus.FAILED for u in got.utterances}
        if failed == {True, False}:
            return budget
    return None


def _same_lattices(a: k2.Fsa, b: k2.Fsa) -> None:
    """The same lattices: arc for arc on CPU; on CUDA, where k2's composition and pruning may
    order the arcs of a state differently from call to call (seen on an H200: the same
    utterance rescored twice, one arc's score in another place), equivalent FSAs with the
    same number of arcs (:func:`_equivalent_lattices`)."""
    assert a.shape[0] == b.shape[0]
    assert torch.equal(arcs_per_fsa(a), arcs_per_fsa(b))
    if a.device.type != "cpu":
        _equivalent_lattices(a, b)
        return
    assert torch.equal(a.arcs.values(), b.arcs.values())
    for name in ("scores", "lm_scores", "aux_labels"):
        assert torch.equal(getattr(a, name), getattr(b, name)), name


def _equivalent_lattices(a: k2.Fsa, b: k2.Fsa) -> None:
    """Each utterance of ``a`` and ``b`` gives every token sequence and every word sequence
    the same best score, under ``scores`` and under ``lm_scores`` (k2's randomized check on
    CPU copies)."""
    for i in range(a.shape[0]):
        for attr in ("scores", "lm_scores"):
            x, y = (f[i].to("cpu") for f in (a, b))
            x.scores, y.scores = getattr(x, attr).clone(), getattr(y, attr).clone()
            for project in (lambda f: f, k2.invert):
                assert k2.is_rand_equivalent(project(x), project(y), log_semiring=False,
                                             npath=200), (i, attr)


@pytest.mark.parametrize("seed", range(5))
def test_rescoring_groups_stay_within_the_bound_with_one_groups_results(device, monkeypatch,
                                                                         seed):
    rng = np.random.default_rng(seed)
    n = [1, 2, 5, 7, 8][seed]
    result, _ = hlg_lattices(device, seed=seed, n=n, output_beam=8.0)
    lattice = result.lattice
    if seed >= 2:  # an utterance the search found nothing for (it fails, with its reason)
        lattice = _with_empty(lattice, int(rng.integers(0, n + 1)))
    G = bigram_G(device)
    configs = [RescoreConfig(lm_scales=SCALES)]
    budget = _failing_budget(lattice, G) if seed >= 3 else None
    if budget is not None:  # and some whose composition never fits
        configs.append(RescoreConfig(lm_scales=SCALES, max_rescored_arcs=budget))
    arcs = arcs_per_fsa(lattice).tolist()
    for config in configs:
        whole = rescore_with_whole_lattice(lattice, G, replace(config, max_group_arcs=UNBOUNDED))
        for bound in sorted({1, max(1, max(arcs) // 2), max(1, sum(arcs) // 3)}):
            groups = _record_groups(monkeypatch)
            got = rescore_with_whole_lattice(lattice, G, replace(config, max_group_arcs=bound))
            monkeypatch.undo()
            assert sum(u for u, _ in groups) == lattice.shape[0]
            assert _within(groups, bound), (bound, groups)
            if bound == 1:  # every utterance on its own
                assert len(groups) == lattice.shape[0]
            assert _summary(got) == _summary(whole)
            if whole.lattice is None:
                assert got.lattice is None
            else:
                _same_lattices(got.lattice, whole.lattice)
    assert budget is not None or seed < 3  # the mixed case was exercised


def test_a_whole_batch_of_failures_fails_in_groups(device):
    result, _ = hlg_lattices(device, seed=1, n=3, output_beam=8.0)
    G = bigram_G(device)
    got = rescore_with_whole_lattice(result, G, RescoreConfig(max_rescored_arcs=1,
                                                              max_group_arcs=1))
    assert got.status is RescoreStatus.FAILED and got.per_scale == () and got.lattice is None
    assert all("max_rescored_arcs=1" in u.reason for u in got.utterances)
    assert len(got.utterances) == 3


def _batch(seed: int, n: int, device):
    """Peaked CTC outputs of ``n`` utterances (1-8 frames, one of 1 frame) and the HLG."""
    rng = np.random.default_rng(seed)
    _, HLG = hlg_lattices(device, seed=seed, n=1)
    lengths = torch.from_numpy(rng.integers(1, 9, size=n))
    lengths[int(rng.integers(0, n))] = 1
    log_probs = peaked_log_probs(rng, n, int(lengths.max()), 4, scale=1.5).to(device)
    return log_probs, lengths, HLG


def _record_order(monkeypatch) -> list[str]:
    """``search`` / ``rescore`` per k2 search call and rescoring group, in call order."""
    events: list[str] = []
    search, group = k2.intersect_dense_pruned, rescore._rescore_group

    def spy_search(*args, **kwargs):
        events.append("search")
        return search(*args, **kwargs)

    def spy_group(*args):
        events.append("rescore")
        return group(*args)

    monkeypatch.setattr(k2, "intersect_dense_pruned", spy_search)
    monkeypatch.setattr(rescore, "_rescore_group", spy_group)
    return events


@pytest.mark.parametrize("seed, n", [(0, 1), (1, 2), (2, 6), (3, 9)])
def test_search_and_rescore_never_holds_the_batch(monkeypatch, seed, n):
    """CPU: the lattices are rescored between search calls, in groups within the bound (one
    utterance per call at icefall's max_active_states), and every report, hypothesis and
    score is that of searching the whole batch and rescoring it as one group."""
    cpu = torch.device("cpu")
    log_probs, lengths, HLG = _batch(seed, n, cpu)
    G = bigram_G(cpu)
    lattice_config = LatticeConfig(search_beam=30.0, output_beam=8.0)
    searched = get_lattice(log_probs, lengths, HLG, lattice_config)
    arcs = arcs_per_fsa(searched.lattice).tolist()
    budget = _failing_budget(searched.lattice, G) if n > 2 else None
    configs = [RescoreConfig(lm_scales=SCALES)]
    if budget is not None:
        configs.append(RescoreConfig(lm_scales=SCALES, max_rescored_arcs=budget))
    for config in configs:
        whole = rescore_with_whole_lattice(searched, G, replace(config,
                                                                max_group_arcs=UNBOUNDED))
        for bound in sorted({1, max(1, sum(arcs) // 3), UNBOUNDED}):
            events = _record_order(monkeypatch)
            groups = _record_groups(monkeypatch)
            reports, got = search_and_rescore_whole_lattices(
                log_probs, lengths, HLG, G, lattice_config, replace(config, max_group_arcs=bound))
            monkeypatch.undo()
            assert reports == searched.reports
            assert _summary(got) == _summary(whole) and got.lattice is None
            assert _within(groups, bound), (bound, groups)
            assert events.count("search") == n  # one utterance per search call
            if bound == 1:  # each utterance rescored before the next one is searched
                assert events == ["search", "rescore"] * n
            elif bound == UNBOUNDED:
                assert events == ["search"] * n + ["rescore"]
            elif n > 1 and sum(arcs) > bound:  # never all of them in one group
                assert events.count("rescore") >= 2
    assert budget is not None or n <= 2


def test_search_and_rescore_bad_inputs():
    cpu = torch.device("cpu")
    log_probs, lengths, HLG = _batch(0, 3, cpu)
    G = bigram_G(cpu)
    with pytest.raises(ValueError, match=r"log_probs_lens must have shape \(N,\) = \(3,\)"):
        search_and_rescore_whole_lattices(log_probs, lengths[:2], HLG, G)
    with pytest.raises(TypeError, match="lattice_config must be a LatticeConfig"):
        search_and_rescore_whole_lattices(log_probs, lengths, HLG, G, RescoreConfig())
    with pytest.raises(TypeError, match="config must be a RescoreConfig"):
        search_and_rescore_whole_lattices(log_probs, lengths, HLG, G, LatticeConfig(),
                                          LatticeConfig())
    with pytest.raises(ValueError, match=r"RescoreConfig.max_group_arcs must be an int"):
        RescoreConfig(max_group_arcs=0)
    no_lm = HLG.clone()
    del no_lm.lm_scores
    with pytest.raises(ValueError, match="graph has no lm_scores"):
        search_and_rescore_whole_lattices(log_probs, lengths, no_lm, G)
    for bad in (0, 10**8 + 1, True, 2.0):  # refused at the call, before any search
        with pytest.raises(ValueError, match=r"^max_group_arcs must be an int in "
                                             r"\[1, 100000000\], got "):
            lattice_groups(log_probs, lengths, HLG, max_group_arcs=bad)


def test_equivalence_of_rescored_lattices_can_fail():
    """The CUDA comparison of :func:`_same_lattices`, run here on CPU lattices: equal for one
    rescoring done twice, not for rescorings at different LM scales."""
    result, _ = hlg_lattices(torch.device("cpu"), seed=1, n=2, output_beam=8.0)
    G = bigram_G(torch.device("cpu"))
    one, other = (rescore_with_whole_lattice(result.lattice, G, RescoreConfig(lm_scales=(s,)))
                  for s in (0.5, 2.0))
    again = rescore_with_whole_lattice(result.lattice, G, RescoreConfig(lm_scales=(0.5,)))
    _equivalent_lattices(one.lattice, again.lattice)
    with pytest.raises(AssertionError):
        _equivalent_lattices(one.lattice, other.lattice)
