"""build_scorers: a method's fusion part and hotwords -> the scorers of a token-level search;
a new scorer is one builder, one registration and its weight in the fusion part, and every
search can use it (the CTC prefix beam search, modified beam search and the attention beam
search below); no method config changes."""

from __future__ import annotations

from dataclasses import dataclass, fields

import pytest
import torch

from k2dec.aed import BeamSearchConfig, beam_search
from k2dec.lattice.ctc_prefix_beam_search import CtcPrefixBeamSearchConfig, ctc_prefix_beam_search
from k2dec.lm import RnnLM, RnnLmConfig, TransformerLM, TransformerLmConfig
from k2dec.methods import (
    AedInputs,
    Resources,
    ScorerRequest,
    build_scorers,
    get_method,
    register_scorer,
    scorer_names,
)
from k2dec.methods.aed import AttentionBeamSearchMethodConfig
from k2dec.methods.hotword_biasing import HotwordConfig
from k2dec.methods.parts import FusionConfig
from k2dec.scorers import CtcScorer, NeuralLmScorer, TableScorer, WeightedScorer
from k2dec.testing.aed import joint_scorers
from k2dec.testing.transducer import random_batch, random_model
from k2dec.transducer import ModifiedBeamSearchConfig, modified_beam_search
from tests.aed.beam_problems import assert_same_hyps, random_problem
from tests.reference.aed_reference import reference_beam_search

V = 5
CPU = torch.device("cpu")


class UnigramBonus(TableScorer):
    """A toy scorer: ``bonus[v]`` for every token ``v``, whatever came before (one state)."""

    def __init__(self, bonus: torch.Tensor) -> None:
        self.vocab_size = bonus.numel()
        self.score_table = bonus.view(1, -1).float()
        self.next_state = torch.zeros(1, self.vocab_size, dtype=torch.int64)
        self.final = torch.zeros(1)

    def init_state(self, utt: torch.Tensor) -> torch.Tensor:
        return torch.zeros_like(utt, dtype=torch.int64)


#: one per test session: what the toy builder made, to compare with
BUILT: list[UnigramBonus] = []


@dataclass(frozen=True)
class ToyFusion(FusionConfig):
    """The fusion part with the toy scorer's weight (a new scorer's one field)."""

    toy_scale: float = 0.0


@register_scorer("toy-unigram", "toy_scale")
def _toy(res: Resources, req: ScorerRequest) -> UnigramBonus:
    if "toy" not in res.sources:
        raise ValueError(f"{req.method} needs the toy bonus in Resources.sources['toy']")
    BUILT.append(UnigramBonus(res.sources["toy"][:req.vocab_size]))
    return BUILT[-1]


class RefUnigramBonus:
    """The toy scorer for the per-hypothesis reference search (tests/reference/scorers.py's
    interface): ``bonus[c]`` for every token, nothing for the end."""

    def __init__(self, bonus: torch.Tensor) -> None:
        self.bonus = bonus.tolist()

    def start(self, utt: int) -> None:
        return None

    def step(self, state, token: int):
        return self.bonus[token], state

    def final(self, state) -> float:
        return 0.0


def _log_probs(seed: int, lens: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(len(lens), max(lens), V, generator=g) * 2).log_softmax(-1)
    return x, torch.tensor(lens)


def test_the_registered_toy_scorer_is_added_by_two_searches():
    assert "toy-unigram" in scorer_names() and {"lm", "lodr"} <= set(scorer_names())
    bonus = torch.tensor([0.0, 0.5, -1.0, 2.0, 0.25])
    res = Resources(sources={"toy": bonus})
    # CTC prefix beam search: each prefix's score is its CTC score plus 0.7 * its bonuses
    x, lens = _log_probs(0, [7, 1, 5])
    scorers = build_scorers(res, "test", ToyFusion(toy_scale=0.7), V, torch.device("cpu"))
    assert [(s.scorer, s.weight) for s in scorers] == [(BUILT[-1], 0.7)]
    hyps = ctc_prefix_beam_search(x, lens, CtcPrefixBeamSearchConfig(beam_size=4), scorers)
    checked = 0
    for per_utt in hyps:
        for h in per_utt:
            want = h.ctc_score + 0.7 * float(sum(bonus[t] for t in h.tokens))
            assert h.score == pytest.approx(want, abs=1e-4)
            checked += len(h.tokens) > 0
    assert checked
    # modified beam search: the same as giving the scorer by hand; a large penalty on every
    # token but blank leaves fewer tokens (the candidates are chosen by the transducer score)
    model = random_model(vocab_size=V, seed=1)
    enc, enc_lens = random_batch([6, 1, 4], seed=1)
    cfg = ModifiedBeamSearchConfig(beam_size=4)
    got = modified_beam_search(model, enc, enc_lens, cfg, scorers=build_scorers(
        res, "test", ToyFusion(toy_scale=0.7), V, torch.device("cpu")))
    by_hand = modified_beam_search(model, enc, enc_lens, cfg,
                                   scorers=[WeightedScorer(UnigramBonus(bonus), 0.7)])
    assert [h.tokens for h in got] == [h.tokens for h in by_hand]
    assert [h.score for h in got] == [h.score for h in by_hand]
    penalty = Resources(sources={"toy": torch.tensor([0.0] + [-1000.0] * (V - 1))})
    plain = modified_beam_search(model, enc, enc_lens, cfg)
    quiet = modified_beam_search(model, enc, enc_lens, cfg, scorers=build_scorers(
        penalty, "test", ToyFusion(toy_scale=1.0), V, torch.device("cpu")))
    assert sum(map(len, (h.tokens for h in quiet))) < sum(map(len, (h.tokens for h in plain)))


def test_fusion_order_zero_weights_and_hotwords():
    lm = RnnLM(RnnLmConfig(vocab_size=V, embedding_dim=4, hidden_dim=4, num_layers=1)).eval()
    res = Resources(lms={"rnn_lm": lm}, hotwords=(((1, 2), None),))
    cpu = torch.device("cpu")
    out = build_scorers(res, "m", FusionConfig(lm_scale=0.3), V, cpu, HotwordConfig())
    assert isinstance(out[0].scorer, NeuralLmScorer) and out[0].weight == 0.3
    assert out[0].scorer.score_eos is False and out[1].weight == 1.0 and len(out) == 2
    assert build_scorers(res, "m", FusionConfig(), V, cpu) == []  # weight 0: not built
    assert len(build_scorers(res, "m", None, V, cpu, HotwordConfig())) == 1
    assert build_scorers(Resources(lms={"rnn_lm": lm}), "m", None, V, cpu,
                         HotwordConfig()) == []
    # the order of the fusion part's fields (ctc, lm, lodr), whatever the weights
    assert [f.name for f in fields(FusionConfig)] == ["ctc_weight", "lm_scale", "lodr_scale"]


@pytest.mark.parametrize("fusion, res, message", [
    (FusionConfig(lm_scale=0.3), Resources(), "m needs a neural LM"),
    (FusionConfig(lodr_scale=-0.2), Resources(), "m with a LODR scale needs LODR's token n-gram"),
    (FusionConfig(lodr_scale=-0.2), Resources(lodr=object()), "a TokenNgramScorer"),
    (ToyFusion(toy_scale=1.0), Resources(), "m needs the toy bonus"),
    (FusionConfig(ctc_weight=0.3), Resources(), "m with a CTC weight needs the batch's CTC output"),
])
def test_missing_scorers_are_clear_errors(fusion, res, message):
    with pytest.raises(ValueError, match=message):
        build_scorers(res, "m", fusion, V, torch.device("cpu"))


def test_a_name_and_a_weight_are_registered_once():
    with pytest.raises(ValueError, match="scorer 'lm' \\(weight 'nope'\\) is registered twice"):
        register_scorer("lm", "nope")(_toy)
    with pytest.raises(ValueError, match="scorer 'mine' \\(weight 'lm_scale'\\) is registered"):
        register_scorer("mine", "lm_scale")(_toy)


def test_the_toy_scorer_in_the_attention_beam_search():
    """The third search: the toy scorer from build_scorers beside the CTC prefix scorer built
    from the fusion part, against the same scorers given by hand and the reference search."""
    bonus = torch.tensor([0.0, 0.5, -1.0, 2.0, 0.25])
    res = Resources(sources={"toy": bonus})
    changed = 0
    for seed in (1, 2, 3):
        n = 1 if seed == 1 else 3
        dec, memory, lens, ctc, _ = random_problem(seed, CPU, n=n, v=V, eos_bias=0.7)
        cfg = BeamSearchConfig(beam_size=3, num_hyps=3)
        scorers = build_scorers(res, "test", ToyFusion(ctc_weight=0.3, toy_scale=0.7), V, CPU,
                                eos_id=dec.eos_id, ctc_log_probs=ctc, ctc_lens=lens)
        assert isinstance(scorers[0].scorer, CtcScorer) and scorers[1].scorer is BUILT[-1]
        got = beam_search(dec, memory, lens, cfg, scorers=scorers)
        ctc_by_hand = joint_scorers(dec, lens, ctc, 0.3)
        by_hand = beam_search(dec, memory, lens, cfg, scorers=[
            *ctc_by_hand, WeightedScorer(UnigramBonus(bonus), 0.7)])
        assert [[(h.tokens, h.score, h.ctc_score) for h in hs] for hs in got] == [
            [(h.tokens, h.score, h.ctc_score) for h in hs] for hs in by_hand]
        want = reference_beam_search(dec, memory, lens, cfg, ctc_log_probs=ctc,
                                     scorers=[(RefUnigramBonus(bonus), 0.7, "full")],
                                     ctc_weight=0.3)
        assert_same_hyps(got, want, 1e-8)
        for hyps in got:
            for h in hyps:  # (ctc, toy): the toy's part is the tokens' bonuses (0 for eos)
                assert h.scorer_scores[0] == h.ctc_score
                assert h.scorer_scores[1] == pytest.approx(sum(bonus[t] for t in h.tokens))
        plain = beam_search(dec, memory, lens, cfg, ctc_by_hand)
        changed += [[h.tokens for h in hs] for hs in got] != [
            [h.tokens for h in hs] for hs in plain]
    assert changed


def _lm(kind: str, seed: int) -> RnnLM | TransformerLM:
    torch.manual_seed(seed)
    if kind == "rnn":
        return RnnLM(RnnLmConfig(vocab_size=V, embedding_dim=4, hidden_dim=4, num_layers=1,
                                 sos_id=4, eos_id=4)).eval()
    return TransformerLM(TransformerLmConfig(vocab_size=V, d_model=4, nhead=1, num_layers=1,
                                             dim_feedforward=4, dropout=0.0, sos_id=4,
                                             eos_id=4)).eval()


def test_the_attention_method_builds_its_ctc_and_lm_from_its_fusion_part():
    """attention-beam-search: its fusion.ctc_weight and fusion.lm_scale through
    build_scorers, the same hypotheses as the library call with a CtcScorer and a
    NeuralLmScorer; the LM is the one every method prefers (rnn_lm over transformer_lm), with
    its end-of-sentence score."""
    rnn, transformer = _lm("rnn", 0), _lm("transformer", 1)
    dec, memory, lens, ctc, _ = random_problem(4, CPU, v=V, eos_bias=0.7, dtype=torch.float32)
    assert dec.eos_id == dec.sos_id == 4
    search = BeamSearchConfig(beam_size=3, num_hyps=3)
    cfg = AttentionBeamSearchMethodConfig(search=search,
                                          fusion=FusionConfig(ctc_weight=0.4, lm_scale=0.5))
    both = Resources(attention_decoder=dec, sources={"transformer_lm": transformer,
                                                     "rnn_lm": rnn})
    out = get_method("attention-beam-search")(AedInputs(memory, lens, ctc), both, cfg)[0]
    with torch.no_grad():
        want = beam_search(dec, memory, lens, search, joint_scorers(dec, lens, ctc, 0.4, rnn, 0.5))
        other = beam_search(dec, memory, lens, search,
                            joint_scorers(dec, lens, ctc, 0.4, transformer, 0.5))
    assert out.tokens == [list(nb[0].tokens) for nb in want]
    assert [r.score for r in out.hyps] == pytest.approx([nb[0].score for nb in want], abs=1e-5)
    assert [[h.tokens for h in hs] for hs in want] != [[h.tokens for h in hs] for hs in other]
    lm = build_scorers(both, "m", FusionConfig(lm_scale=0.5), V, CPU, eos_id=4)[0].scorer
    assert isinstance(lm, NeuralLmScorer) and lm.lm is rnn and lm.score_eos and lm.is_lm
    with pytest.raises(ValueError, match="m: CTC prefix scores are a partial scorer"):
        build_scorers(both, "m", FusionConfig(ctc_weight=0.3), V, CPU, ctc_log_probs=ctc,
                      ctc_lens=lens)
