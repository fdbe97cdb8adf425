"""``k2dec.icefall``'s transducer searches without LMs against k2dec's registered methods
(with :func:`k2dec.methods.icefall_compatible`) and the icefall references of
``tests/reference/icefall_search.py``, at batch sizes 1 and more, with a length-1 utterance."""

from __future__ import annotations

import k2
import pytest
import torch

import k2dec.icefall as ice
from k2dec.methods import Resources, TransducerInputs, get_method, icefall_compatible
from k2dec.methods.parts import GraphConfig
from k2dec.methods.transducer import GreedySearchMethodConfig
from k2dec.nbest import NbestConfig
from k2dec.scorers import ContextGraph
from k2dec.testing.lang import tiny_lg
from k2dec.testing.transducer import random_batch, random_model
from k2dec.transducer import FastBeamSearchConfig, GreedySearchConfig, one_best
from tests.icefall.conftest import BATCHES, VOCAB, model_and_batch
from tests.reference.icefall_search import fast_beam_search_icefall, modified_beam_search_icefall
from tests.reference.lattice_rescore import levenshtein
from tests.reference.transducer_reference import NetOracle, classic_beam_search_reference

SEEDS = [0, 1, 2]
FBS = dict(beam=4.0, max_states=32, max_contexts=8)


def _method(name: str, model, enc, lens, cfg, res=None, refs=None):
    cfg = icefall_compatible(name, cfg)
    out = get_method(name)(TransducerInputs(model, enc, lens, refs), res or Resources(), cfg)
    return out


def _frames(result) -> list[list[int]]:
    return [list(h.token_frames or ()) for h in result.hyps]


@pytest.mark.parametrize("lens", BATCHES)
@pytest.mark.parametrize("seed", SEEDS)
def test_greedy_search_batch_is_the_greedy_method(lens, seed):
    model, enc, enc_lens = model_and_batch(lens, seed)
    got = ice.greedy_search_batch(model, enc, enc_lens, blank_penalty=0.5,
                                  return_timestamps=True)
    [want] = _method("greedy_search", model, enc, enc_lens,
                     GreedySearchMethodConfig(GreedySearchConfig(blank_penalty=0.5)))
    assert got.hyps == want.tokens and got.timestamps == _frames(want)
    assert ice.greedy_search_batch(model, enc, enc_lens, blank_penalty=0.5) == want.tokens
    # scores: each token's joiner logit, recomputed token by token
    for u, (toks, times) in enumerate(zip(got.hyps, got.timestamps)):
        ctx = [-1, model.decoder.blank_id]
        for tok, t, score in zip(toks, times, got.scores[u]):
            with torch.no_grad():
                dec = model.decoder(torch.tensor([ctx]), need_pad=False)
                logits = model.joiner(enc[u, t].reshape(1, 1, 1, -1), dec.unsqueeze(1))
            assert score == pytest.approx(float(logits.reshape(-1)[tok]), abs=1e-5)
            ctx = ctx[1:] + [tok]


@pytest.mark.parametrize("seed", SEEDS)
def test_single_utterance_searches(seed):
    model, enc, enc_lens = model_and_batch([9], seed)
    [want] = _method("greedy_search", model, enc, enc_lens,
                     GreedySearchMethodConfig(GreedySearchConfig(2)))
    got = ice.greedy_search(model, enc, max_sym_per_frame=2, return_timestamps=True)
    assert got.hyps == want.tokens and got.timestamps == _frames(want)
    assert ice.greedy_search(model, enc, 2) == want.tokens[0]
    [want] = _method("beam_search", model, enc, enc_lens, None)
    assert ice.beam_search(model, enc) == want.tokens[0]
    assert ice.beam_search(model, enc, return_timestamps=True).timestamps == _frames(want)
    with pytest.raises(ValueError, match="one utterance"):
        ice.beam_search(model, torch.cat([enc, enc]))


def test_beam_search_takes_the_expansion_bound():
    """``max_expansions_per_frame`` reaches the search: with a model that emits many symbols
    per frame, the best of icefall's algorithm (``classic_beam_search_reference``) at each
    bound; the default is 1000 (icefall has none; k2dec's method stops at 32); values outside
    [1, 1000] are refused."""
    model = random_model(vocab_size=5, context_size=2, seed=11, scale=3.0)
    enc, _ = random_batch([6], seed=11)
    got = {}
    for bound in (1, 2, 32, 1000):
        got[bound] = ice.beam_search(model, enc, max_expansions_per_frame=bound)
        want = classic_beam_search_reference(NetOracle(model, enc[0]), 6, 4, bound)
        c = model.decoder.context_size
        assert tuple(got[bound]) == max(want, key=lambda k: want[k][0] / (c + len(k)))
    assert ice.beam_search(model, enc) == got[1000]
    assert got[1] != got[1000]
    for bad in (0, 1001, None):
        with pytest.raises(ValueError, match="max_expansions_per_frame"):
            ice.beam_search(model, enc, max_expansions_per_frame=bad)


@pytest.mark.parametrize("lens", BATCHES)
@pytest.mark.parametrize("seed", SEEDS)
def test_modified_beam_search_is_the_method_and_icefalls(lens, seed):
    model, enc, enc_lens = model_and_batch(lens, seed)
    got = ice.modified_beam_search(model, enc, enc_lens, beam=3, return_timestamps=True)
    cfg = get_method("modified_beam_search").default_config()
    [want] = _method("modified_beam_search", model, enc, enc_lens,
                     type(cfg)(search=type(cfg.search)(beam_size=3)))
    assert got.hyps == want.tokens and got.timestamps == _frames(want)
    ref = modified_beam_search_icefall(model, enc, enc_lens, beam=3)
    assert got.hyps == [tokens for tokens, _ in ref]


@pytest.mark.parametrize("seed", SEEDS)
def test_modified_beam_search_with_hotwords_is_the_method(seed):
    model, enc, enc_lens = model_and_batch(BATCHES[0], seed)
    phrases = (((1, 2), None), ((3,), 1.5), ((2, 4, 1), None))
    graph = ContextGraph(phrases, context_score=2.0)
    got = ice.modified_beam_search(model, enc, enc_lens, context_graph=graph)
    [want] = _method("modified_beam_search", model, enc, enc_lens, None,
                     Resources(hotwords=phrases))
    assert got == want.tokens
    assert got != ice.modified_beam_search(model, enc, enc_lens)  # the bonus changes them


@pytest.mark.parametrize("lens", BATCHES)
@pytest.mark.parametrize("ilme_scale", [0.0, 0.1])
def test_fast_beam_search_is_icefalls_lattice(lens, ilme_scale):
    model, enc, enc_lens = model_and_batch(lens, 3)
    graph = k2.trivial_graph(VOCAB - 1)
    got = ice.fast_beam_search(model, graph, enc, enc_lens, ilme_scale=ilme_scale, **FBS)
    want = fast_beam_search_icefall(model, enc, enc_lens, graph, FBS["beam"],
                                    FBS["max_states"], FBS["max_contexts"],
                                    ilme_scale=ilme_scale)
    kw = dict(use_double_scores=True, log_semiring=False)
    assert torch.allclose(got.get_tot_scores(**kw), want.get_tot_scores(**kw), atol=1e-4)
    best = [h.tokens for h in one_best(want, enc_lens.tolist())]
    assert ice.get_texts(k2.shortest_path(got, True)) == best
    assert ice.fast_beam_search_one_best(model, graph, enc, enc_lens, ilme_scale=ilme_scale,
                                         **FBS) == best


@pytest.mark.parametrize("lens", BATCHES)
@pytest.mark.parametrize("seed", SEEDS)
def test_fast_beam_search_one_best_is_the_method(lens, seed):
    model, enc, enc_lens = model_and_batch(lens, seed)
    graph = k2.trivial_graph(VOCAB - 1)
    got = ice.fast_beam_search_one_best(model, graph, enc, enc_lens, return_timestamps=True,
                                        temperature=1.3, blank_penalty=0.2, **FBS)
    cfg = get_method("fast_beam_search").default_config()
    search = FastBeamSearchConfig(temperature=1.3, blank_penalty=0.2, **_fbs_fields())
    [want] = _method("fast_beam_search", model, enc, enc_lens, type(cfg)(search=search))
    assert got.hyps == want.tokens and got.timestamps == _frames(want)


def _fbs_fields() -> dict:
    return dict(beam=FBS["beam"], max_states=FBS["max_states"],
                max_contexts=FBS["max_contexts"])


def _nbest_cfg(name: str, num_paths: int, **search):
    cfg = get_method(name).default_config()
    return type(cfg)(search=FastBeamSearchConfig(**_fbs_fields(), **search),
                     nbest=NbestConfig(num_paths=num_paths, nbest_scale=0.5))


@pytest.mark.parametrize("lens", BATCHES)
@pytest.mark.parametrize("seed", SEEDS)
def test_fast_beam_search_nbest_is_the_method(lens, seed):
    model, enc, enc_lens = model_and_batch(lens, seed)
    graph = k2.trivial_graph(VOCAB - 1)
    got = ice.fast_beam_search_nbest(model, graph, enc, enc_lens, num_paths=20, **FBS)
    # icefall's fast_beam_search_nbest runs fast_beam_search with its default ilme_scale 0.1
    [want] = _method("fast_beam_search_nbest", model, enc, enc_lens,
                     _nbest_cfg("fast_beam_search_nbest", 20))
    assert got == want.tokens


@pytest.mark.parametrize("lens", BATCHES)
@pytest.mark.parametrize("seed", SEEDS)
def test_fast_beam_search_nbest_oracle_is_as_close_as_the_method(lens, seed):
    """Both choose a path at the smallest edit distance (ties may go to other paths)."""
    model, enc, enc_lens = model_and_batch(lens, seed)
    graph = k2.trivial_graph(VOCAB - 1)
    refs = [[1, 2, 3, 4][: n % 5] for n in lens]
    got = ice.fast_beam_search_nbest_oracle(model, graph, enc, enc_lens, num_paths=20,
                                            ref_texts=refs, **FBS)
    [want] = _method("fast_beam_search_nbest_oracle", model, enc, enc_lens,
                     _nbest_cfg("fast_beam_search_nbest_oracle", 20), refs=refs)
    for g, w, r in zip(got, want.tokens, refs):
        assert levenshtein(g, r) == levenshtein(w, r)




@pytest.fixture(scope="module")
def lg(tmp_path_factory):
    _, LG = tiny_lg(tmp_path_factory.mktemp("lg"))
    return k2.arc_sort(LG)


@pytest.mark.parametrize("lens", BATCHES)
@pytest.mark.parametrize("seed", SEEDS)
def test_fast_beam_search_nbest_LG_is_the_method(lg, lens, seed):
    model, enc, enc_lens = model_and_batch(lens, seed)
    got = ice.fast_beam_search_nbest_LG(model, lg, enc, enc_lens, num_paths=20,
                                        return_timestamps=True, **FBS)
    cfg = _nbest_cfg("fast_beam_search_nbest_LG", 20)
    cfg = type(cfg)(search=cfg.search, nbest=cfg.nbest, graph=GraphConfig(1.0))
    [want] = _method("fast_beam_search_nbest_LG", model, enc, enc_lens, cfg,
                     Resources(graphs={"LG": lg}))
    assert got.hyps == want.words
    assert all(len(t) == len(w) for t, w in zip(got.timestamps, got.hyps))
    one = ice.fast_beam_search_one_best(model, lg, enc, enc_lens, **FBS)
    assert all(w > 0 for h in one for w in h)  # word ids through LG


def test_a_model_with_another_unk_is_refused():
    model, enc, enc_lens = model_and_batch([3], 0)
    model.unk_id = 2
    with pytest.raises(ValueError, match="unk_id=2"):
        ice.greedy_search_batch(model, enc, enc_lens)


def test_an_empty_utterance_gets_an_empty_hypothesis():
    """icefall asserts every length is > 0; k2dec decodes the others and gives it nothing."""
    model, enc, enc_lens = model_and_batch([4, 0, 2], 1)
    graph = k2.trivial_graph(VOCAB - 1)
    alone = ice.greedy_search_batch(model, enc[:1], enc_lens[:1])
    for got in (ice.greedy_search_batch(model, enc, enc_lens),
                ice.modified_beam_search(model, enc, enc_lens),
                ice.fast_beam_search_one_best(model, graph, enc, enc_lens, **FBS),
                ice.fast_beam_search_nbest(model, graph, enc, enc_lens, num_paths=5, **FBS)):
        assert len(got) == 3 and got[1] == []
    assert ice.greedy_search_batch(model, enc, enc_lens)[0] == alone[0]
