"""The scorers a token-level search adds to its scores, built in one place from the
resources and a method config's fusion part.

A method's fusion part is a list of ``(scorer name, weight)`` pairs (:data:`Fusion`;
``modified_beam_search_LODR``: ``[("lm", lm_scale), ("lodr", lodr_scale)]``).
:func:`build_scorers` turns it, with the hotword part when the method takes hotwords, into the
:class:`~k2dec.scorers.WeightedScorer` list that ``modified_beam_search``, ``beam_search``,
``ctc_prefix_beam_search`` and the attention beam search take. Each scorer name has one
builder, registered with :func:`register_scorer`: a new LM scorer is one function here (or in
any module) and one registration, and every search can use it.

Built-in names: ``"lm"`` (the neural LM of ``Resources.lms``, shallow fusion without an
end-of-sentence score: :class:`~k2dec.scorers.NeuralLmScorer`) and ``"lodr"`` (LODR's token
n-gram, ``Resources.lodr``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from ..scorers import NeuralLmScorer, Scorer, TokenNgramScorer, WeightedScorer
from .hotword_biasing import HotwordConfig, hotword_scorers
from .registry import Resources

__all__ = ["Fusion", "ScorerBuilder", "build_scorers", "register_scorer", "scorer_names"]

#: ``(scorer name, weight)`` pairs: what a method adds to its search's scores.
Fusion = Sequence[tuple[str, float]]
#: ``(resources, method name, vocab_size, device) -> Scorer``; raises ``ValueError`` naming
#: the method when the resources lack what the scorer needs.
ScorerBuilder = Callable[[Resources, str, int, torch.device], Scorer]

_BUILDERS: dict[str, ScorerBuilder] = {}


def register_scorer(name: str) -> Callable[[ScorerBuilder], ScorerBuilder]:
    """Decorator registering the builder of the scorer called ``name`` (a fusion part's
    name); ``ValueError`` if the name is taken."""
    def deco(fn: ScorerBuilder) -> ScorerBuilder:
        if name in _BUILDERS:
            raise ValueError(f"scorer {name!r} is registered twice")
        _BUILDERS[name] = fn
        return fn

    return deco


def scorer_names() -> list[str]:
    """The registered scorer names, sorted."""
    return sorted(_BUILDERS)


def build_scorers(res: Resources, method: str, fusion: Fusion, vocab_size: int,
                  device: torch.device, hotwords: HotwordConfig | None = None,
                  strict_hotwords: bool = False) -> list[WeightedScorer]:
    """The scorers of one batch of a token-level search: one per ``(name, weight)`` of
    ``fusion`` whose weight is not 0, in that order, then, with ``hotwords`` (the method's
    hotword part) and ``Resources.hotwords``, the hotword scorer (weight 1;
    :func:`k2dec.methods.hotword_biasing.hotword_scorers`, ``strict_hotwords``: the strict
    Aho-Corasick match of icefall's CTC biasing).

    Raises:
      ValueError: an unregistered scorer name, or resources without what a scorer needs
        (naming ``method``).
    """
    out = []
    for name, weight in fusion:
        if name not in _BUILDERS:
            raise ValueError(f"{method}: unknown scorer {name!r}; registered: "
                             f"{', '.join(scorer_names())}")
        if weight != 0:
            out.append(WeightedScorer(_BUILDERS[name](res, method, vocab_size, device), weight))
    if hotwords is not None:
        out += hotword_scorers(res, vocab_size, hotwords, device, strict=strict_hotwords)
    return out


@register_scorer("lm")
def _neural_lm(res: Resources, method: str, vocab_size: int, device: torch.device) -> Scorer:
    _, lm = res.neural_lm(method)
    return NeuralLmScorer(lm, score_eos=False)


@register_scorer("lodr")
def lodr_scorer(res: Resources, method: str, vocab_size: int,
                device: torch.device) -> TokenNgramScorer:
    """LODR's token n-gram (``Resources.lodr``), checked against ``vocab_size``."""
    if res.lodr is None:
        raise ValueError(f"{method} with a LODR scale needs LODR's token n-gram in "
                         "Resources.lodr (--lodr-arpa)")
    if not isinstance(res.lodr, TokenNgramScorer):
        raise ValueError(f"{method} needs LODR's token n-gram in Resources.lodr (a "
                         f"TokenNgramScorer), got {type(res.lodr).__name__}")
    if res.lodr.vocab_size != vocab_size:
        raise ValueError(f"Resources.lodr scores {res.lodr.vocab_size} tokens, the model has "
                         f"{vocab_size}")
    return res.lodr
