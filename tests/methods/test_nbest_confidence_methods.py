"""Confidences and frames of the methods that choose from an n-best of a lattice: the n-best
posteriors of the chosen words against the per-utterance reference, frames equal to the
lattice best path's where the same words are chosen, and the same records in any batch."""

from __future__ import annotations

import pytest

from k2dec.lattice import get_lattice
from k2dec.methods import Resources, TransducerInputs, get_method
from k2dec.methods.ctc import CtcConfig
from k2dec.methods.mbr import MbrMethodConfig
from k2dec.methods.transducer import FastBeamSearchNbestConfig, FastBeamSearchNbestLGConfig
from k2dec.nbest import Nbest, NbestConfig
from k2dec.testing.transducer import random_batch, random_model
from tests.methods.test_ctc_methods import _inputs
from tests.methods.test_transducer_methods import tiny_LG  # noqa: F401
from tests.reference import nbest_confidence as ref


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
    inp = _inputs(seed, lang.max_token_id + 1)
    cfg = CtcConfig(nbest=NbestConfig(num_paths=20), hlg_scale=1.0)
    out = get_method("nbest")(inp, res, cfg)[0]
    _check(out.hyps, words=True)
    lat = get_lattice(inp.log_probs, inp.lengths, res.graphs["HLG"], cfg.lattice).lattice
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
    best = get_method("mbr")(inp, res, MbrMethodConfig(ctc=cfg))[1]
    for a, b in zip(out.hyps, best.hyps):
        if not a.error and a.words == b.words:
            assert a.word_frames == b.word_frames
            assert a.word_durations == b.word_durations


@pytest.mark.parametrize("name", ["nbest", "nbest-rescoring", "attention-decoder", "rnn-lm"])
def test_records_do_not_depend_on_the_batch(setup, name):
    lang, res = setup
    cfg = CtcConfig(nbest=NbestConfig(num_paths=20), ngram_lm_scale=0.5, attention_scale=0.3,
                    rnn_lm_scale=0.5, sweep=True, lm_scales=(0.5, 1.0),
                    attention_scales=(0.3,))
    inp = _inputs(7, lang.max_token_id + 1)
    batch = get_method(name)(inp, res, cfg)
    for r in batch:
        _check(r.hyps, words=True)
        assert any(not h.error for h in r.hyps)
    for u in range(3):
        one = _inputs(7, lang.max_token_id + 1)
        one = type(one)(one.log_probs[u:u + 1], one.lengths[u:u + 1],
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


def test_fast_beam_search_nbest_methods_carry_frames_and_confidences(tiny_LG, device):  # noqa: F811
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
