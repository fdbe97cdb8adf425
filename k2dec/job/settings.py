"""Decode settings files: ``KEY=VALUE`` assignments for every method and per method, in JSON.

``k2dec tune`` writes them and ``k2dec decode --config FILE`` reads them::

    {
      "set": ["lattice.search_beam=15"],
      "methods": {
        "nbest-rescoring": ["rescore.ngram_lm_scale=0.3"],
        "attention-decoder": ["rescore.ngram_lm_scale=0.3", "rescore.attention_scale=0.7"]
      },
      "calibration": {"nbest-rescoring": {"ngram_lm_scale_0.3": [1.42, -0.61]}},
      "tuned": {"nbest-rescoring": {"dev_wer": 35.1, "start_wer": 36.0, ...}}
    }

``set`` applies like ``--set`` to every method whose config has the field; ``methods`` gives
each named method its own assignments (every one must fit that method); ``calibration`` gives,
per method and result setting (the key of its CTM file), the Platt scaling ``[a, b]`` of its
confidences (:class:`k2dec.results.Calibration`: ``sigmoid(a * logit(c) + b)``) that the
decode job applies when it writes CTM files and confidence summaries (the JSONL records keep
the method's own posteriors); ``tuned`` records what ``k2dec tune`` measured and is not read
back. Assignments from the command line (``--set``) come last and win.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..results import Calibration

__all__ = ["MODEL_SETTINGS_FILE", "DecodeSettings", "model_settings_file", "read_settings",
           "write_settings"]

#: A model's own settings file: ``k2dec decode`` and ``k2dec tune`` apply it when it lies
#: beside the model file (or in the model's folder) and no ``--config`` is given.
MODEL_SETTINGS_FILE = "decode.json"


@dataclass(frozen=True)
class DecodeSettings:
    """The content of a settings file.

    Attributes:
      assignments: ``KEY=VALUE`` strings for every method that has the field (like ``--set``).
      methods: ``{method name: KEY=VALUE strings}`` applied to that method only, after
        ``assignments``.
      calibration: ``{method name: {setting key: Calibration}}``: how the decode job
        calibrates the confidences of that method's setting in CTM files and confidence
        summaries (``k2dec tune`` fits them on the dev set).
      tuned: ``{method name: what k2dec tune measured}`` (informative).
      source: where the settings were read from (for messages; not written).
    """

    assignments: tuple[str, ...] = ()
    methods: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    tuned: Mapping[str, Any] = field(default_factory=dict)
    calibration: Mapping[str, Mapping[str, Calibration]] = field(default_factory=dict)
    source: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        _check_assignments("set", self.assignments)
        for name, items in self.methods.items():
            if not isinstance(name, str):
                raise TypeError(f"method names must be str, got {name!r}")
            _check_assignments(f"methods[{name!r}]", items)
        for name, per_key in self.calibration.items():
            if not isinstance(name, str) or not isinstance(per_key, Mapping):
                raise TypeError(f"calibration must map method names to {{setting: "
                                f"Calibration}}, got {name!r}: {per_key!r}")
            for key, cal in per_key.items():
                if not isinstance(key, str) or not isinstance(cal, Calibration):
                    raise TypeError(f"calibration[{name!r}] must map setting keys to "
                                    f"Calibration, got {key!r}: {cal!r}")

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"set": list(self.assignments),
                               "methods": {k: list(v) for k, v in self.methods.items()}}
        if self.calibration:
            out["calibration"] = {m: {k: [c.a, c.b] for k, c in per_key.items()}
                                  for m, per_key in self.calibration.items()}
        if self.tuned:
            out["tuned"] = dict(self.tuned)
        return out


def _check_assignments(where: str, items: Any) -> None:
    if isinstance(items, str) or not all(isinstance(a, str) for a in items):
        raise TypeError(f"{where} must be a list of 'KEY=VALUE' strings, got {items!r}")
    bad = [a for a in items if "=" not in a]
    if bad:
        raise ValueError(f"{where}: expected KEY=VALUE, got {bad[0]!r}")


def read_settings(path: str | Path) -> DecodeSettings:
    """Read a settings file (see the module docstring); the method names must be known.

    Raises:
      ValueError: naming the file: unreadable or not JSON, unknown top-level keys, values of
        the wrong shape, unknown method names.
    """
    from ..methods import get_method

    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        raise ValueError(f"settings file {path}: not a readable JSON file: {e}") from None
    if not isinstance(data, dict):
        raise ValueError(f"settings file {path}: expected a JSON object, got "
                         f"{type(data).__name__}")
    unknown = sorted(set(data) - {"set", "methods", "calibration", "tuned"})
    if unknown:
        raise ValueError(f"settings file {path}: unknown keys {', '.join(unknown)} (known: "
                         "set, methods, calibration, tuned)")
    methods = data.get("methods", {})
    if not isinstance(methods, dict):
        raise ValueError(f"settings file {path}: 'methods' must map method names to lists of "
                         f"KEY=VALUE strings, got {methods!r}")
    try:
        calibration = _calibrations(data.get("calibration", {}))
        for name in list(methods) + list(calibration):
            get_method(name)
        return DecodeSettings(tuple(_as_list(data.get("set", []))),
                              {k: tuple(_as_list(v)) for k, v in methods.items()},
                              data.get("tuned", {}), calibration, f"settings file {path}")
    except (TypeError, ValueError) as e:
        raise ValueError(f"settings file {path}: {e}") from None


def _calibrations(data: Any) -> dict[str, dict[str, Calibration]]:
    """``{method: {key: [a, b]}}`` -> :class:`Calibration` objects (finite numbers)."""
    if not isinstance(data, dict):
        raise TypeError(f"'calibration' must map method names to {{setting: [a, b]}}, got "
                        f"{data!r}")
    out: dict[str, dict[str, Calibration]] = {}
    for name, per_key in data.items():
        if not isinstance(per_key, dict):
            raise TypeError(f"calibration[{name!r}] must map setting keys to [a, b], got "
                            f"{per_key!r}")
        out[name] = {}
        for key, ab in per_key.items():
            if not (isinstance(ab, list) and len(ab) == 2
                    and all(isinstance(x, int | float) and not isinstance(x, bool)
                            and math.isfinite(x) for x in ab)):
                raise ValueError(f"calibration[{name!r}][{key!r}] must be [a, b] (two finite "
                                 f"numbers), got {ab!r}")
            out[name][key] = Calibration(float(ab[0]), float(ab[1]))
    return out


def _as_list(items: Any) -> list:
    if not isinstance(items, list):
        raise TypeError(f"expected a list of 'KEY=VALUE' strings, got {items!r}")
    return items


def write_settings(settings: DecodeSettings, path: str | Path) -> Path:
    """Write ``settings`` as JSON (atomically) and return the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(settings.to_json(), indent=2) + "\n")
    tmp.replace(path)
    return path


def model_settings_file(model_path: str | Path) -> Path | None:
    """The settings file that comes with a model: :data:`MODEL_SETTINGS_FILE` in the model's
    folder (for a model folder such as a sherpa-onnx export, inside it); None when there is
    none."""
    path = Path(model_path)
    folder = path if path.is_dir() else path.parent
    found = folder / MODEL_SETTINGS_FILE
    return found if found.is_file() else None
