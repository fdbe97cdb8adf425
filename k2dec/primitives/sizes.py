"""The allowed ranges of size settings: the config fields that set how much work and memory a
search may use (beams, hypotheses and paths kept, active states, lattice arcs, LM batches).

Every such field is checked in its config dataclass's ``__post_init__`` with
:func:`check_int_range` / :func:`check_float_range`, its range written once there, so that
``--set beam=1000000000`` or ``--set num_paths=1000000000`` is refused before anything is
decoded, with an error naming the class, the field, the value and the range, instead of
running out of memory or overflowing k2's int32 sizes. The upper bounds are far above any
setting that changes results in practice (icefall's beams are 4-20, its n-bests 100-200) and
low enough that one such setting alone, on a 30 s utterance, keeps the process within a few
GB (README, "Bounded memory").

Scales, weights and other numbers without a size meaning are checked with
:func:`check_finite` / :func:`check_positive`, the one place their rule is written.

Nothing here imports the rest of k2dec.
"""

from __future__ import annotations

import math

__all__ = ["MAX_DURATION", "check_finite", "check_float_range", "check_int", "check_int_range",
           "check_positive"]

#: Seconds of audio per decode batch, and the longest recording a decode job takes: the one
#: default of :attr:`k2dec.job.DecodeConfig.max_duration` (see there why this value), which
#: ``k2dec decode`` / ``tune`` (``--max-duration``), the ``Recognizer``, the demo and the
#: recipe's decode script use.
MAX_DURATION = 200.0


def _name(owner: object, name: str) -> str:
    return f"{type(owner).__name__}.{name}"


def check_int_range(owner: object, name: str, low: int, high: int,
                    optional: bool = False) -> None:
    """Raise ``ValueError`` unless ``owner.<name>`` is an int in ``[low, high]`` (or ``None``
    when ``optional``), naming the field, its value and the range."""
    check_int(_name(owner, name), getattr(owner, name), low, high, optional)


def check_int(name: str, value: object, low: int, high: int, optional: bool = False) -> None:
    """Raise ``ValueError`` unless ``value`` (an argument called ``name``) is an int in
    ``[low, high]`` (or ``None`` when ``optional``), naming it, its value and the range."""
    if optional and value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{name} must be an int in [{low}, {high}]"
                         f"{' or None' if optional else ''}, got {value!r}")


def check_float_range(owner: object, name: str, low: float, high: float,
                      low_open: bool = True, optional: bool = False) -> None:
    """Raise ``ValueError`` unless ``owner.<name>`` is a number in ``(low, high]`` (``[low,
    high]`` when not ``low_open``; or ``None`` when ``optional``), naming the field, its
    value and the range."""
    value = getattr(owner, name)
    if optional and value is None:
        return
    if not (_is_number(value) and (low < value if low_open else low <= value)
            and value <= high):
        raise ValueError(f"{_name(owner, name)} must be a number in "
                         f"{'(' if low_open else '['}{low:g}, {high:g}]"
                         f"{' or None' if optional else ''}, got {value!r}")


def _is_number(value: object) -> bool:
    return not isinstance(value, bool) and isinstance(value, int | float) \
        and math.isfinite(value)


def check_finite(name: str, value: float) -> None:
    """Raise ``ValueError`` unless ``value`` is a finite number (an int or float, not a
    bool), naming ``name`` and the value."""
    if not _is_number(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")


def check_positive(name: str, value: float) -> None:
    """Raise ``ValueError`` unless ``value`` is a finite number ``> 0`` (not a bool), naming
    ``name`` and the value."""
    if not (_is_number(value) and value > 0):
        raise ValueError(f"{name} must be > 0 and finite, got {value!r}")
