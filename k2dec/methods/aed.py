"""Attention encoder-decoder methods: the vectorized beam search, with what its config's
``fusion`` part adds (joint CTC prefix scoring, ``fusion.ctc_weight``; LM shallow fusion,
``fusion.lm_scale``; LODR, ``fusion.lodr_scale``) and hotword biasing (a hotword scorer, when
hotwords are given), all scorers built by :func:`k2dec.methods.build_scorers` as for the
other token-level searches."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import k2
import torch

from ..aed import BeamSearchConfig, beam_search
from ..lattice import ctc_forced_alignment
from .fusion import build_scorers
from .hotword_biasing import HotwordConfig
from .parts import FusionConfig
from .records import from_aed
from .registry import Family, MethodResult, register
from .resources import AedInputs, Resources

__all__ = ["CTC_WEIGHT", "GNMT_ALPHA", "MAX_REPEATS", "REPEAT_SPAN",
           "AttentionBeamSearchMethodConfig"]


#: The method's CTC weight: joint CTC/attention decoding as ESPnet decodes by default (its
#: LibriSpeech recipes use 0.3). The attention decoder alone ends too early and loops on audio
#: it does not know ("HAPPPP...", "STES STES STES ..."): on the shipped model, WER 112.8% ->
#: 55.5% (test-clean), 87.7% -> 60.8% (test-other), 117.8% -> 80.9% on 24 recordings of
#: other voices, rates and channels (RESULTS.md "Attention beam search defaults").
CTC_WEIGHT = 0.3


#: The method's guard against loops: no span of 1..``REPEAT_SPAN`` tokens may be repeated
#: more than ``MAX_REPEATS`` times in a row (a fourth copy is masked). On real speech the
#: joint search alone still looped on 4 of 26 recordings (Debian's codec2-examples; "THEME"
#: 13 times); with the guard and :data:`GNMT_ALPHA`: 0 of 26, and no WER lost on the shipped
#: test sets (RESULTS.md "Real speech and a repetition guard").
MAX_REPEATS = 3
REPEAT_SPAN = 8
#: GNMT's length penalty exponent: with the repetition guard, the search no longer prefers a
#: shorter hypothesis that stops where a loop was cut (about 1.4x the CPU time of alpha 0).
GNMT_ALPHA = 0.6


def _search() -> BeamSearchConfig:
    """The method's search: ESPnet's end detection (its default when the maximum length is
    the number of encoder frames), which stops a search whose longer hypotheses only get
    worse (the same results on the shipped test sets at half the CPU time), a repetition
    guard (:data:`MAX_REPEATS`, :data:`REPEAT_SPAN`) and GNMT's length penalty
    (:data:`GNMT_ALPHA`)."""
    return BeamSearchConfig(end_detect=True, max_repeats=MAX_REPEATS, repeat_span=REPEAT_SPAN,
                            gnmt_alpha=GNMT_ALPHA)


def _joint_fusion() -> FusionConfig:
    """The method's fusion part: joint CTC/attention scoring (``ctc_weight``
    :data:`CTC_WEIGHT`)."""
    return FusionConfig(ctc_weight=CTC_WEIGHT)


@dataclass(frozen=True)
class AttentionBeamSearchMethodConfig:
    """``attention-beam-search``: the search (:class:`k2dec.aed.BeamSearchConfig`, here with
    ``end_detect``, ``max_repeats`` :data:`MAX_REPEATS` over spans of up to
    :data:`REPEAT_SPAN` tokens and ``gnmt_alpha`` :data:`GNMT_ALPHA`), the scorers added to
    its score (``fusion``: ``ctc_weight`` :data:`CTC_WEIGHT`, joint CTC/attention scoring,
    which needs the model's CTC output (``fusion.ctc_weight=0``: the attention decoder
    alone; the decoder's weight is ``1 - ctc_weight``), ``lm_scale`` a neural LM's,
    ``lodr_scale`` LODR's), with hotword biasing when hotwords are given:
    ``hotwords.token_score`` per token of a hotword (the transducer searches'
    non-strict bonus-and-refund; an unfinished match is refunded on ``eos``)."""

    search: BeamSearchConfig = field(default_factory=_search)
    fusion: FusionConfig = field(default_factory=_joint_fusion)
    hotwords: HotwordConfig = field(default_factory=HotwordConfig)


@register("attention-beam-search", Family.AED, AttentionBeamSearchMethodConfig,
          requires=("attention_decoder",), hotwords=True)
def _attention_beam_search(inputs: AedInputs, res: Resources,
                           cfg: AttentionBeamSearchMethodConfig):
    """Batched beam search over utterances x beams; CTC prefix scoring when
    fusion.ctc_weight > 0 (needs AedInputs.ctc_log_probs), LM fusion when fusion.lm_scale > 0
    (needs a neural LM); hotword biasing when Resources.hotwords are given."""
    if res.attention_decoder is None:
        raise ValueError("attention-beam-search needs Resources.attention_decoder")
    search, decoder, fusion = cfg.search, res.attention_decoder, cfg.fusion
    if fusion.ctc_weight > 0 and inputs.ctc_log_probs is None:
        raise ValueError(f"attention-beam-search with fusion.ctc_weight={fusion.ctc_weight} "
                         f"(joint CTC/attention; default {CTC_WEIGHT}) needs the model's "
                         "CTC output (AedInputs.ctc_log_probs); for a model without one: "
                         "--set fusion.ctc_weight=0")
    scorers = build_scorers(res, "attention-beam-search", fusion, decoder.vocab_size,
                            inputs.memory.device, cfg.hotwords, eos_id=decoder.eos_id,
                            ctc_log_probs=inputs.ctc_log_probs, ctc_lens=inputs.memory_lens,
                            blank_id=search.ctc_blank_id)
    with torch.no_grad():
        nbests = beam_search(decoder, inputs.memory, inputs.memory_lens, search,
                             scorers=scorers)
        frames, conf = _frames_and_confidences(inputs, decoder, nbests)
    return [MethodResult("attention-beam-search", from_aed(nbests, frames, conf), cfg)]


def _frames_and_confidences(inputs: AedInputs, decoder, nbests):
    """Per utterance, the frames of the best hypothesis' tokens (their CTC forced alignment,
    ``None`` without CTC log-probs or when they cannot be aligned) and each token's
    probability under the attention decoder given the tokens before it (teacher forcing)."""
    n = len(nbests)
    tokens = [list(nb[0].tokens) if nb else [] for nb in nbests]
    device = inputs.memory.device
    ragged = k2.RaggedTensor(tokens, dtype=torch.int32, device=device)
    scores = decoder.score_sequences(inputs.memory, inputs.memory_lens, ragged,
                                     torch.arange(n, device=device))
    # drop each sequence's last score (eos)
    per_seq = scores.tolist()
    conf = [[math.exp(x) for x in row[:len(tok)]] for row, tok in zip(per_seq, tokens)]
    frames: list[list[int] | None] = [None] * n
    if inputs.ctc_log_probs is not None:
        v = inputs.ctc_log_probs.shape[2]
        # a token the CTC output cannot spell (the blank id, ids beyond it) has no frames
        usable = [all(0 < t < v for t in tok) for tok in tokens]
        aligned = ctc_forced_alignment(inputs.ctc_log_probs, inputs.memory_lens,
                                       [t if ok else [] for t, ok in zip(tokens, usable)])
        begin = aligned.begin.tolist()
        frames = [begin[i] if ok and use else None
                  for i, (ok, use) in enumerate(zip(aligned.aligned.tolist(), usable))]
    return frames, conf
