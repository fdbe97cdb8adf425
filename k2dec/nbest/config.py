"""Settings of n-best sampling, composed by every method config that samples an n-best."""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["TIE_BREAKS", "NbestConfig"]

#: how :func:`k2dec.nbest.best_paths_by_score` chooses among equal scores
TIE_BREAKS = ("first", "last")


@dataclass(frozen=True)
class NbestConfig:
    """How :meth:`k2dec.nbest.Nbest.from_lattice` samples paths (icefall's defaults for CTC
    lattices; its transducer recipes sample ``num_paths=200``).

    Attributes:
      num_paths: paths sampled per utterance (``>= 1``); duplicates are removed afterwards.
      nbest_scale: lattice scores are multiplied by it before sampling (``> 0``; smaller
        flattens the distribution and gives more distinct paths).
      tie_break: which of several equally scored paths the ``nbest`` and
        ``fast_beam_search_nbest(_LG)`` methods pick (:func:`k2dec.nbest.best_paths_by_score`):
        ``"first"`` (k2dec's default: the lowest path index, i.e. the first sampled, so the
        choice does not depend on how many duplicates follow) or ``"last"`` (icefall's
        ``k2.RaggedTensor.argmax``, which returns the last maximum).

    Raises:
      ValueError: for a ``num_paths`` that is not an int ``>= 1`` or an ``nbest_scale`` that
        is not a positive finite number.
    """

    num_paths: int = 100
    nbest_scale: float = 0.5
    tie_break: str = "first"

    def __post_init__(self) -> None:
        if isinstance(self.num_paths, bool) or not isinstance(self.num_paths, int) \
                or self.num_paths < 1:
            raise ValueError(f"num_paths must be an int >= 1, got {self.num_paths!r}")
        if not (isinstance(self.nbest_scale, int | float) and 0 < self.nbest_scale < math.inf):
            raise ValueError(f"nbest_scale must be > 0 and finite, got {self.nbest_scale!r}")
        if self.tie_break not in TIE_BREAKS:
            raise ValueError(f"tie_break must be one of {TIE_BREAKS}, got {self.tie_break!r}")
