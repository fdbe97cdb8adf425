"""The LMs plug into the attention beam search as shallow-fusion LMs (a NeuralLmScorer): the
batched search (which advances rows with state and reorders it with select_state) agrees with
the per-hypothesis reference search (which steps every prefix from scratch)."""

from __future__ import annotations

import pytest
import torch

from k2dec.aed import BeamSearchConfig, TransformerDecoder, beam_search
from k2dec.scorers import NeuralLmScorer, WeightedScorer
from k2dec.testing.lm import VOCAB, make_lm
from tests.reference.aed_reference import reference_beam_search


@pytest.mark.parametrize("name", ["rnn", "transformer"])
@pytest.mark.parametrize("lm_fusion", ["full", "pruned"])
def test_shallow_fusion_matches_reference(name, lm_fusion, device):
    for seed in range(2):
        torch.manual_seed(seed)
        decoder = TransformerDecoder(VOCAB, 5, d_model=8, nhead=2, num_layers=1,
                                     dim_feedforward=16, dropout=0.0, sos_id=1, eos_id=1)
        decoder = decoder.to(device=device, dtype=torch.float64).eval()
        lm = make_lm(name, device, seed=seed)
        g = torch.Generator().manual_seed(seed)
        memory = torch.randn(3, 6, 5, generator=g, dtype=torch.float64).to(device)
        lens = torch.tensor([6, 3, 5], device=device)
        config = BeamSearchConfig(beam_size=3, num_hyps=3, lm_fusion=lm_fusion)
        got = beam_search(decoder, memory, lens, config,
                          [WeightedScorer(NeuralLmScorer(lm, score_eos=True), 0.5)])
        want = reference_beam_search(decoder, memory, lens, config, lm=lm, lm_scale=0.5)
        assert any(len(h) > 0 for h in got)
        assert all(h.lm_score < 0 for hs in got for h in hs)  # the LM took part
        assert [[h.tokens for h in hs] for hs in got] == [[h.tokens for h in hs] for hs in want]
        for hs, rs in zip(got, want, strict=True):
            for h, r in zip(hs, rs, strict=True):
                assert h.lm_score == pytest.approx(r.lm_score, abs=1e-8)
                assert h.score == pytest.approx(r.score, abs=1e-8)
