"""Arc and word posteriors of CTC (HLG), rescored and transducer lattices against brute-force
path enumeration; posteriors sum to 1 on every frame."""

from __future__ import annotations

import math
from collections import defaultdict

import k2
import numpy as np
import pytest
import torch

from k2dec.lattice import LatticeResult
from k2dec.lattice.posteriors import (
    PosteriorConfig,
    arc_posteriors,
    lattice_arc_frames,
    lattice_arc_words,
    scaled_arc_scores,
    state_depths,
    word_posteriors,
)
from k2dec.lattice.rescore import RescoreConfig, rescore_with_whole_lattice
from k2dec.primitives.best_paths import FRAME_ATTR
from k2dec.testing.lattices import dags_to_vec, empty_fsa, random_word_dag
from k2dec.testing.transducer import random_batch, random_model
from k2dec.transducer import FastBeamSearchConfig, fast_beam_search
from tests.lattice.graphs import bigram_G, hlg_lattices
from tests.reference.lattice_paths import enumerate_paths

SCALES = [PosteriorConfig(), PosteriorConfig(acoustic_scale=0.3, lm_scale=1.5)]


def _hlg_lattices(device, seed=0, ragged=False, lm_scores=True):
    """HLG lattices (tests/lattice/test_rescore.py) and each utterance's number of frames."""
    result, _ = hlg_lattices(device, seed, ragged=ragged)
    if not lm_scores:
        lattice = result.lattice.clone()
        del lattice.lm_scores
        result = LatticeResult(lattice, result.reports)
    return result, torch.tensor([r.num_frames for r in result.reports])


def _brute_force(lattice: k2.Fsa, i: int, config: PosteriorConfig):
    """``(arc posteriors, {word: expected count}, paths)`` of FSA ``i`` by enumerating paths."""
    fsa = lattice[i].to("cpu")
    paths = enumerate_paths(fsa)
    scored = []
    for p in paths:
        if p.lm_score is None:
            s = config.acoustic_scale * p.score
        else:
            s = config.acoustic_scale * (p.score - p.lm_score) + config.lm_scale * p.lm_score
        scored.append(s)
    top = max(scored)
    z = sum(math.exp(s - top) for s in scored)
    post = [0.0] * fsa.num_arcs
    words: dict[int, float] = defaultdict(float)
    for p, s in zip(paths, scored):
        prob = math.exp(s - top) / z
        for a in p.arcs:
            post[a] += prob
        for w in p.words:
            words[w] += prob
    return post, dict(words), paths


def _utt_slices(lattice: k2.Fsa) -> list[tuple[int, int]]:
    splits = lattice.arcs.shape().remove_axis(1).row_splits(1).tolist()
    return list(zip(splits[:-1], splits[1:]))


@pytest.mark.parametrize("config", SCALES)
@pytest.mark.parametrize("ragged", [False, True])
def test_hlg_posteriors_match_path_enumeration(device, config, ragged):
    for seed in range(3):
        result, lengths = _hlg_lattices(device, seed, ragged=ragged)
        lattice = result.lattice
        before = lattice.scores.clone()
        post = arc_posteriors(result, config)
        assert post.dtype == torch.float64 and post.device == lattice.scores.device
        frames = lattice_arc_frames(lattice)
        assert torch.equal(frames, getattr(lattice, FRAME_ATTR).to(torch.int64))
        ids, counts = word_posteriors(lattice, config)
        for i, (lo, hi) in enumerate(_utt_slices(lattice)):
            want, want_words, _ = _brute_force(lattice, i, config)
            assert post[lo:hi].tolist() == pytest.approx(want, abs=1e-6)
            got_words = dict(zip(ids.tolist()[i], counts.tolist()[i]))
            assert got_words == pytest.approx(want_words, abs=1e-6)
            # every path consumes frames 0..T-1 and ends on T: one arc per frame
            per_frame = torch.zeros(int(lengths[i]) + 1, dtype=torch.float64)
            per_frame.index_add_(0, frames[lo:hi].cpu(), post[lo:hi].cpu())
            assert per_frame.tolist() == pytest.approx([1.0] * (int(lengths[i]) + 1), abs=1e-9)
        assert torch.equal(lattice.scores, before)


def test_scaling_without_lm_scores(device):
    result, _ = _hlg_lattices(device, 1, lm_scores=False)
    lat = result.lattice
    cfg = PosteriorConfig(acoustic_scale=0.5, lm_scale=3.0)  # lm_scale unused here
    assert torch.allclose(scaled_arc_scores(lat, cfg), 0.5 * lat.scores.double())
    post = arc_posteriors(lat, cfg)
    for i, (lo, hi) in enumerate(_utt_slices(lat)):
        want, _, _ = _brute_force(lat, i, cfg)
        assert post[lo:hi].tolist() == pytest.approx(want, abs=1e-6)


def test_rescored_lattice_frames_and_posteriors(device):
    """Whole-lattice rescoring adds arcs that consume no frame (frame -1): they take the frame
    of the arc before them, and the posteriors of the frame-consuming arcs still sum to 1."""
    result, lengths = _hlg_lattices(device, 2, ragged=True)
    rescored = rescore_with_whole_lattice(result, bigram_G(device), RescoreConfig(lm_scales=(1.0,)))
    lat = rescored.lattice
    raw = getattr(lat, FRAME_ATTR).to(torch.int64)
    assert bool((raw < 0).any())
    frames = lattice_arc_frames(lat)
    assert bool((frames >= 0).all())
    post = arc_posteriors(lat, PosteriorConfig(acoustic_scale=0.7))
    for i, (lo, hi) in enumerate(_utt_slices(lat)):
        want, _, paths = _brute_force(lat, i, PosteriorConfig(acoustic_scale=0.7))
        assert post[lo:hi].tolist() == pytest.approx(want, abs=1e-6)
        f = frames[lo:hi].tolist()
        r = raw[lo:hi].tolist()
        for p in paths:  # along a path: -1 arcs sit on the frame of the arc before them
            last = 0
            for a in p.arcs:
                assert f[a] == (r[a] if r[a] >= 0 else last)
                last = f[a]
        keep = raw[lo:hi] >= 0
        per_frame = torch.zeros(int(lengths[i]) + 1, dtype=torch.float64)
        per_frame.index_add_(0, frames[lo:hi][keep].cpu(), post[lo:hi][keep].cpu())
        assert per_frame.tolist() == pytest.approx([1.0] * (int(lengths[i]) + 1), abs=1e-9)


@pytest.mark.parametrize("with_graph", [False, True])
def test_transducer_lattice_posteriors(device, with_graph):
    """fast_beam_search lattices (trivial graph and a word graph): arc i of every path is
    frame i, so the depth of an arc's source is its frame and posteriors sum to 1 per frame."""
    model = random_model(vocab_size=4, context_size=2, seed=3, device=device)
    enc, lens = random_batch([3, 1, 4], seed=3, device=device)
    graph = None
    if with_graph:
        graph = k2.Fsa.from_str(
            "0 0 1 5 -0.5\n0 1 2 6 -0.2\n0 2 -1 -1 0.0\n1 0 3 0 -0.1\n1 1 2 0 -0.3\n2",
            acceptor=False).to(device)
    lat = fast_beam_search(model, enc, lens, graph, FastBeamSearchConfig(beam=50.0)).lattice
    post = arc_posteriors(lat, PosteriorConfig(acoustic_scale=0.5))
    frames = lattice_arc_frames(lat)
    for i, (lo, hi) in enumerate(_utt_slices(lat)):
        want, want_words, paths = _brute_force(lat, i, PosteriorConfig(acoustic_scale=0.5))
        assert post[lo:hi].tolist() == pytest.approx(want, abs=1e-6)
        for p in paths:
            assert [frames[lo + a].item() for a in p.arcs] == list(range(len(p.arcs)))
        n = int(lens[i]) + 1
        per_frame = torch.zeros(n, dtype=torch.float64)
        per_frame.index_add_(0, frames[lo:hi].cpu(), post[lo:hi].cpu())
        assert per_frame.tolist() == pytest.approx([1.0] * n, abs=1e-9)
        if with_graph:
            ids, counts = word_posteriors(k2.create_fsa_vec([lat[i]]), PosteriorConfig(0.5))
            assert dict(zip(ids.tolist()[0], counts.tolist()[0])) == pytest.approx(
                want_words, abs=1e-6)


def test_state_depths_and_words_on_random_dags(device):
    rng = np.random.default_rng(0)
    dags = [random_word_dag(rng, int(rng.integers(3, 8))) for _ in range(5)]
    vec = dags_to_vec(dags, device)
    depth = state_depths(vec).tolist()
    offset = 0
    for num_states, arcs in dags:
        longest = [0] + [-1] * (num_states - 1)
        for s, d, _, _ in arcs:  # arcs are in a topological order
            longest[d] = max(longest[d], longest[s] + 1)
        assert depth[offset:offset + num_states] == longest
        offset += num_states
    same, words = lattice_arc_words(vec)
    assert same is vec
    want = [max(w, 0) for _, arcs in dags for _, _, w, _ in arcs]
    assert words.tolist() == want


def test_empty_lattices_and_bad_inputs(device):
    vec = k2.create_fsa_vec([empty_fsa(device), dags_to_vec([(2, [(0, 1, 0, 0.0)])],
                                                          device)[0]])
    post = arc_posteriors(vec)
    assert post.tolist() == [1.0]
    ids, counts = word_posteriors(vec)
    assert ids.tolist() == [[], []] and counts.tolist() == [[], []]
    with pytest.raises(ValueError, match="acoustic_scale"):
        PosteriorConfig(acoustic_scale=0.0)
    with pytest.raises(ValueError, match="lm_scale"):
        PosteriorConfig(lm_scale=float("inf"))
    with pytest.raises(TypeError, match="acoustic_scale"):
        PosteriorConfig(acoustic_scale="1")
    with pytest.raises(TypeError, match="PosteriorConfig"):
        arc_posteriors(vec, config=1.0)
    with pytest.raises(ValueError, match="FsaVec"):
        arc_posteriors(vec[1])
    with pytest.raises(TypeError, match="k2.Fsa"):
        arc_posteriors([vec])
    with pytest.raises(ValueError, match="no 'words' attribute"):
        word_posteriors(vec, attribute="words")
