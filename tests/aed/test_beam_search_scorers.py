"""The attention beam search with extra weighted scorers (neural LM, token n-gram, hotwords,
CTC as a partial scorer) against the per-hypothesis reference."""

from __future__ import annotations

import pytest
import torch

from k2dec.aed import BeamSearchConfig, beam_search
from k2dec.scorers import CtcScorer, WeightedScorer
from tests.aed.test_beam_search import _assert_same, _problem
from tests.reference.aed_reference import reference_beam_search
from tests.reference.scorers import RefCtc
from tests.scorers.factories import scorer_pairs

CASES = {
    "lm": ("r", {}),
    "ngram+hotwords": ("nh", {}),
    "transformer_lm+ctc": ("t", dict(ctc_weight=0.3)),
    "all+pruned_lm": ("rnh", dict(ctc_weight=0.4, lm_weight=0.3, lm_fusion="pruned")),
    "partial_ctc": ("h", {}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_matches_reference(device, tmp_path, case):
    kinds, kwargs = CASES[case]
    for seed in (1, 2):
        dec, memory, lens, ctc, lm = _problem(seed, device, eos_bias=0.7)
        vocab = dec.vocab_size
        scorers, refs = scorer_pairs(kinds, vocab, memory.size(0), seed, device, tmp_path,
                                     score_eos=True)
        refs = [(r, w, "lm" if k in "rt" else "full") for (r, w), k in zip(refs, kinds)]
        if case == "partial_ctc":
            scorers.append(WeightedScorer(CtcScorer(ctc, lens, 0, dec.eos_id), 0.5))
            refs.append((RefCtc(ctc.tolist(), lens.tolist(), 0, dec.eos_id), 0.5, "ctc"))
        cfg = BeamSearchConfig(beam_size=3, nbest=3, **kwargs)
        got = beam_search(dec, memory, lens, cfg, ctc_log_probs=ctc, lm=lm, scorers=scorers)
        want = reference_beam_search(dec, memory, lens, cfg, ctc_log_probs=ctc, lm=lm,
                                     scorers=refs)
        assert any(len(h) > 0 for h in got)
        _assert_same(got, want, 1e-7)
        for hyps, ref in zip(got, want):
            for h, r in zip(hyps, ref):
                assert h.scorer_scores == pytest.approx(tuple(r.scorer_scores), abs=1e-7)
        plain = beam_search(dec, memory, lens, cfg, ctc_log_probs=ctc, lm=lm)
        assert [[(h.tokens, h.score) for h in x] for x in got] != [
            [(h.tokens, h.score) for h in x] for x in plain]


def test_partial_scorer_needs_candidates():
    ctc = torch.randn(1, 4, 5).log_softmax(-1)
    scorer = CtcScorer(ctc, torch.tensor([4]), 0, 4)
    state = scorer.init_state(torch.tensor([0]))
    with pytest.raises(ValueError, match="partial"):
        scorer.score(state)
