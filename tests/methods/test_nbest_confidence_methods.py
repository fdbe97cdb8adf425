"""Confidences and frames of the methods that choose from an n-best of a lattice: the n-best
posteriors of the chosen words against the per-utterance reference, frames equal to the
lattice best path's where the same words are chosen, and the same records in any batch."""

from __future__ import annotations

import copy
import math

import pytest
import torch

from k2dec.lattice import get_lattice
from k2dec.methods import CtcInputs, Resources, TransducerInputs, get_method
from k2dec.methods.ctc import (
    HlgNbestConfig,
    MultiPassMethodConfig,
    _select_utts,
)
from k2dec.methods.ctc_prefix import NoNgramAttentionConfig
from k2dec.methods.mbr import MbrMethodConfig
from k2dec.methods.parts import GraphConfig, RescorePart
from k2dec.methods.transducer import FastBeamSearchNbestConfig, FastBeamSearchNbestLGConfig
from k2dec.nbest import (
    DedupKey,
    MultiPassConfig,
    Nbest,
    NbestConfig,
    lm_path_scorer,
    multi_pass_rescore,
)
from k2dec.testing.transducer import random_batch, random_model
from k2dec.transducer import fast_beam_search
from tests.methods.conftest import method_config
from tests.methods.ctc_inputs import random_ctc_inputs
from tests.reference import nbest_confidence as ref
from tests.reference.lattice_paths import enumerate_paths
from tests.reference.lattice_rescore import levenshtein


def _check(records, words: bool):
    for rec in records:
        if rec.error:
            continue
        if words:
            assert len(rec.word_confidences) == len(rec.words)
            assert rec.word_frames is not None and len(rec.word_frames) == len(rec.words)
            assert all(d >= 0 for d in rec.word_durations)
            assert all(0.0 <= c <= 1.0 for c in rec.word_confidences)
        else:
            assert len(rec.token_confidences) == len(rec.tokens)
            assert all(0.0 <= c <= 1.0 for c in rec.token_confidences)


@pytest.mark.parametrize("seed", range(4))
def test_nbest_confidences_are_nbest_posteriors(setup, seed):
    lang, res = setup
    inp = random_ctc_inputs(seed, lang.max_token_id + 1)
    cfg = HlgNbestConfig(nbest=NbestConfig(num_paths=20), graph=GraphConfig(1.0))
    out = get_method("nbest")(inp, res, cfg)[0]
    _check(out.hyps, words=True)
    lat = get_lattice(inp.log_probs, inp.log_probs_lens, res.graphs["HLG"], cfg.lattice).lattice
    nbest = Nbest.from_config(lat, cfg.nbest).intersect(max_arcs=cfg.nbest.max_intersect_arcs)
    lists = nbest.key_lists()
    totals = nbest.tot_scores().tolist()
    chosen = [lists[u].index(list(r.words)) if not r.error else -1
              for u, r in enumerate(out.hyps)]
    want = ref.nbest_confidences(lists, totals, chosen)
    for r, w in zip(out.hyps, want):
        if not r.error:
            assert list(r.word_confidences) == pytest.approx(w, abs=1e-9)
    # where the n-best chooses the lattice's best word sequence, it has the best path's frames
    best = get_method("mbr")(inp, res, MbrMethodConfig(graph=GraphConfig(1.0)))[1]
    for a, b in zip(out.hyps, best.hyps):
        if not a.error and a.words == b.words:
            assert a.word_frames == b.word_frames
            assert a.word_durations == b.word_durations


@pytest.mark.parametrize("name", ["nbest", "nbest-rescoring", "attention-decoder", "rnn-lm"])
def test_records_do_not_depend_on_the_batch(setup, name):
    lang, res = setup
    cfg = method_config(name, nbest=NbestConfig(num_paths=20), ngram_lm_scale=0.5,
                        attention_scale=0.3, lm_scale=0.5, sweep=True,
                        ngram_lm_scales=(0.5, 1.0), lm_scales=(0.5, 1.0),
                        attention_scales=(0.3,))
    inp = random_ctc_inputs(7, lang.max_token_id + 1)
    batch = get_method(name)(inp, res, cfg)
    for r in batch:
        _check(r.hyps, words=True)
        assert any(not h.error for h in r.hyps)
    for u in range(3):
        one = random_ctc_inputs(7, lang.max_token_id + 1)
        one = type(one)(one.log_probs[u:u + 1], one.log_probs_lens[u:u + 1],
                        ref_words=one.ref_words[u:u + 1], memory=one.memory[u:u + 1],
                        memory_lens=one.memory_lens[u:u + 1])
        alone = get_method(name)(one, res, cfg)
        for a, b in zip(batch, alone):
            x, y = a.hyps[u], b.hyps[0]
            assert (x.words, x.word_frames, x.word_durations, x.error) == \
                (y.words, y.word_frames, y.word_durations, y.error)
            if x.word_confidences is not None:
                assert list(x.word_confidences) == pytest.approx(list(y.word_confidences),
                                                                 abs=1e-6)


def test_fast_beam_search_nbest_methods_carry_frames_and_confidences(tiny_LG, device):
    _, LG = tiny_LG
    model = random_model(vocab_size=5, seed=5, device=device)
    enc, lens = random_batch([6, 1, 5], seed=5, device=device)
    inputs = TransducerInputs(model, enc, lens)
    res = Resources(graphs={"LG": LG.to(device)})
    cfg = FastBeamSearchNbestConfig(nbest=NbestConfig(num_paths=20))
    out = get_method("fast_beam_search_nbest")(inputs, res, cfg)[0]
    _check(out.hyps, words=False)
    plain = get_method("fast_beam_search")(inputs, res)[0]
    for a, b in zip(out.hyps, plain.hyps):
        assert a.token_frames is not None or a.error
        if not a.error and a.tokens == b.tokens:
            assert a.token_frames == b.token_frames
    lg = get_method("fast_beam_search_nbest_LG")(
        inputs, res, FastBeamSearchNbestLGConfig(nbest=NbestConfig(num_paths=20)))[0]
    _check(lg.hyps, words=True)
    assert any(not h.error and h.words for h in lg.hyps)


# ---- oracles, multi-pass, attention-decoder-rescoring-no-ngram ----------------------------


def _on(res: Resources, device) -> Resources:
    """``res`` with its graphs and networks on ``device`` (copies; the fixture stays put)."""
    return Resources(graphs={k: g.to(device) for k, g in res.graphs.items()},
                     lms={k: copy.deepcopy(m).to(device) for k, m in res.lms.items()},
                     attention_decoder=copy.deepcopy(res.attention_decoder).to(device))


def _with_empty(inp, lang, device):
    """``inp`` on ``device`` plus a fourth utterance whose HLG lattice is empty (only token
    ``d`` is possible, and ``d`` alone spells no word)."""
    n, t, v = inp.log_probs.shape
    dead = torch.full((1, t, v), float("-inf"))
    dead[0, :, lang.token_table["d"]] = 0.0
    memory = torch.cat([inp.memory, torch.zeros(1, t, inp.memory.size(2))])
    lengths = torch.cat([inp.log_probs_lens, torch.tensor([4])])
    return CtcInputs(torch.cat([inp.log_probs, dead]).to(device), lengths.to(device),
                     ref_words=inp.ref_words + [[2]], memory=memory.to(device),
                     memory_lens=lengths.to(device))


def _utt(inp, u: int):
    return CtcInputs(inp.log_probs[u:u + 1], inp.log_probs_lens[u:u + 1],
                     ref_words=inp.ref_words[u:u + 1], memory=inp.memory[u:u + 1],
                     memory_lens=inp.memory_lens[u:u + 1])



def _same_records(batch, alone):
    assert (batch.words, batch.tokens, batch.word_frames, batch.word_durations,
            batch.token_frames, batch.error) == (alone.words, alone.tokens, alone.word_frames,
                                                 alone.word_durations, alone.token_frames,
                                                 alone.error)
    for a, b in ((batch.word_confidences, alone.word_confidences),
                 (batch.token_confidences, alone.token_confidences)):
        assert (a is None) == (b is None)
        if a is not None:
            assert list(a) == pytest.approx(list(b), abs=1e-6)


@pytest.mark.parametrize("seed", range(3))
def test_nbest_oracle_confidences_are_lattice_nbest_posteriors(setup, device, seed):
    lang, res = setup
    res = _on(res, device)
    inp = _with_empty(random_ctc_inputs(seed, lang.max_token_id + 1), lang, device)
    cfg = HlgNbestConfig(nbest=NbestConfig(num_paths=20, posterior_scale=0.7),
                         graph=GraphConfig(1.0))
    out = get_method("nbest-oracle")(inp, res, cfg)[0]
    _check(out.hyps, words=True)
    # the same list as the nbest methods: sampled, intersected, by lattice score
    lat = get_lattice(inp.log_probs, inp.log_probs_lens, res.graphs["HLG"], cfg.lattice).lattice
    nbest = Nbest.from_config(lat, cfg.nbest).intersect(max_arcs=cfg.nbest.max_intersect_arcs)
    lists, totals = nbest.key_lists(), _split_scores(nbest)
    chosen = []
    for u, rec in enumerate(out.hyps):
        if not lists[u]:  # the empty lattice: the lattice's reason, no hypothesis
            assert rec.error.startswith("no path survived") and rec.words == ()
            chosen.append(-1)
            continue
        dist = [levenshtein(h, inp.ref_words[u]) for h in lists[u]]
        c = dist.index(min(dist))  # the first closest
        assert list(rec.words) == lists[u][c] and rec.score is None and not rec.error
        chosen.append(c)
    assert any(c >= 0 and lists[u][c] for u, c in enumerate(chosen))
    want = ref.nbest_confidences(lists, totals, chosen, scale=0.7)
    for r, w in zip(out.hyps, want):
        if not r.error:
            assert list(r.word_confidences) == pytest.approx(w, abs=1e-9)
    # frames of the oracle path's best alignment: the nbest method's where it chose the same
    plain = get_method("nbest")(inp, res, cfg)[0]
    for a, b in zip(out.hyps, plain.hyps):
        if not a.error and a.words == b.words:
            assert (a.word_frames, a.word_durations) == (b.word_frames, b.word_durations)
    for u in range(4):  # batch 1 gives the same records
        _same_records(out.hyps[u], get_method("nbest-oracle")(_utt(inp, u), res, cfg)[0].hyps[0])


def _split_scores(nbest) -> list[list[float]]:
    splits = nbest.shape.row_splits(1).tolist()
    values = nbest.tot_scores().values.tolist()
    return [values[a:b] for a, b in zip(splits[:-1], splits[1:])]


def test_fast_beam_search_nbest_oracle_confidences_are_nbest_posteriors(device):
    model = random_model(vocab_size=5, seed=11, device=device)
    enc, lens = random_batch([6, 1, 5, 4], seed=11, device=device)
    cfg = FastBeamSearchNbestConfig(nbest=NbestConfig(num_paths=30))
    plain = get_method("fast_beam_search_nbest")(TransducerInputs(model, enc, lens),
                                                 Resources(), cfg)[0]
    # two references the oracle finds (the plain method's choice), two it may not
    refs = [list(plain.hyps[0].tokens), list(plain.hyps[1].tokens), [2, 2, 4], []]
    inputs = TransducerInputs(model, enc, lens, ref_tokens=refs)
    out = get_method("fast_beam_search_nbest_oracle")(inputs, Resources(), cfg)[0]
    _check(out.hyps, words=False)
    lattice = fast_beam_search(model, enc, lens, None, cfg.search).lattice
    nbest = Nbest.from_config(lattice, cfg.nbest, DedupKey.TOKENS).intersect(
        max_arcs=cfg.nbest.max_intersect_arcs)
    lists, totals = nbest.key_lists(), _split_scores(nbest)
    chosen = []
    for u, rec in enumerate(out.hyps):
        dist = [levenshtein(h, refs[u]) for h in lists[u]]
        c = dist.index(min(dist))
        assert list(rec.tokens) == lists[u][c] and rec.score is None
        chosen.append(c)
    want = ref.nbest_confidences(lists, totals, chosen)
    for r, w in zip(out.hyps, want):
        assert list(r.token_confidences) == pytest.approx(w, abs=1e-9)
    # frames of the oracle path's best alignment: the plain method's where it chose the same
    assert out.hyps[0].tokens == plain.hyps[0].tokens
    for a, b in zip(out.hyps, plain.hyps):
        if a.tokens == b.tokens:
            assert a.token_frames == b.token_frames
    for u in range(4):
        one = TransducerInputs(model, enc[u:u + 1, :int(lens[u])], lens[u:u + 1],
                               ref_tokens=refs[u:u + 1])
        _same_records(out.hyps[u], get_method("fast_beam_search_nbest_oracle")(
            one, Resources(), cfg)[0].hyps[0])


def test_multi_pass_confidences_at_full_budget_equal_rnn_lm_rescoring(setup, device):
    lang, res = setup
    res = _on(res, device)
    inp = _with_empty(random_ctc_inputs(4, lang.max_token_id + 1), lang, device)
    mp = MultiPassConfig(first_k=2, batch_k=2, stop_sigmas=math.inf, lm_scale=0.5, top_k=200)
    nbest = NbestConfig(num_paths=30)
    cfg = MultiPassMethodConfig(nbest=nbest, multi_pass=mp)
    multi = get_method("multi-pass")(inp, res, cfg)[0].hyps
    full = get_method("rnn-lm")(inp, res, method_config("rnn-lm", nbest=nbest,
                                                        lm_scale=0.5))[0].hyps
    _check(multi, words=True)
    assert multi[3].error.startswith("no path survived") and full[3].error == multi[3].error
    for a, b in zip(multi, full):
        assert (a.words, a.word_frames, a.word_durations) == (b.words, b.word_frames,
                                                              b.word_durations)
        if not a.error:
            # float32 LM scores of other batchings: equal to ~1e-8
            assert list(a.word_confidences) == pytest.approx(list(b.word_confidences),
                                                             abs=1e-6)


@pytest.mark.parametrize("seed", range(3))
def test_multi_pass_confidences_are_posteriors_of_the_rescored_paths(setup, device, seed):
    lang, res = setup
    res = _on(res, device)
    inp = _with_empty(random_ctc_inputs(seed, lang.max_token_id + 1), lang, device)
    mp = MultiPassConfig(first_k=1, batch_k=1, stop_sigmas=0.5, lm_scale=0.5, top_k=6)
    cfg = MultiPassMethodConfig(nbest=NbestConfig(num_paths=30, posterior_scale=1.5),
                                multi_pass=mp)
    out = get_method("multi-pass")(inp, res, cfg)[0].hyps
    _check(out, words=True)
    # the method's list: the top_k of the intersected n-best, the paths the passes rescored
    HLG = res.graphs["HLG"].clone()
    HLG.scores = HLG.scores * cfg.graph.scale
    HLG.lm_scores = HLG.scores.clone()
    lat = get_lattice(inp.log_probs, inp.log_probs_lens, HLG, cfg.lattice).lattice
    nbest = Nbest.from_config(lat, cfg.nbest).intersect(max_arcs=cfg.nbest.max_intersect_arcs)
    keep = [0, 1, 2]  # the empty lattice's utterance has no paths
    top = _select_utts(nbest, keep).top_k(mp.top_k)
    result = multi_pass_rescore(top, top.nbest.am_scores().values,
                                lm_path_scorer(res.lms["rnn_lm"], mp.lm_batch_size), mp)
    am = top.nbest.am_scores().values.tolist()
    nn = result.nn_scores.tolist()
    k = mp.top_k
    keys = top.nbest.key_lists()
    lists, totals, chosen = [], [], []
    partial = False
    for i, u in enumerate(keep):
        scores = [a + 0.5 * x if not math.isnan(x) else -math.inf
                  for a, x in zip(am[i * k:(i + 1) * k], nn[i * k:(i + 1) * k])]
        partial |= any(s == -math.inf for s in scores)
        c = scores.index(max(scores))
        assert list(out[u].words) == keys[i][c]
        lists.append(keys[i])
        totals.append(scores)
        chosen.append(c)
    assert partial, "every path was rescored: the test checks no partial list"
    want = ref.nbest_confidences(lists, totals, chosen, scale=1.5)
    for u, w in zip(keep, want):
        assert list(out[u].word_confidences) == pytest.approx(w, abs=1e-9)
    assert out[3].error.startswith("no path survived") and out[3].words == ()
    for u in range(4):
        _same_records(out[u], get_method("multi-pass")(_utt(inp, u), res, cfg)[0].hyps[0])


def _ctc_token_starts(labels) -> list[int]:
    """Start frames of the tokens of a CTC frame labelling (runs of one non-blank label)."""
    return [f for f, x in enumerate(labels) if x > 0 and (f == 0 or labels[f - 1] != x)]


@pytest.mark.parametrize("seed", range(3))
def test_no_ngram_token_frames_are_the_best_alignment_of_the_chosen_tokens(setup, device,
                                                                          seed):
    lang, res = setup
    res = _on(res, device)
    inp = random_ctc_inputs(seed, lang.max_token_id + 1)
    inp = CtcInputs(inp.log_probs.to(device), inp.log_probs_lens.to(device),
                    memory=inp.memory.to(device), memory_lens=inp.memory_lens.to(device))
    cfg = NoNgramAttentionConfig(nbest=NbestConfig(num_paths=20, nbest_scale=1.0),
                                 rescore=RescorePart(attention_scale=1.2,
                                                     attention_scales=(0.3, 2.0)))
    out = get_method("attention-decoder-rescoring-no-ngram")(inp, res, cfg)
    lat = get_lattice(inp.log_probs, inp.log_probs_lens, res.graphs["H"], cfg.lattice).lattice
    checked = 0
    for r in out:
        _check(r.hyps, words=False)
        for u, rec in enumerate(r.hyps):
            paths = [p for p in enumerate_paths(lat[u]) if p.words == rec.tokens]
            best = max(paths, key=lambda p: p.score)
            assert list(rec.token_frames) == _ctc_token_starts(best.labels[:-1])
            checked += len(rec.tokens)
    assert checked > 0
    for u in range(3):
        one = CtcInputs(inp.log_probs[u:u + 1], inp.log_probs_lens[u:u + 1],
                        memory=inp.memory[u:u + 1], memory_lens=inp.memory_lens[u:u + 1])
        alone = get_method("attention-decoder-rescoring-no-ngram")(one, res, cfg)
        for a, b in zip(out, alone):
            _same_records(a.hyps[u], b.hyps[0])
