"""1best, lattices and CTC search against the brute-force references in tests/reference."""

from __future__ import annotations

import k2
import numpy as np
import pytest
import torch

from k2dec.lattice import (
    AuxLabels,
    LatticeConfig,
    LatticeStatus,
    best_paths,
    ctc_decoding,
    ctc_greedy_search,
    ctc_greedy_token_confidences,
    get_lattice,
    hypotheses_from_lattice,
    one_best_decoding,
)
from k2dec.testing.graphs import peaked_log_probs
from tests.lattice.graphs import HUGE, lattice_arc_frames, lattice_has_path, to_k2
from tests.reference.viterbi import (
    ctc_greedy,
    ctc_greedy_confidences,
    enumerate_paths,
    path_outputs,
    path_score,
    random_graph,
    viterbi,
)


def _random_case(seed: int, ragged: bool = False):
    rng = np.random.default_rng(seed)
    vocab = int(rng.integers(2, 6))
    graph = random_graph(rng, int(rng.integers(2, 6)), vocab, num_words=6, ragged_aux=ragged)
    n = int(rng.integers(1, 5))
    lengths = rng.integers(1, 7, size=n)
    log_probs = peaked_log_probs(rng, n, int(lengths.max()), vocab)
    return graph, log_probs, torch.from_numpy(lengths)


@pytest.mark.parametrize("ragged", [False, True])
@pytest.mark.parametrize("config", [LatticeConfig(), HUGE], ids=["default", "huge"])
def test_one_best_equals_viterbi(device, ragged, config):
    ties = total = 0
    for seed in range(40):
        graph, log_probs, lengths = _random_case(seed, ragged)
        fsa = to_k2(graph, device, ragged=ragged)
        result = get_lattice(log_probs.to(device), lengths, fsa, config)
        paths = best_paths(result.lattice)
        scores = paths.get_tot_scores(use_double_scores=True, log_semiring=False)
        hyps = hypotheses_from_lattice(result)
        for i in range(len(lengths)):
            lp = log_probs[i, : lengths[i]].numpy()
            ref_score, ref_path = viterbi(graph, lp)
            assert result.reports[i].status is LatticeStatus.OK
            assert float(scores[i]) == pytest.approx(ref_score, abs=1e-4), (seed, i)
            path = paths[i].arc_id.tolist()
            if path != ref_path:  # a tie: k2's path must score the same
                ties += 1
                assert path_score(graph, lp, path) == pytest.approx(ref_score, abs=1e-5)
            tokens, token_frames, words, word_frames = path_outputs(graph, path)
            h = hyps[i]
            assert list(h.tokens) == tokens and list(h.token_frames) == token_frames
            assert list(h.words) == words and list(h.word_frames) == word_frames
            assert h.score == pytest.approx(ref_score, abs=1e-4)
            total += 1
    assert ties < total // 10


def test_lattice_holds_every_path_within_output_beam(device):
    output_beam = 3.0
    config = LatticeConfig(search_beam=1e4, output_beam=output_beam, min_active_states=0,
                           max_active_states=100000)
    checked = 0
    for seed in range(25):
        graph, log_probs, lengths = _random_case(100 + seed)
        fsa = to_k2(graph, device)
        result = get_lattice(log_probs.to(device), lengths, fsa, config)
        for i in range(len(lengths)):
            lp = log_probs[i, : lengths[i]].numpy()
            paths = enumerate_paths(graph, lp)
            best = max(s for s, _ in paths)
            lat = result.lattice[i].to("cpu")
            for score, arc_ids in paths:
                if score >= best - output_beam + 1e-3:
                    found, lat_score = lattice_has_path(lat, arc_ids)
                    assert found, (seed, i, arc_ids)
                    assert lat_score == pytest.approx(score, abs=1e-4)
                    checked += 1
            # and every lattice arc lies on some path within the beam
            near = {(t, a) for s, p in paths if s >= best - output_beam - 1e-3
                    for t, a in enumerate(p)}
            frames = lattice_arc_frames(lat)
            for t, a in zip(frames, lat.arc_id.tolist()):
                assert (t, a) in near, (seed, i, t, a)
    assert checked > 100


def test_batch_of_one_equals_batch(device):
    for seed in range(10):
        graph, log_probs, lengths = _random_case(200 + seed)
        fsa = to_k2(graph, device)
        batch = one_best_decoding(log_probs.to(device), lengths, fsa)
        for i in range(len(lengths)):
            single = one_best_decoding(log_probs[i : i + 1].to(device), lengths[i : i + 1], fsa)
            assert single[0] == batch[i]


def test_per_utterance_graphs(device):
    rng = np.random.default_rng(5)
    graphs = [random_graph(rng, 4, 4, num_words=3) for _ in range(3)]
    log_probs = peaked_log_probs(rng, 3, 5, 4)
    lengths = torch.tensor([5, 3, 4])
    vec = k2.create_fsa_vec([to_k2(g, device) for g in graphs])
    result = get_lattice(log_probs.to(device), lengths, vec, HUGE)
    paths = best_paths(result.lattice)
    for i, g in enumerate(graphs):
        score, path = viterbi(g, log_probs[i, : lengths[i]].numpy())
        assert paths[i].arc_id.tolist() == path


def test_caller_graph_not_modified(device):
    rng = np.random.default_rng(3)
    graph = random_graph(rng, 4, 3, num_words=2)
    fsa = to_k2(graph, device)
    before = k2.to_str_simple(fsa)
    before_props = fsa.properties
    log_probs = peaked_log_probs(rng, 2, 4, 3).to(device)
    one_best_decoding(log_probs, torch.tensor([4, 2]), fsa)
    assert k2.to_str_simple(fsa) == before
    assert fsa.properties == before_props


def test_not_arc_sorted_graph_is_sorted_on_a_copy(device):
    g = k2.Fsa.from_str("0 1 2 2 0.5\n0 1 1 1 0.25\n1 2 -1 -1 0\n2", acceptor=False).to(device)
    assert g.properties & k2.fsa_properties.ARC_SORTED == 0
    before = k2.to_str_simple(g)
    lp = torch.log(torch.tensor([[[0.1, 0.2, 0.7]]])).to(device)
    hyp = one_best_decoding(lp, torch.tensor([1]), g)[0]
    assert hyp.words == (2,) and hyp.score == pytest.approx(0.5 + float(np.log(0.7)), abs=1e-5)
    assert k2.to_str_simple(g) == before


def test_ctc_greedy_matches_reference(device):
    rng = np.random.default_rng(7)
    for n in (1, 4):
        lengths = torch.from_numpy(rng.integers(1, 12, size=n))
        log_probs = peaked_log_probs(rng, n, int(lengths.max()), 6)
        # padding frames may hold anything finite or -inf
        log_probs[0, int(lengths[0]) :] = -float("inf")
        hyps = ctc_greedy_search(log_probs.to(device), lengths)
        for i, h in enumerate(hyps):
            tokens, score = ctc_greedy(log_probs[i, : lengths[i]].numpy())
            assert list(h.tokens) == tokens
            assert h.score == pytest.approx(score, abs=1e-4)


def test_ctc_greedy_token_confidences_match_reference(device):
    rng = np.random.default_rng(11)
    for n in (1, 5):
        lengths = torch.from_numpy(rng.integers(1, 12, size=n))
        lengths[0] = 1  # one frame
        log_probs = peaked_log_probs(rng, n, int(lengths.max()), 6, scale=1.0)
        if n > 1:  # an all-blank utterance: no tokens
            log_probs[1, :, 0] = 0.0
            log_probs[1, :, 1:] = -5.0
        hyps = ctc_greedy_search(log_probs.to(device), lengths)
        conf = ctc_greedy_token_confidences(log_probs.to(device), lengths)
        assert conf.device == device and conf.dtype == torch.float64
        rows = conf.tolist()
        for i, h in enumerate(hyps):
            want = ctc_greedy_confidences(log_probs[i, : lengths[i]].numpy())
            assert len(rows[i]) == len(h.tokens) == len(want)
            assert rows[i] == pytest.approx(want, abs=1e-6)
            alone = ctc_greedy_token_confidences(log_probs[i:i + 1].to(device),
                                                 lengths[i:i + 1]).tolist()[0]
            assert alone == rows[i]
        if n > 1:
            assert rows[1] == [] and hyps[1].tokens == ()
        assert any(len(r) > 1 for r in rows) or n == 1


def test_ctc_decoding_with_H_equals_greedy(device):
    """Every frame labelling is a path of the standard CTC topology, so with wide beams the
    best path through H is the greedy one."""
    rng = np.random.default_rng(8)
    lengths = torch.from_numpy(rng.integers(1, 15, size=5))
    log_probs = peaked_log_probs(rng, 5, int(lengths.max()), 7, scale=2.0).to(device)
    greedy = ctc_greedy_search(log_probs, lengths)
    viaH = ctc_decoding(log_probs, lengths, config=HUGE)
    for g, h in zip(greedy, viaH):
        assert g.tokens == h.tokens and g.token_frames == h.token_frames
        assert g.score == pytest.approx(h.score, abs=1e-4)


def test_hlg_like_graph_words(device):
    """A hand-written HL-like graph (labels: CTC tokens, aux_labels: words) over ctc_topo-like
    structure: word 1 = token 1, word 2 = tokens 2 3."""
    text = """0 0 0 0 0
0 1 1 1 0
0 2 2 2 0
0 4 -1 -1 0
1 1 1 0 0
1 0 0 0 0
1 2 2 2 0
1 4 -1 -1 0
2 2 2 0 0
2 3 3 0 0
3 3 3 0 0
3 0 0 0 0
3 1 1 1 0
3 2 2 2 0
3 4 -1 -1 0
4"""
    g = k2.Fsa.from_str(text, acceptor=False).to(device)
    # frames: 2 2 3 0 1 1 -> words 2 1
    frames = [2, 2, 3, 0, 1, 1]
    lp = torch.full((1, 6, 4), -5.0)
    for t, k in enumerate(frames):
        lp[0, t, k] = -0.1
    hyp = one_best_decoding(lp.to(device), torch.tensor([6]), g)[0]
    assert hyp.words == (2, 1) and hyp.word_frames == (0, 4)
    assert hyp.tokens == (2, 3, 1) and hyp.token_frames == (0, 2, 4)
    assert hyp.score == pytest.approx(-0.6, abs=1e-5)
    tok = one_best_decoding(lp.to(device), torch.tensor([6]), g, aux_labels=AuxLabels.TOKENS)[0]
    assert tok.tokens == (2, 1)  # aux ids read as tokens
