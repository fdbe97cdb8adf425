from __future__ import annotations

import dataclasses

import k2
import pytest
import torch

from k2dec.testing.transducer import random_batch, random_model
from k2dec.transducer import (
    FastBeamSearch,
    FastBeamSearchConfig,
    StatelessDecoder,
    fast_beam_search,
)
from k2dec.transducer.fast_beam_search import DECODER_CACHE_SIZE
from tests.reference.transducer_reference import (
    GraphWalker,
    NetOracle,
    best_alignment,
    total_log_prob,
)
from tests.transducer.helpers import assert_same_hyps, random_chunks

HUGE = FastBeamSearchConfig(beam=1e5, max_contexts=256, max_states=4096)


def _tot_log(lattice: k2.Fsa) -> list[float]:
    return lattice.get_tot_scores(use_double_scores=True, log_semiring=True).tolist()


@pytest.mark.parametrize("seed", range(6))
def test_unpruned_trivial_graph_gives_exhaustive_best_path(device, seed):
    vocab_size = 3 + seed % 2
    context_size = 1 + seed % 3
    temperature, penalty = [(1.0, 0.0), (0.8, 0.5), (1.3, -0.3)][seed % 3]
    model = random_model(vocab_size=vocab_size, context_size=context_size, seed=seed, device=device)
    lens = [4, 1, 0, 5, 3]
    enc, enc_lens = random_batch(lens, seed=seed, device=device)
    config = dataclasses.replace(HUGE, temperature=temperature, blank_penalty=penalty)
    result = fast_beam_search(model, enc, enc_lens, config=config)
    assert result.lattice.shape[0] == len(lens)
    tot = _tot_log(result.lattice)
    for i, n in enumerate(lens):
        if n == 0:
            assert (result.hyps[i].tokens, result.hyps[i].score) == ([], 0.0)
            continue
        oracle = NetOracle(
            model, enc[i], temperature=temperature, blank_penalty=penalty, k2_initial_context=True
        )
        tokens, times, score = best_alignment(oracle, n)
        assert result.hyps[i].tokens == tokens
        assert result.hyps[i].timestamps == times
        assert result.hyps[i].score == pytest.approx(score, abs=1e-4)
        # nothing pruned: the lattice holds every alignment exactly once
        assert tot[i] == pytest.approx(total_log_prob(oracle, n), abs=1e-4)


def test_pruning_limits_are_applied(device):
    model = random_model(vocab_size=6, context_size=2, seed=7, device=device)
    enc, lens = random_batch([10], seed=7, device=device)
    wide = fast_beam_search(model, enc, lens, config=HUGE)
    narrow = fast_beam_search(
        model, enc, lens, config=FastBeamSearchConfig(beam=2.0, max_contexts=2, max_states=3)
    )
    assert narrow.lattice.num_arcs < wide.lattice.num_arcs
    assert narrow.hyps[0].score <= wide.hyps[0].score + 1e-6
    assert _tot_log(narrow.lattice)[0] < _tot_log(wide.lattice)[0]


def _graph_arcs():
    # Accepts 1 (2)* 3? with scores; two paths read "1 2" (max is taken). Final weights are 0:
    # k2's RNN-T decoding drops them.
    return [
        (0, 1, 1, -0.5),
        (0, 2, 1, -1.5),
        (1, 1, 2, -0.25),
        (1, 3, 3, -0.1),
        (1, 4, -1, 0.0),
        (2, 1, 2, 0.0),
        (3, 4, -1, 0.0),
    ]


def _graph(device, with_words: bool = False) -> k2.Fsa:
    lines = []
    for src, dst, label, w in _graph_arcs():
        word = {1: 10, 2: 0, 3: 11, -1: -1}[label]
        aux = f" {word}" if with_words else ""
        lines.append(f"{src} {dst} {label}{aux} {w}")
    lines.append("4")
    text = "\n".join(lines)
    fsa = k2.Fsa.from_str(text, acceptor=not with_words)
    return fsa.to(device)


@pytest.mark.parametrize("seed", range(4))
def test_hand_made_graph_matches_exhaustive_reference(device, seed):
    model = random_model(vocab_size=4, context_size=2, seed=seed, device=device)
    lens = [5, 2, 4]
    enc, enc_lens = random_batch(lens, seed=seed, device=device)
    graph = _graph(device, with_words=bool(seed % 2))
    result = fast_beam_search(model, enc, enc_lens, decoding_graph=graph, config=HUGE)
    walker = GraphWalker(_graph_arcs())
    for i, n in enumerate(lens):
        oracle = NetOracle(model, enc[i], k2_initial_context=True)
        tokens, times, score = best_alignment(oracle, n, walker)
        assert result.hyps[i].tokens == tokens
        assert result.hyps[i].timestamps == times
        assert result.hyps[i].score == pytest.approx(score, abs=1e-4)
        assert tokens[0] == 1  # the graph constrained the search
    if seed % 2:
        # word ids travel along as aux_labels
        best = k2.shortest_path(result.lattice, use_double_scores=True)
        words = [w for w in best.aux_labels.tolist() if w > 0]
        want = [{1: 10, 3: 11}[t] for h in result.hyps for t in h.tokens if t in (1, 3)]
        assert words == want


def test_graph_that_accepts_nothing_long_enough(device):
    # "1 3" needs two frames: a 1-frame utterance has no path unless allow_partial
    model = random_model(vocab_size=4, seed=1, device=device)
    graph = k2.Fsa.from_str("0 1 1 0\n1 2 3 0\n2 3 -1 0\n3").to(device)
    enc, lens = random_batch([1], seed=1, device=device)
    strict = fast_beam_search(model, enc, lens, decoding_graph=graph, config=HUGE)
    assert strict.hyps[0].tokens == [] and strict.hyps[0].score == float("-inf")
    partial = fast_beam_search(
        model, enc, lens, decoding_graph=graph,
        config=dataclasses.replace(HUGE, allow_partial=True),
    )
    assert partial.hyps[0].score > float("-inf")


def test_batch_of_one_equals_batch_of_many(device):
    model = random_model(vocab_size=7, context_size=2, seed=3, device=device)
    lens = [14, 3, 0, 1, 9, 14]
    enc, enc_lens = random_batch(lens, seed=3, device=device)
    many = fast_beam_search(model, enc, enc_lens)
    tot_many = _tot_log(many.lattice)
    for i, n in enumerate(lens):
        one = fast_beam_search(model, enc[i : i + 1, :n], enc_lens[i : i + 1])
        assert_same_hyps(one.hyps, [many.hyps[i]])
        assert one.lattice[0].num_arcs == many.lattice[i].num_arcs
        if n:
            assert _tot_log(one.lattice)[0] == pytest.approx(tot_many[i], abs=1e-6)


@pytest.mark.parametrize("seed", range(3))
def test_streaming_chunks_equal_offline(device, seed):
    model = random_model(vocab_size=5, context_size=2, seed=seed, device=device)
    lens = [13, 5, 9, 0]
    enc, enc_lens = random_batch(lens, seed=seed, device=device)
    config = FastBeamSearchConfig(beam=4.0, max_contexts=3, max_states=6)
    offline = fast_beam_search(model, enc, enc_lens, config=config)
    search = FastBeamSearch(model, config=config)
    streams = [search.new_stream(device) for _ in lens]
    for order, chunk, chunk_lens, done in random_chunks(enc, lens, seed, shuffle=True):
        search.decode_chunk([streams[p] for p in order], chunk, chunk_lens)
        partial = search.results(streams, final=False)
        for p, d in zip(partial, done):
            assert all(t < d for t in p.timestamps)
    assert_same_hyps(search.results(streams), offline.hyps)
    lattice = search.lattice(streams)
    assert [lattice[i].num_arcs for i in range(len(lens))] == [
        offline.lattice[i].num_arcs for i in range(len(lens))
    ]


def test_config_reaches_the_search_unchanged(device):
    """Every field of the config changes what the wrapper computes exactly as it changes the
    streaming search it wraps, and the result carries the very config object."""
    model = random_model(vocab_size=5, context_size=2, seed=11, device=device)
    enc, lens = random_batch([9, 6], seed=11, device=device)
    base = FastBeamSearchConfig(beam=3.0, max_contexts=3, max_states=5)
    changes = {
        "beam": 0.5,
        "max_contexts": 1,
        "max_states": 2,
        "temperature": 0.6,
        "blank_penalty": 1.0,
        "ilme_scale": 0.4,
        "allow_partial": True,
        "termination_frame": False,
        "decoder_tables": False,  # equal up to float rounding
    }
    assert set(changes) == {f.name for f in dataclasses.fields(FastBeamSearchConfig)}
    default_scores = _tot_log(fast_beam_search(model, enc, lens, config=base).lattice)
    for name, value in changes.items():
        config = dataclasses.replace(base, **{name: value})
        wrapped = fast_beam_search(model, enc, lens, config=config)
        assert wrapped.config is config
        search = FastBeamSearch(model, config=config)
        streams = [search.new_stream(device) for _ in range(2)]
        search.decode_chunk(streams, enc, lens)
        assert_same_hyps(search.results(streams), wrapped.hyps)
        scores = _tot_log(wrapped.lattice)
        assert scores == pytest.approx(_tot_log(search.lattice(streams)), abs=1e-9), name
        if name in ("beam", "max_contexts", "max_states", "temperature", "blank_penalty",
                    "ilme_scale", "termination_frame"):
            assert scores != pytest.approx(default_scores, abs=1e-6), name


def test_graph_validation(device):
    model = random_model(vocab_size=4, device=device)
    enc, lens = random_batch([3], device=device)
    too_big = k2.Fsa.from_str("0 0 4 0\n0 1 -1 0\n1").to(device)
    with pytest.raises(ValueError, match="label 4 but the joiner has only vocab_size=4"):
        fast_beam_search(model, enc, lens, decoding_graph=too_big)
    vec = k2.create_fsa_vec([k2.trivial_graph(3)]).to(device)
    with pytest.raises(ValueError, match="single FSA"):
        fast_beam_search(model, enc, lens, decoding_graph=vec)
    with pytest.raises(TypeError, match="k2.Fsa"):
        fast_beam_search(model, enc, lens, decoding_graph="LG.pt")


def test_blank_must_be_zero():
    model = random_model(vocab_size=4)
    model.decoder = StatelessDecoder(4, 8, blank_id=2, context_size=2)
    with pytest.raises(ValueError, match="blank_id == 0"):
        FastBeamSearch(model)


def test_decoder_cache_gives_identical_results(device):
    model = random_model(vocab_size=6, context_size=2, seed=2, device=device)
    enc, lens = random_batch([12, 7, 10], seed=2, device=device)
    plain = FastBeamSearch(model, decoder_cache_size=0)
    cached = FastBeamSearch(model, decoder_cache_size=1000)
    out = []
    for search in (plain, cached):
        streams = [search.new_stream(device) for _ in range(3)]
        search.decode_chunk(streams, enc, lens)
        out.append((search.results(streams), _tot_log(search.lattice(streams))))
    assert_same_hyps(out[0][0], out[1][0])
    assert out[0][1] == pytest.approx(out[1][1], abs=1e-5)
    assert cached.net.cache is not None and cached.net.cache.hits > 0
    assert plain.net.cache is None
    assert FastBeamSearch(model).net.cache.max_size == DECODER_CACHE_SIZE  # on by default


def test_terminated_stream_cannot_be_fed(device):
    model = random_model(vocab_size=4, seed=2, device=device)
    enc, lens = random_batch([3], seed=2, device=device)
    search = FastBeamSearch(model)
    streams = [search.new_stream(device)]
    search.decode_chunk(streams, enc, lens)
    partial = search.results(streams, final=False)
    assert all(t < 3 for t in partial[0].timestamps)
    search.results(streams)  # final: terminates
    assert streams[0].terminated
    with pytest.raises(ValueError, match="already terminated"):
        search.decode_chunk(streams, enc, lens)


def test_per_stream_graphs(device):
    """Each stream may bring its own graph (e.g. biasing); results match one-graph searches."""
    model = random_model(vocab_size=4, context_size=2, seed=5, device=device)
    enc, lens = random_batch([5, 4], seed=5, device=device)
    graph = _graph(device)
    search = FastBeamSearch(model, config=HUGE)
    streams = [search.new_stream(device, decoding_graph=graph), search.new_stream(device)]
    search.decode_chunk(streams, enc, lens)
    mixed = search.results(streams)
    constrained = fast_beam_search(model, enc[:1], lens[:1], decoding_graph=graph, config=HUGE)
    free = fast_beam_search(model, enc[1:], lens[1:], config=HUGE)
    assert_same_hyps(mixed, constrained.hyps + free.hyps)
    assert mixed[0].tokens != mixed[1].tokens


def test_all_blank_and_single_frame(device):
    model = random_model(vocab_size=5, seed=6, device=device)
    enc, lens = random_batch([6, 1], seed=6, device=device)
    result = fast_beam_search(
        model, enc, lens, config=FastBeamSearchConfig(blank_penalty=-50.0)
    )
    assert [h.tokens for h in result.hyps] == [[], []]
    assert all(h.score == pytest.approx(0.0, abs=1e-3) for h in result.hyps)
    # one frame: an arc for every symbol (plus k2's dead-end arc into the graph's super-final
    # state, labelled 0), then one final arc per surviving state
    one = fast_beam_search(model, enc[1:], lens[1:], config=HUGE)
    labels = one.lattice.labels.tolist()
    assert sorted(x for x in labels if x > 0) == [1, 2, 3, 4]
    assert labels.count(-1) == 5


class _HotwordWalker:
    """Scores a token sequence with the reference hotword automaton (non-strict), without the
    final refund (k2's RNN-T decoding drops final weights)."""

    def __init__(self, ref) -> None:
        self.ref = ref

    def score(self, tokens):
        state, total = 0, 0.0
        for t in tokens:
            s, state = self.ref.step(state, t)
            total += s
        return total


@pytest.mark.parametrize("seed", range(3))
def test_hotword_graph_matches_exhaustive_reference(device, seed):
    import random

    from k2dec.scorers import ContextGraph, hotword_graph
    from tests.reference.scorers import RefContextGraph
    from tests.scorers.helpers import random_phrases

    vocab = 4
    phrases = random_phrases(random.Random(seed), vocab, 3, with_scores=True)
    graph = hotword_graph(ContextGraph(phrases, 1.5), vocab, device=device)
    model = random_model(vocab_size=vocab, context_size=2, seed=seed, device=device)
    lens = [5, 3]
    enc, enc_lens = random_batch(lens, seed=seed, device=device)
    result = fast_beam_search(model, enc, enc_lens, decoding_graph=graph, config=HUGE)
    plain = fast_beam_search(model, enc, enc_lens, config=HUGE)
    walker = _HotwordWalker(RefContextGraph(phrases, 1.5, strict=False))
    for i, n in enumerate(lens):
        oracle = NetOracle(model, enc[i], k2_initial_context=True)
        tokens, times, score = best_alignment(oracle, n, walker)
        assert result.hyps[i].tokens == tokens
        assert result.hyps[i].timestamps == times
        assert result.hyps[i].score == pytest.approx(score, abs=1e-4)
    assert [h.score for h in result.hyps] != [h.score for h in plain.hyps]


def test_cached_decoder_outputs_have_the_bits_of_a_large_batch():
    """Cache misses are evaluated in batches of a multiple of 8 rows, so that a cached output
    has the bits the same context gets in a large batch (CPU float32 GEMMs round the last
    rows of other batch sizes differently): k2dec's lattices then equal icefall's bit for
    bit (it evaluates every context on every frame)."""
    from k2dec.transducer import TransducerNet

    model = random_model(vocab_size=50, context_size=2, dim=64, seed=3)
    g = torch.Generator().manual_seed(3)
    contexts = torch.randint(0, 50, (96, 2), generator=g)
    with torch.inference_mode():
        fresh = TransducerNet(model, 0).decoder_out(contexts)
        cached = TransducerNet(model, 1000)
        start = 0
        while start < contexts.size(0):
            end = min(contexts.size(0), start + int(torch.randint(1, 8, (1,), generator=g)))
            assert torch.equal(cached.decoder_out(contexts[start:end]), fresh[start:end])
            start = end
        assert torch.equal(cached.decoder_out(contexts), fresh)  # all from the cache now
        assert cached.cache.hits >= contexts.size(0)
