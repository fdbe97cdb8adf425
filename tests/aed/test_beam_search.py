"""Batched attention beam search against the per-hypothesis reference, plus hand-worked cases."""

from __future__ import annotations

import math
import random

import pytest
import torch

from k2dec.aed import BeamSearchConfig, beam_search
from k2dec.lm import NeuralLM
from k2dec.scorers import CtcScorer, NeuralLmScorer, WeightedScorer
from k2dec.testing.aed import CountingDecoder, TableDecoder, TinyLM, random_decoder
from tests.aed.beam_problems import assert_same_hyps, random_problem, ref, run, setup, with_
from tests.reference.aed_reference import greedy_search

SWITCHES = {
    "temperature": dict(temperature=1.7),
    "length_norm": dict(length_norm=True),
    "length_bonus": dict(length_bonus=0.8),
    "gnmt": dict(gnmt_alpha=0.9),
    "coverage": dict(coverage_penalty=0.7),
    "eos_threshold": dict(eos_threshold=0.9),
    "min_len": dict(min_len=3),
    "max_len_ratio": dict(max_len_ratio=0.5),
    "ctc": dict(ctc_weight=0.4),
    "ctc_pre_beam": dict(ctc_weight=0.6, ctc_pre_beam=2),
    "ctc_window": dict(ctc_weight=0.7, ctc_window=1),
    "ctc_eos_prebeamed": dict(ctc_weight=0.5, ctc_pre_beam=1, ctc_always_score_eos=False),
    "lm_full": dict(lm_scale=0.5),
    "lm_pruned": dict(lm_scale=0.5, lm_fusion="pruned"),
    "end_detect": dict(end_detect=True, end_detect_window=2, end_detect_margin=1.0),
    "max_ended": dict(max_ended=2),
    "max_repeats": dict(max_repeats=1, repeat_span=2),
}


def _random_combos(count, seed=0):
    rng = random.Random(seed)
    names = sorted(SWITCHES)
    combos = []
    for _ in range(count):
        chosen = rng.sample(names, rng.randint(2, 6))
        if "length_norm" in chosen and "gnmt" in chosen:
            chosen.remove("gnmt")
        if "lm_full" in chosen and "lm_pruned" in chosen:
            chosen.remove("lm_full")
        kwargs = {}
        for name in chosen:
            kwargs.update(SWITCHES[name])
        combos.append(kwargs)
    return combos


CASES = [{}] + list(SWITCHES.values()) + _random_combos(14)


@pytest.mark.parametrize("case", range(len(CASES)))
def test_matches_reference(case, device):
    kwargs = CASES[case]
    for seed in (case, case + 100):
        beam = 2 + seed % 3
        dec, memory, lens, ctc, lm = random_problem(seed, device, eos_bias=(seed % 4) * 0.7)
        cfg = setup(beam_size=beam, num_hyps=beam, **kwargs)
        got = run(dec, memory, lens, cfg, ctc_log_probs=ctc, lm=lm)
        want = ref(dec, memory, lens, cfg, ctc_log_probs=ctc, lm=lm)
        assert any(len(h) > 0 for h in got)
        assert_same_hyps(got, want, 1e-8)


@pytest.mark.parametrize("name", sorted(SWITCHES))
def test_every_switch_changes_something(name):
    """Guards the equivalence test against switches that neither implementation applies."""
    changed = False
    for seed in range(4):
        dec, memory, lens, ctc, lm = random_problem(seed, torch.device("cpu"), eos_bias=0.7)
        # the random decoders end early: repeats show in hypotheses made to be long
        base = setup(beam_size=3, num_hyps=3, min_len=5 if name == "max_repeats" else 0)
        on = with_(base, **SWITCHES[name])
        sigs = []
        for cfg in (base, on):
            counting = CountingDecoder(dec)
            hyps = run(counting, memory, lens, cfg, ctc_log_probs=ctc, lm=lm)
            sigs.append(([[(h.tokens, round(h.score, 9)) for h in hs] for hs in hyps],
                         counting.rows))
        changed |= sigs[0] != sigs[1]
    assert changed


@pytest.mark.parametrize("always", [True, False])
def test_ctc_eos_rule_matches_reference(always, device):
    """Small pre-beams, where eos is often not pre-selected: both settings of
    ctc_always_score_eos against the reference, on many random cases (N = 1 and N > 1)."""
    for seed in range(12):
        n = 1 if seed % 4 == 0 else 3
        dec, memory, lens, ctc, lm = random_problem(seed, device, n=n, eos_bias=(seed % 3) * 0.6)
        cfg = setup(beam_size=1 + seed % 3, num_hyps=1 + seed % 3,
                               ctc_weight=(0.3, 0.5, 0.8)[seed % 3], ctc_pre_beam=1 + seed % 2,
                               ctc_always_score_eos=always, min_len=seed % 2)
        got = run(dec, memory, lens, cfg, ctc_log_probs=ctc, lm=lm)
        want = ref(dec, memory, lens, cfg, ctc_log_probs=ctc, lm=lm)
        assert_same_hyps(got, want, 1e-8)


def test_ctc_eos_rule_changes_results():
    """Guards the test above: the switch matters on some of the same kind of cases."""
    changed = 0
    for seed in range(12):
        dec, memory, lens, ctc, _ = random_problem(seed, torch.device("cpu"),
                                                   eos_bias=(seed % 3) * 0.6)
        sigs = []
        for always in (True, False):
            cfg = setup(beam_size=2, num_hyps=2, ctc_weight=0.5, ctc_pre_beam=1,
                                   ctc_always_score_eos=always)
            hyps = run(dec, memory, lens, cfg, ctc_log_probs=ctc)
            sigs.append([[(h.tokens, round(h.score, 9)) for h in hs] for hs in hyps])
        changed += sigs[0] != sigs[1]
    assert changed >= 3


def test_ctc_eos_rule_hand_worked():
    # tokens: blank 0, 1, 2, eos 3; beam 1, pre-beam 1, ctc_weight 0.5. CTC over 2 frames puts
    # .9 on the blank, .05 on token 1: psi([1]) = .05 + .9 * .05 = .095, P([]) = .81,
    # P([1]) = .05 * .05 + 2 * .9 * .05 = .0925.
    table = {None: [0.001, 0.5, 0.3, 0.199], 1: [0.001, 0.1, 0.1, 0.799]}
    dec = TableDecoder(table, 4, eos_id=3)
    frame = [0.9, 0.05, 0.03, 0.02]
    ctc = torch.tensor([[frame, frame]], dtype=torch.float64).log()
    memory = torch.zeros(1, 2, 1, dtype=torch.float64)
    cfg = setup(beam_size=1, ctc_weight=0.5, ctc_pre_beam=1)
    # eos always scored: at u=0 ending (.5 log(.199 * .81) = -0.91) beats token 1, the only
    # pre-selected token (.5 log(.5 * .095) = -1.52)
    (hyp,) = run(dec, memory, torch.tensor([2]), cfg, ctc_log_probs=ctc)[0]
    assert hyp.tokens == []
    assert hyp.score == pytest.approx(0.5 * math.log(0.199 * 0.81))
    assert hyp.ctc_score == pytest.approx(math.log(0.81))
    # eos pre-beamed only: [1] is the only candidate, then eos is the best token after it
    cfg = with_(cfg, ctc_always_score_eos=False)
    (hyp,) = run(dec, memory, torch.tensor([2]), cfg, ctc_log_probs=ctc)[0]
    assert hyp.tokens == [1]
    assert hyp.score == pytest.approx(0.5 * math.log(0.5 * 0.799 * 0.0925))
    assert hyp.ctc_score == pytest.approx(math.log(0.0925))


def test_float32_matches_reference(device):
    for seed, kwargs in enumerate([{}, dict(ctc_weight=0.3, lm_scale=0.3, coverage_penalty=0.2)]):
        dec, memory, lens, ctc, lm = random_problem(seed, device, dtype=torch.float32)
        cfg = setup(beam_size=3, num_hyps=3, **kwargs)
        got = run(dec, memory, lens, cfg, ctc_log_probs=ctc, lm=lm)
        want = ref(dec, memory, lens, cfg, ctc_log_probs=ctc, lm=lm)
        assert_same_hyps(got, want, 1e-4)


@pytest.mark.parametrize("kwargs", [{}, dict(ctc_weight=0.3, lm_scale=0.3, coverage_penalty=0.5,
                                             end_detect=True, end_detect_margin=1.0)])
def test_batch_of_one_equals_batch_of_many(kwargs, device):
    dec, memory, lens, ctc, lm = random_problem(11, device, n=5, t=9)
    cfg = setup(beam_size=4, num_hyps=4, **kwargs)
    batched = run(dec, memory, lens, cfg, ctc_log_probs=ctc, lm=lm)
    for i in range(5):
        t = int(lens[i])
        single = run(dec, memory[i : i + 1, :t], lens[i : i + 1], cfg,
                             ctc_log_probs=ctc[i : i + 1, :t], lm=lm)
        assert_same_hyps([batched[i]], single, 1e-9)


def test_vocab_smaller_than_beam(device):
    dec, memory, lens, ctc, lm = random_problem(5, device, v=3)
    cfg = setup(beam_size=5, num_hyps=5)
    assert_same_hyps(run(dec, memory, lens, cfg),
                 ref(dec, memory, lens, cfg), 1e-8)


def test_beam_one_is_greedy(device):
    for seed in range(4):
        dec, memory, lens, _, _ = random_problem(seed, device, n=4, eos_bias=seed * 0.5)
        got = run(dec, memory, lens, setup(beam_size=1))
        assert [h[0].tokens for h in got] == greedy_search(dec, memory, lens)


def test_finished_utterances_stop_costing_compute():
    dec, memory, lens, _, _ = random_problem(3, torch.device("cpu"), n=2, t=8)
    lens = torch.tensor([8, 1])
    counting = CountingDecoder(dec)
    run(counting, memory, lens, setup(beam_size=3))
    # step 1: 2 rows; step 2: utterance 1 (max length 1) ends -> 3 rows from then on
    assert counting.calls == 9
    assert counting.rows == 2 + 2 * 3 + 7 * 3


def test_lengths_respect_min_and_max():
    dec, memory, lens, _, _ = random_problem(2, torch.device("cpu"), n=3, eos_bias=3.0)
    cfg = setup(beam_size=3, num_hyps=3, min_len=2, max_len_ratio=0.5)
    for i, hyps in enumerate(run(dec, memory, lens, cfg)):
        max_len = max(1, math.floor(int(lens[i]) * 0.5))
        assert hyps
        for h in hyps:
            assert min(2, max_len) <= len(h.tokens) <= max_len


# A decoder whose next-token distribution depends only on the last token: tokens 0, 1, eos 2.
TABLE = {None: [0.5, 0.1, 0.4], 0: [0.5, 0.2, 0.3], 1: [0.45, 0.35, 0.2]}


def _table_search(cfg, num_frames=10):
    dec = TableDecoder(TABLE, 3, eos_id=2)
    memory = torch.zeros(1, num_frames, 1, dtype=torch.float64)
    hyps = run(dec, memory, torch.tensor([num_frames]), cfg)[0]
    return dec, hyps


def test_end_detection_hand_worked():
    # B = 2: step u=0 ends [] (p .4, the best ended); then each step u ends 0^u with
    # p .5^u * .3 * ... : [0] .15, [0,0] .075, [0,0,0] .0375. With D = 1.5, M = 2:
    # u=2: log(.4/.075) = 1.67 > D but log(.4/.15) = 0.98 < D -> continue;
    # u=3: log(.4/.0375) = 2.37 > D and 1.67 > D -> stop after 4 decoder calls.
    cfg = setup(beam_size=2, num_hyps=2, end_detect=True, end_detect_window=2,
                           end_detect_margin=1.5)
    dec, hyps = _table_search(cfg)
    assert dec.calls == 4
    assert [h.tokens for h in hyps] == [[], [0]]
    assert [h.score for h in hyps] == pytest.approx([math.log(0.4), math.log(0.15)])
    # margin 2.0: u=3 has 2.37 and 1.67 -> continue; u=4: log(.4/.01875)=3.06, 2.37 -> stop
    dec, _ = _table_search(with_(cfg, end_detect_margin=2.0))
    assert dec.calls == 5
    # without end detection the search runs to the maximum length (10 tokens + eos)
    dec, _ = _table_search(with_(cfg, end_detect=False))
    assert dec.calls == 11


def test_eos_threshold_hand_worked():
    # u=0: p(eos) / max other = .4 / .5 = .8 ; after token 0: .3 / .5 = .6 ;
    # after token 1: .2 / .45 = .44.
    cfg = setup(beam_size=2, num_hyps=2, eos_threshold=0.59)
    _, hyps = _table_search(cfg, num_frames=3)
    assert [h.tokens for h in hyps] == [[], [0]]
    assert [h.score for h in hyps] == pytest.approx([math.log(0.4), math.log(0.5 * 0.3)])
    # gamma .61 forbids eos after token 0 (and 1): [0] cannot end; [0, 0] cannot end either.
    _, hyps = _table_search(with_(cfg, eos_threshold=0.61), num_frames=3)
    assert [h.tokens for h in hyps] == [[], [0, 0, 0]]
    assert hyps[1].score == pytest.approx(math.log(0.5 * 0.5 * 0.5 * 0.3))
    # gamma .81 also forbids the empty hypothesis; at the maximum length eos is forced
    _, hyps = _table_search(with_(cfg, eos_threshold=0.81), num_frames=3)
    assert [h.tokens for h in hyps] == [[0, 0, 0], [0, 0, 1]]
    assert hyps[0].score == pytest.approx(math.log(0.5 * 0.5 * 0.5 * 0.3))


def test_max_ended_caps_the_search():
    cfg = setup(beam_size=2, num_hyps=2, max_ended=2)
    dec, hyps = _table_search(cfg)
    assert dec.calls == 2  # [] ends at u=0, [0] at u=1
    assert [h.tokens for h in hyps] == [[], [0]]


def test_length_penalties_hand_worked():
    # the same ended set, ranked by score / |y| ([] has |y| = 1, [0] has 2, ...)
    cfg = setup(beam_size=2, num_hyps=2, length_norm=True, max_ended=2)
    _, hyps = _table_search(cfg)
    assert [h.score for h in hyps] == pytest.approx([math.log(0.4), math.log(0.15) / 2])
    cfg = setup(beam_size=2, num_hyps=2, gnmt_alpha=1.0, max_ended=2)
    _, hyps = _table_search(cfg)
    assert hyps[1].score == pytest.approx(math.log(0.15) / (7 / 6))
    cfg = setup(beam_size=2, num_hyps=2, length_bonus=1.0, max_ended=2)
    _, hyps = _table_search(cfg)
    assert [h.tokens for h in hyps] == [[0], []]
    assert hyps[0].score == pytest.approx(math.log(0.15) + 2)


def test_repeat_guard_hand_worked():
    # token 0 is always the best (.6), then 1 (.3), then eos (.1): greedy repeats 0 up to the
    # maximum length (10 tokens) and is forced to end there
    table = {None: [0.6, 0.3, 0.1], 0: [0.6, 0.3, 0.1], 1: [0.6, 0.3, 0.1]}

    def search(**kwargs):
        dec = TableDecoder(table, 3, eos_id=2)
        memory = torch.zeros(1, 10, 1, dtype=torch.float64)
        cfg = setup(beam_size=1, num_hyps=1, **kwargs)
        return run(dec, memory, torch.tensor([10]), cfg)[0][0]

    assert search().tokens == [0] * 10
    # at most 2 copies of any 1-token span: the third 0 is masked, 1 takes its place
    assert search(max_repeats=2, repeat_span=1).tokens == [0, 0, 1, 0, 0, 1, 0, 0, 1, 0]
    # no span of 1 or 2 tokens twice in a row: 0 1 0, then 0 ("0 0") and 1 ("0 1 0 1") are
    # masked and only eos is left
    hyp = search(max_repeats=1, repeat_span=2)
    assert hyp.tokens == [0, 1, 0]
    assert hyp.score == pytest.approx(math.log(0.6 * 0.3 * 0.6 * 0.1))


def test_repeat_mask_matches_the_reference_rule():
    from k2dec.aed.scoring import repeat_mask
    from tests.reference.aed_reference import completes_repeat

    rng = random.Random(0)
    checked = banned = 0
    for _ in range(300):
        cfg = BeamSearchConfig(max_repeats=rng.randint(1, 3), repeat_span=rng.randint(1, 4))
        u, v = rng.randint(0, 12), rng.randint(2, 4)
        prefixes = torch.tensor([[rng.randrange(v) for _ in range(u)] for _ in range(5)],
                                dtype=torch.int64).reshape(5, u)
        mask = repeat_mask(prefixes, v, cfg)
        for row in range(5):
            for c in range(v):
                want = completes_repeat(prefixes[row].tolist() + [c], cfg)
                got = mask is not None and bool(mask[row, c])
                assert got == want, (prefixes[row].tolist(), c, cfg)
                checked, banned = checked + 1, banned + want
    assert banned > 50 and checked - banned > 50


def test_empty_batch():
    dec = random_decoder(5, 3, seed=0)
    assert run(dec, torch.zeros(0, 4, 3, dtype=torch.float64),
                       torch.zeros(0, dtype=torch.int64)) == []


def test_one_lm_protocol():
    """An LM reaches the search as a scorer of a k2dec.lm.NeuralLM; k2dec.aed has no LM
    protocol of its own, and the search no lm= / ctc_log_probs= shorthands."""
    import k2dec.aed

    assert isinstance(TinyLM(5), NeuralLM)
    assert not hasattr(k2dec.aed, "IncrementalLM") and not hasattr(k2dec.aed,
                                                                    "IncrementalLmScorer")
    dec, memory, lens, ctc, lm = random_problem(0, torch.device("cpu"))
    for old in (dict(ctc_log_probs=ctc), dict(lm=lm)):
        with pytest.raises(TypeError, match=next(iter(old))):
            beam_search(dec, memory, lens, BeamSearchConfig(), **old)
    for old in ("ctc_weight", "lm_scale"):
        with pytest.raises(TypeError, match=old):
            BeamSearchConfig(**{old: 0.3})


def _ctc(weight, n=2):
    """A CTC scorer of ``n`` utterances of 4 frames over the 5 tokens of :func:`_bad`'s
    decoder (blank 0, eos 4)."""
    ctc = torch.zeros(n, 4, 5, dtype=torch.float64).log_softmax(-1)
    return WeightedScorer(CtcScorer(ctc, torch.tensor([4, 2, 3][:n]), 0, 4), weight)


def _bad(**overrides):
    dec = random_decoder(5, 3, seed=0)
    args = dict(decoder=dec, memory=torch.zeros(2, 4, 3, dtype=torch.float64),
                memory_lens=torch.tensor([4, 2]), config=BeamSearchConfig(beam_size=2))
    args.update(overrides)
    return args


@pytest.mark.parametrize(
    "overrides, exc, match",
    [
        (dict(memory=torch.zeros(2, 4)), ValueError, "memory must be a tensor of shape"),
        (dict(memory=torch.zeros(2, 4, 3, dtype=torch.int64)), TypeError, "float"),
        (dict(memory_lens=torch.tensor([4])), ValueError, "memory_lens must be a tensor"),
        (dict(memory_lens=torch.tensor([4.0, 2.0])), TypeError, "integer"),
        (dict(memory_lens=torch.tensor([0, 2])), ValueError, r"memory_lens must be in \[1, 4\]"),
        (dict(memory_lens=torch.tensor([5, 2])), ValueError, r"memory_lens must be in \[1, 4\]"),
        (dict(memory=torch.full((2, 4, 3), float("nan"))), ValueError, "NaN"),
        (dict(config=dict(beam_size=2)), TypeError, "BeamSearchConfig"),
        (dict(decoder=object()), TypeError, "AttentionDecoder"),
        (dict(scorers=[_ctc(0.7), _ctc(0.6)]), ValueError,
         r"CtcScorer weights .* must sum to a value in \(0, 1\], got 1\.29"),
        (dict(scorers=[_ctc(-0.3)]), ValueError, r"must sum to a value in \(0, 1\], got -0\.3"),
        (dict(config=BeamSearchConfig(beam_size=2, ctc_blank_id=3), scorers=[_ctc(0.3)]),
         ValueError, r"\(utterances, blank_id, eos_id\) = \(2, 0, 4\); the search has "
                     r"\(2, 3, 4\) \(memory's utterances, ctc_blank_id"),
        (dict(scorers=[_ctc(0.3, n=3)]), ValueError, r"= \(3, 0, 4\); the search has \(2, 0, 4\)"),
        (dict(scorers=[WeightedScorer(NeuralLmScorer(TinyLM(7)), 0.3)]), ValueError,
         r"scorers\[0\] \(NeuralLmScorer\) scores"),
        (dict(scorers=[(TinyLM(5), 0.3)]), TypeError, r"scorers\[0\] must be a WeightedScorer"),
    ],
)
def test_bad_inputs(overrides, exc, match):
    with pytest.raises(exc, match=match):
        beam_search(**_bad(**overrides))


def test_coverage_needs_attention():
    dec = TableDecoder(TABLE, 3, eos_id=2)
    with pytest.raises(ValueError, match="attention"):
        beam_search(dec, torch.zeros(1, 3, 1), torch.tensor([3]),
                    BeamSearchConfig(beam_size=2, coverage_penalty=1.0))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(beam_size=0), "beam_size"),
        (dict(beam_size=2.0), "beam_size"),
        (dict(num_hyps=3, beam_size=2), "num_hyps"),
        (dict(max_len_ratio=0.0), "max_len_ratio"),
        (dict(min_len=-1), "min_len"),
        (dict(temperature=0.0), "temperature"),
        (dict(temperature=float("nan")), "temperature"),
        (dict(length_norm=True, gnmt_alpha=0.5), "either length_norm"),
        (dict(gnmt_alpha=-1.0), "gnmt_alpha"),
        (dict(coverage_penalty=-0.1), "coverage_penalty"),
        (dict(eos_threshold=-1.0), "eos_threshold"),
        (dict(ctc_pre_beam=0), "ctc_pre_beam"),
        (dict(lm_fusion="shallow"), "lm_fusion"),
        (dict(end_detect_window=0), "end_detect_window"),
        (dict(max_ended=0), "max_ended"),
        (dict(length_bonus=float("inf")), "length_bonus"),
    ],
)
def test_bad_config(kwargs, match):
    with pytest.raises(ValueError, match=match):
        BeamSearchConfig(**kwargs)


@pytest.mark.parametrize("name", ["length_norm", "end_detect", "ctc_always_score_eos"])
def test_bool_switches_must_be_bools(name):
    with pytest.raises(TypeError, match=name):
        BeamSearchConfig(**{name: 1})


def test_default_pre_beam():
    assert BeamSearchConfig(beam_size=10).pre_beam == 15
    assert BeamSearchConfig(beam_size=1).pre_beam == 1
    assert BeamSearchConfig(beam_size=4, ctc_pre_beam=7).pre_beam == 7


def test_docstring_example_runs():
    import doctest

    import k2dec.aed

    result = doctest.testmod(k2dec.aed, raise_on_error=False)
    assert result.attempted > 0 and result.failed == 0


class _NanDecoder(TableDecoder):
    def step(self, tokens, memory, memory_padding_mask, state):
        lp, att, state = super().step(tokens, memory, memory_padding_mask, state)
        return lp.fill_(float("nan")), att, state


def test_nan_from_decoder_is_reported():
    dec = _NanDecoder(TABLE, 3, eos_id=2)
    with pytest.raises(ValueError, match="NaN log-probs"):
        beam_search(dec, torch.zeros(1, 3, 1), torch.tensor([3]), BeamSearchConfig(beam_size=2))


_hyp_settings = dict(max_examples=20, deadline=None, derandomize=True)


def _config_strategy():
    from hypothesis import strategies as st

    return st.fixed_dictionaries(
        {
            "beam_size": st.integers(1, 4),
            "temperature": st.sampled_from([1.0, 0.6, 2.0]),
            "length_norm": st.booleans(),
            "length_bonus": st.sampled_from([0.0, 0.5, -0.3]),
            "coverage_penalty": st.sampled_from([0.0, 0.5]),
            "eos_threshold": st.sampled_from([0.0, 0.3, 1.0]),
            "min_len": st.integers(0, 3),
            "max_len_ratio": st.sampled_from([1.0, 0.4, 2.0]),
            "ctc_weight": st.sampled_from([0.0, 0.3, 1.0]),
            "ctc_pre_beam": st.sampled_from([None, 1, 3]),
            "ctc_always_score_eos": st.booleans(),
            "ctc_window": st.sampled_from([None, 2]),
            "lm_scale": st.sampled_from([0.0, 0.5]),
            "lm_fusion": st.sampled_from(["full", "pruned"]),
            "end_detect": st.booleans(),
            "end_detect_margin": st.sampled_from([0.5, 3.0]),
            "max_ended": st.sampled_from([None, 1, 3]),
            "max_repeats": st.sampled_from([None, 1, 2]),
            "repeat_span": st.sampled_from([1, 3]),
        }
    )


def test_random_switch_combinations_match_reference():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    @settings(**_hyp_settings)
    @given(kwargs=_config_strategy(), seed=st.integers(0, 10_000))
    def check(kwargs, seed):
        kwargs = dict(kwargs)
        kwargs["num_hyps"] = kwargs["beam_size"]
        dec, memory, lens, ctc, lm = random_problem(seed, torch.device("cpu"), n=2, t=5,
                                              eos_bias=(seed % 3) * 0.8)
        cfg = setup(**kwargs)
        got = run(dec, memory, lens, cfg, ctc_log_probs=ctc, lm=lm)
        want = ref(dec, memory, lens, cfg, ctc_log_probs=ctc, lm=lm)
        assert_same_hyps(got, want, 1e-8)

    check()


def test_ctc_minus_inf_is_allowed():
    """-inf CTC log-probs (a masked token) are valid input; the token can then never be chosen."""
    dec, memory, lens, ctc, lm = random_problem(4, torch.device("cpu"))
    ctc = ctc.clone()
    ctc[..., 2] = float("-inf")
    cfg = setup(beam_size=3, num_hyps=3, ctc_weight=0.5)
    got = run(dec, memory, lens, cfg, ctc_log_probs=ctc)
    assert_same_hyps(got, ref(dec, memory, lens, cfg, ctc_log_probs=ctc), 1e-8)
    assert all(2 not in h.tokens for hs in got for h in hs)


class _PerRowMemory(CountingDecoder):
    """The TransformerDecoder state laid out as before memory sharing: the projected memory
    copied for every row after each select_state (one memory row per hypothesis)."""

    def select_state(self, state, index):
        state = self.decoder.select_state(state, index)
        rows, groups = state[0][0].size(0), state[0][2].size(0)
        per_row = torch.arange(rows, device=index.device) // max(1, rows // max(groups, 1))
        return tuple((sk, sv, mk.index_select(0, per_row), mv.index_select(0, per_row))
                     for sk, sv, mk, mv in state)


class _MemoryRecorder(CountingDecoder):
    """Records (rows, memory rows, memory storage bytes) of every state select_state returns."""

    def __init__(self, decoder):
        super().__init__(decoder)
        self.seen = []

    def select_state(self, state, index):
        state = self.decoder.select_state(state, index)
        for sk, _, mk, mv in state:
            storage = (mk.untyped_storage() if hasattr(mk, "untyped_storage") else mk.storage())
            self.seen.append((sk.size(0), mk.size(0), mv.size(0), storage.nbytes()))
        return state


@pytest.mark.parametrize("n", [1, 4])
def test_shared_memory_gives_the_same_search(n, device):
    """n-best lists and scores equal those of the per-row memory layout, on searches where
    utterances finish at different steps; the memory is kept once per active utterance."""
    for seed in range(4):
        dec, memory, lens, ctc, lm = random_problem(seed, device, n=n, t=9,
                                                    eos_bias=0.8 * (seed % 3))
        cfg = setup(beam_size=3 + seed % 2, num_hyps=3, ctc_weight=0.3 * (seed % 2),
                               coverage_penalty=0.2, end_detect=seed % 2 == 1,
                               end_detect_margin=1.0)
        old = run(_PerRowMemory(dec), memory, lens, cfg, ctc_log_probs=ctc)
        rec = _MemoryRecorder(dec)
        new = run(rec, memory, lens, cfg, ctc_log_probs=ctc)
        assert_same_hyps(new, old, 1e-10)
        assert rec.seen
        bytes_per_utt = memory.size(1) * dec.d_model * memory.element_size()
        for rows, mem_k_rows, mem_v_rows, nbytes in rec.seen:
            assert mem_k_rows == mem_v_rows <= n
            assert rows == mem_k_rows * cfg.search.beam_size  # one memory row per utterance
            assert nbytes == mem_k_rows * bytes_per_utt  # not rows * bytes_per_utt
