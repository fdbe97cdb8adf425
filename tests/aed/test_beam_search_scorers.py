"""The attention beam search with extra weighted scorers (neural LM, token n-gram, hotwords,
CTC as a partial scorer) against the per-hypothesis reference."""

from __future__ import annotations

import pytest
import torch

from k2dec.aed import BeamSearchConfig, beam_search
from k2dec.scorers import CtcScorer, WeightedScorer
from tests.aed.beam_problems import assert_same_hyps, random_problem, ref, run, setup
from tests.reference.scorers import RefCtc
from tests.scorers.factories import scorer_pairs

CASES = {
    "lm": ("r", {}),
    "ngram+hotwords": ("nh", {}),
    "transformer_lm+ctc": ("t", dict(ctc_weight=0.3)),
    "all+pruned_lm": ("rnh", dict(ctc_weight=0.4, lm_scale=0.3, lm_fusion="pruned")),
    "partial_ctc": ("h", {}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_matches_reference(device, tmp_path, case):
    kinds, kwargs = CASES[case]
    for seed in (1, 2):
        dec, memory, lens, ctc, lm = random_problem(seed, device, eos_bias=0.7)
        vocab = dec.vocab_size
        scorers, refs = scorer_pairs(kinds, vocab, memory.size(0), seed, device, tmp_path,
                                     score_eos=True)
        refs = [(r, w, "lm" if k in "rt" else "full") for (r, w), k in zip(refs, kinds)]
        if case == "partial_ctc":
            scorers.append(WeightedScorer(CtcScorer(ctc, lens, 0, dec.eos_id), 0.5))
            refs.append((RefCtc(ctc.tolist(), lens.tolist(), 0, dec.eos_id), 0.5, "ctc"))
        cfg = setup(beam_size=3, num_hyps=3, **kwargs)
        got = run(dec, memory, lens, cfg, ctc_log_probs=ctc, lm=lm, scorers=scorers)
        want = ref(dec, memory, lens, cfg, ctc_log_probs=ctc, lm=lm, scorers=refs)
        assert any(len(h) > 0 for h in got)
        assert_same_hyps(got, want, 1e-7)
        joint = (cfg.ctc_weight > 0) + (cfg.lm_scale > 0)  # run's scorers before `scorers`
        for hyps, r_hyps in zip(got, want):
            for h, r in zip(hyps, r_hyps):
                assert h.scorer_scores[joint:] == pytest.approx(tuple(r.scorer_scores),
                                                                abs=1e-7)
                assert len(h.scorer_scores) == joint + len(scorers)
        plain = run(dec, memory, lens, cfg, ctc_log_probs=ctc, lm=lm)
        assert [[(h.tokens, h.score) for h in x] for x in got] != [
            [(h.tokens, h.score) for h in x] for x in plain]


def test_partial_scorer_needs_candidates():
    ctc = torch.randn(1, 4, 5).log_softmax(-1)
    scorer = CtcScorer(ctc, torch.tensor([4]), 0, 4)
    state = scorer.init_state(torch.tensor([0]))
    with pytest.raises(ValueError, match="partial"):
        scorer.score(state)


def test_the_ctc_weight_is_the_ctc_scorers_weight():
    """Joint CTC/attention decoding is a CtcScorer among the scorers (as build_scorers makes
    it from fusion.ctc_weight): its weight is the CTC weight (the decoder's is 1 minus it), so
    the same CTC split over two scorers is the same search; a CtcScorer must match the
    search's blank, eos and batch."""
    dec, memory, lens, ctc, _ = random_problem(3, torch.device("cpu"), eos_bias=0.7)
    cfg = BeamSearchConfig(beam_size=3, num_hyps=3)

    def ctc_scorer(weight):
        return WeightedScorer(CtcScorer(ctc, lens, 0, dec.eos_id), weight)

    one = beam_search(dec, memory, lens, cfg, scorers=[ctc_scorer(0.4)])
    two = beam_search(dec, memory, lens, cfg, scorers=[ctc_scorer(0.25), ctc_scorer(0.15)])
    want = ref(dec, memory, lens, cfg, ctc_log_probs=ctc)  # no CTC
    assert all(h.scorer_scores == (h.ctc_score,) for hs in one for h in hs)
    assert [[(h.tokens, round(h.score, 9), round(h.ctc_score, 9)) for h in hs]
            for hs in two] == [[(h.tokens, round(h.score, 9), round(h.ctc_score * 2, 9))
                                for h in hs] for hs in one]  # each CTC scorer sums its own
    with_ctc = ref(dec, memory, lens, setup(beam_size=3, num_hyps=3, ctc_weight=0.4),
                   ctc_log_probs=ctc)
    assert_same_hyps(one, with_ctc, 1e-8)
    assert [[h.tokens for h in hs] for hs in one] != [[h.tokens for h in hs] for hs in want]
    for bad in (CtcScorer(ctc, lens, 1, dec.eos_id), CtcScorer(ctc[:2], lens[:2], 0, dec.eos_id)):
        with pytest.raises(ValueError, match=r"a CtcScorer in scorers has \(utterances"):
            beam_search(dec, memory, lens, cfg, scorers=[WeightedScorer(bad, 0.4)])
