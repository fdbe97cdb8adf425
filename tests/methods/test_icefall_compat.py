"""The icefall compatibility switches reproduce icefall's searches (tests/reference/
icefall_search.py, written from icefall's beam_search.py), and k2dec's defaults differ from
them where documented."""

from __future__ import annotations

import random
from dataclasses import replace

import k2
import kaldialign
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
    icefall_texts,
    modified_beam_search_icefall,
    oracle_icefall,
)

CASES = [([7, 5, 1, 6], s) for s in range(12)] + [([9], 100), ([3, 3], 101)]
#: more seeds, tried until a lattice without a final state occurs (which seeds give one
#: depends on the torch version's random initialization)
MORE_CASES = [([7, 5, 1, 6], s) for s in range(12, 200)]


def _icefall_best(model, enc, lens, cfg: FastBeamSearchConfig):
    lattice = fast_beam_search_icefall(
        model, enc, lens, k2.trivial_graph(model.decoder.vocab_size - 1), cfg.beam,
        cfg.max_states, cfg.max_contexts, temperature=cfg.temperature,
        ilme_scale=cfg.ilme_scale, allow_partial=cfg.allow_partial)
    final = lattice.labels == -1
    token_finals = int((final & (lattice.aux_labels > 0)).sum())
    return icefall_texts(lattice), one_best(lattice, lens.tolist()), token_finals


def _k2_release() -> tuple[int, ...]:
    import k2.version

    return tuple(int(x) for x in k2.version.__version__.split(".")[:2])


@pytest.mark.parametrize("allow_partial", [True, False])
@pytest.mark.parametrize("ilme_scale", [0.0, 0.1])
@pytest.mark.parametrize("narrow", [False, True])
def test_fast_beam_search_without_termination_frame_is_icefalls(allow_partial, ilme_scale,
                                                                 narrow):
    """icefall's tokens, frames and scores, also where a lattice has no final state and
    ``allow_partial`` makes the last frame's arcs final: icefall's output then has the token
    of the last frame's arc that the best path's final arc stands for (k2dec's with labels
    alone, the tokens of the other cases, does not)."""
    cfg = FastBeamSearchConfig(termination_frame=False, allow_partial=allow_partial,
                               ilme_scale=ilme_scale)
    if narrow:  # final states are pruned away more often
        cfg = replace(cfg, beam=4.0, max_states=4, max_contexts=2)
    differs = partial = token_finals = 0
    cases = CASES + (MORE_CASES if narrow and allow_partial else [])
    for i, (lens, seed) in enumerate(cases):
        if i >= len(CASES) and (partial > 0 or _k2_release() >= (1, 24)):
            break
        model = random_model(vocab_size=5, seed=seed)
        enc, enc_lens = random_batch(lens, seed=seed)
        with torch.no_grad():
            want, by_labels, finals = _icefall_best(model, enc, enc_lens, cfg)
            token_finals += finals
            got = fast_beam_search(model, enc, enc_lens, None, cfg).hyps
            ours = fast_beam_search(model, enc, enc_lens, None,
                                    replace(cfg, termination_frame=True)).hyps
        for g, (tokens, frames, score), b, o in zip(got, want, by_labels, ours):
            assert (g.tokens, g.timestamps) == (tokens, frames)
            assert g.score == pytest.approx(score, abs=1e-4)
            partial += b.tokens != tokens
            differs += (o.tokens, o.score) != (tokens, score)
    assert differs > 0  # k2dec's default (a termination frame) is another result
    if not allow_partial:
        assert partial == 0 and token_finals == 0
    elif narrow:
        # k2 1.23's partial lattices keep the last frame's token on their final arcs, which
        # icefall reads: the case occurs. k2 1.24's final arcs carry none (icefall then gives
        # the labels' tokens, as k2dec does).
        assert (partial > 0) == (token_finals > 0)
        assert token_finals > 0 or _k2_release() >= (1, 24)


def test_icefall_compatible_configs():
    nbest = icefall_compatible(get_method("fast_beam_search_nbest"))
    assert nbest.search.ilme_scale == 0.1  # icefall's fast_beam_search default, not passed on
    assert nbest.search.termination_frame is False and nbest.nbest.tie_break == "last"
    for name in ("fast_beam_search_nbest_oracle", "fast_beam_search_with_nbest_rescoring",
                 "fast_beam_search_with_nbest_rnn_rescoring"):
        assert icefall_compatible(get_method(name)).search.ilme_scale == 0.1, name
    lg = icefall_compatible(get_method("fast_beam_search_nbest_LG"))
    assert lg.search.ilme_scale == 0.0  # icefall passes its --ilme-scale (0.0) here
    one = icefall_compatible(get_method("fast_beam_search")).search
    assert one.termination_frame is False and one.ilme_scale == 0.0
    assert one.decoder_tables is False and nbest.search.decoder_tables is False
    mbs = icefall_compatible(get_method("modified_beam_search"))
    assert mbs.search.score_dtype == "float32"
    for cfg in (mbs, nbest, icefall_compatible(get_method("attention-beam-search"))):
        hot = cfg.hotwords
        assert (hot.partial_share, hot.whole_words) == (1.0, False)
        assert hot.token_score == 2.0  # icefall's --context-score (k2dec's: 1.0)
    biased = override_config(get_method("beam_search").default_config(),
                             ["hotwords.partial_share=0.3"])
    assert icefall_compatible("beam_search", biased).hotwords.partial_share == 0.3
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
    assert (default.hotwords.partial_share,
            default.hotwords.whole_words) == (0.5, True)


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


def _nbest_of_keys(keys: list[list[list[int]]]):
    from k2dec.nbest import DedupKey, Nbest

    flat = [k for utt in keys for k in utt]
    fsa = k2.create_fsa_vec([k2.linear_fsa(k) for k in flat])
    splits = torch.tensor([0] + [len(u) for u in keys]).cumsum(0).to(torch.int32)
    shape = k2.ragged.create_ragged_shape2(splits, None, len(flat))
    return Nbest(fsa, shape, DedupKey.TOKENS, k2.RaggedTensor(flat, dtype=torch.int32))


def _edited(rng: random.Random, ref: list[int]) -> list[int]:
    hyp = list(ref)
    for _ in range(rng.randint(0, 3)):
        op, at = rng.choice("sid"), rng.randint(0, len(hyp))
        if op == "i" or not hyp:
            hyp.insert(at, rng.randint(1, 5))
        elif op == "s":
            hyp[min(at, len(hyp) - 1)] = rng.randint(1, 5)
        else:
            del hyp[min(at, len(hyp) - 1)]
    return hyp


def test_oracle_tie_break_last_is_icefalls():
    """Among paths at the same edit distance icefall's oracle takes the last maximum of
    float32 Levenshtein alignment scores, whose rounding decides: NbestConfig.tie_break
    "last" chooses the same paths; "first" (k2dec's) the first at the best distance."""
    rng = random.Random(0)
    differ = 0
    for _ in range(40):
        refs = [[rng.randint(1, 5) for _ in range(rng.randint(0, 9))] for _ in range(3)]
        keys = [list(dict.fromkeys(tuple(_edited(rng, r)) for _ in range(rng.randint(0, 8))))
                for r in refs]
        keys = [[list(k) for k in utt] for utt in keys]
        nbest = _nbest_of_keys(keys)
        last, dist = nbest.oracle(refs, tie_break="last")
        first, dist_first = nbest.oracle(refs)
        assert last.tolist() == oracle_icefall(keys, refs)
        assert dist.tolist() == dist_first.tolist()
        start = 0
        for u, (f, b, d) in enumerate(zip(first.tolist(), last.tolist(), dist.tolist())):
            distances = [kaldialign.edit_distance(refs[u], k)["total"] for k in keys[u]]
            if distances:  # both at the best distance, "first" the lowest index there
                assert d == min(distances) == distances[b - start]
                assert f == start + distances.index(d)
            else:
                assert f == b == d == -1
            start += len(keys[u])
            differ += f != b
    assert differ > 0


def test_modified_beam_search_float32_is_icefalls():
    cfg = ModifiedBeamSearchConfig(score_dtype="float32")
    for lens, seed in CASES:
        model = random_model(vocab_size=5, seed=seed)
        enc, enc_lens = random_batch(lens, seed=seed)
        with torch.no_grad():
            want = modified_beam_search_icefall(model, enc, enc_lens, beam=cfg.beam_size)
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
