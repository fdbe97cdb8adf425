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
from dataclasses import dataclass, replace

import k2
import kaldialign
import torch

from k2dec.lattice.groups import MAX_GROUP_ARCS, MAX_GROUP_ARCS_LIMIT, lattice_groups
from k2dec.lattice.one_best import AuxLabels, Hypothesis, hypotheses_from_lattice
from k2dec.lattice.prune import PruneReport, prune_lattice
from k2dec.lattice.search import (
    LatticeConfig,
    LatticeResult,
    LatticeStatus,
    UtteranceReport,
    arcs_per_fsa,
    lattice_fsa_vec,
)
from k2dec.primitives.best_paths import FRAME_ATTR
from k2dec.primitives.sizes import check_int_range

logger = logging.getLogger(__name__)

__all__ = [
    "RescoreConfig",
    "RescoreResult",
    "RescoreStatus",
    "ScaleResult",
    "UtteranceRescore",
    "SweepPoint",
    "SweepResult",
    "rescore_with_whole_lattice",
    "search_and_rescore_whole_lattices",
    "split_scores",
    "sweep_lattice_weights",
]


@dataclass(frozen=True)
class RescoreConfig:
    """Settings of :func:`rescore_with_whole_lattice`, including its memory bounds.

    Composing a lattice with a 4-gram G multiplies its size by the number of distinct word
    histories reaching each state, which grows very fast with the lattice's density (the
    shipped model, 30 s of audio: 10k, 25k, 50k lattice arcs became 0.18M, 2.0M and 32M
    composed arcs; the last needed 4 GB). So each utterance's lattice is pruned BEFORE
    composing (:func:`~k2dec.lattice.prune_lattice`: the narrowest output beam that keeps
    ``first_arcs`` arcs, then doubling), composed, and its composed size measured; the lattice
    grows while the composition predicted for the next doubling (this size times the growth
    of the last doubling) stays within ``max_rescored_arcs``, and never beyond
    ``max_input_arcs``. The pruning is reported per utterance. Memory is bounded by about
    ``max_rescored_arcs`` times 150 bytes per composition call (an utterance or a group of
    them within that budget), time by about twice the last composition. A batch's lattices
    are rescored in groups of at most ``max_group_arcs`` lattice arcs, so the copies the
    rescoring makes of its input (acoustic scores, inversion, connection) are bounded too,
    whatever the size of the batch's densest lattices
    (:func:`search_and_rescore_whole_lattices` also searches in such groups).

    Attributes:
      lm_scales: LM scales to produce results for (scores are ``am / lm_scale + lm``, icefall's
        convention); default 0.1, 0.2, ..., 2.0.
      max_input_arcs: the most lattice arcs of an utterance composed with G.
      max_rescored_arcs: the most arcs the composition of one utterance may produce (before
        removing dead ends).
      first_arcs: the lattice size of the first composition of an utterance.
      max_group_arcs: the most lattice arcs rescored together: consecutive utterances whose
        lattices hold at most this many arcs (one utterance at least, whatever its size).
        Every utterance is rescored on its own, so the results do not depend on it.
    """

    lm_scales: tuple[float, ...] = tuple(round(0.1 * i, 1) for i in range(1, 21))
    max_input_arcs: int = 100_000
    max_rescored_arcs: int = 2_000_000
    first_arcs: int = 2_000
    max_group_arcs: int = MAX_GROUP_ARCS

    def __post_init__(self) -> None:
        if not self.lm_scales or any(not s > 0 for s in self.lm_scales):
            raise ValueError(f"lm_scales must be a non-empty tuple of values > 0, got "
                             f"{self.lm_scales}")
        check_int_range(self, "max_input_arcs", 1, 10_000_000)
        check_int_range(self, "max_rescored_arcs", 1, 10_000_000)
        check_int_range(self, "first_arcs", 1, 10_000_000)
        check_int_range(self, "max_group_arcs", 1, MAX_GROUP_ARCS_LIMIT)


class RescoreStatus(enum.Enum):
    """Outcome of :func:`rescore_with_whole_lattice` for one utterance."""

    OK = "ok"
    """Rescored the whole (connected) lattice."""
    PRUNED = "pruned"
    """Rescored after pruning the lattice to fit the bounds (see the report's ``prune``)."""
    FAILED = "failed"
    """Even the smallest pruned lattice composed to more than ``max_rescored_arcs`` arcs, or
    the lattice is empty: no hypothesis."""


@dataclass(frozen=True)
class UtteranceRescore:
    """What :func:`rescore_with_whole_lattice` did to one utterance.

    Attributes:
      status: see :class:`RescoreStatus`.
      prune: the pruning of the lattice that was composed (arcs before and after, beam).
      rescored_arcs: arcs of its composition with G (before removing dead ends); 0 if failed.
      reason: why it failed or was pruned, for the utterance's report (``""`` if OK).
    """

    status: RescoreStatus
    prune: PruneReport
    rescored_arcs: int
    reason: str = ""


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
      status: ``FAILED`` when every utterance failed, ``PRUNED`` when some lattice was pruned,
        else ``OK`` (each utterance's own status is in ``utterances``).
      per_scale: one :class:`ScaleResult` per LM scale (a failed utterance has an empty
        hypothesis with status ``EMPTY`` and the reason).
      utterances: one :class:`UtteranceRescore` per utterance.
      reason: the failed utterances' reasons, joined (``""`` if none failed).
      lattice: the rescored lattice FsaVec ``[utt][state][arc]`` (labels tokens, aux_labels
        words one per arc, ``scores = am + lm``, ``lm_scores`` from G; arcs added to spell out
        ragged word labels have token label 0 and ``frame`` -1; an empty FSA for a failed
        utterance), or ``None`` when every utterance failed.
    """

    status: RescoreStatus
    per_scale: tuple[ScaleResult, ...]
    utterances: tuple[UtteranceRescore, ...] = ()
    reason: str = ""
    lattice: k2.Fsa | None = None

    def notes(self) -> list[str]:
        """Per utterance, what its report should say (pruning or failure; ``""`` if OK)."""
        return [u.reason for u in self.utterances]


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
    lat = lattice_fsa_vec(lattice)
    _check_word_lattice(lat)
    return lat.scores.detach() - lat.lm_scores, lat.lm_scores.detach().clone()


def _intersect_with_G(G: k2.Fsa, inv: k2.Fsa) -> tuple[k2.Fsa, torch.Tensor]:
    """The composition of each lattice of ``inv`` (words as labels) with G, connected and
    top-sorted, and int64 CPU ``[num_utts]``: the arcs each composition had before removing
    dead ends (what its memory and time were spent on)."""
    b_to_a = torch.zeros(inv.shape[0], dtype=torch.int32, device=inv.device)
    out = k2.intersect_device(G, inv, b_to_a_map=b_to_a, sorted_match_a=True)
    raw = arcs_per_fsa(out)
    return k2.top_sort(k2.connect(out)), raw


def rescore_with_whole_lattice(
    lattice: LatticeResult | k2.Fsa,
    G: k2.Fsa,
    config: RescoreConfig = RescoreConfig(),  # noqa: B008 (frozen, immutable)
) -> RescoreResult:
    """Replace the LM scores of word lattices by those of a bigger G and take the 1best at each
    LM scale, each lattice pruned beforehand to fit the bounds of ``config``.

    Args:
      lattice: word lattices (see the module docstring), e.g. ``get_lattice(..., HLG)``.
      G: word acceptor (labels word ids, ``-1`` on final arcs) with epsilon self-loops
        (``k2.add_epsilon_self_loops``), arc-sorted, with attribute ``lm_scores`` (icefall's
        ``G_4_gram.pt`` prepared for rescoring), on the lattice's device. A single Fsa or an
        FsaVec of one.
      config: LM scales and the memory bounds (see :class:`RescoreConfig`); the utterances
        are rescored in groups of at most ``config.max_group_arcs`` lattice arcs.

    Returns:
      :class:`RescoreResult` with one :class:`ScaleResult` per LM scale and a report per
      utterance.
    """
    lat = lattice_fsa_vec(lattice)
    _check_word_lattice(lat)
    _check_config(config)
    G = _rescoring_G(G, lat.device)
    parts = _rescore_in_groups(G, lat, config, keep_lattice=True)
    return _joined(parts, lat.shape[0], config, keep_lattice=True)


def search_and_rescore_whole_lattices(
    log_probs: torch.Tensor,
    log_probs_lens: torch.Tensor,
    graph: k2.Fsa,
    G: k2.Fsa,
    lattice_config: LatticeConfig = LatticeConfig(),  # noqa: B008 (frozen, immutable)
    config: RescoreConfig = RescoreConfig(),  # noqa: B008 (frozen, immutable)
    subsampling_factor: int | None = None,
) -> tuple[tuple[UtteranceReport, ...], RescoreResult]:
    """:func:`~k2dec.lattice.get_lattice` and :func:`rescore_with_whole_lattice`, without
    holding the lattices of the whole batch: the lattices of each group of
    :func:`~k2dec.lattice.groups.lattice_groups` (at most ``config.max_group_arcs`` arcs, or
    one search call's; the whole batch on GPU) are rescored and dropped before the next
    group is searched. Every utterance is searched and rescored on its own: the reports and
    hypotheses are those of the two calls.

    Args: as :func:`~k2dec.lattice.get_lattice` (``log_probs`` float32 ``(N, T, V)``,
      ``log_probs_lens`` integer ``(N,)``, ``graph`` a word-output HLG with ``lm_scores``, a
      single Fsa or an FsaVec of one or ``N``) and :func:`rescore_with_whole_lattice`.

    Returns:
      ``(reports, result)``: the search's :class:`~k2dec.lattice.search.UtteranceReport` per
      utterance and the :class:`RescoreResult` (its ``lattice`` is ``None``: the rescored
      lattices are not kept).
    """
    if not isinstance(lattice_config, LatticeConfig):
        raise TypeError(f"lattice_config must be a LatticeConfig, got "
                        f"{type(lattice_config).__name__}")
    _check_config(config)
    if isinstance(graph, k2.Fsa) and not hasattr(graph, "lm_scores"):
        raise ValueError("graph has no lm_scores attribute; set graph.lm_scores = "
                         "graph.scores.clone() so the LM part of the lattices' scores can be "
                         "removed")
    groups = lattice_groups(log_probs, log_probs_lens, graph, lattice_config,
                            subsampling_factor, config.max_group_arcs)
    G = _rescoring_G(G, log_probs.device)
    reports: list[UtteranceReport | None] = [None] * log_probs.shape[0]
    parts: list[tuple[list[int], _GroupRescore]] = []
    for utts, found in groups:
        _check_word_lattice(found.lattice)
        idx = utts.tolist()
        for u, r in zip(idx, found.reports):
            reports[u] = r
        parts += [([idx[j] for j in group], part)
                  for group, part in _rescore_in_groups(G, found.lattice, config, False)]
        del found  # not held while the next group is searched
    return tuple(reports), _joined(parts, len(reports), config, keep_lattice=False)


def _check_config(config: RescoreConfig) -> None:
    if not isinstance(config, RescoreConfig):
        raise TypeError(f"config must be a RescoreConfig, got {type(config).__name__}")


@dataclass(frozen=True)
class _GroupRescore:
    """The rescoring of one group of utterances: their reports, their hypotheses per LM scale
    (``None`` when every one failed) and their rescored lattices (``None`` when not kept or
    every one failed)."""

    utterances: tuple[UtteranceRescore, ...]
    hypotheses: tuple[tuple[Hypothesis, ...], ...] | None
    lattice: k2.Fsa | None


def _rescore_in_groups(G: k2.Fsa, lat: k2.Fsa, config: RescoreConfig, keep_lattice: bool
                       ) -> list[tuple[list[int], _GroupRescore]]:
    """Each group of consecutive utterances of ``lat`` holding at most
    ``config.max_group_arcs`` arcs (one utterance at least) rescored on its own, with its
    utterances' positions in ``lat``."""
    groups = _groups(arcs_per_fsa(lat).tolist(), config.max_group_arcs)
    if not groups:
        groups = [[]]
    out = []
    for group in groups:
        sub = lat if len(groups) == 1 else k2.index_fsa(
            lat, torch.tensor(group, dtype=torch.int32, device=lat.device))
        out.append((group, _rescore_group(G, sub, config, keep_lattice)))
        del sub
    return out


def _rescore_group(G: k2.Fsa, lat: k2.Fsa, config: RescoreConfig, keep_lattice: bool
                   ) -> _GroupRescore:
    """The rescoring of every utterance of ``lat`` (one k2 call per step for all of them)."""
    rescored, utts = _bounded_compose(G, _acoustic_word_lattice(lat), config)
    if all(u.status is RescoreStatus.FAILED for u in utts):
        return _GroupRescore(utts, None, None)
    am = rescored.scores - rescored.lm_scores
    scaled = rescored.clone()  # our own copy, re-scored for each scale
    per_scale = []
    for scale in config.lm_scales:
        scaled.scores = am / scale + rescored.lm_scores
        hyps = hypotheses_from_lattice(scaled, aux_labels=AuxLabels.WORDS)
        per_scale.append(tuple(
            h if u.status is not RescoreStatus.FAILED
            else replace(h, status=LatticeStatus.EMPTY, reason=u.reason)
            for h, u in zip(hyps, utts)))
    return _GroupRescore(utts, tuple(per_scale), rescored if keep_lattice else None)


def _failed_hypothesis(reason: str) -> Hypothesis:
    """The hypothesis of a failed utterance (as the best path of an empty lattice)."""
    return Hypothesis(tokens=(), token_frames=(), words=(), word_frames=(),
                      score=float("-inf"), status=LatticeStatus.EMPTY, reason=reason)


def _joined(parts: list[tuple[list[int], _GroupRescore]], n: int, config: RescoreConfig,
            keep_lattice: bool) -> RescoreResult:
    """The :class:`RescoreResult` of ``n`` utterances rescored in ``parts`` (each with the
    caller's indexes of its utterances; with ``keep_lattice`` consecutive, in order)."""
    utts: list[UtteranceRescore] = [None] * n  # type: ignore[list-item]
    for idx, part in parts:
        for j, u in enumerate(idx):
            utts[u] = part.utterances[j]
    reason = "; ".join(f"utterance {i}: {u.reason}" for i, u in enumerate(utts)
                       if u.status is RescoreStatus.FAILED)
    if reason:
        logger.warning("whole-lattice rescoring: %s", reason)
    if all(u.status is RescoreStatus.FAILED for u in utts):
        return RescoreResult(status=RescoreStatus.FAILED, per_scale=(), utterances=tuple(utts),
                             reason=reason)
    status = (RescoreStatus.PRUNED if any(u.status is RescoreStatus.PRUNED for u in utts)
              else RescoreStatus.OK)
    per_scale = []
    for k, scale in enumerate(config.lm_scales):
        hyps: list[Hypothesis] = [None] * n  # type: ignore[list-item]
        for idx, part in parts:
            for j, u in enumerate(idx):
                hyps[u] = (part.hypotheses[k][j] if part.hypotheses is not None
                           else _failed_hypothesis(part.utterances[j].reason))
        per_scale.append(ScaleResult(lm_scale=scale, hypotheses=tuple(hyps)))
    lattice = _joined_lattice([p for _, p in parts]) if keep_lattice else None
    return RescoreResult(status=status, per_scale=tuple(per_scale), utterances=tuple(utts),
                         reason=reason, lattice=lattice)


def _joined_lattice(parts: list[_GroupRescore]) -> k2.Fsa:
    """The rescored lattices of consecutive groups joined (empty FSAs for a group whose
    utterances all failed); at least one group has a lattice."""
    template = next(p.lattice for p in parts if p.lattice is not None)
    if len(parts) == 1:
        return template
    empty = _empty_like(template)
    zeros = torch.zeros(1, dtype=torch.int32, device=template.device)
    pieces = [p.lattice if p.lattice is not None
              else k2.index_fsa(empty, zeros.expand(len(p.utterances)).contiguous())
              for p in parts]
    return k2.cat(pieces)


def _rescoring_G(G: k2.Fsa, device: torch.device) -> k2.Fsa:
    """``G`` checked, as an arc-sorted FsaVec of one."""
    if not isinstance(G, k2.Fsa):
        raise TypeError(f"G must be a k2.Fsa, got {type(G).__name__}")
    if not hasattr(G, "lm_scores"):
        raise ValueError("G has no lm_scores attribute; set G.lm_scores = G.scores.clone()")
    if G.device != device:
        raise ValueError(f"G is on {G.device} but the lattice is on {device}")
    if G.arcs.num_axes() == 2:
        G = k2.create_fsa_vec([G])
    elif G.shape[0] != 1:
        raise ValueError(f"G must be one FSA, got an FsaVec of {G.shape[0]}")
    if G.properties & k2.fsa_properties.ARC_SORTED == 0:
        G = k2.arc_sort(G)
    return G


def _acoustic_word_lattice(lat: k2.Fsa) -> k2.Fsa:
    """A clone with acoustic-only scores and no lm_scores, inverted so words are the labels,
    and connected. Ragged word labels are expanded into chains of arcs; the added arcs consume
    no frame."""
    inv = lat.clone()
    inv.scores = (lat.scores - lat.lm_scores).detach()
    del inv.lm_scores
    inv, arc_map = k2.invert(inv, ret_arc_map=True)
    if hasattr(inv, FRAME_ATTR):
        frames = getattr(inv, FRAME_ATTR)
        setattr(inv, FRAME_ATTR, torch.where(arc_map >= 0, frames, torch.full_like(frames, -1)))
    inv, _ = prune_lattice(inv, connect=True)
    return inv


def _bounded_compose(G: k2.Fsa, inv: k2.Fsa, config: RescoreConfig
                     ) -> tuple[k2.Fsa, tuple[UtteranceRescore, ...]]:
    """Compose every utterance of ``inv`` (connected, words as labels) with G within the
    bounds of ``config`` (see :class:`RescoreConfig`): rounds over the utterances still
    growing, each round one composition call per group of utterances whose predicted sizes
    fit the budget. Returns the inverted compositions in utterance order (an empty FSA where
    an utterance failed) and the reports."""
    st = _ComposeState.start(arcs_per_fsa(inv).tolist(), config)
    budget = config.max_rescored_arcs
    rounds: list[k2.Fsa] = []
    active = [u for u in range(st.n) if st.total[u] > 0]
    while active:
        sub = k2.index_fsa(inv, torch.tensor(active, dtype=torch.int32, device=inv.device))
        pruned, rep = prune_lattice(sub, [st.cap[u] for u in active])
        outs, raw = [], []
        for group in _groups([st.predicted[u] for u in active], budget):
            part = k2.index_fsa(pruned, torch.tensor(group, dtype=torch.int32,
                                                     device=inv.device))
            out, r = _intersect_with_G(G, part)
            outs.append(out)
            raw += r.tolist()
        rounds.append(outs[0] if len(outs) == 1 else k2.cat(outs))
        active = st.next_round(active, len(rounds) - 1, rep, raw,
                               arcs_per_fsa(rounds[-1]).tolist(), budget)
    utts = tuple(st.report(u, config) for u in range(st.n))
    offsets = [0]
    for r in rounds:
        offsets.append(offsets[-1] + r.shape[0])
    pieces = rounds + [_empty_like(rounds[0] if rounds else inv)]
    everything = pieces[0] if len(pieces) == 1 else k2.cat(pieces)
    pick = [offsets[c[0]] + c[1] if c is not None else offsets[-1] for c in st.chosen]
    out = k2.index_fsa(everything, torch.tensor(pick, dtype=torch.int32, device=inv.device))
    return k2.invert(out), utts


@dataclass
class _ComposeState:
    """Per utterance of :func:`_bounded_compose`: its arcs, the cap on its pruned arcs and
    the cap's limit, the predicted composed size, the composed size at the last accepted cap
    (0: none yet), the ``(round, position)`` and prune report and composed size of the kept
    composition, and whether the last composition kept no path (G accepts none)."""

    total: list[int]
    limit: list[int]
    cap: list[int]
    predicted: list[int]
    last_raw: list[int]
    chosen: list[tuple[int, int] | None]
    reports: list[PruneReport | None]
    raws: list[int]
    dead: list[bool]

    @property
    def n(self) -> int:
        """The number of utterances."""
        return len(self.total)

    @classmethod
    def start(cls, total: list[int], config: RescoreConfig) -> _ComposeState:
        """Before the first round: caps at ``first_arcs`` within the bounds."""
        n = len(total)
        cap = [max(1, min(t, config.first_arcs, config.max_input_arcs)) for t in total]
        return cls(total=total, limit=[min(t, config.max_input_arcs) for t in total], cap=cap,
                   predicted=[c * _FIRST_GROWTH for c in cap], last_raw=[0] * n,
                   chosen=[None] * n, reports=[None] * n, raws=[0] * n, dead=[False] * n)

    def next_round(self, active: list[int], round_index: int, rep: list[PruneReport],
                   raw: list[int], alive: list[int], budget: int) -> list[int]:
        """Take a round's compositions (position j: utterance ``active[j]``, groups being
        consecutive); return the utterances to compose again with a new cap."""
        still = []
        for j, u in enumerate(active):
            if raw[j] > budget:
                if self.chosen[u] is None and self.cap[u] > 1:  # nothing fits: prune harder
                    self.cap[u] = max(1, self.cap[u] // 4)
                    self.predicted[u] = budget
                    still.append(u)
                    self.dead[u] = False
                continue  # else keep the previous composition
            if alive[j] > 0:  # G accepts some path of the pruned lattice
                self.chosen[u], self.reports[u], self.raws[u] = (round_index, j), rep[j], raw[j]
            elif self.chosen[u] is None:
                self.dead[u] = True
            if self.cap[u] >= self.limit[u]:
                continue
            growth = raw[j] / self.last_raw[u] if self.last_raw[u] else _FIRST_GROWTH
            nxt = min(2 * self.cap[u], self.limit[u])
            self.predicted[u] = int(raw[j] * max(growth, 1.0) * nxt / (2 * self.cap[u])) + 1
            if self.predicted[u] > budget:
                continue
            self.last_raw[u], self.cap[u] = raw[j], nxt
            still.append(u)
        return still

    def report(self, u: int, config: RescoreConfig) -> UtteranceRescore:
        """What happened to utterance ``u``, once no round is left."""
        budget, total, cap = config.max_rescored_arcs, self.total[u], self.cap[u]
        if self.chosen[u] is None:
            if total == 0:
                why = "empty lattice"
            elif self.dead[u]:
                why = (f"whole-lattice rescoring failed: G accepts no path of the lattice "
                       f"pruned to {cap} of {total} arcs (bounds max_input_arcs="
                       f"{config.max_input_arcs}, max_rescored_arcs={budget})")
            else:
                why = (f"whole-lattice rescoring failed: even pruned to {cap} of "
                       f"{total} arcs the lattice composed with G to more than "
                       f"max_rescored_arcs={budget} arcs")
            return UtteranceRescore(RescoreStatus.FAILED, PruneReport(total, 0), 0, why)
        rep = self.reports[u]
        why = "" if not rep.pruned else (
            f"{rep.describe()} before whole-lattice rescoring (composed: {self.raws[u]} arcs; "
            f"bounds max_input_arcs={config.max_input_arcs}, max_rescored_arcs={budget})")
        return UtteranceRescore(
            RescoreStatus.PRUNED if rep.pruned else RescoreStatus.OK, rep, self.raws[u], why)


#: expected growth of a lattice's size when composed with G (or when its pruned size
#: doubles) before an utterance's own growth has been measured
_FIRST_GROWTH = 20


def _groups(expected: list[int], budget: int) -> list[list[int]]:
    """Consecutive groups of positions whose ``expected`` sizes add up to at most
    ``budget`` (at least one position each)."""
    groups: list[list[int]] = []
    size = 0
    for i, e in enumerate(expected):
        if groups and size + e <= budget:
            groups[-1].append(i)
            size += e
        else:
            groups.append([i])
            size = e
    return groups


def _empty_like(fsas: k2.Fsa) -> k2.Fsa:
    """An FsaVec holding one empty FSA, with the attributes of ``fsas``."""
    import _k2

    device = fsas.device
    shape = k2.ragged.create_ragged_shape2(
        torch.zeros(2, dtype=torch.int32, device=device), None, 0).compose(
        k2.ragged.create_ragged_shape2(torch.zeros(1, dtype=torch.int32, device=device),
                                       None, 0))
    arcs = _k2.RaggedArc(shape, torch.zeros(0, 4, dtype=torch.int32, device=device))
    return k2.utils.fsa_from_unary_function_tensor(
        fsas, arcs, torch.zeros(0, dtype=torch.int32, device=device))


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
    lat = lattice_fsa_vec(lattice)
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
