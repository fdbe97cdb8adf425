"""Hotwords in fast_beam_search_nbest / _nbest_oracle / _mbr (the hotword automaton replaces
the trivial graph) and in attention-beam-search (a hotword scorer), against slow references:
every path of the unpruned plain lattice plus its reference bonus (tests/reference/scorers.py),
and the per-hypothesis attention beam search; an empty hotword list changes nothing; per
utterance lists through the functions below the methods."""

from __future__ import annotations

import math
import random
from dataclasses import replace

import pytest
import torch

from k2dec.aed import BeamSearchConfig, beam_search
from k2dec.lattice import AuxLabels, Topology, lattice_timed_units
from k2dec.methods import AedInputs, Resources, TransducerInputs, get_method
from k2dec.methods.aed import AttentionBeamSearchMethodConfig
from k2dec.methods.hotword_biasing import HotwordConfig
from k2dec.methods.mbr import FastBeamSearchMbrConfig
from k2dec.methods.parts import FusionConfig
from k2dec.methods.transducer import FastBeamSearchNbestConfig
from k2dec.nbest import Nbest, NbestConfig
from k2dec.primitives.hypothesis import HypothesisRecord
from k2dec.scorers import ContextGraph, HotwordScorer, WeightedScorer, hotword_graph
from k2dec.testing.aed import joint_scorers
from k2dec.testing.transducer import random_batch, random_model
from k2dec.transducer import FastBeamSearch, FastBeamSearchConfig, fast_beam_search
from tests.aed.beam_problems import assert_same_hyps, random_problem
from tests.reference.aed_reference import reference_beam_search
from tests.reference.lattice_paths import enumerate_paths
from tests.reference.scorers import RefContextGraph
from tests.scorers.helpers import random_phrases

HUGE = FastBeamSearchConfig(beam=1e5, max_contexts=256, max_states=4096)
VOCAB = 5
#: scheme -> (hotwords_partial_share, hotwords_whole_words); tokens 1 and 3 start words
SCHEMES = {"icefall": (1.0, False), "k2dec": (0.5, True)}
WORD_START = torch.tensor([False, True, False, True, False])


def _setup(seed: int, lens: list[int], device):
    rng = random.Random(seed)
    phrases = random_phrases(rng, VOCAB, 3, with_scores=True)
    model = random_model(vocab_size=VOCAB, context_size=2, seed=seed, device=device)
    enc, enc_lens = random_batch(lens, seed=seed, device=device)
    hotwords = tuple((tuple(t), s) for t, s in phrases)
    res = Resources(hotwords=hotwords, word_start=WORD_START.to(device))
    return phrases, TransducerInputs(model, enc, enc_lens), res


def _ref(phrases, score: float, scheme: str, strict: bool = False) -> RefContextGraph:
    share, whole = SCHEMES[scheme]
    return RefContextGraph(phrases, score, strict, share, {1, 3} if whole else None)


def _bonus(ref: RefContextGraph, tokens) -> float:
    """What a hypothesis' tokens earn in the graph (no final refund: k2's RNN-T decoding
    drops final weights)."""
    state, total = ref.start(0), 0.0
    for t in tokens:
        s, state = ref.step(state, t)
        total += s
    return total


def _biased_graph(res: Resources):
    [graph] = [g for k, g in res.cache.items() if k[0] == "hotword_graph"]
    return graph


@pytest.mark.parametrize("scheme", sorted(SCHEMES))
@pytest.mark.parametrize("lens", [[5], [4, 1, 3]])
@pytest.mark.parametrize("seed", range(3))
def test_nbest_picks_the_best_token_sequence_plus_its_bonus(device, scheme, lens, seed):
    phrases, inputs, res = _setup(seed, lens, device)
    share, whole = SCHEMES[scheme]
    cfg = FastBeamSearchNbestConfig(search=HUGE, nbest=NbestConfig(num_paths=300),
                                    hotwords=HotwordConfig(1.5, share, whole))
    out = get_method("fast_beam_search_nbest")(inputs, res, cfg)[0]
    plain = fast_beam_search(inputs.model, inputs.encoder_out, inputs.encoder_out_lens, None,
                             HUGE).lattice
    biased = fast_beam_search(inputs.model, inputs.encoder_out, inputs.encoder_out_lens,
                              _biased_graph(res), HUGE).lattice
    ref = _ref(phrases, 1.5, scheme)
    changed = 0
    for u in range(len(lens)):
        # every alignment of the biased lattice is the plain one plus its tokens' bonus
        want_paths = {p.labels: p.score + _bonus(ref, p.tokens) for p in enumerate_paths(
            plain[u])}
        got_paths = {p.labels: p.score for p in enumerate_paths(biased[u])}
        assert got_paths.keys() == want_paths.keys()
        for k, v in want_paths.items():
            assert got_paths[k] == pytest.approx(v, abs=1e-4), k
        best: dict[tuple[int, ...], float] = {}
        plain_best: dict[tuple[int, ...], float] = {}
        for p in enumerate_paths(plain[u]):
            best[p.tokens] = max(best.get(p.tokens, -math.inf), p.score + _bonus(ref, p.tokens))
            plain_best[p.tokens] = max(plain_best.get(p.tokens, -math.inf), p.score)
        want = max(best, key=best.get)
        assert tuple(out.tokens[u]) == want
        assert out.hyps[u].score == pytest.approx(best[want], abs=1e-4)
        changed += want != max(plain_best, key=plain_best.get)
    if seed == 0:
        assert changed, "the bonus changed no hypothesis: the test checks nothing"
    # the oracle finds the reference in the biased lattice's n-best
    refs = out.tokens
    oracle = get_method("fast_beam_search_nbest_oracle")(
        TransducerInputs(inputs.model, inputs.encoder_out, inputs.encoder_out_lens, refs),
        res, cfg)[0]
    assert oracle.tokens == refs


@pytest.mark.parametrize("scheme", sorted(SCHEMES))
@pytest.mark.parametrize("lens", [[6], [6, 2, 5]])
def test_mbr_decodes_the_biased_lattice(device, scheme, lens):
    phrases, inputs, res = _setup(3, lens, device)
    share, whole = SCHEMES[scheme]
    cfg = FastBeamSearchMbrConfig(hotwords=HotwordConfig(2.5, share, whole))
    mbr, best = get_method("fast_beam_search_mbr")(inputs, res, cfg)
    lattice = fast_beam_search(inputs.model, inputs.encoder_out, inputs.encoder_out_lens,
                               _biased_graph(res), cfg.search).lattice
    lattice.aux_labels = lattice.labels.clone()  # the cached graph has none (a quarter less)
    units, _ = lattice_timed_units(lattice, Topology.TRANSDUCER, cfg.mbr.config(decode_mbr=True),
                                   word_start=res.word_start, aux_labels=AuxLabels.TOKENS)
    assert mbr.tokens == units.ids.tolist()
    one = get_method("fast_beam_search")(inputs, res, _fbs_config(cfg))[0]
    assert best.tokens == one.tokens
    plain, _ = get_method("fast_beam_search_mbr")(inputs, Resources(), cfg)
    big, _ = get_method("fast_beam_search_mbr")(inputs, res, FastBeamSearchMbrConfig(
        hotwords=HotwordConfig(20.0, share, whole)))
    assert big.tokens != plain.tokens


def _fbs_config(cfg):
    m = get_method("fast_beam_search")
    return m.config_cls(search=cfg.search, hotwords=cfg.hotwords)


@pytest.mark.parametrize("name", ["fast_beam_search_nbest", "fast_beam_search_nbest_oracle",
                                  "fast_beam_search_mbr", "fast_beam_search"])
@pytest.mark.parametrize("lens", [[4], [4, 1, 3]])
def test_an_empty_hotword_list_changes_nothing(device, name, lens):
    _, inputs, _ = _setup(1, lens, device)
    inputs.ref_tokens = [[1, 2]] * len(lens)
    plain = get_method(name)(inputs, Resources())
    none = get_method(name)(inputs, Resources(hotwords=()))
    # a list whose phrases are all empty: the automaton is the root alone
    empty = get_method(name)(inputs, Resources(hotwords=(((), None),),
                                               word_start=WORD_START.to(device)))
    for other in (none, empty):
        _assert_same_up_to_float_noise([r.hyps for r in other], [r.hyps for r in plain])


FLOAT_FIELDS = ("score", "token_confidences", "word_confidences")


def _assert_same_up_to_float_noise(got, want) -> None:
    """Equal hypotheses: ids, frames and errors exactly; scores and confidences up to float
    noise (a different graph sums the same posteriors in another order: on CUDA confidences
    differed in the 16th digit)."""
    assert len(got) == len(want)
    for g_hyps, w_hyps in zip(got, want):
        assert len(g_hyps) == len(w_hyps)
        for g, w in zip(g_hyps, w_hyps):
            blank = dict.fromkeys(FLOAT_FIELDS)
            assert replace(g, **blank) == replace(w, **blank)
            for name in FLOAT_FIELDS:
                a, b = getattr(g, name), getattr(w, name)
                assert (a is None) == (b is None), name
                if a is not None:
                    assert a == pytest.approx(b, rel=1e-6, abs=1e-9), name


def test_float_noise_comparison_rejects_real_differences():
    rec = HypothesisRecord(tokens=(1, 2), token_frames=(0, 3), score=-1.5,
                           token_confidences=(0.9533688077111239, 0.5))
    noisy = replace(rec, token_confidences=(0.9533688077111238, 0.5), score=-1.5 + 1e-15)
    _assert_same_up_to_float_noise([[noisy]], [[rec]])
    for other in (replace(rec, tokens=(1, 3)), replace(rec, token_frames=(0, 2)),
                  replace(rec, token_confidences=(0.95, 0.5)), replace(rec, score=-1.4),
                  replace(rec, token_confidences=None)):
        with pytest.raises(AssertionError):
            _assert_same_up_to_float_noise([[other]], [[rec]])


def test_per_utterance_lists_through_streams(device):
    """Below the methods: one hotword graph per stream; each utterance's lattice (and so its
    n-best) is the one its own graph gives alone."""
    rng = random.Random(5)
    lens = [5, 3, 4]
    model = random_model(vocab_size=VOCAB, context_size=2, seed=5, device=device)
    enc, enc_lens = random_batch(lens, seed=5, device=device)
    graphs = [hotword_graph(ContextGraph(random_phrases(rng, VOCAB, 2, False), 3.0), VOCAB,
                            device=device, word_start=WORD_START, partial=0.5)
              for _ in lens]
    search = FastBeamSearch(model, None, HUGE)
    streams = [search.new_stream(device, decoding_graph=g) for g in graphs]
    search.decode_chunk(streams, enc, enc_lens)
    lattice = search.lattice(streams)
    nbest = Nbest.from_config(lattice, NbestConfig(num_paths=50))
    assert nbest.shape.dim0 == len(lens)
    for i, g in enumerate(graphs):
        alone = fast_beam_search(model, enc[i:i + 1], enc_lens[i:i + 1], g, HUGE).lattice
        want = {p.labels: p.score for p in enumerate_paths(alone[0])}
        got = {p.labels: p.score for p in enumerate_paths(lattice[i])}
        assert got.keys() == want.keys()
        assert [got[k] for k in want] == pytest.approx(list(want.values()), abs=1e-5)


def _aed_res(dec, phrases, device, word_start: bool) -> Resources:
    ws = torch.tensor([False, True, False, True, False, False], device=device)
    return Resources(attention_decoder=dec, hotwords=tuple((tuple(t), s) for t, s in phrases),
                     word_start=ws if word_start else None)


@pytest.mark.parametrize("scheme", sorted(SCHEMES))
@pytest.mark.parametrize("n", [1, 3])
@pytest.mark.parametrize("seed", [1, 2])
def test_attention_beam_search_matches_the_reference(device, scheme, n, seed):
    dec, memory, lens, ctc, _ = random_problem(seed, device, n=n, eos_bias=0.7)
    ctc = ctc.float()  # the method aligns the CTC output for token frames
    rng = random.Random(seed)
    phrases = random_phrases(rng, 5, 3, with_scores=True)  # tokens 1..4 (5 is sos/eos)
    share, whole = SCHEMES[scheme]
    search = BeamSearchConfig(beam_size=3, num_hyps=3)
    ctc_weight = 0.3 if seed == 2 else 0.0
    cfg = AttentionBeamSearchMethodConfig(search=search, fusion=FusionConfig(ctc_weight),
                                          hotwords=HotwordConfig(1.5, share, whole))
    out = get_method("attention-beam-search")(AedInputs(memory, lens, ctc),
                                              _aed_res(dec, phrases, device, True), cfg)[0]
    ref = (RefContextGraph(phrases, 1.5, False, share, {1, 3} if whole else None), 1.0, "full")
    want = reference_beam_search(dec, memory, lens, search, ctc_log_probs=ctc, scorers=[ref],
                                 ctc_weight=ctc_weight)
    assert out.tokens == [w[0].tokens for w in want]
    assert [r.score for r in out.hyps] == pytest.approx([w[0].score for w in want], abs=1e-6)
    with torch.no_grad():
        plain = beam_search(dec, memory, lens, search, joint_scorers(dec, lens, ctc, ctc_weight))
    none = get_method("attention-beam-search")(AedInputs(memory, lens, ctc),
                                               Resources(attention_decoder=dec, hotwords=()),
                                               cfg)[0]
    assert none.tokens == [list(p[0].tokens) for p in plain]
    assert [r.score for r in none.hyps] == [p[0].score for p in plain]


def test_attention_beam_search_per_utterance_lists(device):
    """Below the method: a HotwordScorer with one list per utterance, against the reference
    with each utterance's own list."""
    dec, memory, lens, _, _ = random_problem(3, device, n=3, eos_bias=0.7)
    rng = random.Random(3)
    lists = [random_phrases(rng, 5, 2, with_scores=False) for _ in range(3)]
    ws = torch.tensor([False, True, False, True, False, False], device=device)
    scorer = HotwordScorer([ContextGraph(p, 2.0) for p in lists], 6, device=device,
                           word_start=ws, partial=0.5)
    cfg = BeamSearchConfig(beam_size=3, num_hyps=3)
    with torch.no_grad():
        got = beam_search(dec, memory, lens, cfg, scorers=[WeightedScorer(scorer, 1.0)])
    for i, p in enumerate(lists):
        ref = (RefContextGraph(p, 2.0, False, 0.5, {1, 3}), 1.0, "full")
        want = reference_beam_search(dec, memory[i:i + 1], lens[i:i + 1], cfg, scorers=[ref])
        assert_same_hyps(got[i:i + 1], want, 1e-7)
