"""The token-level hotword bonus put on transducer lattices after the search
(:class:`k2dec.scorers.hotword_lattices.TokenLatticeHotwords`, for lists whose biased graph
would be too large): every path of a lattice gets the bonus a brute-force automaton
(tests/reference/scorers.py) gives its tokens, and, searched without pruning, the biased
lattice has the paths and scores of the lattice of the biased graph (the trivial graph or LG
intersected with the hotword automaton), so the fast_beam_search methods decode the same."""

from __future__ import annotations

import random

import k2
import pytest
import torch

from k2dec.methods import Resources, TransducerInputs, get_method
from k2dec.methods import hotword_biasing as hb
from k2dec.methods.hotword_biasing import HotwordConfig, token_biased_graph
from k2dec.scorers import ContextGraph, hotword_graph
from k2dec.scorers.hotword_lattices import TokenLatticeHotwords
from k2dec.testing.lang import tiny_lg
from k2dec.testing.transducer import random_batch, random_model
from k2dec.transducer import FastBeamSearchConfig, fast_beam_search
from tests.reference.lattice_paths import enumerate_paths
from tests.reference.scorers import RefContextGraph
from tests.scorers.helpers import random_phrases

HUGE = FastBeamSearchConfig(beam=1e5, max_contexts=256, max_states=4096)
VOCAB = 5
#: scheme -> (partial share, whole words); tokens 1 and 3 start words
SCHEMES = {"icefall": (1.0, False), "k2dec": (0.5, True)}
WORD_START = torch.tensor([False, True, False, True, False])


def _bonus(ref: RefContextGraph, tokens) -> float:
    """What ``tokens`` earn in the biased graph (no final refund: k2's RNN-T decoding drops a
    graph's final weights)."""
    state, total = ref.start(0), 0.0
    for t in tokens:
        s, state = ref.step(state, t)
        total += s
    return total


def _paths(lattice: k2.Fsa) -> list[tuple[tuple, float]]:
    """(labels and words, score) of every path, sorted."""
    return sorted(((p.labels, p.words), p.score) for p in enumerate_paths(lattice))


def _setup(seed: int, lens: list[int], scheme: str):
    rng = random.Random(seed)
    phrases = random_phrases(rng, VOCAB, 4, with_scores=True)
    share, whole = SCHEMES[scheme]
    ws = WORD_START if whole else None
    ref = RefContextGraph(phrases, 1.5, False, share, {1, 3} if whole else None)
    bias = TokenLatticeHotwords(ContextGraph(phrases, 1.5), VOCAB, ws, share)
    model = random_model(vocab_size=VOCAB, context_size=2, seed=seed)
    enc, enc_lens = random_batch(lens, seed=seed)
    return phrases, ref, bias, (model, enc, enc_lens), (ws, share)


@pytest.mark.parametrize("scheme", sorted(SCHEMES))
@pytest.mark.parametrize("lens", [[5], [4, 1, 3], [1], [3, 0, 2]])
@pytest.mark.parametrize("seed", range(3))
def test_every_path_gets_its_reference_bonus(scheme, lens, seed):
    phrases, ref, bias, net, (ws, share) = _setup(seed, lens, scheme)
    plain = fast_beam_search(*net, None, HUGE).lattice
    biased = bias(plain)
    graph = hotword_graph(ContextGraph(phrases, 1.5), VOCAB, 0, "cpu", ws, share)
    composed = fast_beam_search(*net, graph, HUGE).lattice
    changed = 0
    for u in range(len(lens)):
        want = sorted(((p.labels, p.words), p.score + _bonus(ref, p.tokens))
                      for p in enumerate_paths(plain[u]))
        got = _paths(biased[u])
        assert [k for k, _ in got] == [k for k, _ in want]
        assert [s for _, s in got] == pytest.approx([s for _, s in want], abs=1e-4)
        # the lattice of the biased graph, searched without pruning: the same paths
        assert [k for k, _ in _paths(composed[u])] == [k for k, _ in want]
        assert [s for _, s in _paths(composed[u])] == pytest.approx([s for _, s in got],
                                                                    abs=1e-4)
        changed += any(abs(g - p.score) > 1e-3 for (_, g), p in zip(
            got, sorted(enumerate_paths(plain[u]), key=lambda p: (p.labels, p.words))))
    if sum(lens) > 1:
        assert changed, "no path got a bonus: the test checks nothing"


@pytest.fixture(scope="module")
def tiny_LG(tmp_path_factory):
    return tiny_lg(tmp_path_factory.mktemp("hot_lattice_lg"))[1]  # tokens a b c d = 1..4


@pytest.mark.parametrize("scheme", sorted(SCHEMES))
@pytest.mark.parametrize("lens", [[6], [5, 2, 4]])
@pytest.mark.parametrize("seed", range(2))
def test_biased_LG_lattice_is_the_biased_graphs(tiny_LG, scheme, lens, seed):
    """LG lattices (word ids in aux_labels) biased after the search have the paths, words and
    scores of the lattices of LG intersected with the automaton."""
    phrases, ref, bias, net, (ws, share) = _setup(seed, lens, scheme)
    res = Resources(graphs={"LG": tiny_LG}, hotwords=tuple((tuple(t), s) for t, s in phrases),
                    word_start=WORD_START)
    cfg = HotwordConfig(1.5, share, ws is not None)
    composed_graph = token_biased_graph(res, tiny_LG, cfg, VOCAB, 0, torch.device("cpu"))
    assert isinstance(composed_graph, k2.Fsa)
    plain = fast_beam_search(*net, tiny_LG, HUGE).lattice
    composed = fast_beam_search(*net, composed_graph, HUGE).lattice
    biased = bias(plain)
    for u in range(len(lens)):
        want = sorted(((p.labels, p.words), p.score + _bonus(ref, p.tokens))
                      for p in enumerate_paths(plain[u]))
        got, comp = _paths(biased[u]), _paths(composed[u])
        assert [k for k, _ in got] == [k for k, _ in want] == [k for k, _ in comp]
        assert [s for _, s in got] == pytest.approx([s for _, s in want], abs=1e-4)
        assert [s for _, s in got] == pytest.approx([s for _, s in comp], abs=1e-4)


LG_METHODS = ["fast_beam_search_LG", "fast_beam_search_nbest_LG", "fast_beam_search_mbr_LG"]
PLAIN_METHODS = ["fast_beam_search", "fast_beam_search_nbest", "fast_beam_search_mbr"]


@pytest.mark.parametrize("name", LG_METHODS + PLAIN_METHODS)
@pytest.mark.parametrize("lens", [[5], [6, 1, 4]])
def test_methods_decode_a_list_past_the_graph_bound_as_the_biased_graph(
        tiny_LG, monkeypatch, name, lens):
    """With the bound lowered below a tiny list, the methods bias their lattices (no biased
    graph built, no error) and, searched without pruning, decode what the biased graph
    gives."""
    method = get_method(name)
    hot = tuple((tuple(t), s) for t, s in [((1, 2), None), ((3,), 2.0), ((2, 4, 1), None)])
    model = random_model(vocab_size=VOCAB, context_size=2, seed=3)
    enc, enc_lens = random_batch(lens, seed=3)
    inputs = TransducerInputs(model, enc, enc_lens)
    cfg = method.config_cls(search=HUGE, hotwords=HotwordConfig(4.0))
    graphs = {"LG": tiny_LG} if name in LG_METHODS else {}
    res = Resources(graphs=dict(graphs), hotwords=hot, word_start=WORD_START)
    want = method(inputs, res, cfg)
    assert any(isinstance(g, k2.Fsa) for k, g in res.cache.items() if k[0] == "hotword_graph")
    monkeypatch.setattr(hb, "HOTWORD_LG_MAX_ARCS", 1)
    monkeypatch.setattr(hb, "HOTWORD_GRAPH_MAX_ARCS", 1)
    res = Resources(graphs=dict(graphs), hotwords=hot, word_start=WORD_START)
    got = method(inputs, res, cfg)
    kinds = [type(g) for k, g in res.cache.items() if k[0] == "hotword_graph"]
    assert kinds == [TokenLatticeHotwords]
    assert [r.words for r in got] == [r.words for r in want]
    assert [r.tokens for r in got] == [r.tokens for r in want]
    plain = method(inputs, Resources(graphs=dict(graphs)), cfg)
    assert [(r.words, r.tokens) for r in got] != [(r.words, r.tokens) for r in plain], (
        "the bonus changed nothing: the test checks nothing")


@pytest.mark.parametrize("lens", [[5], [6, 1, 4]])
def test_streaming_fast_beam_search_biases_its_lattices(monkeypatch, lens):
    """Streaming fast_beam_search with a list past the graph bound reads its (partial and
    final) results from biased lattices: the offline method's hypotheses."""
    method = get_method("fast_beam_search")
    hot = tuple((tuple(t), s) for t, s in [((1, 2), None), ((3,), 2.0)])
    model = random_model(vocab_size=VOCAB, context_size=2, seed=5)
    enc, enc_lens = random_batch(lens, seed=5)
    cfg = method.config_cls(hotwords=HotwordConfig(4.0, 1.0, False))
    monkeypatch.setattr(hb, "HOTWORD_GRAPH_MAX_ARCS", 1)
    res = Resources(hotwords=hot)
    offline = method(TransducerInputs(model, enc, enc_lens), res, cfg)[0]
    search = method.streaming(model, res, cfg, torch.device("cpu"))
    streams = [search.new_stream() for _ in lens]
    for start in range(0, max(lens), 2):
        chunk = enc[:, start:start + 2]
        chunk_lens = (enc_lens - start).clamp(0, 2)
        search.decode_chunk(streams, chunk, chunk_lens)
        search.records(streams, final=False)
    records = search.records(streams, final=True)
    assert [list(r.tokens) for r in records] == offline.tokens
    plain = method(TransducerInputs(model, enc, enc_lens), Resources(), cfg)[0]
    assert offline.tokens != plain.tokens, "the bonus changed nothing: the test checks nothing"


def test_inputs_are_checked():
    bias = TokenLatticeHotwords(ContextGraph([([1, 2], None)], 1.0), 3)
    with pytest.raises(ValueError, match="needs an FsaVec"):
        bias(k2.Fsa.from_str("0 1 1 0\n1 2 -1 0\n2"))
    lattice = k2.create_fsa_vec([k2.Fsa.from_str("0 1 4 0\n1 2 -1 0\n2")])
    with pytest.raises(ValueError, match="lattice has token id 4, not below vocab_size 3"):
        bias(lattice)
    with pytest.raises(TypeError, match="context must be a ContextGraph"):
        TokenLatticeHotwords([([1], None)], 3)


PRUNED = FastBeamSearchConfig(beam=2.0, max_contexts=3, max_states=4)


@pytest.mark.parametrize("scheme", sorted(SCHEMES))
@pytest.mark.parametrize("lens", [[7], [7, 1, 5], [1], [3, 0, 6]])
@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("with_lg", [False, True])
def test_pruned_lattices_with_dead_ends(tiny_LG, scheme, lens, seed, with_lg):
    """Lattices of a pruned search have dead ends: the biased lattice is connected and has
    exactly the complete paths of the input, each with its reference bonus."""
    phrases, ref, bias, (model, enc, enc_lens), _ = _setup(seed, lens, scheme)
    plain = fast_beam_search(model, enc, enc_lens, tiny_LG if with_lg else None,
                             PRUNED).lattice
    before = plain.arcs.values().clone()
    biased = bias(plain)
    assert torch.equal(plain.arcs.values(), before), "the input lattice was changed"
    assert k2.connect(biased).num_arcs == biased.num_arcs, "dead ends left in the output"
    assert biased.properties & k2.fsa_properties.TOPSORTED_AND_ACYCLIC
    shape = biased.arcs.shape()
    num_arcs = shape.row_splits(2)[shape.row_splits(1).long()].diff().tolist()
    for u in range(len(lens)):
        want = sorted(((p.labels, p.words), p.score + _bonus(ref, p.tokens))
                      for p in enumerate_paths(plain[u]))
        if not want:  # no complete path (k2 cannot index an FSA without arcs here)
            assert num_arcs[u] == 0
            continue
        got = _paths(biased[u])
        assert [k for k, _ in got] == [k for k, _ in want]
        assert [s for _, s in got] == pytest.approx([s for _, s in want], abs=1e-4)
    if sum(lens) > 1:
        assert k2.connect(plain).num_arcs < plain.num_arcs, "no dead ends: checks nothing"


@pytest.mark.parametrize("scheme", sorted(SCHEMES))
@pytest.mark.parametrize("seed", range(3))
def test_steps_kept_between_calls_change_nothing(scheme, seed, monkeypatch):
    """A bias that has seen other batches (its steps kept) gives exactly what a fresh one
    gives, expands no step twice, and keeps none past ``max_cached_steps``."""
    phrases, _, bias, _, (ws, share) = _setup(seed, [6], scheme)
    batches = []
    for k, lens in enumerate([[6, 2], [1], [5, 0, 4], [6, 2]]):
        model = random_model(vocab_size=VOCAB, context_size=2, seed=seed + 10 * k)
        batches.append(fast_beam_search(model, *random_batch(lens, seed=seed + k), None,
                                        PRUNED if k % 2 else HUGE).lattice)
    computed = []
    step = TokenLatticeHotwords._step
    monkeypatch.setattr(TokenLatticeHotwords, "_step",
                        lambda self, keys: computed.append(keys.numel()) or step(self, keys))
    for lattice in batches:
        fresh = TokenLatticeHotwords(ContextGraph(phrases, 1.5), VOCAB, ws, share)
        want, got = fresh(lattice), bias(lattice)
        assert torch.equal(got.arcs.values(), want.arcs.values())
        assert torch.equal(got.scores, want.scores)
    assert bias._cached[0].numel() > 0
    computed.clear()
    bias(batches[0])
    assert sum(computed) == 0, "a step kept from an earlier call was expanded again"
    none_kept = TokenLatticeHotwords(ContextGraph(phrases, 1.5), VOCAB, ws, share,
                                     max_cached_steps=0)
    none_kept(batches[0])
    computed.clear()
    none_kept(batches[0])
    assert sum(computed) > 0, "steps kept past max_cached_steps=0"
