"""Words with frames and confidences from lattices: frames equal those of the best path found
by enumerating every path; confidences are the sausage posteriors of those words."""

from __future__ import annotations

import k2
import numpy as np
import pytest
import torch

from k2dec.lattice import AuxLabels, LatticeConfig, get_lattice, hypotheses_from_lattice
from k2dec.lattice.mbr import MbrConfig, mbr_decode
from k2dec.lattice.posteriors import PosteriorConfig
from k2dec.lattice.rescore import RescoreConfig, rescore_with_whole_lattice
from k2dec.lattice.timed_units import Topology, lattice_timed_units
from k2dec.testing.graphs import ctc_lexicon_graph, peaked_log_probs
from k2dec.testing.transducer import random_batch, random_model
from k2dec.transducer import FastBeamSearchConfig, fast_beam_search
from tests.lattice.test_rescore import _G
from tests.primitives.test_word_spans import _ref_ctc_spans, _ref_words
from tests.reference.lattice_paths import enumerate_paths

# tokens 1, 2 begin words; 3, 4 continue them
LEXICON = {1: [1], 2: [2], 3: [1, 3], 4: [2, 4, 3]}
WORD_START = torch.tensor([False, True, True, False, False])


def _lattices(device, seed, n=5):
    rng = np.random.default_rng(seed)
    scores = {1: -1.0, 2: -1.4, 3: -0.8, 4: -0.6}
    HLG = k2.Fsa.from_str(ctc_lexicon_graph(LEXICON, scores), acceptor=False).to(device)
    HLG.lm_scores = HLG.scores.clone()
    lengths = torch.from_numpy(rng.integers(1, 9, size=n))
    log_probs = peaked_log_probs(rng, n, int(lengths.max()), 5, scale=1.2).to(device)
    return get_lattice(log_probs, lengths, HLG, LatticeConfig(output_beam=5.0))


def _best_path(lattice, i):
    paths = enumerate_paths(lattice[i].to("cpu"))
    return max(paths, key=lambda p: p.score)


@pytest.mark.parametrize("use_word_start", [True, False])
def test_ctc_units_match_best_path_frames(device, use_word_start):
    for seed in range(4):
        result = _lattices(device, seed)
        post = PosteriorConfig(acoustic_scale=0.6)
        units, mbr = lattice_timed_units(
            result, Topology.CTC, MbrConfig(posterior=post, decode_mbr=False),
            word_start=WORD_START.to(device) if use_word_start else None)
        hyps = hypotheses_from_lattice(result)
        assert units.ids.tolist() == [list(h.words) for h in hyps]
        # confidences are the sausage posteriors of the best path's words
        again = mbr_decode(result, MbrConfig(posterior=post, decode_mbr=False),
                           hyps=[list(h.words) for h in hyps])
        # the same sums, taken in another order on CUDA
        assert units.confidences.tolist() == [
            pytest.approx(row, rel=1e-12, abs=1e-12) for row in again.confidences.tolist()]
        for i in range(result.lattice.shape[0]):
            best = _best_path(result.lattice, i)
            frame_labels = [lab for lab in best.labels if lab >= 0]
            spans = _ref_ctc_spans(frame_labels)
            words = _ref_words([s[0] for s in spans], [s[1] for s in spans],
                               [s[2] for s in spans], WORD_START.tolist())
            assert len(words) == len(best.words)
            assert list(zip(units.begin.tolist()[i], units.end.tolist()[i])) == [
                tuple(w) for w in words]
            assert all(0.0 <= c <= 1.0 + 1e-9 for c in units.confidences.tolist()[i])


def test_ctc_mbr_units(device):
    for seed in range(4):
        result = _lattices(device, 10 + seed, n=6)
        config = MbrConfig(posterior=PosteriorConfig(acoustic_scale=0.5))
        units, mbr = lattice_timed_units(result, Topology.CTC, config,
                                         word_start=WORD_START.to(device))
        one_best, _ = lattice_timed_units(result, Topology.CTC,
                                          word_start=WORD_START.to(device))
        assert units.ids.tolist() == mbr.words.tolist()
        assert units.confidences.tolist() == mbr.confidences.tolist()
        for i in range(result.lattice.shape[0]):
            b, e = units.begin.tolist()[i], units.end.tolist()[i]
            assert all(x <= y for x, y in zip(b, e))
            assert b == sorted(b)
            if units.ids.tolist()[i] == one_best.ids.tolist()[i]:
                assert b == one_best.begin.tolist()[i] and e == one_best.end.tolist()[i]


def test_rescored_lattice_units(device):
    result = _lattices(device, 3)
    rescored = rescore_with_whole_lattice(result, _G(device), RescoreConfig(lm_scales=(1.0,)))
    units, _ = lattice_timed_units(rescored.lattice, Topology.CTC,
                                   word_start=WORD_START.to(device))
    hyps = hypotheses_from_lattice(rescored.lattice)
    assert units.ids.tolist() == [list(h.words) for h in hyps]
    for i, h in enumerate(hyps):
        assert units.begin.tolist()[i][:1] == list(h.token_frames[:1])


@pytest.mark.parametrize("with_graph", [False, True])
def test_transducer_units_match_best_path(device, with_graph):
    model = random_model(vocab_size=4, context_size=2, seed=5, device=device)
    enc, lens = random_batch([4, 1, 5, 3], seed=5, device=device)
    graph = None
    if with_graph:  # word 5 = tokens 1 3, word 6 = token 2; words on their first token
        graph = k2.Fsa.from_str("0 0 2 6 -0.4\n0 1 1 5 -0.5\n0 2 -1 -1 0.0\n1 0 3 0 -0.1\n2",
                                acceptor=False).to(device)
    lattice = fast_beam_search(model, enc, lens, graph, FastBeamSearchConfig(beam=50.0)).lattice
    word_start = torch.tensor([False, True, True, False], device=device)
    units, _ = lattice_timed_units(
        lattice, Topology.TRANSDUCER,
        aux_labels=AuxLabels.WORDS if with_graph else AuxLabels.TOKENS,
        word_start=word_start if with_graph else None)
    for i in range(lattice.shape[0]):
        best = _best_path(lattice, i)
        toks = [(lab, t, t + 1) for t, lab in enumerate(best.labels) if lab > 0]
        if with_graph:
            want = _ref_words([t[0] for t in toks], [t[1] for t in toks], [t[2] for t in toks],
                              word_start.tolist())
            assert units.ids.tolist()[i] == list(best.words)
        else:
            want = [[t[1], t[2]] for t in toks]
            assert units.ids.tolist()[i] == [t[0] for t in toks]
        assert [list(x) for x in zip(units.begin.tolist()[i], units.end.tolist()[i])] == want


def test_empty_lattice_and_bad_inputs(device):
    result = _lattices(device, 0, n=2)
    HLG = k2.Fsa.from_str(ctc_lexicon_graph(LEXICON, {w: 0.0 for w in LEXICON}),
                          acceptor=False).to(device)
    log_probs = torch.zeros(2, 3, 5, device=device).log_softmax(-1)
    log_probs[0] = -float("inf")  # no path at all
    empty = get_lattice(log_probs, torch.tensor([3, 3]), HLG, LatticeConfig(retry_scales=()))
    assert empty.empty_indices == [0]
    units, mbr = lattice_timed_units(empty, Topology.CTC)
    assert units.has_path.tolist() == [False, True]
    assert units.ids.tolist()[0] == [] and units.begin.tolist()[0] == []
    lat = empty.lattice
    with pytest.raises(TypeError, match="Topology"):
        lattice_timed_units(lat, "ctc")
    with pytest.raises(TypeError, match="AuxLabels"):
        lattice_timed_units(lat, Topology.CTC, aux_labels="words")
    with pytest.raises(ValueError, match="no 'words' attribute"):
        lattice_timed_units(lat, Topology.CTC, attribute="words")
    with pytest.raises(ValueError, match="one to one"):
        lattice_timed_units(result, Topology.CTC, aux_labels=AuxLabels.TOKENS)
