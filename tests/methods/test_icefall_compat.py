"""The icefall compatibility switches reproduce icefall's searches (tests/reference/
icefall_search.py, written from icefall's beam_search.py), and k2dec's defaults differ from
them where documented."""

from __future__ import annotations

from dataclasses import replace

import k2
import pytest
import torch

from k2dec.methods import get_method, icefall_compatible, override_config
from k2dec.nbest import NbestConfig, best_paths_by_score
from k2dec.testing.transducer import random_batch, random_model
from k2dec.transducer import (
    FastBeamSearchConfig,
    ModifiedBeamSearchConfig,
    fast_beam_search,
    modified_beam_search,
    one_best,
)
from tests.reference.icefall_search import (
    argmax_last,
    fast_beam_search_icefall,
    modified_beam_search_icefall,
)

CASES = [([7, 5, 1, 6], s) for s in range(12)] + [([9], 100), ([3, 3], 101)]


def _icefall_best(model, enc, lens, cfg: FastBeamSearchConfig):
    lattice = fast_beam_search_icefall(
        model, enc, lens, k2.trivial_graph(model.decoder.vocab_size - 1), cfg.beam,
        cfg.max_states, cfg.max_contexts, temperature=cfg.temperature,
        ilme_scale=cfg.ilme_scale, allow_partial=cfg.allow_partial)
    return one_best(lattice, lens.tolist())


@pytest.mark.parametrize("allow_partial", [True, False])
@pytest.mark.parametrize("ilme_scale", [0.0, 0.1])
def test_fast_beam_search_without_termination_frame_is_icefalls(allow_partial, ilme_scale):
    cfg = FastBeamSearchConfig(termination_frame=False, allow_partial=allow_partial,
                               ilme_scale=ilme_scale)
    differs = 0
    for lens, seed in CASES:
        model = random_model(vocab_size=5, seed=seed)
        enc, enc_lens = random_batch(lens, seed=seed)
        with torch.no_grad():
            want = _icefall_best(model, enc, enc_lens, cfg)
            got = fast_beam_search(model, enc, enc_lens, None, cfg).hyps
            ours = fast_beam_search(model, enc, enc_lens, None,
                                    replace(cfg, termination_frame=True)).hyps
        for g, w, o in zip(got, want, ours):
            assert g.tokens == w.tokens and g.timestamps == w.timestamps
            assert g.score == pytest.approx(w.score, abs=1e-4)
            differs += (o.tokens, o.score) != (w.tokens, w.score)
    assert differs > 0  # k2dec's default (a termination frame) is another result


def test_icefall_compatible_configs():
    nbest = icefall_compatible(get_method("fast_beam_search_nbest"))
    assert nbest.search.ilme_scale == 0.1  # icefall's fast_beam_search default, not passed on
    assert nbest.search.termination_frame is False and nbest.nbest.tie_break == "last"
    oracle = icefall_compatible(get_method("fast_beam_search_nbest_oracle"))
    assert oracle.search.ilme_scale == 0.1
    lg = icefall_compatible(get_method("fast_beam_search_nbest_LG"))
    assert lg.search.ilme_scale == 0.0  # icefall passes its --ilme-scale (0.0) here
    one = icefall_compatible(get_method("fast_beam_search")).search
    assert one.termination_frame is False and one.ilme_scale == 0.0
    mbs = icefall_compatible(get_method("modified_beam_search"))
    assert mbs.search.score_dtype == "float32"
    for cfg in (mbs, nbest, icefall_compatible(get_method("attention-beam-search"))):
        hot = cfg.hotwords
        assert (hot.hotwords_partial_share, hot.hotwords_whole_words) == (1.0, False)
        assert hot.hotwords_score == 2.0  # icefall's --context-score (k2dec's: 1.0)
    biased = override_config(get_method("beam_search").default_config(),
                             ["hotwords_partial_share=0.3"])
    assert icefall_compatible("beam_search", biased).hotwords.hotwords_partial_share == 0.3
    explicit = replace(get_method("fast_beam_search_nbest").default_config(),
                       search=FastBeamSearchConfig(ilme_scale=0.3))
    assert icefall_compatible("fast_beam_search_nbest", explicit).search.ilme_scale == 0.3
    ctc = icefall_compatible(get_method("nbest"))
    assert ctc.nbest.tie_break == "last" and ctc.nbest.sampler == "k2"
    assert nbest.nbest.sampler == "k2"
    greedy = get_method("greedy_search")
    assert icefall_compatible(greedy) == greedy.default_config()
    # k2dec's own defaults
    assert FastBeamSearchConfig().termination_frame is True
    assert FastBeamSearchConfig().ilme_scale == 0.0
    assert NbestConfig().tie_break == "first"
    assert NbestConfig().sampler == "hashed"
    assert ModifiedBeamSearchConfig().score_dtype == "float64"
    default = get_method("modified_beam_search").default_config()
    assert (default.hotwords.hotwords_partial_share,
            default.hotwords.hotwords_whole_words) == (0.5, True)


def _nbest_with_scores(rows: list[list[float]]):
    from k2dec.nbest import DedupKey, Nbest

    num = sum(len(r) for r in rows)
    fsa = k2.create_fsa_vec([k2.linear_fsa([1]) for _ in range(num)])
    splits = torch.tensor([0] + [len(r) for r in rows]).cumsum(0).to(torch.int32)
    shape = k2.ragged.create_ragged_shape2(splits, None, num)
    keys = k2.RaggedTensor([[1]] * num, dtype=torch.int32)
    scores = torch.tensor([v for r in rows for v in r], dtype=torch.float64)
    return Nbest(fsa, shape, DedupKey.TOKENS, keys), scores


def test_tie_break_last_is_k2_argmax():
    g = torch.Generator().manual_seed(0)
    for _ in range(20):
        rows = [torch.randint(0, 3, (int(torch.randint(0, 6, (1,), generator=g)),),
                              generator=g).double().tolist() for _ in range(4)]
        nbest, scores = _nbest_with_scores(rows)
        last, _ = best_paths_by_score(nbest, scores, tie_break="last")
        first, _ = best_paths_by_score(nbest, scores)
        ragged = k2.RaggedTensor(nbest.shape, scores)
        assert last.tolist() == argmax_last(ragged).tolist()
        assert last.tolist() == ragged.argmax().to(torch.int64).tolist()  # k2 itself
        for a, b in zip(first.tolist(), last.tolist()):
            if b >= 0:
                assert scores[a] == scores[b]
    nbest, scores = _nbest_with_scores([[1.0, 2.0, 2.0, 0.0]])
    assert best_paths_by_score(nbest, scores)[0].tolist() == [1]
    assert best_paths_by_score(nbest, scores, tie_break="last")[0].tolist() == [2]
    with pytest.raises(ValueError, match="tie_break"):
        best_paths_by_score(nbest, scores, tie_break="middle")


def test_modified_beam_search_float32_is_icefalls():
    cfg = ModifiedBeamSearchConfig(score_dtype="float32")
    for lens, seed in CASES:
        model = random_model(vocab_size=5, seed=seed)
        enc, enc_lens = random_batch(lens, seed=seed)
        with torch.no_grad():
            want = modified_beam_search_icefall(model, enc, enc_lens, beam=cfg.beam)
            got = modified_beam_search(model, enc, enc_lens, cfg)
        for h, (tokens, score) in zip(got, want):
            assert h.tokens == tokens
            assert h.score == pytest.approx(score, abs=1e-5)
            # accumulated in float32: the score is a float32 value
            assert h.score == float(torch.tensor(h.score, dtype=torch.float32))


def test_config_values_checked():
    with pytest.raises(ValueError, match="score_dtype"):
        ModifiedBeamSearchConfig(score_dtype="float16")
    with pytest.raises(ValueError, match="tie_break"):
        NbestConfig(tie_break="random")
    with pytest.raises(TypeError, match="termination_frame"):
        FastBeamSearchConfig(termination_frame="no")
