from __future__ import annotations

import math

import k2
import pytest
import torch

from k2dec.aed import BeamSearchConfig, TransformerDecoder, beam_search
from k2dec.lm import RnnLM, RnnLmConfig
from k2dec.methods import AedInputs, Family, Resources, get_method, list_methods
from k2dec.methods.aed import AttentionBeamSearchMethodConfig as Cfg
from k2dec.methods.parts import FusionConfig
from k2dec.testing.aed import joint_scorers


def _setup(seed: int = 0):
    torch.manual_seed(seed)
    dec = TransformerDecoder(vocab_size=8, memory_dim=6, d_model=16, nhead=2, num_layers=1,
                             dim_feedforward=16, dropout=0.0).eval()
    lm = RnnLM(RnnLmConfig(vocab_size=8, embedding_dim=8, hidden_dim=8, num_layers=1,
                           sos_id=7, eos_id=7)).eval()
    memory = torch.randn(3, 9, 6)
    lens = torch.tensor([9, 6, 8])
    ctc = torch.randn(3, 9, 8).log_softmax(-1)
    return dec, lm, AedInputs(memory, lens, ctc)


def test_listed():
    assert [m.name for m in list_methods(Family.AED)] == ["attention-beam-search"]


@pytest.mark.parametrize("fusion", [FusionConfig(), FusionConfig(ctc_weight=0.3),
                                    FusionConfig(lm_scale=0.5),
                                    FusionConfig(ctc_weight=0.4, lm_scale=0.2)])
def test_method_equals_the_library_call(fusion):
    dec, lm, inp = _setup()
    cfg = BeamSearchConfig(beam_size=3)
    method_cfg = Cfg(search=cfg, fusion=fusion)
    out = get_method("attention-beam-search")(inp, Resources(lms={"rnn_lm": lm},
                                                             attention_decoder=dec),
                                              method_cfg)[0]
    assert out.config is method_cfg
    with torch.no_grad():
        want = beam_search(dec, inp.memory, inp.memory_lens, cfg, joint_scorers(
            dec, inp.memory_lens, inp.ctc_log_probs, fusion.ctc_weight, lm, fusion.lm_scale))
    assert out.tokens == [list(nb[0].tokens) for nb in want]


def test_missing_pieces():
    dec, lm, inp = _setup()
    m = get_method("attention-beam-search")
    with pytest.raises(ValueError, match="needs Resources.attention_decoder"):
        m(inp, Resources())
    with pytest.raises(ValueError, match=r"fusion.ctc_weight=0.5 .* needs the model's CTC "
                                         r"output \(AedInputs.ctc_log_probs\); .* --set "
                                         r"fusion.ctc_weight=0"):
        m(AedInputs(inp.memory, inp.memory_lens), Resources(attention_decoder=dec),
          Cfg(fusion=FusionConfig(ctc_weight=0.5)))
    with pytest.raises(ValueError, match=r"fusion.ctc_weight=0.3 \(joint CTC/attention"):
        m(AedInputs(inp.memory, inp.memory_lens), Resources(attention_decoder=dec))
    with pytest.raises(ValueError, match="needs a neural LM"):
        m(inp, Resources(attention_decoder=dec), Cfg(fusion=FusionConfig(lm_scale=0.5)))
    with pytest.raises(ValueError, match=r"fusion.ctc_weight must be in \[0, 1\], got 1.5"):
        FusionConfig(ctc_weight=1.5)


def test_frames_and_confidences():
    from k2dec.lattice import ctc_forced_alignment

    dec, lm, inp = _setup(1)
    out = get_method("attention-beam-search")(inp, Resources(attention_decoder=dec),
                                              Cfg(BeamSearchConfig(beam_size=3)))[0]
    tokens = out.tokens
    scores = dec.score_sequences(inp.memory, inp.memory_lens,
                                 k2.RaggedTensor(tokens, dtype=torch.int32),
                                 torch.arange(3)).tolist()
    aligned = ctc_forced_alignment(inp.ctc_log_probs, inp.memory_lens,
                                   [t if all(x > 0 for x in t) else [] for t in tokens])
    for i, rec in enumerate(out.hyps):
        assert list(rec.token_confidences) == pytest.approx(
            [math.exp(x) for x in scores[i][:len(tokens[i])]], abs=1e-6)
        if all(x > 0 for x in tokens[i]) and bool(aligned.aligned[i]):
            assert list(rec.token_frames) == aligned.begin.tolist()[i]
        else:
            assert rec.token_frames is None
    # without CTC log-probs the tokens have no frames
    bare = get_method("attention-beam-search")(AedInputs(inp.memory, inp.memory_lens),
                                               Resources(attention_decoder=dec),
                                               Cfg(BeamSearchConfig(beam_size=3),
                                                   FusionConfig(ctc_weight=0.0)))[0]
    assert all(r.token_frames is None and r.token_confidences is not None for r in bare.hyps)


@pytest.mark.parametrize("seed", [1, 2])
def test_lodr_is_a_fusion_scorer_of_the_attention_search(tmp_path, seed):
    """fusion.lodr_scale adds LODR's token n-gram (Resources.sources['lodr']) as a full
    scorer beside the CTC prefix scores: the method's hypotheses are the library call's with
    the same scorers and the reference search's, and differ from those without LODR."""
    from k2dec.scorers import WeightedScorer
    from tests.aed.beam_problems import random_problem, ref, setup
    from tests.scorers.factories import scorer_pairs

    cpu = torch.device("cpu")
    dec, memory, lens, ctc, _ = random_problem(seed, cpu, eos_bias=0.7)
    ctc = ctc.float()  # the method aligns the CTC output for token frames
    [lodr_ws], [(ref_lodr, weight)] = scorer_pairs("n", dec.vocab_size, 3, seed, cpu,
                                                   tmp_path)
    lodr = lodr_ws.scorer
    search = BeamSearchConfig(beam_size=3, num_hyps=3)
    res = Resources(attention_decoder=dec, sources={"lodr": lodr})
    method = get_method("attention-beam-search")
    out = method(AedInputs(memory, lens, ctc), res,
                 Cfg(search, FusionConfig(ctc_weight=0.3, lodr_scale=weight)))[0]
    plain = method(AedInputs(memory, lens, ctc), res, Cfg(search, FusionConfig(ctc_weight=0.3)))[0]
    with torch.no_grad():
        want = beam_search(dec, memory, lens, search,
                           [*joint_scorers(dec, lens, ctc, 0.3), WeightedScorer(lodr, weight)])
    reference = ref(dec, memory, lens, setup(beam_size=3, num_hyps=3, ctc_weight=0.3),
                    ctc_log_probs=ctc, scorers=[(ref_lodr, weight, "full")])
    assert out.tokens == [list(nb[0].tokens) for nb in want] == [r[0].tokens for r in reference]
    assert [r.score for r in out.hyps] == pytest.approx([r[0].score for r in reference],
                                                       abs=1e-5)
    assert weight < 0 and [r.score for r in out.hyps] != [r.score for r in plain.hyps]
