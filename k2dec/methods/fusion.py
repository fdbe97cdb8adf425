"""The scorers a token-level search adds to its scores, built in one place from the
resources and a method config's ``fusion`` part (:class:`~k2dec.methods.parts.FusionConfig`).

Each scorer name has one builder, registered with :func:`register_scorer` together with the
field of the fusion part that holds its weight. :func:`build_scorers` turns a fusion part, with
the hotword part when the method takes hotwords, into the
:class:`~k2dec.scorers.WeightedScorer` list that ``modified_beam_search``, ``beam_search``,
``ctc_prefix_beam_search`` and the attention beam search take: one scorer per registered
name whose weight is not 0, in the order of the fusion part's fields. A new scorer is one
:class:`~k2dec.scorers.Scorer` class, one registration here (or in any module) and its weight
field in :class:`FusionConfig`, the one fusion part; no method config changes.

Built-in names (weight field):

- ``"ctc"`` (``ctc_weight``): the CTC prefix scores of the batch's CTC output
  (:class:`~k2dec.scorers.CtcScorer`, a partial scorer: the attention beam search only);
- ``"lm"`` (``lm_scale``): the neural LM of the resources (:meth:`Resources.neural_lm`:
  ``rnn_lm``, else ``transformer_lm``, for every method), as
  :class:`~k2dec.scorers.NeuralLmScorer`: shallow fusion, with the LM's end-of-sentence score
  in a search that ends hypotheses with ``eos`` (the attention beam search) and without it in
  the others (icefall's transducer and CTC searches never score the end);
- ``"lodr"`` (``lodr_scale``): LODR's token n-gram (``Resources.sources["lodr"]``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields

import torch

from ..scorers import CtcScorer, NeuralLmScorer, Scorer, TokenNgramScorer, WeightedScorer
from .hotword_biasing import HotwordConfig, hotword_scorers
from .parts import FusionConfig
from .resources import Resources

__all__ = ["ScorerBuilder", "ScorerRequest", "build_scorers", "register_scorer",
           "scorer_names"]


@dataclass(frozen=True)
class ScorerRequest:
    """What the scorers of one batch are built for (a builder's second argument).

    Attributes:
      method: the method's name (errors name it).
      vocab_size: ``V``, the token ids the search scores.
      device: the search's device.
      eos_id: the end-of-sentence id of a search that ends hypotheses with it (the attention
        beam search: the decoder's ``eos_id``); None: the search never scores an end.
      ctc_log_probs: float ``[N, T, V]``, the batch's CTC log-softmax output, or None.
      ctc_lens: int ``[N]``, its valid frames per utterance.
      blank_id: the CTC blank id.
    """

    method: str
    vocab_size: int
    device: torch.device
    eos_id: int | None = None
    ctc_log_probs: torch.Tensor | None = None
    ctc_lens: torch.Tensor | None = None
    blank_id: int = 0


#: ``(resources, request) -> Scorer``; raises ``ValueError`` naming ``request.method`` when
#: the resources or the batch lack what the scorer needs.
ScorerBuilder = Callable[[Resources, ScorerRequest], Scorer]

#: scorer name -> (its builder, the field of :class:`FusionConfig` with its weight)
_BUILDERS: dict[str, tuple[ScorerBuilder, str]] = {}


def register_scorer(name: str, weight: str) -> Callable[[ScorerBuilder], ScorerBuilder]:
    """Decorator registering the builder of the scorer called ``name``, weighted by the
    fusion part's field ``weight`` (a field of :class:`FusionConfig`, or of a subclass that
    adds it); ``ValueError`` if the name or the field is taken."""
    def deco(fn: ScorerBuilder) -> ScorerBuilder:
        if name in _BUILDERS or weight in {w for _, w in _BUILDERS.values()}:
            raise ValueError(f"scorer {name!r} (weight {weight!r}) is registered twice")
        _BUILDERS[name] = (fn, weight)
        return fn

    return deco


def scorer_names() -> list[str]:
    """The registered scorer names, sorted."""
    return sorted(_BUILDERS)


def build_scorers(res: Resources, method: str, fusion: FusionConfig | None, vocab_size: int,
                  device: torch.device, hotwords: HotwordConfig | None = None,
                  strict_hotwords: bool = False, *, eos_id: int | None = None,
                  ctc_log_probs: torch.Tensor | None = None,
                  ctc_lens: torch.Tensor | None = None,
                  blank_id: int = 0) -> list[WeightedScorer]:
    """The scorers of one batch of a token-level search: one per registered scorer whose
    weight in ``fusion`` (the method's fusion part, a :class:`FusionConfig`; None: none) is
    not 0, in the order of the fusion part's fields, then, with ``hotwords`` (the method's
    hotword part) and hotwords in the resources, the hotword scorer (weight 1;
    :func:`k2dec.methods.hotword_biasing.hotword_scorers`, ``strict_hotwords``: the strict
    Aho-Corasick match of icefall's CTC biasing). The keyword arguments describe the search
    and the batch (:class:`ScorerRequest`).

    Raises:
      ValueError: resources without what a scorer needs (naming ``method``).
    """
    request = ScorerRequest(method, vocab_size, device, eos_id, ctc_log_probs, ctc_lens,
                            blank_id)
    by_field = {weight: build for build, weight in _BUILDERS.values()}
    out = []
    for f in fields(fusion) if fusion is not None else ():
        weight = getattr(fusion, f.name)
        if weight != 0 and f.name in by_field:
            out.append(WeightedScorer(by_field[f.name](res, request), weight))
    if hotwords is not None:
        out += hotword_scorers(res, vocab_size, hotwords, device, strict=strict_hotwords)
    return out


@register_scorer("lm", "lm_scale")
def _neural_lm(res: Resources, req: ScorerRequest) -> NeuralLmScorer:
    _, lm = res.neural_lm(req.method)
    return NeuralLmScorer(lm, score_eos=req.eos_id is not None)


@register_scorer("lodr", "lodr_scale")
def lodr_scorer(res: Resources, req: ScorerRequest) -> TokenNgramScorer:
    """LODR's token n-gram (``Resources.sources["lodr"]``), checked against the search's
    vocabulary."""
    lodr = res.sources.get("lodr")
    if lodr is None:
        raise ValueError(f"{req.method} with a LODR scale needs LODR's token n-gram in "
                         "Resources.sources['lodr'] (--lodr-arpa)")
    if not isinstance(lodr, TokenNgramScorer):
        raise ValueError(f"{req.method} needs LODR's token n-gram in Resources.sources['lodr'] "
                         f"(a TokenNgramScorer), got {type(lodr).__name__}")
    if lodr.vocab_size != req.vocab_size:
        raise ValueError(f"Resources.sources['lodr'] scores {lodr.vocab_size} tokens, the "
                         f"model has {req.vocab_size}")
    return lodr


@register_scorer("ctc", "ctc_weight")
def _ctc_prefix(res: Resources, req: ScorerRequest) -> CtcScorer:
    if req.ctc_log_probs is None or req.ctc_lens is None:
        raise ValueError(f"{req.method} with a CTC weight needs the batch's CTC output "
                         "(ctc_log_probs and ctc_lens)")
    if req.eos_id is None:
        raise ValueError(f"{req.method}: CTC prefix scores are a partial scorer for a search "
                         "that pre-selects candidates and ends hypotheses with eos (the "
                         "attention beam search)")
    return CtcScorer(req.ctc_log_probs, req.ctc_lens, req.blank_id, req.eos_id)
