"""The settings of methods that weigh scores by scales: ONE configured setting by default,
the points of a scale grid with ``rescore.sweep`` (the configured setting still first)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping

from ..nbest import scale_key
from .parts import GraphConfig, RescorePart
from .registry import Setting

__all__ = ["LM_SCALE", "NGRAM_LM_SCALE", "grid_settings", "lg_graph", "scale_points",
           "weight_points"]

#: icefall's ``--lm-scale`` for shallow fusion: the neural LM's weight in
#: ``modified_beam_search_lm_shallow_fusion`` and ``ctc-prefix-beam-search-shallow-fussion``.
LM_SCALE = 0.3
#: icefall's ``--ngram-lm-scale`` of the transducer LG methods (``fast_beam_search_LG``,
#: ``_nbest_LG``, ``_mbr_LG``: LG scores are multiplied by it; their ``graph.scale``).
NGRAM_LM_SCALE = 0.01


def lg_graph() -> GraphConfig:
    """The ``graph`` part of the transducer LG methods: LG's scores times
    :data:`NGRAM_LM_SCALE`."""
    return GraphConfig(scale=NGRAM_LM_SCALE)


def scale_points(configured: float, grid: tuple[float, ...], sweep: bool) -> list[float]:
    """``[configured]``, then (with ``sweep``) the grid's other values, in order."""
    out = [float(configured)]
    if sweep:
        out += [float(x) for x in grid if float(x) != out[0]]
    return out


def weight_points(rescore: RescorePart, weight: str) -> list[float]:
    """:func:`scale_points` of one weight of a ``rescore`` part (``"ngram_lm_scale"``): the
    configured value, then, with ``rescore.sweep``, the other points of its grid."""
    return scale_points(getattr(rescore, weight), getattr(rescore, f"{weight}s"), rescore.sweep)


def grid_settings(points: Mapping[str, list[float]], fields: Mapping[str, str],
                  key: Callable[[dict[str, float]], str] = scale_key) -> list[Setting]:
    """One :class:`Setting` per point of the product of ``points`` (``{scale name: values}``,
    each list from :func:`scale_points`), in product order, named ``key(point)``; ``fields`` maps
    each scale name to the config field that sets it (the first point, the configured one,
    needs no assignment)."""
    out = []
    names = list(points)
    for i, values in enumerate(itertools.product(*points.values())):
        point = dict(zip(names, values))
        assign = () if i == 0 else tuple(f"{fields[n]}={v}" for n, v in point.items())
        out.append(Setting(key(point), assign))
    return out
