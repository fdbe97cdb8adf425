"""build_scorers: a method's fusion part and hotwords -> the scorers of a token-level search;
a new scorer is one builder and one registration, and every search can use it."""

from __future__ import annotations

import pytest
import torch

from k2dec.lattice.ctc_prefix_beam_search import CtcPrefixBeamSearchConfig, ctc_prefix_beam_search
from k2dec.lm import RnnLM, RnnLmConfig
from k2dec.methods import Resources, build_scorers, register_scorer, scorer_names
from k2dec.methods.hotword_biasing import HotwordConfig
from k2dec.scorers import NeuralLmScorer, TableScorer, WeightedScorer
from k2dec.testing.transducer import random_batch, random_model
from k2dec.transducer import ModifiedBeamSearchConfig, modified_beam_search

V = 5


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


@register_scorer("toy-unigram")
def _toy(res: Resources, method: str, vocab_size: int, device: torch.device) -> UnigramBonus:
    if "toy" not in res.cache:
        raise ValueError(f"{method} needs the toy bonus in Resources.cache['toy']")
    BUILT.append(UnigramBonus(res.cache["toy"][:vocab_size]))
    return BUILT[-1]


def _log_probs(seed: int, lens: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(len(lens), max(lens), V, generator=g) * 2).log_softmax(-1)
    return x, torch.tensor(lens)


def test_the_registered_toy_scorer_is_added_by_two_searches():
    assert "toy-unigram" in scorer_names() and {"lm", "lodr"} <= set(scorer_names())
    bonus = torch.tensor([0.0, 0.5, -1.0, 2.0, 0.25])
    res = Resources(cache={"toy": bonus})
    # CTC prefix beam search: each prefix's score is its CTC score plus 0.7 * its bonuses
    x, lens = _log_probs(0, [7, 1, 5])
    scorers = build_scorers(res, "test", [("toy-unigram", 0.7)], V, torch.device("cpu"))
    assert [(s.scorer, s.weight) for s in scorers] == [(BUILT[-1], 0.7)]
    hyps = ctc_prefix_beam_search(x, lens, CtcPrefixBeamSearchConfig(beam=4), scorers)
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
    cfg = ModifiedBeamSearchConfig(beam=4)
    got = modified_beam_search(model, enc, enc_lens, cfg, scorers=build_scorers(
        res, "test", [("toy-unigram", 0.7)], V, torch.device("cpu")))
    by_hand = modified_beam_search(model, enc, enc_lens, cfg,
                                   scorers=[WeightedScorer(UnigramBonus(bonus), 0.7)])
    assert [h.tokens for h in got] == [h.tokens for h in by_hand]
    assert [h.score for h in got] == [h.score for h in by_hand]
    penalty = Resources(cache={"toy": torch.tensor([0.0] + [-1000.0] * (V - 1))})
    plain = modified_beam_search(model, enc, enc_lens, cfg)
    quiet = modified_beam_search(model, enc, enc_lens, cfg, scorers=build_scorers(
        penalty, "test", [("toy-unigram", 1.0)], V, torch.device("cpu")))
    assert sum(map(len, (h.tokens for h in quiet))) < sum(map(len, (h.tokens for h in plain)))


def test_fusion_order_zero_weights_and_hotwords():
    lm = RnnLM(RnnLmConfig(vocab_size=V, embedding_dim=4, hidden_dim=4, num_layers=1)).eval()
    res = Resources(lms={"rnn_lm": lm}, hotwords=(((1, 2), None),))
    cpu = torch.device("cpu")
    out = build_scorers(res, "m", [("lm", 0.3)], V, cpu, HotwordConfig())
    assert isinstance(out[0].scorer, NeuralLmScorer) and out[0].weight == 0.3
    assert out[0].scorer.score_eos is False and out[1].weight == 1.0 and len(out) == 2
    assert build_scorers(res, "m", [("lm", 0.0)], V, cpu) == []  # weight 0: not built
    assert len(build_scorers(res, "m", (), V, cpu, HotwordConfig())) == 1
    assert build_scorers(Resources(lms={"rnn_lm": lm}), "m", (), V, cpu, HotwordConfig()) == []


@pytest.mark.parametrize("fusion, res, message", [
    ([("nope", 1.0)], Resources(), "m: unknown scorer 'nope'; registered: "),
    ([("lm", 0.3)], Resources(), "m needs a neural LM"),
    ([("lodr", -0.2)], Resources(), "m with a LODR scale needs LODR's token n-gram"),
    ([("lodr", -0.2)], Resources(lodr=object()), "a TokenNgramScorer"),
    ([("toy-unigram", 1.0)], Resources(), "m needs the toy bonus"),
])
def test_missing_scorers_are_clear_errors(fusion, res, message):
    with pytest.raises(ValueError, match=message):
        build_scorers(res, "m", fusion, V, torch.device("cpu"))


def test_a_name_is_registered_once():
    with pytest.raises(ValueError, match="scorer 'lm' is registered twice"):
        register_scorer("lm")(_toy)
