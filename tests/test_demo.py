"""The demo's methods come from the registry: every registered method but those it leaves out
with a reason, so that a newly registered method is in the demo without editing a list."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

import k2dec.demo as demo
from k2dec.methods import Family, family_order, get_method, list_methods, register, registry


def test_demo_methods_are_the_registry_but_those_left_out():
    names = [m.name for m in list_methods()]
    assert set(demo.DEMO_LEAVES_OUT) <= set(names), "a left-out method is not registered"
    assert all(reason.strip() for reason in demo.DEMO_LEAVES_OUT.values())
    methods = demo.demo_methods()
    assert set(methods) == set(names) - set(demo.DEMO_LEAVES_OUT)
    assert list(methods) == [m.name for m in family_order(get_method(n) for n in methods)]
    assert {get_method(n).family for n in methods} == set(Family)  # every family
    assert demo.DEMO_METHODS == methods  # the old constant's name still answers


@dataclass(frozen=True)
class _ToyConfig:
    pass


def test_a_newly_registered_method_is_in_the_demo():
    register("toy-demo-method", Family.CTC, _ToyConfig)(lambda inputs, res, cfg: [])
    try:
        assert "toy-demo-method" in demo.demo_methods()
    finally:
        del registry._REGISTRY["toy-demo-method"]
    assert "toy-demo-method" not in demo.demo_methods()


def test_unknown_module_attribute():
    with pytest.raises(AttributeError, match="no attribute 'NO_SUCH_NAME'"):
        demo.NO_SUCH_NAME  # noqa: B018
