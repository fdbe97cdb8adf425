"""The registry of named decoding methods (icefall's names).

A :class:`Method` couples a name (``"fast_beam_search_nbest_LG"``, ``"1best"``, ...), its
frozen config dataclass (icefall's defaults) and a function composing search, n-best and
rescoring. The CLI, recipes and benchmarks look methods up here by name; nothing dispatches
on method-name strings elsewhere.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields, is_dataclass, replace
from typing import Any

import k2
import torch

__all__ = [
    "Family",
    "Method",
    "MethodResult",
    "Resources",
    "TransducerInputs",
    "CtcInputs",
    "AedInputs",
    "register",
    "get_method",
    "list_methods",
    "override_config",
]


class Family(str, enum.Enum):
    """Which network output a method decodes."""

    CTC = "ctc"
    TRANSDUCER = "transducer"
    AED = "aed"


@dataclass(frozen=True)
class MethodResult:
    """Hypotheses of one batch for one setting of a method.

    Attributes:
      key: the setting's name: the method name, or a scale key such as
        ``"ngram_lm_scale_0.5"`` for methods that sweep scales (icefall's result keys).
      tokens: token ids per utterance (``None`` when the method yields only words).
      words: word ids per utterance (``None`` when the method yields only tokens).
      failed: per utterance, ``""`` or why it has no hypothesis (empty lattice, ...).
      config: the config object the method ran with (the very object passed in).
    """

    key: str
    tokens: list[list[int]] | None
    words: list[list[int]] | None
    failed: list[str]
    config: Any


@dataclass
class Resources:
    """What methods may need besides the batch: graphs, LMs, decoders.

    Attributes:
      graphs: by name: ``"H"``, ``"HLG"``, ``"LG"``, ``"G"`` (rescoring G with
        ``lm_scores``), ``"trivial"``; on the device of the inputs.
      lms: neural LMs by name (``"rnn_lm"``, ``"transformer_lm"``).
      attention_decoder: the AED decoder for attention rescoring / beam search.
      cache: scratch space methods use to keep derived objects (e.g. a scaled LG) across
        batches.
    """

    graphs: dict[str, k2.Fsa] = field(default_factory=dict)
    lms: dict[str, Any] = field(default_factory=dict)
    attention_decoder: Any = None
    cache: dict[Any, Any] = field(default_factory=dict)

    def graph(self, name: str, method: str) -> k2.Fsa:
        if name not in self.graphs:
            raise ValueError(f"method {method!r} needs the {name} graph; give it in "
                             f"Resources.graphs[{name!r}]")
        return self.graphs[name]


@dataclass
class TransducerInputs:
    """A batch for transducer methods.

    Attributes:
      model: a stateless transducer (``.decoder``, ``.joiner``).
      encoder_out: float ``[N, T, C]``; encoder_out_lens: int ``[N]``.
      ref_tokens: reference token ids per utterance (oracle methods only).
    """

    model: torch.nn.Module
    encoder_out: torch.Tensor
    encoder_out_lens: torch.Tensor
    ref_tokens: list[list[int]] | None = None


@dataclass
class CtcInputs:
    """A batch for CTC/HMM methods.

    Attributes:
      log_probs: float32 ``[N, T, V]``; lengths: int ``[N]``.
      ref_words: reference word ids per utterance (oracle methods only).
      memory, memory_lens: encoder output for attention-decoder rescoring.
    """

    log_probs: torch.Tensor
    lengths: torch.Tensor
    ref_words: list[list[int]] | None = None
    memory: torch.Tensor | None = None
    memory_lens: torch.Tensor | None = None


@dataclass
class AedInputs:
    """A batch for attention encoder-decoder methods.

    Attributes:
      memory: float ``[N, T, C]`` encoder output; memory_lens: int ``[N]``.
      ctc_log_probs: float ``[N, T, V]`` CTC log-probs for joint CTC/attention decoding.
    """

    memory: torch.Tensor
    memory_lens: torch.Tensor
    ctc_log_probs: torch.Tensor | None = None


RunFn = Callable[[Any, Resources, Any], list[MethodResult]]


@dataclass(frozen=True)
class Method:
    """A named decoding method: ``run(inputs, resources, config) -> [MethodResult]``.

    ``needs_references``: the method reads every utterance's reference (oracle methods); a
    job without references must refuse it before decoding.
    """

    name: str
    family: Family
    config_cls: type
    run: RunFn
    requires: tuple[str, ...]
    description: str
    needs_references: bool = False

    def default_config(self) -> Any:
        return self.config_cls()

    def __call__(self, inputs: Any, resources: Resources, config: Any = None) -> list[
            MethodResult]:
        config = self.default_config() if config is None else config
        if not isinstance(config, self.config_cls):
            raise TypeError(f"method {self.name!r} takes a {self.config_cls.__name__}, got "
                            f"{type(config).__name__}")
        return self.run(inputs, resources, config)


_REGISTRY: dict[str, Method] = {}


def register(
    name: str, family: Family, config_cls: type, requires: tuple[str, ...] = (),
    needs_references: bool = False,
) -> Callable[[RunFn], RunFn]:
    """Decorator adding a method to the registry (its docstring's first line describes it;
    ``needs_references`` marks oracle methods)."""
    if not is_dataclass(config_cls) or not config_cls.__dataclass_params__.frozen:
        raise TypeError(f"{config_cls!r} must be a frozen dataclass")
    try:
        config_cls()
    except TypeError as e:
        raise TypeError(f"{config_cls.__name__} needs defaults for every field: {e}") from None

    def deco(fn: RunFn) -> RunFn:
        if name in _REGISTRY:
            raise ValueError(f"method {name!r} is registered twice")
        doc = (fn.__doc__ or "").strip().splitlines()[0] if fn.__doc__ else ""
        _REGISTRY[name] = Method(name, family, config_cls, fn, requires, doc, needs_references)
        return fn

    return deco


def get_method(name: str) -> Method:
    """The method called ``name``; ``ValueError`` listing the known names otherwise."""
    _load_all()
    if name not in _REGISTRY:
        raise ValueError(f"unknown decoding method {name!r}; known: {', '.join(sorted(_REGISTRY))}")
    return _REGISTRY[name]


def list_methods(family: Family | str | None = None) -> list[Method]:
    """All registered methods (of one family), sorted by name."""
    _load_all()
    fam = Family(family) if family is not None else None
    return sorted((m for m in _REGISTRY.values() if fam is None or m.family is fam),
                  key=lambda m: m.name)


def _load_all() -> None:
    from . import aed, ctc, transducer  # noqa: F401  (registers on import)


def override_config(config: Any, assignments: Sequence[str]) -> Any:
    """A copy of a (frozen dataclass) config with ``KEY=VALUE`` strings applied, each value
    typed like the field's current value; ``a.b=1`` reaches into a nested config and tuples
    are comma-separated (``lm_scales=0.5,1.0``).

    Raises:
      ValueError: a malformed assignment, an unknown field, or a value of the wrong type.
    """
    for item in assignments:
        if "=" not in item:
            raise ValueError(f"expected KEY=VALUE, got {item!r}")
        key, value = item.split("=", 1)
        config = _set_field(config, key.split("."), value)
    return config


def _set_field(config: Any, path: list[str], value: str) -> Any:
    names = {f.name for f in fields(config)}
    if path[0] not in names:
        raise ValueError(f"{type(config).__name__} has no field {path[0]!r} "
                         f"(fields: {', '.join(sorted(names))})")
    current = getattr(config, path[0])
    if len(path) > 1:
        return replace(config, **{path[0]: _set_field(current, path[1:], value)})
    try:
        if isinstance(current, bool):
            if value.lower() not in ("1", "0", "true", "false", "yes", "no"):
                raise ValueError(value)
            new: Any = value.lower() in ("1", "true", "yes")
        elif isinstance(current, tuple):
            new = tuple(float(x) for x in value.split(",") if x)
        elif current is None:
            new = None if value.lower() == "none" else _number(value)
        elif isinstance(current, int | float):
            new = type(current)(_number(value))
        else:
            new = value
    except ValueError:
        raise ValueError(f"{path[0]}={value!r} does not fit the field's type "
                         f"({type(current).__name__})") from None
    return replace(config, **{path[0]: new})


def _number(value: str) -> int | float:
    try:
        return int(value)
    except ValueError:
        return float(value)
