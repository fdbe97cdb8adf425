"""``LatticeConfig.allow_partial``: an utterance whose search ends with no final state active gets
its best partial path (the brute force over a tiny graph agrees), utterances that reach a final
state get exactly the lattice they get without it, and searches that die before the last frame
are still retried or reported empty."""

from __future__ import annotations

import k2
import pytest
import torch

from k2dec.lattice import LatticeConfig, LatticeStatus, get_lattice, one_best_decoding
from k2dec.lattice.search import has_final_arc, k2_has_allow_partial, partial_graph
from k2dec.methods.records import from_lattice
from tests.lattice.graphs import HUGE
from tests.reference.dead_end import dead_end_case
from tests.reference.partial_paths import best_paths_of_length

EXACT = LatticeConfig(search_beam=HUGE.search_beam, output_beam=HUGE.output_beam,
                      min_active_states=0, max_active_states=HUGE.max_active_states,
                      retry_scales=())
PARTIAL = LatticeConfig(**{**EXACT.__dict__, "allow_partial": True})
V = 4


def _random_graph(gen: torch.Generator, device) -> k2.Fsa:
    """4 states and a final one: 0-3 arcs per state (labels 0..V-1, scores in [-2, 1]), final
    arcs from a random subset (possibly none); some states may have no leaving arc."""
    num = 4
    lines = []
    for s in range(num):
        for _ in range(int(torch.randint(0, 4, (1,), generator=gen))):
            dest = int(torch.randint(0, num, (1,), generator=gen))
            label = int(torch.randint(0, V, (1,), generator=gen))
            score = float(torch.rand(1, generator=gen)) * 3 - 2
            lines.append(f"{s} {dest} {label} {label + 10} {score:.4f}")
        if s > 0 and float(torch.rand(1, generator=gen)) < 0.4:
            lines.append(f"{s} {num} -1 -1 {float(torch.rand(1, generator=gen)) - 0.5:.4f}")
    lines.append("0 1 1 11 0.0")  # the start state always leads somewhere
    lines.sort(key=lambda line: int(line.split()[0]))
    return k2.arc_sort(k2.Fsa.from_str("\n".join(lines + [str(num)]), acceptor=False)).to(device)


def _best(lattice: k2.Fsa) -> tuple[float, tuple[int, ...]]:
    """Score and labels (without the final -1) of the best path of a single lattice."""
    vec = k2.create_fsa_vec([lattice])
    path = k2.shortest_path(vec, use_double_scores=True)
    score = float(vec.get_tot_scores(use_double_scores=True, log_semiring=False)[0])
    return score, tuple(x for x in path.labels.tolist() if x != -1)


def _same_fsa(a: k2.Fsa, b: k2.Fsa) -> bool:
    aux_a, aux_b = a.aux_labels, b.aux_labels
    if isinstance(aux_a, k2.RaggedTensor):
        aux_a, aux_b = aux_a.tolist(), aux_b.tolist()
        same_aux = aux_a == aux_b
    else:
        same_aux = torch.equal(aux_a, aux_b)
    return (torch.equal(a.arcs.values(), b.arcs.values()) and torch.equal(a.scores, b.scores)
            and same_aux and torch.equal(a.frame, b.frame))


def _cases(seed: int, device):
    """A random graph and a batch of 1-5 utterances of 1-4 frames, with the brute force's
    best complete and partial path of each."""
    gen = torch.Generator().manual_seed(seed)
    graph = _random_graph(gen, device)
    n = int(torch.randint(1, 6, (1,), generator=gen))
    lengths = torch.randint(1, 5, (n,), generator=gen)
    lp = torch.randn(n, int(lengths.max()), V, generator=gen).log_softmax(-1)
    refs = [best_paths_of_length(graph, lp[i, : int(lengths[i])]) for i in range(n)]
    return graph, lp.to(device), lengths, refs


def test_partial_paths_equal_the_brute_force(device):
    kinds = {LatticeStatus.OK: 0, LatticeStatus.PARTIAL: 0, LatticeStatus.EMPTY: 0}
    for seed in range(60):
        graph, lp, lengths, refs = _cases(seed, device)
        res = get_lattice(lp, lengths, graph, PARTIAL)
        plain = get_lattice(lp, lengths, graph, EXACT)
        for i, ((complete, partial), report) in enumerate(zip(refs, res.reports)):
            kinds[report.status] += 1
            if complete is not None:
                assert report.status is LatticeStatus.OK, (seed, i)
                assert _same_fsa(res.lattice[i], plain.lattice[i]), (seed, i)
                assert _best(res.lattice[i])[0] == pytest.approx(complete[0], abs=1e-4)
            elif partial is not None:
                assert report.status is LatticeStatus.PARTIAL, (seed, i)
                assert "best partial path (allow_partial)" in report.reason
                assert plain.reports[i].status is LatticeStatus.EMPTY
                score, labels = _best(res.lattice[i])
                assert score == pytest.approx(partial[0], abs=1e-4), (seed, i)
                assert labels == partial[1], (seed, i)
            else:
                assert report.status is LatticeStatus.EMPTY, (seed, i)
                assert res.lattice[i].num_arcs == 0
    assert min(kinds.values()) >= 5, kinds  # every kind, in batches of 1 and more


def test_batch_results_do_not_depend_on_batching(device):
    for seed in range(20):
        graph, lp, lengths, _ = _cases(seed, device)
        whole = one_best_decoding(lp, lengths, graph, PARTIAL)
        for i in range(lp.shape[0]):
            one = one_best_decoding(lp[i : i + 1, : int(lengths[i])], lengths[i : i + 1],
                                    graph, PARTIAL)[0]
            assert (one.tokens, one.words, one.status) == \
                   (whole[i].tokens, whole[i].words, whole[i].status)
            assert one.score == pytest.approx(whole[i].score, abs=1e-5)


def _final_aux(lattice: k2.Fsa) -> list:
    """The aux labels of the arcs into the final state of a single lattice."""
    aux = lattice.aux_labels
    rows = aux.tolist() if isinstance(aux, k2.RaggedTensor) else aux.tolist()
    return [rows[i] for i in torch.nonzero(lattice.labels == -1).flatten().tolist()]


@pytest.mark.parametrize("ragged", [False, True])
@pytest.mark.parametrize("t", [1, 6, 40])
def test_pruned_final_path_gives_the_partial_path_not_retries(device, t, ragged):
    """The dead-end graph: utterance 0's complete path is pruned (it falls 3 per frame behind),
    so its search ends in state 1, which has no final arc; utterance 1 ends normally."""
    g, lp, lengths = dead_end_case(t, device)
    if ragged:  # aux labels as the shipped HLG holds them (ragged, [] for none)
        g.aux_labels = k2.RaggedTensor([[x] if x != 0 else [] for x in g.aux_labels.tolist()]
                                       ).to(device)
    config = LatticeConfig(search_beam=1.0, output_beam=1.0, min_active_states=0,
                           retry_scales=(2.0, 4.0 * t), allow_partial=True)
    plain = get_lattice(lp, lengths, g, LatticeConfig(**{**config.__dict__,
                                                         "allow_partial": False}))
    res = get_lattice(lp, lengths, g, config)
    assert [r.status for r in res.reports] == [LatticeStatus.PARTIAL, LatticeStatus.OK]
    assert plain.reports[0].status is LatticeStatus.RETRIED  # without it: retried
    assert _same_fsa(res.lattice[1], plain.lattice[1])
    assert has_final_arc(res.lattice).tolist() == [True, True]
    assert set(map(str, _final_aux(res.lattice[0]))) == {"[-1]" if ragged else "-1"}
    hyps = one_best_decoding(lp, lengths, g, config)
    assert [h.status for h in hyps] == [LatticeStatus.PARTIAL, LatticeStatus.OK]
    # the dead end: label 1 on every frame, no word; its self-loop (score 0) ends it
    assert hyps[0].tokens == (1,) and hyps[0].words == ()
    assert hyps[0].score == pytest.approx(float(lp[0, :, 1].sum()), abs=1e-4)
    assert hyps[0].reason == res.reports[0].reason
    records = from_lattice(hyps, words=True)
    assert not records[0].error and "allow_partial" in records[0].notes
    assert records[1].notes == ""


def test_search_that_dies_is_still_retried_or_empty(device):
    """A graph that accepts at most 2 tokens: a 5-frame search dies, no partial path exists."""
    g = k2.Fsa.from_str("0 1 1 1 0\n1 2 2 2 0\n2 3 -1 -1 0\n3", acceptor=False).to(device)
    lp = torch.zeros(1, 5, 3).log_softmax(-1).to(device)
    res = get_lattice(lp, torch.tensor([5]), g, PARTIAL)
    assert res.reports[0].status is LatticeStatus.EMPTY and res.lattice[0].num_arcs == 0
    ok = get_lattice(lp[:, :2], torch.tensor([2]), g, PARTIAL)
    assert ok.reports[0].status is LatticeStatus.OK


def test_partial_graph_arcs(device):
    """One extra arc per state with leaving arcs and no final arc, scored with its best
    leaving arc, label and aux label -1; the graph itself unchanged; kept per graph."""
    g = k2.Fsa.from_str("0 1 1 5 -1.5\n0 2 2 6 -0.5\n1 1 1 0 -2.0\n2 3 -1 -1 0.25\n3",
                        acceptor=False).to(device)
    before = g.arcs.values().clone()
    pg = partial_graph(g)
    assert torch.equal(g.arcs.values(), before)
    new = [(a[0], a[1], a[2], s) for a, s in zip(pg.arcs.values()[:, :3].tolist(),
                                                 pg.scores.tolist())]
    assert sorted(new) == sorted([(0, 1, 1, -1.5), (0, 2, 2, -0.5), (1, 1, 1, -2.0),
                                  (2, 3, -1, 0.25), (0, 3, -1, -0.5), (1, 3, -1, -2.0)])
    assert (pg.aux_labels[pg.labels == -1] == -1).all()
    assert partial_graph(g) is pg


def test_config_validation_and_inputs():
    with pytest.raises(TypeError, match="allow_partial must be True or False, got 'yes'"):
        LatticeConfig(allow_partial="yes")
    with pytest.raises(TypeError, match="allow_partial must be True or False, got 1"):
        LatticeConfig(allow_partial=1)
    assert LatticeConfig().allow_partial is False
    assert isinstance(k2_has_allow_partial(), bool)
    g, lp, _ = dead_end_case(3, "cpu")
    with pytest.raises(ValueError, match="non-empty"):
        get_lattice(lp[:0], torch.tensor([], dtype=torch.int64), g, PARTIAL)
    with pytest.raises(ValueError, match=r"log_probs_lens\[1\]=0"):
        get_lattice(lp, torch.tensor([3, 0]), g, PARTIAL)


def test_searches_without_the_option_refuse_it():
    from k2dec.lattice import StreamingDecoder, viterbi_one_best

    g, lp, lengths = dead_end_case(3, "cpu")
    with pytest.raises(ValueError, match="allow_partial=True is a setting of the lattice search"):
        viterbi_one_best(lp, lengths, g, PARTIAL)
    with pytest.raises(ValueError, match="allow_partial must be False"):
        StreamingDecoder(g, PARTIAL)


def test_method_setting(device):
    """``--set allow_partial=true`` (or ``lattice.allow_partial``) reaches 1best, whose records
    note the partial paths; the lattice-free search refuses it before decoding."""
    from k2dec.methods import CtcInputs, Resources, get_method
    from k2dec.methods.settings import override_config

    method = get_method("1best")
    cfg = override_config(method.config_cls(), ["allow_partial=true", "graph.scale=1.0",
                                                "search_beam=1.0", "output_beam=1.0",
                                                "min_active_states=0"])
    assert cfg.lattice.allow_partial is True
    assert override_config(method.config_cls(), ["lattice.allow_partial=false"]
                           ).lattice.allow_partial is False
    with pytest.raises(ValueError, match="allow_partial"):
        override_config(method.config_cls(), ["allow_partial=maybe"])
    with pytest.raises(ValueError, match="needs the lattice search"):
        override_config(method.config_cls(), ["allow_partial=true", "search.lattice_free=true"])
    g, lp, lengths = dead_end_case(6, device)
    [result] = method(CtcInputs(lp, lengths), Resources(graphs={"HLG": g}), cfg)
    assert ["allow_partial" in r.notes for r in result.hyps] == [True, False]
    assert [r.error for r in result.hyps] == ["", ""]
