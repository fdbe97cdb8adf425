"""Attention-decoder and neural-LM n-best rescoring against per-path Python loops."""

from __future__ import annotations

import k2
import pytest
import torch

from k2dec.aed import TransformerDecoder
from k2dec.nbest import Nbest, neural_scores, rescore_with_attention_decoder, rescore_with_lm
from k2dec.testing.lattices import make_lattices
from tests.reference.lattice_paths import enumerate_paths


def _decoder(seed: int) -> TransformerDecoder:
    torch.manual_seed(seed)
    return TransformerDecoder(vocab_size=6, memory_dim=8, d_model=16, nhead=2, num_layers=2,
                              dim_feedforward=32, dropout=0.0).eval()


def _seq_score(decoder: TransformerDecoder, memory: torch.Tensor, length: int,
               tokens: list[int]) -> float:
    """Sum of log P(token | prefix) and eos, one sequence at a time (teacher forcing)."""
    inp = torch.tensor([[decoder.sos_id] + tokens])
    mask = torch.arange(memory.size(0)).unsqueeze(0) >= length
    lp = decoder(inp, memory[None], mask)[0]
    targets = tokens + [decoder.eos_id]
    return float(sum(lp[i, t] for i, t in enumerate(targets)))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_attention_rescoring_against_loop(tiny_hlg, seed):
    lang, HLG, _ = tiny_hlg
    lattice = make_lattices(HLG, 3, 6, seed, torch.device("cpu"), lang.max_token_id + 1)
    nbest = Nbest.from_lattice(lattice, num_paths=30).intersect(lattice)
    decoder = _decoder(seed)
    memory = torch.randn(3, 7, 8)
    memory_lens = torch.tensor([7, 5, 6])
    with torch.no_grad():
        results = rescore_with_attention_decoder(
            nbest, decoder, memory, memory_lens, ngram_lm_scales=[0.3, 1.0],
            attention_scales=[0.5])
    assert list(results) == ["ngram_lm_scale_0.3_attention_scale_0.5",
                             "ngram_lm_scale_1.0_attention_scale_0.5"]
    keys = nbest.key_lists()
    for key, res in results.items():
        s1, s2 = res.scales["ngram_lm_scale"], res.scales["attention_scale"]
        for u in range(3):
            ref_paths = enumerate_paths(lattice[u])
            totals = []
            for words in keys[u]:
                best = max((p for p in ref_paths if p.words == tuple(words)),
                           key=lambda p: p.score)
                with torch.no_grad():
                    att = _seq_score(decoder, memory[u], int(memory_lens[u]), list(best.tokens))
                totals.append(best.score - best.lm_score + s1 * best.lm_score + s2 * att)
            j = max(range(len(totals)), key=lambda i: (totals[i], -i))
            assert res.hyps[u] == keys[u][j], key
            assert res.scores[u].item() == pytest.approx(totals[j], abs=1e-3)


def test_lm_rescoring_with_a_fixed_scorer(tiny_hlg):
    lang, HLG, _ = tiny_hlg
    lattice = make_lattices(HLG, 2, 5, 3, torch.device("cpu"), lang.max_token_id + 1)
    nbest = Nbest.from_lattice(lattice, num_paths=20).intersect(lattice)

    def length_scorer(tokens: k2.RaggedTensor, seq_to_utt: torch.Tensor) -> k2.RaggedTensor:
        # -1 per token and per eos: favours short hypotheses
        return k2.RaggedTensor([[-1.0] * (len(t) + 1) for t in tokens.tolist()])

    scores = neural_scores(nbest, length_scorer, chunk_size=3).tolist()
    toks = nbest.token_seqs().tolist()
    flat = [x for row in scores for x in row]
    assert flat == [-(len(t) + 1.0) for t in toks]
    res = rescore_with_lm(nbest, length_scorer, [0.0, 100.0], scale_name="rnn_lm_scale")
    assert list(res) == ["rnn_lm_scale_0.0", "rnn_lm_scale_100.0"]
    # a huge LM weight picks the path with the fewest tokens
    splits = nbest.shape.row_splits(1).tolist()
    for u in range(2):
        lens = [len(toks[j]) for j in range(splits[u], splits[u + 1])]
        chosen = res["rnn_lm_scale_100.0"].best[u].item()
        assert len(toks[chosen]) == min(lens)
    with pytest.raises(ValueError, match="must end in '_scale'"):
        rescore_with_lm(nbest, length_scorer, [1.0], scale_name="rnn")


def test_token_seqs_need_tokens_attribute(tiny_hlg):
    lang, HLG, _ = tiny_hlg
    lattice = make_lattices(HLG, 1, 4, 0, torch.device("cpu"), lang.max_token_id + 1)
    bare = k2.Fsa(lattice.arcs, aux_labels=lattice.aux_labels)
    nb = Nbest.from_lattice(bare, num_paths=5)
    with pytest.raises(ValueError, match="no 'tokens' attribute"):
        nb.token_seqs()


def test_lm_path_scorer_with_a_real_rnn_lm(tiny_hlg):
    from k2dec.lm import RnnLM, RnnLmConfig
    from k2dec.nbest import lm_path_scorer

    lang, HLG, _ = tiny_hlg
    lattice = make_lattices(HLG, 2, 5, 8, torch.device("cpu"), lang.max_token_id + 1)
    nbest = Nbest.from_lattice(lattice, num_paths=20).intersect(lattice)
    torch.manual_seed(0)
    lm = RnnLM(RnnLmConfig(vocab_size=6, embedding_dim=8, hidden_dim=8, num_layers=1)).eval()
    scores = neural_scores(nbest, lm_path_scorer(lm, batch_size=3), chunk_size=4)
    with torch.no_grad():
        want = lm.score_sequences(nbest.token_seqs()).totals.double()
    assert torch.allclose(scores.values, want, atol=1e-5)


def test_rnn_and_transformer_lm_rescoring_keys(tiny_hlg):
    from k2dec.lm import RnnLM, RnnLmConfig, TransformerLM, TransformerLmConfig
    from k2dec.nbest import rescore_with_rnn_lm, rescore_with_transformer_lm

    lang, HLG, _ = tiny_hlg
    lattice = make_lattices(HLG, 2, 5, 1, torch.device("cpu"), lang.max_token_id + 1)
    nbest = Nbest.from_lattice(lattice, num_paths=10).intersect(lattice)
    torch.manual_seed(0)
    rnn = RnnLM(RnnLmConfig(vocab_size=6, embedding_dim=8, hidden_dim=8, num_layers=1)).eval()
    tfm = TransformerLM(TransformerLmConfig(vocab_size=6, d_model=8, nhead=2, num_layers=1,
                                            dim_feedforward=8)).eval()
    a = rescore_with_rnn_lm(nbest, rnn, [0.5])
    b = rescore_with_transformer_lm(nbest, tfm, [0.5])
    assert list(a) == ["rnn_lm_scale_0.5"] and list(b) == ["transformer_lm_scale_0.5"]
    # the same as the generic call
    from k2dec.nbest import lm_path_scorer, rescore_with_lm
    c = rescore_with_lm(nbest, lm_path_scorer(rnn), [0.5], scale_name="rnn_lm_scale")
    assert a["rnn_lm_scale_0.5"].hyps == c["rnn_lm_scale_0.5"].hyps
