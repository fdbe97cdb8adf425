"""The transducer methods of the registry, against brute-force enumeration of their lattices."""

from __future__ import annotations

import math

import k2
import pytest
import torch

from k2dec.methods import Family, Resources, TransducerInputs, get_method, list_methods
from k2dec.methods.hotword_biasing import HotwordConfig
from k2dec.methods.transducer import (
    FastBeamSearchLGConfig,
    FastBeamSearchNbestConfig,
    FastBeamSearchNbestLGConfig,
)
from k2dec.nbest import NbestConfig
from k2dec.testing.transducer import random_batch, random_model
from k2dec.transducer import FastBeamSearchConfig, fast_beam_search
from tests.reference.lattice_paths import enumerate_paths

TRANSDUCER_METHODS = [
    "fast_beam_search",
    "fast_beam_search_LG",
    "fast_beam_search_mbr",
    "fast_beam_search_mbr_LG",
    "fast_beam_search_nbest",
    "fast_beam_search_nbest_LG",
    "fast_beam_search_nbest_oracle",
    "greedy_search",
    "modified_beam_search",
]




#: the transducer methods with scorers (tests/methods/test_scorer_methods.py) and the n-best
#: rescoring ones (tests/methods/test_nbest_rescoring_methods.py)
SCORER_METHODS = ["beam_search", "fast_beam_search_with_nbest_rescoring",
                  "fast_beam_search_with_nbest_rnn_rescoring", "modified_beam_search_LODR",
                  "modified_beam_search_lm_rescore",
                  "modified_beam_search_lm_rescore_LODR",
                  "modified_beam_search_lm_shallow_fusion"]


def test_registry_names_and_errors():
    assert [m.name for m in list_methods(Family.TRANSDUCER)] == sorted(
        TRANSDUCER_METHODS + SCORER_METHODS)
    with pytest.raises(ValueError, match="unknown decoding method 'nope'; known:"):
        get_method("nope")
    m = get_method("greedy_search")
    with pytest.raises(TypeError, match="takes a GreedySearchMethodConfig"):
        m(None, Resources(), FastBeamSearchConfig())
    assert all(m.description for m in list_methods())


@pytest.mark.parametrize("name", TRANSDUCER_METHODS)
@pytest.mark.parametrize("lens", [[3], [4, 1, 3]])
def test_every_method_runs_and_passes_its_config(tiny_LG, device, name, lens):
    _, LG = tiny_LG
    model = random_model(vocab_size=5, seed=1, device=device)
    enc, enc_lens = random_batch(lens, seed=2, device=device)
    method = get_method(name)
    cfg = method.default_config()
    refs = [[1, 2]] * len(lens)
    out = method(TransducerInputs(model, enc, enc_lens, ref_tokens=refs),
                 Resources(graphs={"LG": LG.to(device)}), cfg)
    assert len(out) == (2 if "_mbr" in name else 1) and out[0].key == name
    assert all(r.config is cfg for r in out)
    hyps = out[0].tokens if out[0].tokens is not None else out[0].words
    assert len(hyps) == len(lens) and len(out[0].failed) == len(lens)


def test_missing_graph_and_refs_are_clear_errors(device):
    model = random_model(vocab_size=5, device=device)
    enc, enc_lens = random_batch([3], device=device)
    with pytest.raises(ValueError, match="needs the LG graph"):
        get_method("fast_beam_search_nbest_LG")(TransducerInputs(model, enc, enc_lens),
                                                Resources())
    with pytest.raises(ValueError, match="needs reference token ids"):
        get_method("fast_beam_search_nbest_oracle")(TransducerInputs(model, enc, enc_lens),
                                                    Resources())


@pytest.mark.parametrize("seed", range(4))
def test_nbest_picks_the_best_token_sequence_of_the_lattice(seed):
    model = random_model(vocab_size=4, seed=seed)
    enc, enc_lens = random_batch([4, 3], seed=seed)
    cfg = FastBeamSearchNbestConfig(nbest=NbestConfig(num_paths=300))
    out = get_method("fast_beam_search_nbest")(TransducerInputs(model, enc, enc_lens),
                                               Resources(), cfg)[0]
    lattice = fast_beam_search(model, enc, enc_lens, None, cfg.search).lattice
    for u in range(2):
        paths = enumerate_paths(lattice[u])
        best: dict[tuple[int, ...], float] = {}
        for p in paths:
            best[p.tokens] = max(best.get(p.tokens, -math.inf), p.score)
        want = max(best, key=best.get)
        assert tuple(out.tokens[u]) == want


@pytest.mark.parametrize("seed", range(3))
def test_nbest_LG_picks_the_best_log_sum_word_sequence(tiny_LG, seed):
    _, LG = tiny_LG
    model = random_model(vocab_size=5, seed=seed)
    enc, enc_lens = random_batch([4, 5], seed=seed)
    cfg = FastBeamSearchNbestLGConfig(nbest=NbestConfig(num_paths=300))
    res = Resources(graphs={"LG": LG})
    out = get_method("fast_beam_search_nbest_LG")(TransducerInputs(model, enc, enc_lens),
                                                  res, cfg)[0]
    graph = LG.clone()
    graph.scores = LG.scores * cfg.graph.scale
    lattice = fast_beam_search(model, enc, enc_lens, graph, cfg.search).lattice
    for u in range(2):
        totals: dict[tuple[int, ...], list[float]] = {}
        for p in enumerate_paths(lattice[u]):
            totals.setdefault(p.words, []).append(p.score)
        logsum = {k: torch.logsumexp(torch.tensor(v, dtype=torch.float64), 0).item()
                  for k, v in totals.items()}
        if not logsum:
            assert out.words[u] == [] and out.failed[u]
            continue
        assert tuple(out.words[u]) == max(logsum, key=logsum.get)


def test_oracle_finds_the_reference_when_it_is_in_the_lattice():
    model = random_model(vocab_size=4, seed=7)
    enc, enc_lens = random_batch([5, 3], seed=7)
    cfg = FastBeamSearchNbestConfig(nbest=NbestConfig(num_paths=300))
    one_best = fast_beam_search(model, enc, enc_lens, None, cfg.search).hyps
    refs = [h.tokens for h in one_best]
    out = get_method("fast_beam_search_nbest_oracle")(
        TransducerInputs(model, enc, enc_lens, ref_tokens=refs), Resources(), cfg)[0]
    assert out.tokens == refs


def test_scaled_LG_is_built_once_and_leaves_the_graph_alone(tiny_LG):
    _, LG = tiny_LG
    before = LG.scores.clone()
    res = Resources(graphs={"LG": LG})
    model = random_model(vocab_size=5, seed=3)
    enc, enc_lens = random_batch([3], seed=3)
    m = get_method("fast_beam_search_LG")
    m(TransducerInputs(model, enc, enc_lens), res)
    m(TransducerInputs(model, enc, enc_lens), res)
    assert torch.equal(LG.scores, before)
    assert len(res.cache) == 1
    assert isinstance(next(iter(res.cache.values())), k2.Fsa)


def test_override_config():
    from k2dec.methods import override_config
    from k2dec.methods.ctc import NbestRescoringConfig

    cfg = override_config(FastBeamSearchConfig(), ["beam=4", "max_states=32",
                                                   "allow_partial=true"])
    assert (cfg.beam, cfg.max_states, cfg.allow_partial) == (4.0, 32, True)
    assert isinstance(cfg.beam, float) and isinstance(cfg.max_states, int)
    c2 = override_config(NbestRescoringConfig(), ["lattice.search_beam=15",
                                                  "ngram_lm_scales=0.5,1.0"])
    assert c2.lattice.search_beam == 15.0 and c2.rescore.ngram_lm_scales == (0.5, 1.0)
    for bad, msg in [(["nope=1"], "has no field 'nope'"), (["beam"], "expected KEY=VALUE"),
                     (["search.beam.x=1"], "has no field 'search.beam.x'"),
                     (["beam=x"], "does not fit"), (["allow_partial=maybe"], "does not fit")]:
        with pytest.raises(ValueError, match=msg):
            override_config(FastBeamSearchConfig(), bad)


def test_icefall_defaults_of_the_composed_configs():
    for cls in (FastBeamSearchNbestConfig, FastBeamSearchNbestLGConfig):
        c = cls()
        assert (c.nbest.num_paths, c.nbest.nbest_scale) == (200, 0.5)
        assert c.search == FastBeamSearchConfig()
    assert FastBeamSearchNbestLGConfig().graph.scale == 0.01
    assert FastBeamSearchLGConfig().graph.scale == 0.01
    assert NbestConfig() == NbestConfig(num_paths=100, nbest_scale=0.5)


def _best_score(graph: k2.Fsa, tokens: list[int]) -> float:
    """The best path of ``graph`` reading ``tokens`` (tropical; -inf if none)."""
    lin = k2.linear_fsa(tokens)
    inter = k2.intersect(k2.arc_sort(graph), lin, treat_epsilons_specially=True)
    inter = k2.create_fsa_vec([k2.top_sort(k2.connect(inter))])
    return float(inter.get_tot_scores(use_double_scores=True, log_semiring=False)[0])


@pytest.mark.parametrize("seed", range(4))
def test_LG_with_hotwords_adds_the_reference_bonus_to_every_token_sequence(tiny_LG, seed):
    import random

    from tests.reference.scorers import RefContextGraph
    from tests.scorers.helpers import random_phrases

    _, LG = tiny_LG
    rng = random.Random(seed)
    phrases = random_phrases(rng, 5, 4, with_scores=True)
    # odd seeds: whole words, tokens 1 and 3 start words (k2dec's default scheme); even seeds:
    # no word-start mask (phrases complete on their last token)
    word_start = torch.tensor([False, True, False, True, False]) if seed % 2 else None
    res = Resources(graphs={"LG": LG}, hotwords=tuple((tuple(t), s) for t, s in phrases),
                    word_start=word_start)
    model = random_model(vocab_size=5, seed=seed)
    enc, enc_lens = random_batch([4, 1, 3], seed=seed)
    cfg = FastBeamSearchLGConfig(hotwords=HotwordConfig(token_score=1.5))
    out = get_method("fast_beam_search_LG")(TransducerInputs(model, enc, enc_lens), res, cfg)[0]
    biased = [g for k, g in res.cache.items() if k[0] == "hotword_graph"]
    assert len(biased) == 1
    scaled = LG.clone()
    scaled.scores = LG.scores * cfg.graph.scale
    ref = RefContextGraph(phrases, 1.5, strict=False,
                          partial=cfg.hotwords.partial_share,
                          word_start=None if word_start is None else {1, 3})
    checked = 0
    for _ in range(60):
        tokens = [rng.randrange(1, 5) for _ in range(rng.randint(1, 6))]
        plain = _best_score(scaled, tokens)
        got = _best_score(biased[0], tokens)
        if plain == -math.inf:
            assert got == -math.inf
            continue
        state, bonus = ref.start(0), 0.0
        for t in tokens:
            s, state = ref.step(state, t)
            bonus += s
        assert got == pytest.approx(plain + bonus, abs=1e-4), tokens
        checked += bonus != 0.0
    assert checked, "no sequence earned a bonus: the test checks nothing"
    # the method searched the biased graph
    direct = fast_beam_search(model, enc, enc_lens, biased[0], cfg.search)
    assert [h.tokens for h in direct.hyps] == out.tokens
    # hotwords with a large bonus change the result
    big = get_method("fast_beam_search_LG")(
        TransducerInputs(model, enc, enc_lens), res,
        FastBeamSearchLGConfig(hotwords=HotwordConfig(token_score=8.0)))
    plain = get_method("fast_beam_search_LG")(TransducerInputs(model, enc, enc_lens),
                                              Resources(graphs={"LG": LG}))
    assert big[0].tokens != plain[0].tokens or seed > 1
