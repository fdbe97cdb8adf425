"""The lattice-free Viterbi beam search (k2dec.lattice.viterbi) against the brute-force
reference and against k2's exact route (``k2.intersect_dense`` + ``k2.shortest_path``): the same
best path and score with beams that prune nothing, never a better-than-optimal score with tight
beams, the same result at any batch size, and no utterance lost silently."""

from __future__ import annotations

import k2
import numpy as np
import pytest
import torch

from k2dec.lattice import (
    LatticeConfig,
    LatticeStatus,
    hypotheses_from_lattice,
    make_dense_fsa_vec,
    one_best_decoding,
    viterbi_one_best,
)
from k2dec.lattice.viterbi import graph_tables, viterbi_paths
from k2dec.testing.graphs import ctc_lexicon_graph, peaked_log_probs
from tests.lattice.graphs import HUGE, LEXICON, to_k2
from tests.reference.dead_end import dead_end_case
from tests.reference.viterbi import path_outputs, path_score, random_case, random_graph, viterbi

INF = float("inf")


def _fields(h):
    return (h.tokens, h.token_frames, h.words, h.word_frames)


def _exact_k2(log_probs, lengths, fsa):
    """k2's exact route, one utterance at a time: intersect_dense (no pruning) and the best
    path of the whole lattice."""
    out = []
    for i in range(log_probs.shape[0]):
        dense = make_dense_fsa_vec(log_probs[i : i + 1], lengths[i : i + 1]).dense_fsa_vec
        lattice = k2.intersect_dense(fsa, dense, output_beam=1e4, frame_idx_name="frame")
        out += hypotheses_from_lattice(lattice)
    return out


def _hlg(device):
    """The HLG-shaped graph of the toy CTC lexicon (words 1-4 over tokens 1-3, blank 0)."""
    scores = {1: -1.0, 2: -1.4, 3: -2.0, 4: -1.8}
    return k2.Fsa.from_str(ctc_lexicon_graph(LEXICON, scores), acceptor=False).to(device)


@pytest.mark.parametrize("ragged", [False, True])
def test_wide_beams_give_the_reference_best_path(device, ragged):
    """Brute-force Viterbi: same score; same outputs and frames unless two paths tie."""
    checked = 0
    for seed in range(40):
        graph, log_probs, lengths = random_case(100 + seed, ragged, one_frame=True)
        fsa = to_k2(graph, device, ragged=ragged)
        hyps = viterbi_one_best(log_probs.to(device), lengths, fsa, HUGE)
        assert len(hyps) == len(lengths)
        for i, h in enumerate(hyps):
            ref_score, ref_path = viterbi(graph, log_probs[i, : lengths[i]].numpy())
            if ref_score == -INF:
                assert h.status is LatticeStatus.EMPTY and h.score == -INF and h.words == ()
                continue
            assert h.status is LatticeStatus.OK and h.reason == ""
            assert h.score == pytest.approx(ref_score, abs=1e-4), (seed, i)
            tokens, token_frames, words, word_frames = path_outputs(graph, ref_path)
            if (list(h.tokens), list(h.words)) == (tokens, words):
                assert (list(h.token_frames), list(h.word_frames)) == (token_frames,
                                                                        word_frames)
                checked += 1
    assert checked > 50


@pytest.mark.parametrize("seed", range(6))
def test_wide_beams_equal_k2_intersect_dense_on_an_hlg(device, seed):
    """An HLG-shaped graph, batches of 1 to 6 with a one-frame utterance: the hypotheses and
    scores of k2.intersect_dense + k2.shortest_path."""
    rng = np.random.default_rng(seed)
    fsa = _hlg(device)
    n = 1 + seed
    lengths = torch.from_numpy(rng.integers(1, 12, size=n))
    lengths[-1] = 1
    log_probs = peaked_log_probs(rng, n, int(lengths.max()), 4, scale=2.0).to(device)
    fast = viterbi_one_best(log_probs, lengths, fsa, HUGE)
    exact = _exact_k2(log_probs, lengths, fsa)
    for f, e in zip(fast, exact, strict=True):
        assert f.score == pytest.approx(e.score, abs=1e-4)
        assert f.status is e.status
        assert _fields(f) == _fields(e)


def test_tight_beams_never_beat_the_optimum(device):
    """With pruning the search may miss the best path, but the path it returns is a real
    complete path whose score is the reported one, and never above the optimum."""
    misses = 0
    for seed in range(40):
        graph, log_probs, lengths = random_case(300 + seed, max_t=14, one_frame=True)
        fsa = to_k2(graph, device)
        tables = graph_tables(fsa)
        paths = viterbi_paths(log_probs.to(device), lengths, tables, 1.0, 2)
        for i in range(len(lengths)):
            lp = log_probs[i, : lengths[i]].numpy()
            best, _ = viterbi(graph, lp)
            score = float(paths.scores[i])
            if score == -INF:
                continue
            arcs = paths.arcs[i, : lengths[i]].tolist() + [int(paths.final_arc[i])]
            assert path_score(graph, lp, arcs) == pytest.approx(score, abs=1e-4)
            assert score <= best + 1e-4
            misses += score < best - 1e-4
    assert misses > 0  # the beams above do prune


def test_max_active_states_bounds_the_tokens(device):
    """At most max_active_states tokens per utterance survive a frame (counted through the
    back-pointers the search stores)."""
    rng = np.random.default_rng(5)
    graph = random_graph(rng, 30, 5, num_words=3, arcs_per_state=6)
    fsa = to_k2(graph, device)
    log_probs = peaked_log_probs(rng, 3, 20, 5, scale=0.5).to(device)
    lengths = torch.tensor([20, 13, 20])
    tables = graph_tables(fsa)
    seen = []
    import k2dec.lattice.viterbi as viterbi_module

    original = viterbi_module._cap_active

    def spy(step, n, max_active):
        out = original(step, n, max_active)
        seen.append(int(torch.bincount(out.utt, minlength=n).max()))
        return out

    viterbi_module._cap_active = spy
    try:
        viterbi_paths(log_probs, lengths, tables, 1e4, 4)
    finally:
        viterbi_module._cap_active = original
    assert max(seen) == 4


@pytest.mark.parametrize("config", [HUGE, LatticeConfig(search_beam=2.0, max_active_states=3,
                                                     min_active_states=0)],
                         ids=["huge", "tight"])
def test_batch_size_does_not_change_results(device, config):
    for seed in range(15):
        graph, log_probs, lengths = random_case(500 + seed, max_n=7, max_t=12, one_frame=True)
        fsa = to_k2(graph, device)
        batch = viterbi_one_best(log_probs.to(device), lengths, fsa, config)
        for i in range(len(lengths)):
            single = viterbi_one_best(log_probs[i : i + 1].to(device), lengths[i : i + 1], fsa,
                                      config)
            assert single[0] == batch[i], (seed, i)


@pytest.mark.parametrize("approx", [{"token_top_k": 2}, {"blank_skip_threshold": 0.6},
                                    {"token_top_k": 3, "blank_skip_threshold": 0.5}])
def test_approximations_match_the_lattice_route(device, approx):
    """The same pruned inputs give the lattice route's best path, with frames mapped back to
    the original frames."""
    config = LatticeConfig(**{**HUGE.__dict__, **approx})
    for seed in range(6):
        rng = np.random.default_rng(700 + seed)
        lengths = torch.from_numpy(rng.integers(1, 15, size=4))
        log_probs = peaked_log_probs(rng, 4, int(lengths.max()), 4, scale=3.0).to(device)
        fsa = _hlg(device)
        fast = viterbi_one_best(log_probs, lengths, fsa, config)
        slow = one_best_decoding(log_probs, lengths, fsa, config)
        for f, s in zip(fast, slow, strict=True):
            assert f.score == pytest.approx(s.score, abs=1e-4)
            assert _fields(f) == _fields(s) and f.status is s.status


def test_no_surviving_path_is_retried_then_reported(device):
    t = 10
    g, lp, lengths = dead_end_case(t, device)
    retried = LatticeConfig(search_beam=1.0, min_active_states=0,
                            retry_scales=(2.0, 4.0 * t))
    hyps = viterbi_one_best(lp, lengths, g, retried)
    assert [h.status for h in hyps] == [LatticeStatus.RETRIED, LatticeStatus.OK]
    assert f"found at search_beam={4 * t:g}" in hyps[0].reason
    assert hyps[0].tokens == (2,) and hyps[0].words == (7,) * (t - 1)
    assert hyps[0].score == pytest.approx(float(lp[0, :, 2].sum()), abs=1e-4)
    none = LatticeConfig(search_beam=1.0, min_active_states=0, retry_scales=())
    hyps = viterbi_one_best(lp, lengths, g, none)
    assert hyps[0].status is LatticeStatus.EMPTY and hyps[0].score == -INF
    assert hyps[0].words == () and hyps[0].tokens == ()
    assert f"no path survived {t} frames" in hyps[0].reason
    assert hyps[1].status is LatticeStatus.OK and hyps[1].words == (7,) * (t - 1)


def test_a_length_no_path_accepts_is_empty(device):
    """The graph needs at least 2 frames: a one-frame utterance has no path at any beam."""
    g = k2.Fsa.from_str("0 1 1 0 0\n1 2 2 5 0\n2 3 -1 -1 0\n3", acceptor=False).to(device)
    lp = torch.log_softmax(torch.zeros(2, 2, 3), dim=-1).to(device)
    hyps = viterbi_one_best(lp, torch.tensor([1, 2]), g, HUGE)
    assert hyps[0].status is LatticeStatus.EMPTY and hyps[0].score == -INF
    assert hyps[1].status is LatticeStatus.OK and hyps[1].words == (5,)
    assert hyps[1].tokens == (1, 2) and hyps[1].token_frames == (0, 1)


def test_bad_inputs_are_refused(device):
    fsa = _hlg(device)
    lp = peaked_log_probs(np.random.default_rng(0), 2, 3, 4).to(device)
    lengths = torch.tensor([3, 2])
    with pytest.raises(ValueError, match="FsaVec of 2 FSAs"):
        viterbi_one_best(lp, lengths, k2.create_fsa_vec([fsa, fsa]), HUGE)
    with pytest.raises(TypeError, match="config must be a LatticeConfig"):
        viterbi_one_best(lp, lengths, fsa, {"search_beam": 5})
    with pytest.raises(TypeError, match="graph must be a k2.Fsa"):
        viterbi_one_best(lp, lengths, "HLG.pt", HUGE)
    with pytest.raises(ValueError, match="log_probs_lens"):
        viterbi_one_best(lp, torch.tensor([4, 2]), fsa, HUGE)
    with pytest.raises(ValueError, match="has token id 3 but log_probs has only V=3"):
        viterbi_one_best(lp[:, :, :3], lengths, fsa, HUGE)
    one = viterbi_one_best(lp, lengths, k2.create_fsa_vec([fsa]), HUGE)
    assert one == viterbi_one_best(lp, lengths, fsa, HUGE)


def test_graph_tables_follow_score_edits(device):
    fsa = _hlg(device)
    first = graph_tables(fsa)
    assert graph_tables(fsa) is first
    fsa.scores = fsa.scores * 2.0
    second = graph_tables(fsa)
    assert second is not first
    assert torch.allclose(second.emit_score, first.emit_score * 2.0)
