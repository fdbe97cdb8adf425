"""Validation of method config fields shared by the method modules."""

from __future__ import annotations

from ..primitives.sizes import check_finite

__all__ = ["check_finite", "check_lodr_weight", "check_scales", "check_sweep"]


def check_scales(name: str, values: tuple[float, ...]) -> None:
    """Raise ``ValueError`` unless ``values`` is a non-empty tuple of finite numbers."""
    if not isinstance(values, tuple) or not values:
        raise ValueError(f"{name} needs at least one scale, got {values!r}")
    for v in values:
        check_finite(name, v)


def check_sweep(value: bool) -> None:
    """Raise ``TypeError`` unless ``value`` (a config's ``sweep``) is a bool."""
    if not isinstance(value, bool):
        raise TypeError(f"sweep must be a bool, got {value!r}")


def check_lodr_weight(name: str, value: float) -> None:
    """Raise ``ValueError`` unless ``value`` (a LODR weight, ``name`` its settings key) is
    ``<= 0``: the weight is ADDED to a path's score, so LODR is subtracted by a negative one
    (0.1 took a positive ``rescore.lodr_scale`` and subtracted it; that value now means the
    opposite and is refused rather than silently used)."""
    check_finite(name, value)
    if value > 0:
        raise ValueError(f"{name} must be <= 0, got {value!r}: the LODR weight is added to "
                         f"the score; give a negative value (e.g. {-value!r} for 0.1's "
                         f"subtracted {value!r})")
