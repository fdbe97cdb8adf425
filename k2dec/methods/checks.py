"""Validation of method config fields shared by the method modules."""

from __future__ import annotations

from ..primitives.sizes import check_finite

__all__ = ["check_finite", "check_scales", "check_sweep"]


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
