"""Configuration of the attention beam search (:func:`k2dec.aed.beam_search`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from ..primitives.sizes import check_float_range, check_int_range

__all__ = ["BeamSearchConfig"]


@dataclass(frozen=True)
class BeamSearchConfig:
    """Switches of :func:`beam_search` (see the module docstring for the exact scoring).

    Attributes:
      beam_size: ``B``, live hypotheses per utterance.
      num_hyps: hypotheses returned per utterance (``<= beam_size``; formerly ``nbest``).
      max_len_ratio: maximum output length is ``max(1, floor(max_len_ratio * T_n))`` tokens.
      min_len: ``eos`` is not allowed before this many tokens.
      temperature: divides the decoder log-probs before renormalizing.
      length_norm: rank ended hypotheses by score / number of tokens (including ``eos``).
      length_bonus: added per token (including ``eos``) during the search.
      gnmt_alpha: GNMT length penalty exponent (0 disables).
      coverage_penalty: GNMT coverage penalty weight ``beta`` (0 disables).
      eos_threshold: ``gamma`` of the eos threshold rule (0 disables).
      ctc_pre_beam: candidate tokens per hypothesis scored by CTC (by every partial scorer);
        None means ``floor(1.5 * beam_size)``. Ignored when the CTC weight is 1 (all tokens
        are scored). (The CTC weight ``lambda`` of joint CTC/attention decoding is the weight
        of the :class:`~k2dec.scorers.CtcScorer` among the search's scorers, a method's
        ``fusion.ctc_weight``; the decoder's log-probs are weighted ``1 - lambda``.)
      ctc_always_score_eos: with CTC prefix scoring (partial scorers), ``eos`` is always a
        candidate of every hypothesis (scored with the CTC probability that the output is
        exactly the prefix), also when it is not among the ``ctc_pre_beam`` best tokens, as
        in ESPnet's ``CTCPrefixScorer`` (the established joint CTC/attention search; the
        default). False: ``eos`` competes only when pre-selected, like every other token.
        Tokens the token rules forbid (e.g. ``eos`` before ``min_len``) stay forbidden
        either way.
      ctc_blank_id: the CTC blank id (masked when the search has a CTC scorer, whose blank
        it must be).
      ctc_window: if set, CTC lets a new token be first emitted only within this many frames
        of the step's attention peak (argmax of the decoder's cross-attention); needs a
        decoder that returns attention. None: no window.
      lm_fusion: ``"full"`` adds the LMs (the ``is_lm`` scorers, e.g. a
        :class:`~k2dec.scorers.NeuralLmScorer` weighted by a method's ``fusion.lm_scale``) on
        all ``B x V`` scores, ``"pruned"`` only on each hypothesis' ``B`` best candidates.
      end_detect: enable end detection; end_detect_window: ``M``; end_detect_margin: ``D``.
      max_ended: stop an utterance once it has this many ended hypotheses (None: no cap); all
        hypotheses that end in the step reaching the cap are kept.
      max_repeats: a hypothesis may not end with a span of ``1..repeat_span`` tokens repeated
        more than this many times in a row: the token that would complete the next copy is
        masked (the loops of a decoder on audio it does not know, "HAPPPPP", "STES STES
        STES ..."). None: no limit.
      repeat_span: the longest repeated span :attr:`max_repeats` looks for (in tokens).
    """

    beam_size: int = 10
    num_hyps: int = 1
    max_len_ratio: float = 1.0
    min_len: int = 0
    temperature: float = 1.0
    length_norm: bool = False
    length_bonus: float = 0.0
    gnmt_alpha: float = 0.0
    coverage_penalty: float = 0.0
    eos_threshold: float = 0.0
    ctc_pre_beam: int | None = None
    ctc_always_score_eos: bool = True
    ctc_blank_id: int = 0
    ctc_window: int | None = None
    lm_fusion: Literal["full", "pruned"] = "full"
    end_detect: bool = False
    end_detect_window: int = 3
    end_detect_margin: float = 10.0
    max_ended: int | None = None
    max_repeats: int | None = None
    repeat_span: int = 4

    def __post_init__(self) -> None:
        def _int(name: str, low: int) -> None:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ValueError(f"{name} must be an int >= {low}, got {value!r}")

        def _float(name: str, low: float, strict: bool) -> None:
            value = getattr(self, name)
            bad = not isinstance(value, int | float) or isinstance(value, bool)
            if not bad and (not math.isfinite(value) or value < low or (strict and value == low)):
                bad = True
            if bad:
                op = ">" if strict else ">="
                raise ValueError(f"{name} must be a finite number {op} {low}, got {value!r}")

        check_int_range(self, "beam_size", 1, 64)  # memory: beam x frames x model dim
        check_int_range(self, "num_hyps", 1, self.beam_size)
        check_float_range(self, "max_len_ratio", 0.0, 10.0)
        check_int_range(self, "min_len", 0, 10_000)
        _float("temperature", 0.0, strict=True)
        if not isinstance(self.length_norm, bool):
            raise TypeError(f"length_norm must be a bool, got {self.length_norm!r}")
        _float("length_bonus", -math.inf, strict=False)
        _float("gnmt_alpha", 0.0, strict=False)
        if self.length_norm and self.gnmt_alpha > 0:
            raise ValueError("use either length_norm or gnmt_alpha > 0, not both")
        _float("coverage_penalty", 0.0, strict=False)
        _float("eos_threshold", 0.0, strict=False)
        check_int_range(self, "ctc_pre_beam", 1, 1000, optional=True)
        if not isinstance(self.ctc_always_score_eos, bool):
            raise TypeError(
                f"ctc_always_score_eos must be a bool, got {self.ctc_always_score_eos!r}"
            )
        _int("ctc_blank_id", 0)
        check_int_range(self, "ctc_window", 0, 100_000, optional=True)
        if self.lm_fusion not in ("full", "pruned"):
            raise ValueError(f"lm_fusion must be 'full' or 'pruned', got {self.lm_fusion!r}")
        if not isinstance(self.end_detect, bool):
            raise TypeError(f"end_detect must be a bool, got {self.end_detect!r}")
        check_int_range(self, "end_detect_window", 1, 1000)
        _float("end_detect_margin", 0.0, strict=False)
        check_int_range(self, "max_ended", 1, 10_000, optional=True)
        check_int_range(self, "max_repeats", 1, 10_000, optional=True)
        check_int_range(self, "repeat_span", 1, 64)

    @property
    def pre_beam(self) -> int:
        """Candidates per hypothesis scored by CTC."""
        if self.ctc_pre_beam is not None:
            return self.ctc_pre_beam
        return max(1, int(1.5 * self.beam_size))
