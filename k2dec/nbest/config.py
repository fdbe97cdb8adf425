"""Settings of n-best sampling, composed by every method config that samples an n-best."""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["NbestConfig"]


@dataclass(frozen=True)
class NbestConfig:
    """How :meth:`k2dec.nbest.Nbest.from_lattice` samples paths (icefall's defaults for CTC
    lattices; its transducer recipes sample ``num_paths=200``).

    Attributes:
      num_paths: paths sampled per utterance (``>= 1``); duplicates are removed afterwards.
      nbest_scale: lattice scores are multiplied by it before sampling (``> 0``; smaller
        flattens the distribution and gives more distinct paths).

    Raises:
      ValueError: for a ``num_paths`` that is not an int ``>= 1`` or an ``nbest_scale`` that
        is not a positive finite number.
    """

    num_paths: int = 100
    nbest_scale: float = 0.5

    def __post_init__(self) -> None:
        if isinstance(self.num_paths, bool) or not isinstance(self.num_paths, int) \
                or self.num_paths < 1:
            raise ValueError(f"num_paths must be an int >= 1, got {self.num_paths!r}")
        if not (isinstance(self.nbest_scale, int | float) and 0 < self.nbest_scale < math.inf):
            raise ValueError(f"nbest_scale must be > 0 and finite, got {self.nbest_scale!r}")
