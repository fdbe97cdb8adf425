"""Agreement with a real peer: PyPI kaldi-decoder's FasterDecoder (a port of Kaldi's) on the same
graph and log-likelihoods gives the same 1-best word sequence and score."""

from __future__ import annotations

import k2
import numpy as np
import pytest
import torch

from k2dec.graph import k2_to_kaldi_decoder_fst
from k2dec.lattice import AuxLabels, LatticeConfig, one_best_decoding
from k2dec.testing.graphs import ctc_lexicon_graph, hmm_lexicon_graph, peaked_log_probs
from tests.lattice.graphs import to_k2
from tests.reference.viterbi import random_graph

kd = pytest.importorskip("kaldi_decoder")

WIDE = LatticeConfig(search_beam=50.0, output_beam=8.0, min_active_states=0,
                     max_active_states=100000)


def _kaldi_1best(fst, log_probs: np.ndarray) -> tuple[list[int], float]:
    import kaldifst

    decoder = kd.FasterDecoder(fst, kd.FasterDecoderOptions(beam=50.0, max_active=100000,
                                                             min_active=0))
    decoder.decode(kd.DecodableCtc(log_probs))
    ok, lattice = decoder.get_best_path()
    assert ok
    ok, _, olabels, weight = kaldifst.get_linear_symbol_sequence(lattice)
    assert ok
    return list(olabels), -(weight.value1 + weight.value2)


def _agree(fsa: k2.Fsa, log_probs: torch.Tensor, lengths: torch.Tensor,
           aux_labels: AuxLabels = AuxLabels.WORDS) -> int:
    fst = k2_to_kaldi_decoder_fst(fsa)
    hyps = one_best_decoding(log_probs, lengths, fsa, WIDE, aux_labels=aux_labels)
    compared = 0
    for i, h in enumerate(hyps):
        words, score = _kaldi_1best(fst, log_probs[i, : lengths[i]].numpy())
        out = list(h.tokens if aux_labels is AuxLabels.TOKENS else h.words)
        assert out == words, i
        assert h.score == pytest.approx(score, rel=1e-5, abs=1e-3), i
        compared += 1
    return compared


def test_ctc_topo_agrees_with_kaldi_decoder():
    rng = np.random.default_rng(1)
    H = k2.arc_sort(k2.ctc_topo(5))
    lengths = torch.from_numpy(rng.integers(1, 40, size=20))
    log_probs = peaked_log_probs(rng, 20, int(lengths.max()), 6)
    assert _agree(H, log_probs, lengths, AuxLabels.TOKENS) == 20


def test_hlg_like_graph_agrees_with_kaldi_decoder():
    rng = np.random.default_rng(2)
    lexicon = {1: [1, 2], 2: [2, 2, 3], 3: [3], 4: [4, 1, 4], 5: [1, 3, 5], 6: [5, 5]}
    scores = {w: float(np.log(p)) for w, p in zip(lexicon, rng.dirichlet(np.ones(6)))}
    fsa = k2.Fsa.from_str(ctc_lexicon_graph(lexicon, scores), acceptor=False)
    lengths = torch.from_numpy(rng.integers(5, 50, size=30))
    # peaked on a random token sequence: realistic, and the best path is usually a word string
    log_probs = peaked_log_probs(rng, 30, int(lengths.max()), 6, scale=4.0)
    assert _agree(fsa, log_probs, lengths) == 30


def test_hclg_like_graph_agrees_with_kaldi_decoder():
    """Monophone HMM graph: pdf-id labels (0 is a real pdf), transition scores, words."""
    rng = np.random.default_rng(4)
    lexicon = {1: [0, 1], 2: [2], 3: [1, 2, 0], 4: [3, 3], 5: [2, 1]}
    scores = {w: float(np.log(p)) for w, p in zip(lexicon, rng.dirichlet(np.ones(5)))}
    fsa = k2.Fsa.from_str(hmm_lexicon_graph(lexicon, scores), acceptor=False)
    lengths = torch.from_numpy(rng.integers(2, 60, size=30))
    log_probs = peaked_log_probs(rng, 30, int(lengths.max()), 8, scale=3.0)
    hyps = one_best_decoding(log_probs, lengths, fsa, WIDE)
    assert sum(len(h.words) > 1 for h in hyps) > 10
    assert _agree(fsa, log_probs, lengths) == 30


def test_random_graphs_agree_with_kaldi_decoder():
    rng = np.random.default_rng(3)
    compared = 0
    for _ in range(15):
        graph = random_graph(rng, int(rng.integers(3, 8)), 5, num_words=7, arcs_per_state=4)
        fsa = to_k2(graph, torch.device("cpu"))
        lengths = torch.from_numpy(rng.integers(1, 20, size=4))
        log_probs = peaked_log_probs(rng, 4, int(lengths.max()), 5)
        compared += _agree(fsa, log_probs, lengths)
    assert compared == 60
