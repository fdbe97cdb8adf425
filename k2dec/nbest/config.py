"""Settings of n-best sampling, composed by every method config that samples an n-best."""

from __future__ import annotations

from dataclasses import dataclass, fields

from ..lattice.groups import MAX_GROUP_ARCS_LIMIT
from ..lattice.prune import MAX_LATTICE_ARCS
from ..primitives.sizes import check_int_range, check_positive

__all__ = ["SAMPLERS", "TIE_BREAKS", "NbestConfig", "check_posterior_scale"]

#: how :func:`k2dec.nbest.best_paths_by_score` chooses among equal scores
TIE_BREAKS = ("first", "last")
#: how :meth:`k2dec.nbest.Nbest.from_lattice` draws paths
SAMPLERS = ("hashed", "k2")


def check_posterior_scale(value: float, name: str = "posterior_scale") -> None:
    """``ValueError`` unless ``value`` is a positive finite number (not a bool)."""
    check_positive(name, value)


@dataclass(frozen=True)
class NbestConfig:
    """How :meth:`k2dec.nbest.Nbest.from_lattice` samples paths (icefall's defaults for CTC
    lattices; its transducer recipes sample ``num_paths=200``).

    Memory and time are bounded by ``max_lattice_arcs`` and ``max_intersect_arcs``.
    Sampling and intersecting cost time in proportion to ``num_paths x lattice arcs`` (each
    sampled word sequence is intersected with its utterance's lattice: the dense lattice of
    30 s of speech at icefall's output beam 8 takes minutes; throughput: BENCHMARKS.md
    ``nbest``). So a lattice with more than ``max_lattice_arcs`` arcs is pruned first (the
    narrowest output beam keeping that many, see :func:`k2dec.lattice.prune_lattice`,
    recorded in the utterance's report): an utterance's n-best costs at most ``num_paths x
    max_lattice_arcs`` arc visits whatever its length. Intersection runs in chunks touching
    at most ``max_intersect_arcs`` lattice arcs (about 0.5 KB each: 1M arcs ~ 0.5 GB).

    Attributes:
      num_paths: paths sampled per utterance (``>= 1``); duplicates are removed afterwards.
      nbest_scale: lattice scores are multiplied by it before sampling (``> 0``; smaller
        flattens the distribution and gives more distinct paths).
      max_lattice_arcs: lattices with more arcs are pruned to this many before sampling
        (``None``: never; only arcs on no complete path are dropped).
      max_intersect_arcs: lattice arcs one intersection chunk may touch (memory bound).
      tie_break: which of several equally scored paths the ``nbest`` and
        ``fast_beam_search_nbest(_LG)`` methods pick (:func:`k2dec.nbest.best_paths_by_score`),
        and of several paths at the same edit distance the oracles (:meth:`Nbest.oracle`):
        ``"first"`` (k2dec's default: the lowest path index, i.e. the first sampled, so the
        choice does not depend on how many duplicates follow) or ``"last"`` (icefall's
        ``k2.RaggedTensor.argmax``, which returns the last maximum).
      sampler: ``"hashed"`` (k2dec's default, :func:`k2dec.nbest.sample_paths`: an
        utterance's samples depend on its lattice alone, so results are the same at any batch
        size and after a resume) or ``"k2"`` (``k2.random_paths``, icefall's sampler: the
        same paths as icefall for the same lattice, but a ~1e-5 score change, which another
        batch composition gives, changes most samples of a long utterance).
      posterior_scale: the n-best methods' word (token) confidences are list posteriors,
        ``softmax(posterior_scale * score)`` over an utterance's paths by the scores the
        method ranks them by (:mod:`k2dec.nbest.list_confidences`); ``> 0``. Like a lattice's
        acoustic scale: below 1 flattens the list distribution (less confident words), above
        1 sharpens it. It changes confidences only, never the chosen hypothesis. The default
        of every method config that has the field (the beam-search list methods have their
        own ``posterior_scale`` field with this default).
      max_group_arcs: the HLG n-best methods that search their own lattices (no lattice cache
        shared between a job's methods) search, sample and rescore consecutive groups of a
        batch's utterances whose lattices hold at most this many arcs together (one
        utterance at least; :func:`k2dec.lattice.groups.lattice_groups`), so what they hold
        does not grow with the batch's densest lattices. Every utterance is decoded on its
        own, so results do not depend on it. ``None`` (the default here, and the setting of
        the methods whose n-best comes from another search, which do not list it): the
        whole batch at once; the HLG methods' default is
        :data:`k2dec.lattice.groups.MAX_GROUP_ARCS`.

    Raises:
      ValueError: for a ``num_paths`` that is not an int ``>= 1``, or an ``nbest_scale`` or
        ``posterior_scale`` that is not a positive finite number.
    """

    num_paths: int = 100
    nbest_scale: float = 0.5
    max_lattice_arcs: int | None = MAX_LATTICE_ARCS
    max_intersect_arcs: int = 1_000_000
    tie_break: str = "first"
    sampler: str = "hashed"
    posterior_scale: float = 1.0
    max_group_arcs: int | None = None

    def __post_init__(self) -> None:
        check_int_range(self, "num_paths", 1, 10_000)
        check_posterior_scale(self.posterior_scale)
        check_positive("nbest_scale", self.nbest_scale)
        check_int_range(self, "max_lattice_arcs", 1, 1_000_000, optional=True)
        check_int_range(self, "max_intersect_arcs", 1, 4_000_000)
        if self.tie_break not in TIE_BREAKS:
            raise ValueError(f"tie_break must be one of {TIE_BREAKS}, got {self.tie_break!r}")
        if self.sampler not in SAMPLERS:
            raise ValueError(f"sampler must be one of {SAMPLERS}, got {self.sampler!r}")
        check_int_range(self, "max_group_arcs", 1, MAX_GROUP_ARCS_LIMIT, optional=True)

    def settings_fields(self) -> tuple[str, ...]:
        """The fields a method reads (``max_group_arcs`` only where it is not None)."""
        return tuple(f.name for f in fields(self)
                     if f.name != "max_group_arcs" or self.max_group_arcs is not None)
