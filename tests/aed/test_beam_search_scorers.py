"""The attention beam search with extra weighted scorers (neural LM, token n-gram, hotwords,
CTC as a partial scorer) against the per-hypothesis reference."""

from __future__ import annotations

import pytest
import torch

from k2dec.aed import BeamSearchConfig, IncrementalLmScorer, beam_search
from k2dec.scorers import CtcScorer, NeuralLmScorer, WeightedScorer
from tests.aed.beam_problems import assert_same_hyps, random_problem
from tests.reference.aed_reference import reference_beam_search
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
        cfg = BeamSearchConfig(beam_size=3, num_hyps=3, **kwargs)
        got = beam_search(dec, memory, lens, cfg, ctc_log_probs=ctc, lm=lm, scorers=scorers)
        want = reference_beam_search(dec, memory, lens, cfg, ctc_log_probs=ctc, lm=lm,
                                     scorers=refs)
        assert any(len(h) > 0 for h in got)
        assert_same_hyps(got, want, 1e-7)
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


def test_incremental_lm_scorer_agrees_with_the_neural_lm_scorer(device, tmp_path):
    """Two ways to fuse a k2dec LM: through IncrementalLM.step (the ``lm`` argument) and
    through NeuralLM.advance (build_scorers' "lm"); same scores over random reorderings."""
    from tests.scorers.factories import random_lm

    lm = random_lm("rnn", 6, 0, device)
    inc = IncrementalLmScorer(lm, lm.sos_id, lm.eos_id)
    ref = NeuralLmScorer(lm, score_eos=True)
    g = torch.Generator().manual_seed(0)
    utt = torch.arange(3, device=device)
    a, b = inc.init_state(utt), ref.init_state(utt)
    for _ in range(4):
        assert torch.allclose(inc.score(a)[0], ref.score(b)[0], atol=1e-10)
        assert torch.allclose(inc.final_score(a), ref.final_score(b), atol=1e-10)
        rows = torch.randint(0, inc.num_rows(a), (4,), generator=g).to(device)
        tokens = torch.randint(0, 6, (4,), generator=g).to(device)
        a, b = inc.advance(a, None, rows, tokens), ref.advance(b, None, rows, tokens)
    assert a.ys.shape == (4, 5)
    with pytest.raises(ValueError, match="extends every row"):
        inc.advance(a, None, rows, tokens, emit=torch.tensor([True, False, True, True]))
    with pytest.raises(ValueError, match="scores every token"):
        inc.score(a, tokens.unsqueeze(1))


def test_ctc_given_as_a_scorer_is_the_joint_ctc():
    """ctc_weight > 0 with the CTC prefix scorer among the scorers (as the method builds it)
    is the same search as with ctc_log_probs; it must match the search's blank, eos and
    batch, and the CTC is given once."""
    dec, memory, lens, ctc, _ = random_problem(3, torch.device("cpu"), eos_bias=0.7)
    cfg = BeamSearchConfig(beam_size=3, num_hyps=3, ctc_weight=0.4)
    ws = WeightedScorer(CtcScorer(ctc, lens, 0, dec.eos_id), 0.4)
    given = beam_search(dec, memory, lens, cfg, scorers=[ws])
    joint = beam_search(dec, memory, lens, cfg, ctc_log_probs=ctc)
    assert [[(h.tokens, h.score, h.ctc_score) for h in hs] for hs in given] == [
        [(h.tokens, h.score, h.ctc_score) for h in hs] for hs in joint]
    assert all(h.scorer_scores == (h.ctc_score,) for hs in given for h in hs)
    with pytest.raises(ValueError, match="give the CTC output once"):
        beam_search(dec, memory, lens, cfg, ctc_log_probs=ctc, scorers=[ws])
    for bad in (CtcScorer(ctc, lens, 1, dec.eos_id), CtcScorer(ctc[:2], lens[:2], 0, dec.eos_id)):
        with pytest.raises(ValueError, match=r"a CtcScorer in scorers has \(utterances"):
            beam_search(dec, memory, lens, cfg, scorers=[WeightedScorer(bad, 0.4)])
