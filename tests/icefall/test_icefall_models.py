"""``k2dec.icefall``'s fast_beam_search family handed icefall's own kind of model objects
(:class:`~tests.icefall.icefall_shaped.ZipformerDecoder` / ``ZipformerJoiner``: their own
classes and forward signatures) at vocab 500 and 20: the lattice has the bits of icefall's
(every stream over every frame, the decoder module, ``decoder_proj`` and the joiner on each
frame's whole batch: ``tests/reference/icefall_search.py``), so ``k2.random_paths`` draws
icefall's n-best paths and the n-best choices are icefall's
(``tests/reference/icefall_nbest.py``). Batches: one utterance, fewer than 16 (icefall's very
batches) and more (ended utterances dropped, batches padded), with a length-1 utterance."""

from __future__ import annotations

import copy

import k2
import pytest
import torch

import k2dec.icefall as ice
from k2dec.transducer import greedy
from k2dec.transducer.fast_beam_search import (
    DECODER_CACHE_SIZE,
    FastBeamSearch,
    FastBeamSearchConfig,
)
from k2dec.transducer.network import (
    TransducerNet,
    cached_equivalent_joiner,
    cached_equivalent_tables,
)
from tests.icefall.icefall_shaped import zipformer_transducer
from tests.reference.icefall_greedy import greedy_search_batch_icefall, greedy_search_icefall
from tests.reference.icefall_nbest import nbest_icefall, oracle_distance, oracle_icefall
from tests.reference.icefall_search import fast_beam_search_icefall
from tests.reference.lattice_rescore import levenshtein
from tests.reference.transducer_reference import NetOracle, greedy_reference

FBS = dict(beam=4.0, max_states=32, max_contexts=8)
#: (vocab, decoder dim, encoder dim)
MODELS = [(500, 256, 384), (20, 32, 32)]
BATCHES = [[13], [9, 1, 12, 7], [14, 3, 11, 9, 12, 1, 10, 8, 13, 6, 12, 9, 5, 14, 7, 11, 10, 4]]
NUM_PATHS = 20
#: blank penalty of the greedy tests on decoder tables (symbols on a third of the frames)
GREEDY_PENALTY = 2.0


def _problem(sizes, lens, seed):
    vocab, dim, enc_dim = sizes
    model = zipformer_transducer(vocab, dim, enc_dim, seed, blank_bias=3.0)
    g = torch.Generator().manual_seed(seed)
    enc = torch.randn(len(lens), max(lens), enc_dim, generator=g)
    return model, enc, torch.tensor(lens)


def word_loop_lg(vocab: int, num_words: int, seed: int) -> k2.Fsa:
    """An LG-like graph: a loop over ``num_words`` random words of 1-3 tokens (labels
    tokens, ``aux_labels`` the word id on its first arc), random word scores."""
    g = torch.Generator().manual_seed(seed)
    lines, nxt = [], 1
    for word in range(1, num_words + 1):
        pron = torch.randint(1, vocab, (int(torch.randint(1, 4, (1,), generator=g)),),
                             generator=g).tolist()
        score = -float(torch.rand(1, generator=g)) * 2
        src = 0
        for i, tok in enumerate(pron):
            dst = 0 if i == len(pron) - 1 else nxt
            nxt += dst != 0
            lines.append(f"{src} {dst} {tok} {word if i == 0 else 0} {score if i == 0 else 0.0}")
            src = dst
    lines.append(f"0 {nxt} -1 -1 0.0")
    lines.sort(key=lambda line: int(line.split()[0]))
    return k2.arc_sort(k2.Fsa.from_str("\n".join(lines + [f"{nxt}"]), acceptor=False))


def _reference_lattice(model, enc, lens, graph, ilme_scale):
    with torch.no_grad():
        return fast_beam_search_icefall(model, enc, lens, graph, FBS["beam"],
                                        FBS["max_states"], FBS["max_contexts"],
                                        ilme_scale=ilme_scale)


def _same_lattice(got: k2.Fsa, want: k2.Fsa) -> None:
    assert torch.equal(got.arcs.values(), want.arcs.values())
    assert torch.equal(got.scores, want.scores)  # bit for bit


@pytest.mark.parametrize("sizes", MODELS)
@pytest.mark.parametrize("lens", BATCHES)
def test_nbest_searches_are_icefalls(sizes, lens):
    model, enc, enc_lens = _problem(sizes, lens, seed=len(lens))
    graph = k2.trivial_graph(sizes[0] - 1)
    want = _reference_lattice(model, enc, enc_lens, graph, 0.1)
    with torch.no_grad():
        _same_lattice(ice.fast_beam_search(model, graph, enc, enc_lens, **FBS), want)
        for seed in range(2):
            torch.manual_seed(seed)
            got = ice.fast_beam_search_nbest(model, graph, enc, enc_lens, num_paths=NUM_PATHS,
                                             **FBS)
            torch.manual_seed(seed)
            assert got == nbest_icefall(want, NUM_PATHS)
        refs = [list(range(1, 1 + n % 4)) for n in lens]
        torch.manual_seed(0)
        got = ice.fast_beam_search_nbest_oracle(model, graph, enc, enc_lens,
                                                num_paths=NUM_PATHS, ref_texts=refs, **FBS)
        torch.manual_seed(0)
        dist = oracle_distance(want, NUM_PATHS, refs)
        torch.manual_seed(0)
        chosen = oracle_icefall(want, NUM_PATHS, refs)
    assert [levenshtein(g, r) for g, r in zip(got, refs)] == dist
    assert got == chosen


@pytest.mark.parametrize("sizes", MODELS)
@pytest.mark.parametrize("lens", BATCHES)
def test_nbest_LG_is_icefalls(sizes, lens):
    model, enc, enc_lens = _problem(sizes, lens, seed=7 + len(lens))
    lg = word_loop_lg(sizes[0], 40, seed=len(lens))
    want = _reference_lattice(model, enc, enc_lens, lg, 0.0)
    with torch.no_grad():
        _same_lattice(ice.fast_beam_search(model, lg, enc, enc_lens, ilme_scale=0.0, **FBS),
                      want)
        torch.manual_seed(3)
        got = ice.fast_beam_search_nbest_LG(model, lg, enc, enc_lens, num_paths=NUM_PATHS,
                                            **FBS)
        torch.manual_seed(3)
    assert got == nbest_icefall(want, NUM_PATHS, log_semiring=True)


@pytest.mark.parametrize("sizes", MODELS)
@pytest.mark.parametrize("max_sym", [1, 2])
def test_greedy_search_is_icefalls(sizes, max_sym):
    """The one-utterance greedy_search against icefall's loop (frame by frame, one joiner
    call each, the decoder module after every symbol)."""
    model, enc, enc_lens = _problem(sizes, [70, 1, 40], seed=max_sym)
    with torch.no_grad():
        for i, n in enumerate(enc_lens.tolist()):
            x = enc[i : i + 1, :n]
            got = ice.greedy_search(model, x, max_sym, blank_penalty=0.3, return_timestamps=True)
            want = greedy_search_icefall(model, x, max_sym, blank_penalty=0.3)
            assert (got.hyps[0], got.timestamps[0]) == want


def _streamed_lattice(model, enc, lens, graph, config, cache_size, chunk):
    """The lattice of FastBeamSearch's streaming path (batches padded to ICEFALL_MIN_ROWS
    rows), fed ``chunk`` frames at a time, with per-context rows kept in a cache of
    ``cache_size`` contexts (0: computed on every frame)."""
    search = FastBeamSearch(model, graph, config, decoder_cache_size=cache_size)
    streams = [search.new_stream() for _ in lens.tolist()]
    for start in range(0, enc.size(1), chunk):
        part = (lens - start).clamp(min=0, max=chunk)
        search.decode_chunk(streams, enc[:, start : start + chunk], part)
    return search.lattice(streams)


@pytest.mark.parametrize("sizes", MODELS)
@pytest.mark.parametrize("ilme_scale", [0.0, 0.1])
def test_context_rows_cache_gives_the_uncached_lattice(sizes, ilme_scale):
    """In icefall's layout the projected decoder outputs and ILME log-probs are computed once
    per context (in batches of at least ICEFALL_MIN_ROWS rows) and cached: the lattices are
    bit for bit those of computing them on every frame, with the default cache, a tiny one
    that is emptied again and again, at batch 1, 4 and 18, whole or in chunks, on random
    problems (a length-1 and an empty utterance included)."""
    graph = k2.trivial_graph(sizes[0] - 1)
    config = FastBeamSearchConfig(beam=4.0, max_states=32, max_contexts=8,
                                  ilme_scale=ilme_scale, decoder_tables=False,
                                  termination_frame=False)
    for seed, lens in enumerate([[13], [9, 1, 12, 0], BATCHES[2]]):
        model, enc, enc_lens = _problem(sizes, lens, seed=30 + seed)
        with torch.no_grad():
            for chunk in (enc.size(1), 5):
                want = _streamed_lattice(model, enc, enc_lens, graph, config, 0, chunk)
                for size in (DECODER_CACHE_SIZE, 7):
                    got = _streamed_lattice(model, enc, enc_lens, graph, config, size, chunk)
                    _same_lattice(got, want)


@pytest.mark.parametrize("sizes", MODELS)
@pytest.mark.parametrize("loop", ["frames", "windows"])
def test_greedy_search_batch_is_icefalls(sizes, loop, monkeypatch):
    """greedy_search_batch (argmax of the logits, each token's logit from the search)
    against icefall's algorithm utterance by utterance, through both loops of the search
    (the frame-synchronous one and the look-ahead windows), at batch 1, 4 and 18 with a
    length-1 and an empty utterance; its tokens are also those of k2dec's greedy_search
    (decisions by the log-probs)."""
    monkeypatch.setattr(greedy, "_FRAME_LOOP_WORK", 0 if loop == "frames" else 1 << 62)
    for seed, lens in enumerate([[13], [9, 1, 12, 0], BATCHES[2]]):
        model, enc, enc_lens = _problem(sizes, lens, seed=50 + seed)
        with torch.no_grad():
            got = ice.greedy_search_batch(model, enc, enc_lens, blank_penalty=0.5,
                                          return_timestamps=True)
            tokens, frames, logits = greedy_search_batch_icefall(model, enc, lens, 0.5)
            hyps = greedy.greedy_search(model, enc, enc_lens, greedy.GreedySearchConfig(
                blank_penalty=0.5))
        assert got.hyps == tokens and got.timestamps == frames
        assert sum(map(len, tokens)) > len(lens)  # (the test sees symbols)
        for mine, want in zip(got.scores, logits):
            assert mine == pytest.approx(want, abs=1e-4)
        assert [h.tokens for h in hyps] == tokens
        assert ice.greedy_search_batch(model, enc, enc_lens, blank_penalty=0.5) == tokens


@pytest.mark.parametrize("sizes", [(2000, 128, 64)] + MODELS)
@pytest.mark.parametrize("loop", ["frames", "windows"])
def test_greedy_search_on_decoder_tables_is_the_modules(sizes, loop, monkeypatch):
    """k2dec's greedy_search runs icefall's decoder class as per-token tables
    (cached_equivalent_tables) and its joiner's linear layers with transposed weights
    (cached_equivalent_joiner): the tokens and frames of the frame-by-frame reference that
    calls the decoder module and the unprojected joiner, and its scores (sums of log-probs)
    to float tolerance, through both loops, at vocab 2000, 500 and 20, at batch 1 and 4 with
    a length-1 and an empty utterance; the one-utterance search gives the same tokens."""
    monkeypatch.setattr(greedy, "_FRAME_LOOP_WORK", 0 if loop == "frames" else 1 << 62)
    for seed, lens in enumerate([[13], [1], [9, 1, 12, 0], [0]]):
        model, enc, enc_lens = _problem(sizes, lens, seed=70 + seed)
        net = TransducerNet(model, equivalent_tables=True, equivalent_joiner=True)
        assert net.decoder_tables() is not None
        with torch.no_grad():
            assert net._joiner_weights() is not None
        with torch.no_grad():
            hyps = greedy.greedy_search(model, enc, enc_lens, greedy.GreedySearchConfig(
                blank_penalty=GREEDY_PENALTY))
            for i, n in enumerate(lens):
                tokens, times, score = greedy_reference(
                    NetOracle(model, enc[i], blank_penalty=GREEDY_PENALTY), n)
                assert (hyps[i].tokens, hyps[i].timestamps) == (tokens, times)
                assert hyps[i].score == pytest.approx(score, rel=1e-5, abs=1e-4)
                if n:
                    assert greedy.greedy_search_single(
                        model, enc[i : i + 1, :n], greedy.GreedySearchConfig(
                            blank_penalty=GREEDY_PENALTY)) == (tokens, times)
        if seed == 2:
            assert sum(len(h.tokens) for h in hyps) > 4  # (the test sees symbols)


def test_equivalent_tables_are_kept_until_the_weights_change():
    """cached_equivalent_tables builds the tables of a decoder once and again after an
    in-place weight update (an optimizer step), when they follow the new weights."""
    model, _, _ = _problem(MODELS[1], [3], seed=5)
    net = TransducerNet(model, equivalent_tables=True)
    first = net.decoder_tables()
    assert first is not None and net.decoder_tables() is first
    assert cached_equivalent_tables(TransducerNet(model)) is first
    ctx = torch.tensor([[-1, 0], [3, 7], [19, 2]])
    with torch.no_grad():
        model.decoder.embedding.weight.mul_(0.5)
        want = net.project_decoder(net._decoder_module(ctx))
        second = net.decoder_tables()
        got = net.decoder_out(ctx)
    assert second is not first
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_equivalent_joiner_follows_the_weights_and_refuses_other_joiners():
    """cached_equivalent_joiner keeps a joiner's transposed weights until they change (then
    the logits follow the new weights), and a joiner whose forward is not icefall's
    (output_linear(tanh(e + d))) runs as its module."""
    model, _, _ = _problem(MODELS[1], [3], seed=6)
    net = TransducerNet(model, equivalent_joiner=True)
    e, d = torch.randn(5, 1, 1, 32), torch.randn(5, 1, 1, 32)
    with torch.no_grad():
        first = net._joiner_weights()
        assert first is not None and cached_equivalent_joiner(net) is first
        model.joiner.output_linear.weight.mul_(0.5)
        torch.testing.assert_close(net.logits4(e, d), model.joiner(
            e, d, project_input=False).reshape(5, -1), rtol=1e-5, atol=1e-5)
        assert net._joiner_weights() is not first
    model.joiner = copy.deepcopy(model.joiner)  # (a new joiner object)
    model.joiner.__class__ = type("ReluJoiner", (type(model.joiner),), {
        "forward": lambda self, e, d, project_input=True: self.output_linear(
            torch.relu(e + d))})
    with torch.no_grad():
        assert TransducerNet(model, equivalent_joiner=True)._joiner_weights() is None
