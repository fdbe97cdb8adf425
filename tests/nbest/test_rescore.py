"""n-gram rescoring and score combination against plain-Python references."""

from __future__ import annotations

import k2
import pytest
import torch

from k2dec.graph import build_rescoring_G
from k2dec.nbest import Nbest, combine_scores, ngram_lm_scores, rescore_with_ngram, scale_key
from k2dec.testing.lang import TINY_ARPA
from k2dec.testing.lattices import make_lattices
from tests.reference.ngram import ArpaScorer


@pytest.fixture
def arpa(tmp_path):
    p = tmp_path / "lm.arpa"
    p.write_text(TINY_ARPA)
    return p


def test_ngram_scores_equal_the_arpa(tiny_hlg, arpa, device):
    lang, HLG, _ = tiny_hlg
    G = build_rescoring_G(arpa, lang.word_table, device=device)
    scorer = ArpaScorer(arpa)
    lattice = make_lattices(HLG, 3, 6, 7, device, lang.max_token_id + 1)
    nbest = Nbest.from_lattice(lattice, num_paths=40)
    scores = ngram_lm_scores(nbest, G, chunk_size=5).tolist()
    for u, keys in enumerate(nbest.key_lists()):
        for key, got in zip(keys, scores[u]):
            words = [lang.word_table.get(i) for i in key]
            assert got == pytest.approx(scorer.sentence_logprob(words), abs=1e-4), words


@pytest.mark.parametrize("seed", [0, 1])
def test_rescore_with_ngram_picks_the_argmax_of_the_combination(tiny_hlg, arpa, seed):
    lang, HLG, _ = tiny_hlg
    G = build_rescoring_G(arpa, lang.word_table)
    scorer = ArpaScorer(arpa)
    lattice = make_lattices(HLG, 3, 6, seed, torch.device("cpu"), lang.max_token_id + 1)
    nbest = Nbest.from_lattice(lattice, num_paths=40).intersect(lattice)
    results = rescore_with_ngram(nbest, G, [0.1, 0.5, 1.3])
    assert list(results) == ["ngram_lm_scale_0.1", "ngram_lm_scale_0.5", "ngram_lm_scale_1.3"]
    am = nbest.am_scores().tolist()
    for key, res in results.items():
        s = res.scales["ngram_lm_scale"]
        for u, keys in enumerate(nbest.key_lists()):
            totals = [am[u][j] + s * scorer.sentence_logprob(
                [lang.word_table.get(i) for i in k]) for j, k in enumerate(keys)]
            j = max(range(len(totals)), key=lambda i: (totals[i], -i))
            assert res.hyps[u] == keys[j], key
            assert res.scores[u].item() == pytest.approx(totals[j], abs=1e-4)


def test_combine_scores_grid_and_names():
    shape = k2.ragged.create_ragged_shape2(torch.tensor([0, 2, 3], dtype=torch.int32), None, 3)
    fsa = k2.linear_fsa(k2.RaggedTensor([[1], [2], [3]]))
    nb = Nbest(fsa=fsa, shape=shape, key="words", key_seqs=k2.RaggedTensor([[1], [2], [3]]))
    comps = {
        "am": k2.RaggedTensor(shape, torch.tensor([0.0, -1.0, -2.0], dtype=torch.float64)),
        "ngram_lm": k2.RaggedTensor(shape, torch.tensor([-5.0, 0.0, -1.0], dtype=torch.float64)),
        "attention": k2.RaggedTensor(shape, torch.tensor([0.0, 0.0, 0.0], dtype=torch.float64)),
    }
    res = combine_scores(comps, {"ngram_lm_scale": [0.1, 1.0], "attention_scale": [1.0]},
                         nbest=nb)
    assert list(res) == ["ngram_lm_scale_0.1_attention_scale_1.0",
                         "ngram_lm_scale_1.0_attention_scale_1.0"]
    # scale 0.1: path0 = -0.5, path1 = -1.0 -> path0; scale 1.0: -5 vs -1 -> path1
    assert res["ngram_lm_scale_0.1_attention_scale_1.0"].hyps == [[1], [3]]
    assert res["ngram_lm_scale_1.0_attention_scale_1.0"].hyps == [[2], [3]]
    assert res["ngram_lm_scale_1.0_attention_scale_1.0"].best.tolist() == [1, 2]
    assert scale_key({"lm_scale": 0.6}) == "lm_scale_0.6"
    with pytest.raises(ValueError, match="no component 'nnlm'"):
        combine_scores(comps, {"nnlm_scale": [1.0]}, nbest=nb)
    with pytest.raises(ValueError, match="end in '_scale'"):
        combine_scores(comps, {"ngram": [1.0]}, nbest=nb)


def test_ngram_rescoring_needs_word_nbest(tiny_hlg, arpa):
    lang, HLG, _ = tiny_hlg
    G = build_rescoring_G(arpa, lang.word_table)
    lattice = make_lattices(HLG, 1, 4, 0, torch.device("cpu"), lang.max_token_id + 1)
    nb = Nbest.from_lattice(lattice, num_paths=5, key="tokens")
    with pytest.raises(ValueError, match="deduplicated by words"):
        ngram_lm_scores(nb, G)
