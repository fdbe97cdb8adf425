"""Attention encoder-decoder methods: the vectorized beam search, optionally with joint
CTC prefix scoring and LM shallow fusion (switched on by the config's weights)."""

from __future__ import annotations

import torch

from ..aed import BeamSearchConfig, beam_search
from .records import from_aed
from .registry import AedInputs, Family, MethodResult, Resources, register


@register("attention-beam-search", Family.AED, BeamSearchConfig,
          requires=("attention_decoder",))
def _attention_beam_search(inputs: AedInputs, res: Resources, cfg: BeamSearchConfig):
    """Batched beam search over utterances x beams; CTC prefix scoring when ctc_weight > 0
    (needs AedInputs.ctc_log_probs), LM fusion when lm_weight > 0 (needs a neural LM)."""
    if res.attention_decoder is None:
        raise ValueError("attention-beam-search needs Resources.attention_decoder")
    ctc = None
    if cfg.ctc_weight > 0:
        if inputs.ctc_log_probs is None:
            raise ValueError("ctc_weight > 0 needs AedInputs.ctc_log_probs")
        ctc = inputs.ctc_log_probs
    lm = None
    if cfg.lm_weight > 0:
        lm = res.lms.get("transformer_lm", res.lms.get("rnn_lm"))
        if lm is None:
            raise ValueError("lm_weight > 0 needs a neural LM in Resources.lms")
    with torch.no_grad():
        nbests = beam_search(res.attention_decoder, inputs.memory, inputs.memory_lens, cfg,
                             ctc_log_probs=ctc, lm=lm)
    return [MethodResult("attention-beam-search", from_aed(nbests), cfg)]
