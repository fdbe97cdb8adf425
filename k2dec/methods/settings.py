"""The settings parser: ``KEY=VALUE`` strings (``--set``, settings files, ``k2dec tune``)
applied to a method's frozen config.

A key of a method config is ``part.field`` (``fusion.lm_scale``, ``nbest.num_paths``,
``search.beam_size``): a method config is ``search`` plus parts, with no field beside them
(tests/methods/test_parts.py), and nothing is deeper. Every part is one class
(:data:`k2dec.methods.parts.PARTS`), so a key means the same thing in every method that has
it. (Applied to a part or search config itself, such as ``FastBeamSearchConfig``, a key is
one of its fields.) A bare field name (``num_paths``) also works where exactly one field of
the config has that name. A key of version 0.1 (:data:`OLD_KEYS`) is refused with its new name.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields, is_dataclass, replace
from typing import Any

__all__ = ["OLD_KEYS", "config_field_path", "config_keys", "config_parts", "describe_settings",
           "old_key_error", "override_config", "setting_text"]

#: Keys of k2dec 0.1 -> their new keys (for error messages only; CHANGELOG.md lists them).
OLD_KEYS: dict[str, tuple[str, ...]] = {
    "beam": ("search.beam_size",),
    "search.beam": ("search.beam_size",),
    "nbest": ("search.num_hyps",),
    "search.nbest": ("search.num_hyps",),
    "lm_weight": ("fusion.lm_scale",),
    "search.lm_weight": ("fusion.lm_scale",),
    "search.lm_scale": ("fusion.lm_scale",),
    "search.ctc_weight": ("fusion.ctc_weight",),
    "hlg_scale": ("graph.scale",),
    "ngram_lm_scale": ("graph.scale",),
    "lm_scale": ("fusion.lm_scale", "rescore.lm_scale"),
    "lodr_scale": ("fusion.lodr_scale", "rescore.lodr_scale"),
    "rnn_lm_scale": ("rescore.lm_scale", "multi_pass.lm_scale"),
    "rnn_lm_scales": ("rescore.lm_scales",),
    "whole_lattice_lm_scale": ("rescore.ngram_lm_scale",),
    "whole_lattice.lm_scales": ("rescore.ngram_lm_scales",),
    "lm_scales": ("rescore.ngram_lm_scales",),
    "sweep": ("rescore.sweep",),
    "hotwords_score": ("hotwords.token_score", "word_hotwords.word_score"),
    "hotwords_partial_share": ("hotwords.partial_share",),
    "hotwords_whole_words": ("hotwords.whole_words",),
    "hotwords_max_arcs": ("word_hotwords.max_arcs",),
    "multi_pass.rnn_lm_scale": ("multi_pass.lm_scale",),
    "multi_pass.nn_scale": ("multi_pass.lm_scale",),
    "nn_scale": ("multi_pass.lm_scale",),
    "rescore": ("mbr.rescore_with_g",),
    "mbr.posterior.acoustic_scale": ("mbr.am_posterior_scale",),
    "mbr.posterior.lm_scale": ("mbr.lm_posterior_scale",),
    "acoustic_scale": ("mbr.am_posterior_scale",),
    "posterior.acoustic_scale": ("mbr.am_posterior_scale",),
    "posterior.lm_scale": ("mbr.lm_posterior_scale",),
}

#: What changed besides the name, for the keys whose meaning was split or whose sign flipped.
_NOTES = {
    "beam": "hypotheses kept; search.beam is the fast_beam_search family's pruning beam",
    "search.beam": "hypotheses kept; search.beam is the fast_beam_search family's pruning "
                   "beam",
    "hotwords_score": "the bonus per token, or per word in the HLG methods",
    "ngram_lm_scale": "LG's weight in the search; rescore.ngram_lm_scale is G's weight in "
                      "rescoring",
    "lodr_scale": "added: < 0 subtracts it, so modified_beam_search_lm_rescore_LODR's 0.5 "
                  "is -0.5",
}


#: The search configs that had ``beam`` (hypotheses kept) in 0.1, and the name ending of the
#: method configs that had ``ngram_lm_scale`` as LG's weight: their new keys are shared with
#: methods that never had the old one (the attention search's ``beam_size``, the HLG methods'
#: ``graph.scale``), where the old key stays an unknown key.
_HAD_BEAM = ("ModifiedBeamSearchConfig", "TransducerBeamSearchConfig",
             "CtcPrefixBeamSearchConfig")
_HAD_NGRAM_LM_SCALE = "LGConfig"


def _had(config: Any, key: str) -> bool:
    if key in ("beam", "search.beam"):
        return type(getattr(config, "search", None)).__name__ in _HAD_BEAM
    if key == "ngram_lm_scale":
        return type(config).__name__.endswith(_HAD_NGRAM_LM_SCALE)
    return True


def old_key_error(config: Any, key: str) -> str | None:
    """The message for a key of version 0.1 that ``config`` has under a new name
    (``beam`` of modified_beam_search: ``search.beam_size``; ``ctc.lattice.X`` of ``mbr``:
    ``lattice.X``); None for any other key."""
    keys = config_keys(config)
    new = [k for k in OLD_KEYS.get(key, ()) if k in keys and _had(config, key)]
    if not new and key.startswith("ctc."):  # mbr's and the no-ngram method's former ctc part
        rest = key[4:]
        new = [k for k in OLD_KEYS.get(rest, (rest,)) if k in keys]
    if not new:
        return None
    note = f" ({_NOTES[key]})" if key in _NOTES else ""
    return f"{key!r} was renamed in k2dec 0.2: use {' or '.join(new)}{note}"


def config_parts(config: Any) -> dict[str, dict[str, Any]]:
    """``{part: {field: value}}`` of a method config, grouped by part (``""``: the fields that
    are not dataclasses, which a method config has none of: those of a search or part config
    given itself). A part with a ``settings_fields()`` method lists only those
    (:class:`~k2dec.methods.parts.RescorePart`: the weights the method has)."""
    out: dict[str, dict[str, Any]] = {}
    for f in fields(config):
        value = getattr(config, f.name)
        if is_dataclass(value):
            used = getattr(value, "settings_fields", None)
            names = used() if used is not None else [g.name for g in fields(value)]
            out[f.name] = {name: getattr(value, name) for name in names}
        else:
            out.setdefault("", {})[f.name] = value
    return out


def setting_text(value: Any, short: bool = False) -> str:
    """A setting's value as ``--set`` takes it (tuples comma-separated; ``short``: a grid of
    more than four values by its ends and ``[size]``)."""
    if isinstance(value, tuple):
        if short and len(value) > 4:
            return f"{value[0]:g},...,{value[-1]:g}[{len(value)}]"
        return ",".join(f"{x:g}" for x in value)
    return str(value).lower() if isinstance(value, bool) else str(value)


def describe_settings(config: Any, short: bool = False) -> list[str]:
    """One line per part of a method config: ``part: field=value ...`` (the top-level fields
    first, as ``settings:``), the keys ``--set part.field=VALUE`` takes."""
    return [f"{part or 'settings'}: " + " ".join(f"{k}={setting_text(v, short)}"
                                                 for k, v in values.items())
            for part, values in sorted(config_parts(config).items(), key=lambda x: x[0] != "")]


def config_keys(config: Any) -> dict[str, Any]:
    """``{key: value}`` of every setting of a method config: ``part.field`` for a part's
    fields, the name of a top-level field."""
    return {(f"{part}.{name}" if part else name): value
            for part, values in config_parts(config).items() for name, value in values.items()}


def config_field_path(config: Any, key: str) -> list[str] | None:
    """Where ``key`` lands in a method config: ``[part, field]`` or ``[field]``; a bare field
    name lands on the one field of that name (top-level or in a part); ``None`` when the
    config has no such field.

    Raises:
      ValueError: a bare name several parts have (say which: ``part.field``), or a key of
        version 0.1 that the config has under its new name (:data:`OLD_KEYS`).
    """
    path = key.split(".")
    keys = config_keys(config)
    if key in keys:
        return path
    found = [k for k in keys if len(path) == 1 and k.split(".")[-1] == key]
    if len(found) > 1:
        raise ValueError(f"{key!r} is a field of several parts of {type(config).__name__}: "
                         f"say which one of {', '.join(found)}")
    if found:
        return found[0].split(".")
    message = old_key_error(config, key)
    if message is not None:
        raise ValueError(message)
    return None


def override_config(config: Any, assignments: Sequence[str]) -> Any:
    """A copy of a method config with ``KEY=VALUE`` strings applied (keys:
    :func:`config_field_path`), each value typed like the field's current value; tuples are
    comma-separated (``nbest.num_paths=50``, ``lm_scales=0.5,1.0``). The config's own checks
    run on the result.

    Raises:
      ValueError: a malformed assignment, an unknown, ambiguous or renamed key, a value of the
        wrong type (``num_paths=2.7``, an empty tuple), or one the config rejects
        (``num_paths=0``).
    """
    for item in assignments:
        if "=" not in item:
            raise ValueError(f"expected KEY=VALUE, got {item!r}")
        key, value = item.split("=", 1)
        path = config_field_path(config, key)
        if path is None:
            raise ValueError(f"{type(config).__name__} has no field {key!r} "
                             f"(keys: {', '.join(sorted(config_keys(config)))})")
        try:
            config = _set_field(config, path, value)
        except ValueError as e:
            raise ValueError(f"{item}: {e}") from None
    return config


def _set_field(config: Any, path: list[str], value: str) -> Any:
    current = getattr(config, path[0])
    if len(path) > 1:
        return replace(config, **{path[0]: _set_field(current, path[1:], value)})
    field_type = next(f.type for f in fields(config) if f.name == path[0])
    if value.lower() == "none" and "None" in str(field_type):  # an Optional field: off
        return replace(config, **{path[0]: None})
    try:
        new = _parse(current, value)
    except ValueError:
        raise ValueError(f"{path[0]}={value!r} does not fit the field's type "
                         f"({type(current).__name__})") from None
    return replace(config, **{path[0]: new})


def _parse(current: Any, value: str) -> Any:
    """``value`` typed like ``current``; ``ValueError`` if it does not fit."""
    if isinstance(current, bool):
        if value.lower() not in ("1", "0", "true", "false", "yes", "no"):
            raise ValueError(value)
        return value.lower() in ("1", "true", "yes")
    if isinstance(current, tuple):
        items = [x for x in value.split(",") if x.strip()]
        if not items:
            raise ValueError(value)
        return tuple(float(x) for x in items)
    if current is None:
        return None if value.lower() == "none" else _number(value)
    if isinstance(current, int):
        return int(value)  # "2.7" is not an int
    if isinstance(current, float):
        return float(value)
    return value


def _number(value: str) -> int | float:
    try:
        return int(value)
    except ValueError:
        return float(value)
