"""Whole-lattice rescoring with a bigger n-gram G, and lattice weight sweeps (acoustic scale,
LM scale, word insertion penalty) against references, all on stored lattices.

Lattices here come from :func:`~k2dec.lattice.search.get_lattice` with a word-output graph
(HLG): ``labels`` are token ids, ``aux_labels`` word ids (an int32 tensor, or ragged
``[arc][word]`` as after ``k2.remove_epsilon``), and the arc
attribute ``lm_scores`` holds the graph's LM part of ``scores`` (set ``HLG.lm_scores =
HLG.scores.clone()`` before decoding, as icefall does). The acoustic part of an arc is
``scores - lm_scores``. Nothing here modifies the caller's lattice or G.
"""

from __future__ import annotations

import enum
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass

import k2
import kaldialign
import torch

from k2dec.lattice.one_best import AuxLabels, Hypothesis, hypotheses_from_lattice
from k2dec.lattice.search import LatticeResult
from k2dec.utils import FRAME_ATTR

logger = logging.getLogger(__name__)

__all__ = [
    "RescoreConfig",
    "RescoreResult",
    "RescoreStatus",
    "ScaleResult",
    "SweepPoint",
    "SweepResult",
    "rescore_with_whole_lattice",
    "split_scores",
    "sweep_lattice_weights",
]


@dataclass(frozen=True)
class RescoreConfig:
    """Settings of :func:`rescore_with_whole_lattice`.

    Attributes:
      lm_scales: LM scales to produce results for (scores are ``am / lm_scale + lm``, icefall's
        convention); default 0.1, 0.2, ..., 2.0.
      prune_thresholds: arc-posterior thresholds for ``k2.prune_on_arc_post``, tried in rising
        order when the intersection runs out of memory (or the lattice exceeds
        ``max_lattice_arcs``).
      max_lattice_arcs: if set, a lattice with more arcs than this is pruned (at the thresholds
        above) before intersecting, as a memory budget. ``None``: only real memory errors
        trigger pruning.
    """

    lm_scales: tuple[float, ...] = tuple(round(0.1 * i, 1) for i in range(1, 21))
    prune_thresholds: tuple[float, ...] = (1e-10, 1e-9, 1e-8, 1e-7, 1e-6)
    max_lattice_arcs: int | None = None

    def __post_init__(self) -> None:
        if not self.lm_scales or any(not s > 0 for s in self.lm_scales):
            raise ValueError(f"lm_scales must be a non-empty tuple of values > 0, got "
                             f"{self.lm_scales}")
        if any(not 0 < t < 1 for t in self.prune_thresholds) or list(
            self.prune_thresholds
        ) != sorted(self.prune_thresholds):
            raise ValueError(
                f"prune_thresholds must be rising values in (0, 1), got {self.prune_thresholds}"
            )
        if self.max_lattice_arcs is not None and self.max_lattice_arcs < 1:
            raise ValueError(f"max_lattice_arcs must be >= 1 or None, got {self.max_lattice_arcs}")


class RescoreStatus(enum.Enum):
    """Outcome of :func:`rescore_with_whole_lattice`."""

    OK = "ok"
    """Rescored the full lattice."""
    PRUNED = "pruned"
    """Rescored after pruning the lattice with ``prune_on_arc_post`` (see ``prune_threshold``)."""
    FAILED = "failed"
    """Out of memory / over budget even at the highest threshold; no results."""


@dataclass(frozen=True)
class ScaleResult:
    """1best after rescoring at one LM scale.

    Attributes:
      lm_scale: the scale.
      hypotheses: one per utterance (caller's order); ``score`` is ``am / lm_scale + lm`` of the
        best path.
    """

    lm_scale: float
    hypotheses: tuple[Hypothesis, ...]


@dataclass(frozen=True)
class RescoreResult:
    """Result of :func:`rescore_with_whole_lattice`.

    Attributes:
      status: see :class:`RescoreStatus`.
      per_scale: one :class:`ScaleResult` per LM scale (empty when ``FAILED``).
      prune_threshold: the threshold the lattice was pruned at (``None`` if not pruned).
      reason: what happened when not ``OK``.
      lattice: the rescored lattice FsaVec ``[utt][state][arc]`` (labels tokens, aux_labels
        words one per arc, ``scores = am + lm``, ``lm_scores`` from G; arcs added to spell out
        ragged word labels have token label 0 and ``frame`` -1), or ``None`` when ``FAILED``.
    """

    status: RescoreStatus
    per_scale: tuple[ScaleResult, ...]
    prune_threshold: float | None = None
    reason: str = ""
    lattice: k2.Fsa | None = None


def _unpack(lattice: LatticeResult | k2.Fsa) -> k2.Fsa:
    if isinstance(lattice, LatticeResult):
        return lattice.lattice
    if isinstance(lattice, k2.Fsa):
        return lattice
    raise TypeError(f"lattice must be a LatticeResult or k2.Fsa, got {type(lattice).__name__}")


def _check_word_lattice(lattice: k2.Fsa) -> None:
    if lattice.arcs.num_axes() != 3:
        raise ValueError("lattice must be an FsaVec (3 axes [utt][state][arc])")
    if not hasattr(lattice, "lm_scores"):
        raise ValueError(
            "lattice has no lm_scores attribute; set graph.lm_scores = graph.scores.clone() on "
            "the HLG before decoding so the LM part of the scores can be removed"
        )
    if not hasattr(lattice, "aux_labels"):
        raise ValueError("lattice has no aux_labels (word ids); decode with a word-output graph")


def split_scores(lattice: LatticeResult | k2.Fsa) -> tuple[torch.Tensor, torch.Tensor]:
    """``(am_scores, lm_scores)`` per arc of a word lattice: float tensors ``(num_arcs,)``."""
    lat = _unpack(lattice)
    _check_word_lattice(lat)
    return lat.scores.detach() - lat.lm_scores, lat.lm_scores.detach().clone()


def _is_memory_error(e: BaseException) -> bool:
    if isinstance(e, MemoryError):
        return True
    msg = str(e).lower()
    return isinstance(e, RuntimeError) and (
        "out of memory" in msg or "can't allocate" in msg or "bad_alloc" in msg
    )


def _intersect_with_G(G: k2.Fsa, inv: k2.Fsa) -> k2.Fsa:
    b_to_a = torch.zeros(inv.shape[0], dtype=torch.int32, device=inv.device)
    out = k2.intersect_device(G, inv, b_to_a_map=b_to_a, sorted_match_a=True)
    out = k2.top_sort(k2.connect(out))
    return k2.invert(out)


def rescore_with_whole_lattice(
    lattice: LatticeResult | k2.Fsa,
    G: k2.Fsa,
    config: RescoreConfig = RescoreConfig(),  # noqa: B008 (frozen, immutable)
) -> RescoreResult:
    """Replace the LM scores of word lattices by those of a bigger G and take the 1best at each
    LM scale.

    Args:
      lattice: word lattices (see the module docstring), e.g. ``get_lattice(..., HLG)``.
      G: word acceptor (labels word ids, ``-1`` on final arcs) with epsilon self-loops
        (``k2.add_epsilon_self_loops``), arc-sorted, with attribute ``lm_scores`` (icefall's
        ``G_4_gram.pt`` prepared for rescoring), on the lattice's device. A single Fsa or an
        FsaVec of one.
      config: LM scales and the memory back-off.

    Returns:
      :class:`RescoreResult` with one :class:`ScaleResult` per LM scale.
    """
    lat = _unpack(lattice)
    _check_word_lattice(lat)
    if not isinstance(config, RescoreConfig):
        raise TypeError(f"config must be a RescoreConfig, got {type(config).__name__}")
    if not isinstance(G, k2.Fsa):
        raise TypeError(f"G must be a k2.Fsa, got {type(G).__name__}")
    if not hasattr(G, "lm_scores"):
        raise ValueError("G has no lm_scores attribute; set G.lm_scores = G.scores.clone()")
    if G.device != lat.device:
        raise ValueError(f"G is on {G.device} but the lattice is on {lat.device}")
    if G.arcs.num_axes() == 2:
        G = k2.create_fsa_vec([G])
    elif G.shape[0] != 1:
        raise ValueError(f"G must be one FSA, got an FsaVec of {G.shape[0]}")
    if G.properties & k2.fsa_properties.ARC_SORTED == 0:
        G = k2.arc_sort(G)

    # A clone with acoustic-only scores and no lm_scores, inverted so words are the labels.
    # Ragged word labels are expanded into chains of arcs; the added arcs consume no frame.
    inv = lat.clone()
    inv.scores = (lat.scores - lat.lm_scores).detach()
    del inv.lm_scores
    inv, arc_map = k2.invert(inv, ret_arc_map=True)
    if hasattr(inv, FRAME_ATTR):
        frames = getattr(inv, FRAME_ATTR)
        setattr(inv, FRAME_ATTR, torch.where(arc_map >= 0, frames, torch.full_like(frames, -1)))

    thresholds: list[float | None] = [None, *config.prune_thresholds]
    rescored = None
    used = None
    reasons = []
    for th in thresholds:
        candidate = inv if th is None else k2.prune_on_arc_post(inv, th, True)
        if config.max_lattice_arcs is not None and candidate.num_arcs > config.max_lattice_arcs:
            reasons.append(
                f"{candidate.num_arcs} arcs > max_lattice_arcs={config.max_lattice_arcs}"
                + ("" if th is None else f" after pruning at {th:g}")
            )
            continue
        try:
            rescored = _intersect_with_G(G, candidate)
        except (RuntimeError, MemoryError) as e:
            if not _is_memory_error(e):
                raise
            reasons.append(
                "out of memory" + ("" if th is None else f" after pruning at {th:g}")
            )
            logger.warning("whole-lattice rescoring: %s; pruning the lattice", reasons[-1])
            continue
        used = th
        break
    if rescored is None:
        reason = "; ".join(reasons)
        logger.warning("whole-lattice rescoring failed: %s", reason)
        return RescoreResult(status=RescoreStatus.FAILED, per_scale=(), reason=reason)

    am = rescored.scores - rescored.lm_scores
    scaled = rescored.clone()  # our own copy, re-scored for each scale
    per_scale = []
    for scale in config.lm_scales:
        scaled.scores = am / scale + rescored.lm_scores
        hyps = hypotheses_from_lattice(scaled, aux_labels=AuxLabels.WORDS)
        per_scale.append(ScaleResult(lm_scale=scale, hypotheses=tuple(hyps)))
    return RescoreResult(
        status=RescoreStatus.OK if used is None else RescoreStatus.PRUNED,
        per_scale=tuple(per_scale),
        prune_threshold=used,
        reason="; ".join(reasons),
        lattice=rescored,
    )


@dataclass(frozen=True)
class SweepPoint:
    """WER of the 1best at one setting of the lattice weights.

    The arc score used is ``acoustic_scale * am + lm_scale * lm - word_insertion_penalty * w``
    where ``w`` is the number of words on the arc.
    """

    acoustic_scale: float
    lm_scale: float
    word_insertion_penalty: float
    errors: int
    ref_words: int

    @property
    def wer(self) -> float:
        """Word error rate in percent."""
        return 100.0 * self.errors / max(self.ref_words, 1)


@dataclass(frozen=True)
class SweepResult:
    """All evaluated settings (grid order) and the best one (fewest errors; ties go to the
    first in grid order)."""

    points: tuple[SweepPoint, ...]
    best: SweepPoint


def _words_per_arc(lat: k2.Fsa) -> torch.Tensor:
    aux = lat.aux_labels
    if isinstance(aux, k2.RaggedTensor):
        counts = torch.zeros(lat.num_arcs, dtype=torch.float64, device=lat.device)
        row_ids = aux.shape.row_ids(1).to(torch.int64)
        counts.index_add_(0, row_ids, (aux.values > 0).to(torch.float64))
        return counts
    return (aux > 0).to(torch.float64)


def sweep_lattice_weights(
    lattice: LatticeResult | k2.Fsa,
    references: Sequence[Sequence[int]],
    acoustic_scales: Sequence[float] = (1.0,),
    lm_scales: Sequence[float] = (0.5, 0.7, 0.9, 1.0, 1.2, 1.5, 2.0),
    word_insertion_penalties: Sequence[float] = (0.0, 0.5, 1.0, 2.0),
) -> SweepResult:
    """Grid search of lattice weights on stored lattices (no re-decoding), scored by WER.

    Args:
      lattice: word lattices with ``lm_scores`` (see the module docstring); ``N`` utterances.
        Batches decoded separately can be joined with ``k2.cat``.
      references: ``N`` reference word-id sequences (same ids as the lattice's aux_labels).
      acoustic_scales, lm_scales, word_insertion_penalties: the grid (all combinations).

    Returns:
      :class:`SweepResult`; an utterance with an empty lattice counts as all deletions.
    """
    lat = _unpack(lattice)
    if lat.arcs.num_axes() != 3:
        raise ValueError("lattice must be an FsaVec (3 axes [utt][state][arc])")
    if not hasattr(lat, "lm_scores"):
        raise ValueError("lattice has no lm_scores attribute (see rescore module docstring)")
    if not hasattr(lat, "aux_labels"):
        raise ValueError("lattice has no aux_labels (word ids)")
    if len(references) != lat.shape[0]:
        raise ValueError(
            f"references has {len(references)} entries but the lattice has {lat.shape[0]} "
            "utterances"
        )
    for name, values in (
        ("acoustic_scales", acoustic_scales),
        ("lm_scales", lm_scales),
        ("word_insertion_penalties", word_insertion_penalties),
    ):
        if len(values) == 0 or any(not math.isfinite(v) for v in values):
            raise ValueError(f"{name} must be a non-empty sequence of finite values, got {values}")
    am = (lat.scores - lat.lm_scores).detach().double()
    lm = lat.lm_scores.detach().double()
    words = _words_per_arc(lat)
    ref_words = sum(len(r) for r in references)
    refs = [list(r) for r in references]
    points = []
    scaled = lat.clone()  # our own copy, re-scored for each grid point
    for a in acoustic_scales:
        for m in lm_scales:
            for p in word_insertion_penalties:
                scaled.scores = (a * am + m * lm - p * words).to(lat.scores.dtype)
                hyps = hypotheses_from_lattice(scaled, aux_labels=AuxLabels.WORDS)
                errors = 0
                for ref, h in zip(refs, hyps):
                    errors += kaldialign.edit_distance(ref, list(h.words))["total"]
                points.append(SweepPoint(float(a), float(m), float(p), int(errors), ref_words))
    best = min(points, key=lambda q: q.errors)
    return SweepResult(points=tuple(points), best=best)
