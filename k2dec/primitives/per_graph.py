"""Values computed from a k2 graph once and kept per graph object while its content is the
same: arc tables for a search, a modified copy of the graph."""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Generic, TypeVar

import k2

__all__ = ["PerGraph", "graph_version"]

T = TypeVar("T")


def graph_version(graph: k2.Fsa) -> tuple:
    """What changes when ``graph``'s arcs, labels or scores do: their storage and torch
    version counters (a new ``scores`` tensor is a new version)."""
    arcs, scores = graph.arcs.values(), graph.scores
    return (arcs.data_ptr(), arcs.shape[0], scores.data_ptr(), scores._version,
            graph.labels._version)


class PerGraph(Generic[T]):
    """``build(graph)`` computed once per graph object and kept (weakly: it goes with the
    graph) while :func:`graph_version` is the same; a changed graph is built again."""

    def __init__(self, build: Callable[[k2.Fsa], T]) -> None:
        self._build = build
        self._kept: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def __call__(self, graph: k2.Fsa) -> T:
        key = graph_version(graph)
        cached = self._kept.get(graph)
        if cached is not None and cached[0] == key:
            return cached[1]
        value = self._build(graph)
        self._kept[graph] = (key, value)
        return value
