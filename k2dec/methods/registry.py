"""The registry of named decoding methods (icefall's names).

A :class:`Method` couples a name (``"fast_beam_search_nbest_LG"``, ``"1best"``, ...), its
frozen config dataclass (icefall's defaults) and a function composing search, n-best and
rescoring. The CLI, recipes and benchmarks look methods up here by name; nothing dispatches
on method-name strings elsewhere. What a method is given besides its config (the batch, the
:class:`~k2dec.methods.Resources`) is defined in :mod:`k2dec.methods.resources`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields, is_dataclass, replace
from typing import Any

import torch

from ..primitives.family import Family
from ..primitives.hypothesis import HypothesisRecord

__all__ = [
    "Family",
    "Method",
    "MethodResult",
    "Setting",
    "register",
    "get_method",
    "list_methods",
    "family_order",
    "supported_methods",
]


@dataclass(frozen=True)
class MethodResult:
    """Hypotheses of one batch for one setting of a method.

    Attributes:
      key: the setting's name: the method name, or a scale key such as
        ``"ngram_lm_scale_0.5"`` for methods that sweep scales (icefall's result keys).
      hyps: one :class:`~k2dec.primitives.hypothesis.HypothesisRecord` per utterance, in the batch's
        order (``error`` says why an utterance has none).
      config: the config object the method ran with (the very object passed in).
    """

    key: str
    hyps: tuple[HypothesisRecord, ...]
    config: Any

    @property
    def tokens(self) -> list[list[int]] | None:
        """Token ids per utterance; ``None`` when the method yields only words."""
        if self.hyps and self.hyps[0].tokens is None:
            return None
        return [list(h.tokens or ()) for h in self.hyps]

    @property
    def words(self) -> list[list[int]] | None:
        """Word ids per utterance; ``None`` when the method yields only tokens."""
        if not self.hyps or self.hyps[0].words is None:
            return None
        return [list(h.words or ()) for h in self.hyps]

    @property
    def failed(self) -> list[str]:
        """Per utterance, ``""`` or why it has no hypothesis (empty lattice, ...)."""
        return [h.error for h in self.hyps]


#: ``(inputs, resources, config) -> [MethodResult]``: the batch (an ``Inputs`` of
#: :mod:`k2dec.methods.resources`), its :class:`~k2dec.methods.Resources`, the config.
RunFn = Callable[[Any, Any, Any], list[MethodResult]]


@dataclass(frozen=True)
class Setting:
    """One setting a method reports (one :class:`MethodResult` key) and how to make it the
    method's configured setting.

    Attributes:
      key: the :attr:`MethodResult.key` (``"ngram_lm_scale_0.5"``).
      assignments: ``KEY=VALUE`` strings (:func:`override_config`) that make this setting the
        configured one (``("rescore.ngram_lm_scale=0.5",)``); ``()`` for the configured setting.
    """

    key: str
    assignments: tuple[str, ...] = ()


SettingsFn = Callable[[Any], list[Setting]]

#: ``(transducer, resources, config, device) -> StreamingSearch`` (see
#: :mod:`k2dec.methods.streaming`).
StreamingFn = Callable[[Any, Any, Any, torch.device], Any]


@dataclass(frozen=True)
class Method:
    """A named decoding method: ``run(inputs, resources, config) -> [MethodResult]``.

    Attributes:
      requires: what the method needs from :class:`Resources`: graph names and
        :data:`NON_GRAPH_NEEDS` (``Resources.missing(method.requires)`` lists what is absent).
      needs_references: the method reads every utterance's reference (oracle methods); a
        job without references must refuse it before decoding.
      hotwords: the method biases towards ``Resources.hotwords`` / ``hotword_words`` when
        given (``--hotwords``), with its ``hotwords`` or ``word_hotwords`` part.
      settings_fn: for methods whose config has a ``rescore`` part (methods that weigh scores
        by scales: n-best / lattice rescoring), the :class:`Setting` list of a config: the
        configured scales first, then, with ``rescore.sweep``, every other point of the
        config's scale grids, in the order the method returns its results.
      streaming: for methods that also decode chunk by chunk, ``(transducer, resources,
        config, device) -> StreamingSearch`` (:mod:`k2dec.methods.streaming`): the method's
        search fed encoder frames as they come; ``None`` for the others.
    """

    name: str
    family: Family
    config_cls: type
    run: RunFn
    requires: tuple[str, ...]
    description: str
    needs_references: bool = False
    settings_fn: SettingsFn | None = None
    hotwords: bool = False
    streaming: StreamingFn | None = None

    def default_config(self) -> Any:
        return self.config_cls()

    @property
    def outputs_words(self) -> bool:
        """True if the method's hypotheses are word ids (words.txt): the methods that search
        or rescore through HLG or LG; the others give token ids."""
        return "HLG" in self.requires or "LG" in self.requires

    @property
    def sweeps(self) -> bool:
        """True if the method can report a grid of scale settings (``rescore.sweep``)."""
        return self.settings_fn is not None

    def scale_fields(self, config: Any = None) -> dict[str, Any]:
        """``{field: configured value}`` of the scales the method sweeps (``{}`` if none)."""
        if self.settings_fn is None:
            return {}
        config = self.default_config() if config is None else config
        swept = self.settings_fn(replace(config, rescore=replace(config.rescore, sweep=True)))
        names = dict.fromkeys(a.split("=", 1)[0] for s in swept for a in s.assignments)
        return {n: _get(config, n.split(".")) for n in names}

    def settings(self, config: Any = None) -> list[Setting]:
        """The settings :meth:`__call__` returns results for with ``config``, in its order: the
        configured one first (its key, no assignments), then the sweep's other points."""
        config = self.default_config() if config is None else config
        if self.settings_fn is None:
            return [Setting(self.name)]
        return self.settings_fn(config)

    def __call__(self, inputs: Any, resources: Any, config: Any = None) -> list[
            MethodResult]:
        config = self.default_config() if config is None else config
        if not isinstance(config, self.config_cls):
            raise TypeError(f"method {self.name!r} takes a {self.config_cls.__name__}, got "
                            f"{type(config).__name__}")
        return self.run(inputs, resources, config)


_REGISTRY: dict[str, Method] = {}


def register(
    name: str, family: Family, config_cls: type, requires: tuple[str, ...] = (),
    needs_references: bool = False, settings: SettingsFn | None = None,
    hotwords: bool = False, streaming: StreamingFn | None = None,
) -> Callable[[RunFn], RunFn]:
    """Decorator adding a method to the registry (its docstring's first paragraph describes it;
    ``needs_references`` marks oracle methods; ``settings`` lists the scale settings of a
    sweeping method, see :attr:`Method.settings_fn`; ``hotwords`` marks methods that bias
    towards hotwords, whose config then needs a ``hotwords`` or ``word_hotwords`` part;
    ``streaming`` builds its chunk-by-chunk search, see :attr:`Method.streaming`)."""
    if not is_dataclass(config_cls) or not config_cls.__dataclass_params__.frozen:
        raise TypeError(f"{config_cls!r} must be a frozen dataclass")
    if settings is not None and "rescore" not in {f.name for f in fields(config_cls)}:
        raise TypeError(f"{config_cls.__name__} needs a 'rescore' part (its weights and "
                        "'sweep') for a method that sweeps")
    try:
        config = config_cls()
    except TypeError as e:
        raise TypeError(f"{config_cls.__name__} needs defaults for every field: {e}") from None
    if hotwords and not ({"hotwords", "word_hotwords"} & {f.name for f in fields(config)}):
        raise TypeError(f"{config_cls.__name__} needs a 'hotwords' or 'word_hotwords' part "
                        "for a method that takes hotwords")

    def deco(fn: RunFn) -> RunFn:
        if name in _REGISTRY:
            raise ValueError(f"method {name!r} is registered twice")
        doc = " ".join((fn.__doc__ or "").strip().split("\n\n")[0].split())
        _REGISTRY[name] = Method(name, family, config_cls, fn, requires, doc, needs_references,
                                 settings, hotwords, streaming)
        return fn

    return deco


def get_method(name: str) -> Method:
    """The method called ``name``; ``ValueError`` listing the known names otherwise."""
    if name not in _REGISTRY:
        raise ValueError(f"unknown decoding method {name!r}; known: {', '.join(sorted(_REGISTRY))}")
    return _REGISTRY[name]


def list_methods(family: Family | str | None = None) -> list[Method]:
    """All registered methods (of one family), sorted by name."""
    fam = Family(family) if family is not None else None
    return sorted((m for m in _REGISTRY.values() if fam is None or m.family is fam),
                  key=lambda m: m.name)


def family_order(methods: Iterable[Method]) -> list[Method]:
    """``methods`` in the order ``--list-methods`` shows them: by family name, then by name."""
    return sorted(methods, key=lambda m: (m.family.value, m.name))


def supported_methods(model: Any) -> list[Method]:
    """The registered methods ``model`` (a :class:`k2dec.model.AcousticModel`) can run,
    sorted by name (graphs and LMs they also need are in each method's ``requires``)."""
    return [m for m in list_methods() if model.supports(m)]


def _get(config: Any, path: list[str]) -> Any:
    for name in path:
        config = getattr(config, name)
    return config
