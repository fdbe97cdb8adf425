"""``k2dec.icefall``'s CTC searches against k2dec's registered methods (with
:func:`k2dec.methods.icefall_compatible`), at batch sizes 1 and 3 with a length-1
utterance."""

from __future__ import annotations

import pytest
import torch

import k2dec.icefall as ice
from k2dec.lattice.ctc_prefix_beam_search import CtcPrefixBeamSearchConfig
from k2dec.methods import CtcInputs, Resources, get_method, icefall_compatible
from k2dec.methods.ctc_prefix import (
    CtcPrefixAttentionConfig,
    CtcPrefixConfig,
    CtcPrefixFusionConfig,
)
from k2dec.methods.parts import FusionConfig, RescorePart
from k2dec.scorers import ContextGraph
from tests.icefall import icefall_shaped
from tests.icefall.conftest import VOCAB

LENGTHS = [[9, 1, 6], [8]]


def _inputs(lens: list[int], seed: int) -> CtcInputs:
    g = torch.Generator().manual_seed(seed)
    n, t = len(lens), max(lens)
    log_probs = (torch.randn(n, t, VOCAB, generator=g) * 2).log_softmax(-1)
    memory = torch.randn(n, t, 8, generator=g)
    lengths = torch.tensor(lens)
    return CtcInputs(log_probs, lengths, memory=memory, memory_lens=lengths)


def _method(name, inp, cfg, res=None):
    return get_method(name)(inp, res or Resources(), icefall_compatible(name, cfg))


@pytest.mark.parametrize("lens", LENGTHS)
@pytest.mark.parametrize("seed", [0, 1])
def test_greedy_and_prefix_beam_search_are_the_methods(lens, seed):
    inp = _inputs(lens, seed)
    [greedy] = _method("ctc-greedy-search", inp, None)
    assert ice.ctc_greedy_search(inp.log_probs, inp.log_probs_lens) == greedy.tokens
    [prefix] = _method("ctc-prefix-beam-search", inp,
                       CtcPrefixConfig(search=CtcPrefixBeamSearchConfig(beam_size=3)))
    got = ice.ctc_prefix_beam_search(inp.log_probs, inp.log_probs_lens, beam=3)
    assert got == prefix.tokens
    lists = ice.ctc_prefix_beam_search(inp.log_probs, inp.log_probs_lens, beam=3, return_nbest=True)
    assert [h.get_most_probable().ys for h in lists] == got
    for hyps in lists:
        assert 1 <= len(hyps) <= 3
        scores = [float(h.tot_score) for h in hyps]
        assert scores == sorted(scores, reverse=True)
        assert all(hyps[h.key] is h and h.key in hyps for h in hyps)


@pytest.mark.parametrize("lens", LENGTHS)
def test_shallow_fussion_is_the_method(lms, lens):
    lm, lodr, _ = lms
    inp = _inputs(lens, 2)
    phrases = (((1, 2), None), ((3, 1), 1.5))
    got = ice.ctc_prefix_beam_search_shallow_fussion(
        inp.log_probs, inp.log_probs_lens, LODR_lm=lodr, LODR_lm_scale=-0.2,
        NNLM=ice.LmScorer(lm, 0.4), context_graph=ContextGraph(phrases, 2.0))
    cfg = CtcPrefixFusionConfig(fusion=FusionConfig(lm_scale=0.4, lodr_scale=-0.2))
    [want] = _method("ctc-prefix-beam-search-shallow-fussion", inp, cfg,
                     Resources(lms={"rnn_lm": lm}, lodr=lodr, hotwords=phrases))
    assert got == want.tokens
    shaped = icefall_shaped.LmScorer(lm, 0.4)
    assert ice.ctc_prefix_beam_search_shallow_fussion(
        inp.log_probs, inp.log_probs_lens, LODR_lm=lodr, LODR_lm_scale=-0.2, NNLM=shaped,
        context_graph=ContextGraph(phrases, 2.0)) == got
    assert ice.ctc_prefix_beam_search_shallow_fussion(inp.log_probs, inp.log_probs_lens) == \
        ice.ctc_prefix_beam_search(inp.log_probs, inp.log_probs_lens)


@pytest.mark.parametrize("lens", LENGTHS)
def test_attention_decoder_rescoring_is_the_method(lms, lens):
    _, _, decoder = lms
    inp = _inputs(lens, 3)
    shaped = icefall_shaped.ZipformerAttentionDecoder(decoder)
    got = ice.ctc_prefix_beam_search_attention_decoder_rescoring(
        inp.log_probs, shaped, inp.memory, inp.log_probs_lens, attention_scale=0.7)
    out = _method("ctc-prefix-beam-search-attention-decoder-rescoring", inp,
                  CtcPrefixAttentionConfig(rescore=RescorePart(attention_scale=0.7,
                                                         attention_scales=(0.7,))),
                  Resources(attention_decoder=decoder))
    assert got == {r.key: r.tokens for r in out}
    grid = ice.ctc_prefix_beam_search_attention_decoder_rescoring(
        inp.log_probs, decoder, inp.memory, inp.log_probs_lens)
    assert len(grid) == 28 and "attention_scale_9.0" in grid  # icefall's grid
