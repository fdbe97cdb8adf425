"""``get_lattice``: pruned intersection of a decoding graph with network outputs.

An utterance whose best path is pruned away (or which the graph cannot accept at all) comes back
from k2 as an empty FSA, or as the partial lattice of a search that died before the last frame
(arcs but no final arc, see :func:`has_final_arc`). ``get_lattice`` retries such utterances with
wider beams and reports, per utterance, whether that worked and why not, so no utterance vanishes
silently. With ``LatticeConfig.allow_partial`` (opt-in) an utterance whose search ends with no
final state active instead gets the lattice of its best partial path (what Kaldi's
FasterDecoder and flashlight return), searched again at the same beams: through k2's own
``allow_partial`` where the installed k2 has it (k2 >= 1.24), else through a copy of the graph
with an extra final arc from every state (:func:`partial_graph`).
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import inspect
import logging
import math
import warnings
from dataclasses import dataclass

import k2
import torch

from k2dec.lattice.dense import (
    PrunedFrames,
    check_vocab,
    dense_rows,
    original_frames,
    prune_frames,
    validate_log_probs,
)
from k2dec.primitives.best_paths import FRAME_ATTR
from k2dec.primitives.per_graph import PerGraph
from k2dec.primitives.ragged import ragged_from_row_ids
from k2dec.primitives.sizes import check_float_range, check_int_range

logger = logging.getLogger(__name__)

__all__ = [
    "LatticeConfig",
    "LatticeResult",
    "LatticeStatus",
    "PiecewiseLattices",
    "UtteranceReport",
    "arcs_per_fsa",
    "cpu_group_size",
    "get_lattice",
    "has_final_arc",
    "k2_has_allow_partial",
    "partial_graph",
    "prepare_graph",
    "search_lattices",
]


#: The widest beams and the most active states a lattice search may use (a retry's scaled
#: settings are clamped to them). Active states bound the search's memory; a beam only needs
#: to be finite (beyond ~50 it prunes nothing; exact searches in tests use 1e4).
_MAX_BEAM = 1e5
_MAX_ACTIVE_STATES = 1_000_000


@dataclass(frozen=True)
class LatticeConfig:
    """Pruning settings of ``k2.intersect_dense_pruned`` (icefall's defaults).

    Attributes:
      search_beam: decoding beam; larger is slower and more exact.
      output_beam: lattice beam relative to the best path (Kaldi's ``lattice-beam``).
      min_active_states: try to keep at least this many graph states active per frame (fewer
        than ``max_active_states``).
      max_active_states: try to keep at most this many graph states active per frame.
      retry_scales: when an utterance's lattice has no complete path (see
        :func:`has_final_arc`), decode it again with both beams and ``max_active_states``
        multiplied by each factor in turn (at most 1e5 and 1M), until it has one. ``()``
        disables retries (such utterances are still reported, as ``EMPTY``). Retries search
        the network outputs without the two approximations below.
      token_top_k: approximation, off by default: keep only the ``token_top_k`` best tokens
        of every frame (see :func:`~k2dec.lattice.dense.prune_frames`). Fewer states open
        through unlikely tokens, so the search is faster; paths through pruned tokens are
        lost.
      blank_skip_threshold: approximation, off by default: shrink every run of frames whose
        blank posterior exceeds this (in ``(0, 1]``) to its first frame before the search (see
        :func:`~k2dec.lattice.dense.prune_frames`). Lattice frames (``frame`` attribute) are
        mapped back to the original frames, so timestamps stay in the caller's frame rate;
        scores lack the dropped frames.
      blank_id: the blank token of the network outputs, for ``blank_skip_threshold``.
      allow_partial: off by default (icefall's name, as in its ``fast_beam_search``): an
        utterance whose search at these settings ends with no final state active gets the
        lattice of its best partial path instead of retries: every graph state active on the
        last frame is treated as final, with the score of its best leaving arc (k2's
        ``allow_partial`` semantics), and the arc into the final state carries label ``-1``
        and ``aux_labels`` ``-1``. Its status is ``PARTIAL``. Utterances that reach a final
        state get exactly the lattice they get without it; those whose search dies before
        the last frame (no state active there) are still retried (``retry_scales``).
      subsampling_factor: of the network outputs relative to the graph's frame rate (1: none;
        the methods' ``lattice.subsampling_factor``; formerly a top-level field of the CTC
        lattice method configs). :func:`get_lattice` uses it unless its own
        ``subsampling_factor`` argument is given (a disagreeing pair is refused).
    """

    search_beam: float = 20.0
    output_beam: float = 8.0
    min_active_states: int = 30
    max_active_states: int = 10000
    retry_scales: tuple[float, ...] = (2.0, 8.0)
    token_top_k: int | None = None
    blank_skip_threshold: float | None = None
    blank_id: int = 0
    subsampling_factor: int = 1
    allow_partial: bool = False

    def __post_init__(self) -> None:
        check_int_range(self, "subsampling_factor", 1, 16)
        check_float_range(self, "search_beam", 0.0, _MAX_BEAM)
        check_float_range(self, "output_beam", 0.0, _MAX_BEAM)
        check_int_range(self, "max_active_states", 1, _MAX_ACTIVE_STATES)
        # k2's search needs max_active_states > min_active_states (a fatal check in C++)
        check_int_range(self, "min_active_states", 0, self.max_active_states - 1)
        for s in self.retry_scales:
            if isinstance(s, bool) or not isinstance(s, int | float) or not 1 < s < math.inf:
                raise ValueError(f"LatticeConfig.retry_scales must all be finite numbers > 1, "
                                 f"got {self.retry_scales!r}")
        check_int_range(self, "token_top_k", 1, 100_000, optional=True)
        th = self.blank_skip_threshold
        if th is not None and not 0.0 < th <= 1.0:
            raise ValueError(f"blank_skip_threshold must be None or in (0, 1], got {th!r}")
        if isinstance(self.blank_id, bool) or not isinstance(self.blank_id, int) \
                or self.blank_id < 0:
            raise ValueError(f"blank_id must be an int >= 0, got {self.blank_id!r}")
        if not isinstance(self.allow_partial, bool):
            raise TypeError(f"LatticeConfig.allow_partial must be True or False, got "
                            f"{self.allow_partial!r}")

    @property
    def approximate(self) -> bool:
        """Whether the network outputs are pruned before the search (``token_top_k`` or
        ``blank_skip_threshold`` set)."""
        return self.token_top_k is not None or self.blank_skip_threshold is not None

    def scaled(self, factor: float) -> LatticeConfig:
        """A copy with beams and ``max_active_states`` multiplied by ``factor`` (at most 1e5 and
        1M, the ranges' ends), no retries and no approximations (the settings of a retry)."""
        return LatticeConfig(  # within the bounds of a config (memory: active states)
            search_beam=min(self.search_beam * factor, _MAX_BEAM),
            output_beam=min(self.output_beam * factor, _MAX_BEAM),
            min_active_states=self.min_active_states,
            max_active_states=min(int(self.max_active_states * factor), _MAX_ACTIVE_STATES),
            retry_scales=(),
            blank_id=self.blank_id,
            subsampling_factor=self.subsampling_factor,
        )


class LatticeStatus(enum.Enum):
    """What happened to one utterance in :func:`get_lattice`."""

    OK = "ok"
    """Non-empty lattice at the configured beams."""
    RETRIED = "retried"
    """No complete path at the configured beams, found after widening them."""
    PARTIAL = "partial"
    """No final state active at the end of the search (``LatticeConfig.allow_partial``): the
    lattice of the best partial path, which may lack the utterance's last words."""
    EMPTY = "empty"
    """No complete path even at the widest retry beams; the utterance has no hypothesis and an
    empty lattice."""


@dataclass(frozen=True)
class UtteranceReport:
    """Per-utterance outcome of :func:`get_lattice`.

    Attributes:
      status: see :class:`LatticeStatus`.
      num_frames: frames decoded (after subsampling/truncation).
      search_beam, output_beam, max_active_states: the settings of the last attempt.
      reason: human-readable explanation for ``RETRIED``/``PARTIAL``/``EMPTY``; ``""`` for
        ``OK``.
    """

    status: LatticeStatus
    num_frames: int
    search_beam: float
    output_beam: float
    max_active_states: int
    reason: str = ""


@dataclass(frozen=True)
class LatticeResult:
    """Lattices of a batch, in the caller's utterance order.

    Attributes:
      lattice: FsaVec with axes ``[utt][state][arc]`` and ``N`` FSAs, FSA ``i`` is utterance
        ``i`` (an empty FSA for ``EMPTY`` utterances). Arcs carry the graph's attributes
        (``aux_labels``, ``lm_scores``, ...) and the int32 attribute ``frame`` (the frame each
        arc consumes; ``num_frames`` on final arcs).
      reports: one :class:`UtteranceReport` per utterance.
    """

    lattice: k2.Fsa
    reports: tuple[UtteranceReport, ...]

    @property
    def empty_indices(self) -> list[int]:
        """Indexes of utterances with no lattice."""
        return [i for i, r in enumerate(self.reports) if r.status is LatticeStatus.EMPTY]


def lattice_fsa_vec(lattice: LatticeResult | k2.Fsa) -> k2.Fsa:
    """The lattices of ``lattice`` (a :class:`LatticeResult` or an FsaVec) as an FsaVec.

    Raises:
      TypeError: neither a :class:`LatticeResult` nor a ``k2.Fsa``.
      ValueError: a single FSA (2 axes) instead of an FsaVec.
    """
    if isinstance(lattice, LatticeResult):
        lattice = lattice.lattice
    if not isinstance(lattice, k2.Fsa):
        raise TypeError(f"lattice must be a LatticeResult or k2.Fsa, got "
                        f"{type(lattice).__name__}")
    if lattice.arcs.num_axes() != 3:
        raise ValueError("lattice must be an FsaVec (3 axes [utt][state][arc]); use "
                         "k2.create_fsa_vec([fsa]) for a single lattice")
    return lattice


def arcs_per_fsa(fsas: k2.Fsa) -> torch.Tensor:
    """int64 CPU tensor ``(num_fsas,)``: number of arcs of each FSA of an FsaVec."""
    splits = fsas.arcs.shape().remove_axis(1).row_splits(1).to("cpu", torch.int64)
    return splits[1:] - splits[:-1]


def prepare_graph(graph: k2.Fsa, num_utts: int, device: torch.device) -> k2.Fsa:
    """Validate a decoding graph for a batch of ``num_utts`` and return an arc-sorted version.

    Never modifies ``graph``: when it is not arc-sorted a sorted copy is returned.

    Args:
      graph: a single Fsa (2 axes) shared by all utterances, or an FsaVec with 1 or
        ``num_utts`` FSAs (one graph per utterance).
    """
    if not isinstance(graph, k2.Fsa):
        raise TypeError(f"graph must be a k2.Fsa, got {type(graph).__name__}")
    if graph.device != device:
        raise ValueError(
            f"graph is on {graph.device} but log_probs is on {device}; move one of them"
        )
    if graph.arcs.num_axes() == 3 and graph.shape[0] not in (1, num_utts):
        raise ValueError(
            f"graph is an FsaVec of {graph.shape[0]} FSAs; need 1 or N={num_utts}"
        )
    if graph.num_arcs == 0:
        raise ValueError("graph has no arcs")
    if graph.properties & k2.fsa_properties.ARC_SORTED == 0:
        graph = k2.arc_sort(graph)
    return graph


def _graph_subset(graph: k2.Fsa, indexes: torch.Tensor) -> k2.Fsa:
    """The graphs for the given utterances (the shared graph when there is only one)."""
    if graph.arcs.num_axes() == 2 or graph.shape[0] == 1:
        return graph
    return k2.index_fsa(graph, indexes.to(device=graph.device, dtype=torch.int32))


def has_final_arc(fsas: k2.Fsa) -> torch.Tensor:
    """bool CPU tensor ``(num_fsas,)``: whether each FSA of an FsaVec has an arc entering its final
    state (label ``-1``).

    A lattice from ``k2.intersect_dense_pruned`` has a complete path exactly when it has such an
    arc. When the search dies before the last frame, k2 returns the partial lattice (non-empty,
    no final arc, total score ``-inf``), so counting arcs is not enough to detect failures.
    """
    n = fsas.shape[0]
    if fsas.num_arcs == 0:
        return torch.zeros(n, dtype=torch.bool)
    row_ids = fsas.arcs.shape().remove_axis(1).row_ids(1)
    is_final = fsas.labels == -1
    counts = torch.zeros(n, dtype=torch.int64, device=row_ids.device)
    counts.index_add_(0, row_ids[is_final].to(torch.int64),
                      torch.ones(int(is_final.sum()), dtype=torch.int64, device=row_ids.device))
    return counts.to("cpu") > 0


@functools.cache
def k2_has_allow_partial() -> bool:
    """Whether the installed k2's ``intersect_dense_pruned`` takes ``allow_partial`` (k2 >=
    1.24; 1.23.4 does not), read from its signature."""
    return "allow_partial" in inspect.signature(k2.intersect_dense_pruned).parameters


def _intersect(
    graph: k2.Fsa, dense: k2.DenseFsaVec, config: LatticeConfig, output_beam_cap: float | None,
    allow_partial: bool = False,
) -> k2.Fsa:
    output_beam = config.output_beam
    if output_beam_cap is not None:
        output_beam = min(output_beam, output_beam_cap)
    extra = {"allow_partial": True} if allow_partial else {}
    return k2.intersect_dense_pruned(
        graph,
        dense,
        search_beam=config.search_beam,
        output_beam=output_beam,
        min_active_states=config.min_active_states,
        max_active_states=config.max_active_states,
        frame_idx_name=FRAME_ATTR,
        **extra,
    )


def partial_graph(graph: k2.Fsa) -> k2.Fsa:
    """The graph of a best-partial-path search on a k2 without ``allow_partial``: a copy of
    ``graph`` (one FSA, or an FsaVec) with an extra arc into the final state (label ``-1``,
    ``aux_labels`` ``-1`` / ``[-1]`` on every final arc, other attributes 0) from every state that
    has leaving arcs but no final arc, scored with its best leaving arc's score (what k2's
    ``allow_partial`` gives a state active on the last frame), arc-sorted. A search through it
    that reaches no real final arc ends on the best active state. Kept per graph object while
    its arcs and scores are unchanged; ``graph`` is not modified."""
    return _PARTIAL_GRAPHS(graph)


def _build_partial_graph(graph: k2.Fsa) -> k2.Fsa:
    if graph.arcs.num_axes() == 2:
        return _with_partial_final_arcs(graph)
    return k2.create_fsa_vec([_with_partial_final_arcs(graph[i])
                              for i in range(graph.shape[0])])


_PARTIAL_GRAPHS: PerGraph[k2.Fsa] = PerGraph(_build_partial_graph)


def _with_partial_final_arcs(graph: k2.Fsa) -> k2.Fsa:
    """:func:`partial_graph` of a single FSA (2 axes)."""
    arcs = graph.arcs.values()
    device = arcs.device
    num_states = graph.shape[0]
    if num_states == 0:
        return graph.clone()
    src = arcs[:, 0].to(torch.int64)
    is_final = arcs[:, 2] == -1
    best = torch.full((num_states,), -math.inf, dtype=torch.float32, device=device)
    with warnings.catch_warnings():  # torch 1.13: "scatter_reduce() is in beta"
        warnings.simplefilter("ignore", UserWarning)
        best = best.scatter_reduce(0, src, graph.scores.detach().to(torch.float32), "amax")
    has_final = torch.zeros(num_states, dtype=torch.bool, device=device)
    has_final[src[is_final]] = True
    new_src = torch.nonzero(~has_final & (best > -math.inf)).flatten()
    new_arcs = torch.stack([
        new_src.to(torch.int32),
        torch.full_like(new_src, num_states - 1, dtype=torch.int32),
        torch.full_like(new_src, -1, dtype=torch.int32),
        best[new_src].view(torch.int32),
    ], dim=1)
    order = torch.sort(torch.cat([src, new_src]), stable=True).indices
    arc_map = torch.cat([torch.arange(arcs.shape[0], device=device),
                         torch.full_like(new_src, -1)])[order].to(torch.int32)
    out = k2.utils.fsa_from_unary_function_tensor(
        graph, k2.Fsa(torch.cat([arcs, new_arcs])[order]).arcs, arc_map)
    return k2.arc_sort(_mark_final_aux(out))


def _mark_final_aux(fsa: k2.Fsa) -> k2.Fsa:
    """``fsa`` (changed in place) with ``aux_labels`` ``-1`` on every arc into a final state:
    where they are a tensor, ``-1``; where they are ragged, ``[-1]`` on such an arc that has
    none (k2's ``allow_partial`` and :func:`partial_graph` give the arcs they add fillers:
    ``0`` / ``[]``)."""
    aux = getattr(fsa, "aux_labels", None)
    if aux is None or fsa.num_arcs == 0:
        return fsa
    final = fsa.labels == -1
    if isinstance(aux, torch.Tensor):
        fsa.aux_labels = torch.where(final, torch.full_like(aux, -1), aux)
        return fsa
    splits = aux.shape.row_splits(1)
    missing = torch.nonzero(final & (splits[1:] == splits[:-1])).flatten()
    if missing.numel() > 0:
        extra = ragged_from_row_ids(missing.to(torch.int32),
                                    torch.full_like(missing, -1, dtype=torch.int32),
                                    fsa.num_arcs)
        fsa.aux_labels = k2.ragged.cat([aux, extra], axis=1)
    return fsa


@dataclass(frozen=True)
class PiecewiseLattices:
    """Lattices of a batch as k2 produced them, in pieces, before restoring the caller's order
    (the result of :func:`search_lattices`).

    The first pieces hold the utterances sorted by decreasing length, in groups of
    :func:`cpu_group_size` on CPU (one piece on GPU); each later piece holds utterances of the
    best-partial-path search (``allow_partial``) or of one retry, grouped the same way (and
    finally the empty lattices of ``EMPTY`` utterances).

    Attributes:
      pieces: FsaVecs ``[utt][state][arc]``.
      index: int64 CPU ``(N,)``: caller utterance ``u`` is FSA ``index[u]`` of
        ``k2.cat(pieces)``.
      reports: one :class:`UtteranceReport` per caller utterance.
    """

    pieces: tuple[k2.Fsa, ...]
    index: torch.Tensor
    reports: tuple[UtteranceReport, ...]

    def gather(self, per_piece: list[k2.Fsa]) -> k2.Fsa:
        """``per_piece[k]`` (an FsaVec with as many FSAs as ``pieces[k]``, e.g. its best paths)
        joined and put in the caller's order."""
        joined = per_piece[0] if len(per_piece) == 1 else k2.cat(per_piece)
        return k2.index_fsa(joined, self.index.to(device=joined.device, dtype=torch.int32))


def config_subsampling(config: LatticeConfig, subsampling_factor: int | None) -> int:
    """The subsampling factor a lattice search uses: ``subsampling_factor`` when given, else
    ``config.subsampling_factor``; a given one that disagrees with a non-default
    ``config.subsampling_factor`` is refused (``ValueError``), so neither is silently ignored."""
    if subsampling_factor is None:
        return config.subsampling_factor
    if config.subsampling_factor not in (1, subsampling_factor):
        raise ValueError(f"subsampling_factor={subsampling_factor} disagrees with "
                         f"LatticeConfig.subsampling_factor={config.subsampling_factor}: "
                         f"give one of them")
    return subsampling_factor


def get_lattice(
    log_probs: torch.Tensor,
    log_probs_lens: torch.Tensor,
    graph: k2.Fsa,
    config: LatticeConfig = LatticeConfig(),  # noqa: B008 (frozen, immutable)
    subsampling_factor: int | None = None,
    allow_truncate: int = 0,
) -> LatticeResult:
    """Decode a batch into lattices with ``k2.intersect_dense_pruned``.

    Args:
      log_probs: float32 ``(N, T, V)`` network outputs (log-softmax or log-likelihoods).
      log_probs_lens: integer ``(N,)`` valid frames of ``log_probs`` per utterance: network
        output frames, after subsampling (with ``subsampling_factor > 1``, see
        :func:`~k2dec.lattice.dense.validate_log_probs`).
      graph: decoding graph (H, HL, HLG, HCLG with pdf/token-id labels): a single Fsa or an
        FsaVec of 1 or N graphs, on ``log_probs.device``; labels must be in ``[-1, V)``.
        Not modified (an arc-sorted copy is made when needed).
      config: pruning settings.
      subsampling_factor, allow_truncate: see :func:`~k2dec.lattice.dense.make_dense_fsa_vec`;
        ``subsampling_factor`` ``None`` (the default) takes ``config.subsampling_factor``
        (a value that disagrees with a non-default one there is refused).

    On CPU the batch is searched in groups of at most :data:`CPU_GROUP_SIZE` utterances of
    similar length (faster, same result), fewer for a wide search (:data:`CPU_STATES_PER_CALL`:
    the memory of one call is bounded).

    Returns:
      :class:`LatticeResult` with the lattice FsaVec in the caller's order and one report per
      utterance.
    """
    search = search_lattices(log_probs, log_probs_lens, graph, config, subsampling_factor,
                             allow_truncate)
    return LatticeResult(lattice=search.gather(list(search.pieces)), reports=search.reports)


CPU_GROUP_SIZE = 4
"""At most this many utterances per ``k2.intersect_dense_pruned`` call on CPU (:func:`get_lattice`
splits a batch, sorted by length, into groups; :func:`cpu_group_size` makes them smaller for
searches with many active states). k2's frame-synchronous search keeps the states and arcs of
every utterance of a call; small groups keep that working set in cache, which made the shipped
HLG search faster than one call for a whole batch. Every utterance is searched independently, so
the result does not depend on the grouping. GPUs get the whole batch at once."""

CPU_STATES_PER_CALL = 10_000
"""The memory bound of one ``k2.intersect_dense_pruned`` call on CPU, in active states: a call
searches at most ``CPU_STATES_PER_CALL // max_active_states`` utterances (one at least, at most
:data:`CPU_GROUP_SIZE`; retries, with their scaled ``max_active_states``, too). k2 holds every
active state of each utterance of a call and the arcs leaving them for the frames its
backward pruning has not yet reached (it prunes 30 frames at a time, in a thread of its own), so
a call's working memory grows with its utterances times their active states, whatever their
length: with the shipped HLG at icefall's ``max_active_states=10000``, 50 MB for one utterance,
150-240 MB for four. Searches at that default go one utterance per call (6% slower than four
in the lattice bench's sweep); narrower ones (``max_active_states <= 2500``) still go four at a
time."""


def cpu_group_size(max_active_states: int) -> int:
    """Utterances per CPU ``k2.intersect_dense_pruned`` call for a search with
    ``max_active_states``: ``CPU_STATES_PER_CALL // max_active_states``, within
    ``[1, CPU_GROUP_SIZE]``."""
    return max(1, min(CPU_GROUP_SIZE, CPU_STATES_PER_CALL // max_active_states))


def search_lattices(
    log_probs: torch.Tensor,
    log_probs_lens: torch.Tensor,
    graph: k2.Fsa,
    config: LatticeConfig,
    subsampling_factor: int | None = None,
    allow_truncate: int = 0,
    output_beam_cap: float | None = None,
) -> PiecewiseLattices:
    """What :func:`get_lattice` does, with the lattices left in k2's pieces (so a caller that
    only needs e.g. best paths computes them piece by piece before joining).

    Args: as :func:`get_lattice`, plus ``output_beam_cap``: if set, the output beam of every
      attempt is at most this (the 1best fast path needs no wide lattice).
    """
    if not isinstance(config, LatticeConfig):
        raise TypeError(f"config must be a LatticeConfig, got {type(config).__name__}")
    subsampling_factor = config_subsampling(config, subsampling_factor)
    num_frames = validate_log_probs(log_probs, log_probs_lens, subsampling_factor, allow_truncate)
    check_vocab(graph, log_probs.shape[2])
    graph = prepare_graph(graph, log_probs.shape[0], log_probs.device)
    bias = dict(graph.named_non_tensor_attr()).get("hotword_lattice_bias")
    if bias is not None:  # the bonus may pick a path off the 1best fast path's narrow lattice
        output_beam_cap = None
    search = _GroupedSearch(log_probs, num_frames, graph, config, output_beam_cap)
    order = torch.sort(num_frames, descending=True, stable=True).indices
    pending = search.first_pass(order)
    search.retry(search.partial(pending))
    result = search.result()
    if bias is None:  # a graph too large to bias carries its hotword bonus for the lattices
        return result
    return dataclasses.replace(result, pieces=tuple(bias(p) for p in result.pieces))


class _GroupedSearch:
    """The attempts of one :func:`search_lattices` call and where each utterance's lattice is:
    utterance ``u`` is FSA ``where_index[u]`` of ``pieces[where_piece[u]]``."""

    def __init__(self, log_probs: torch.Tensor, num_frames: torch.Tensor, graph: k2.Fsa,
                 config: LatticeConfig, output_beam_cap: float | None) -> None:
        self.log_probs, self.num_frames, self.graph = log_probs, num_frames, graph
        self.config, self.output_beam_cap = config, output_beam_cap
        self.pruned: PrunedFrames | None = None
        if config.approximate:
            self.pruned = prune_frames(log_probs, num_frames, config.token_top_k,
                                       config.blank_skip_threshold, config.blank_id)
        n = num_frames.numel()
        self.pieces: list[k2.Fsa] = []
        self.where_piece = torch.zeros(n, dtype=torch.int64)
        self.where_index = torch.zeros(n, dtype=torch.int64)
        self.settings = [config] * n  # the settings of each utterance's last attempt
        self.status = [LatticeStatus.OK] * n

    def _decode(self, utts: torch.Tensor, config: LatticeConfig, partial: bool = False
                ) -> k2.Fsa:
        """Lattices of the caller's utterances ``utts`` (int64 CPU), in that order; on the
        pruned outputs when ``config`` asks for approximations (frames mapped back); with
        ``partial`` the best partial path's lattice where no final state is active at the
        end (k2's ``allow_partial``, else :func:`partial_graph`)."""
        pruned = self.pruned if config.approximate else None
        log_probs, num_frames = ((pruned.log_probs, pruned.num_frames) if pruned is not None
                                 else (self.log_probs, self.num_frames))
        dense = dense_rows(log_probs, utts, num_frames)
        graph = _graph_subset(self.graph, utts)
        native = partial and k2_has_allow_partial()
        if partial and not native:
            graph = partial_graph(graph)
        lattice = _intersect(graph, dense, config, self.output_beam_cap, allow_partial=native)
        if partial:
            lattice = _mark_final_aux(lattice)
        if pruned is not None and pruned.kept is not None and lattice.num_arcs > 0:
            shape = lattice.arcs.shape()
            fsa_of_arc = shape.row_ids(1)[shape.row_ids(2).to(torch.int64)]
            frames = getattr(lattice, FRAME_ATTR)
            utt_of_arc = utts.to(frames.device)[fsa_of_arc.to(torch.int64)]
            setattr(lattice, FRAME_ATTR,
                    original_frames(frames, utt_of_arc, pruned, self.num_frames))
        return lattice

    def _place(self, lattice: k2.Fsa, utts: torch.Tensor) -> None:
        """Record that ``utts`` (int64 CPU) are the FSAs of the new piece ``lattice``."""
        self.where_piece[utts] = len(self.pieces)
        self.where_index[utts] = torch.arange(utts.numel())
        self.pieces.append(lattice)

    def first_pass(self, order: torch.Tensor) -> torch.Tensor:
        """Search the utterances in ``order`` (caller indexes sorted by decreasing number of
        frames) in groups (:meth:`_groups`); return those without a complete path (int64 CPU,
        in the same order)."""
        failed = []
        for utts in self._groups(order, self.config):
            lattice = self._decode(utts, self.config)
            self._place(lattice, utts)
            failed.append(utts[~has_final_arc(lattice)])
        return torch.cat(failed)

    def _groups(self, utts: torch.Tensor, config: LatticeConfig) -> list[torch.Tensor]:
        """``utts`` (int64 CPU) in the groups that are searched in one k2 call each with
        ``config``: :func:`cpu_group_size` on CPU, all at once on GPU."""
        n = utts.numel()
        if self.log_probs.device.type == "cpu":
            size = cpu_group_size(config.max_active_states)
        else:
            size = max(n, 1)
        return [utts[start : start + size] for start in range(0, n, size)]

    def partial(self, pending: torch.Tensor) -> torch.Tensor:
        """With ``config.allow_partial``: search ``pending`` (int64 CPU, no complete path)
        again at the same settings for their best partial paths; those that get one are
        ``PARTIAL``. Returns the rest (their search died before the last frame), which the
        retries take; without ``allow_partial`` returns ``pending``."""
        if not self.config.allow_partial or pending.numel() == 0:
            return pending
        return self._search_again(pending, self.config, LatticeStatus.PARTIAL, partial=True)

    def _search_again(self, pending: torch.Tensor, config: LatticeConfig,
                      status: LatticeStatus, partial: bool = False) -> torch.Tensor:
        """Search ``pending`` (int64 CPU) again with ``config`` in groups (:meth:`_groups`);
        those whose new lattice has a final arc take it, with ``status``. Returns the rest."""
        left = []
        for utts in self._groups(pending, config):
            lattice = self._decode(utts, config, partial=partial)
            found = has_final_arc(lattice)
            self.pieces.append(lattice)
            piece = len(self.pieces) - 1
            for j in found.nonzero().squeeze(1).tolist():
                u = int(utts[j])
                self.where_piece[u], self.where_index[u] = piece, j
                self.status[u] = status
            left.append(utts[~found])
        return torch.cat(left)

    def retry(self, pending: torch.Tensor) -> None:
        """Decode ``pending`` again at each of ``config.retry_scales`` (in groups for the
        retry's ``max_active_states``, :meth:`_groups`) until they have a complete path; those
        that never get one are ``EMPTY`` (an empty FSA each)."""
        first_piece, first_index = self.where_piece.clone(), self.where_index.clone()
        for factor in self.config.retry_scales:
            if pending.numel() == 0:
                break
            wider = self.config.scaled(factor)
            logger.info(
                "%d utterance(s) gave no complete path; retrying with search_beam=%g, "
                "output_beam=%g, max_active_states=%d",
                pending.numel(), wider.search_beam, wider.output_beam, wider.max_active_states,
            )
            for u in pending.tolist():
                self.settings[u] = wider
            pending = self._search_again(pending, wider, LatticeStatus.RETRIED)
        if pending.numel() > 0:
            # k2 returns the partial lattice of a search that died before the end: keep the
            # documented contract (an empty FSA) by removing every arc not on a complete path
            device = self.log_probs.device
            partial = [
                k2.index_fsa(self.pieces[int(first_piece[u])],
                             first_index[u : u + 1].to(device=device, dtype=torch.int32))
                for u in pending.tolist()
            ]
            self._place(k2.connect(k2.cat(partial)), pending)
            for u in pending.tolist():
                self.status[u] = LatticeStatus.EMPTY

    def result(self) -> PiecewiseLattices:
        if len(self.pieces) > 1:
            offsets = torch.tensor([0] + [p.shape[0] for p in self.pieces[:-1]]).cumsum(0)
            index = offsets[self.where_piece] + self.where_index
        else:
            index = self.where_index
        reports = tuple(self._report(u) for u in range(self.num_frames.numel()))
        return PiecewiseLattices(pieces=tuple(self.pieces), index=index, reports=reports)

    def _report(self, u: int) -> UtteranceReport:
        report = utterance_report(self.config, self.settings[u], self.status[u],
                                  int(self.num_frames[u]))
        if report.status is LatticeStatus.EMPTY:
            logger.warning("utterance %d: %s", u, report.reason)
        return report


def utterance_report(config: LatticeConfig, last: LatticeConfig, status: LatticeStatus,
                     num_frames: int) -> UtteranceReport:
    """The report of an utterance searched with ``config`` whose last attempt used ``last``
    (a retry's settings, or ``config``), with the reason for ``RETRIED`` / ``PARTIAL`` /
    ``EMPTY``."""
    if status is LatticeStatus.OK:
        reason = ""
    elif status is LatticeStatus.RETRIED:
        reason = (
            f"empty lattice at search_beam={config.search_beam:g}, "
            f"output_beam={config.output_beam:g}, "
            f"max_active_states={config.max_active_states}; "
            f"found at search_beam={last.search_beam:g}"
        )
    elif status is LatticeStatus.PARTIAL:
        reason = (
            f"no final state active after {num_frames} frames at "
            f"search_beam={config.search_beam:g}, max_active_states={config.max_active_states}; "
            "best partial path (allow_partial), which may lack the last words"
        )
    else:
        reason = (
            f"no path survived {num_frames} frames even at search_beam={last.search_beam:g}, "
            f"output_beam={last.output_beam:g}, max_active_states={last.max_active_states}: "
            "the graph may accept no token sequence of this length, or every accepted "
            "sequence is far below the best partial path"
        )
    return UtteranceReport(
        status=status,
        num_frames=num_frames,
        search_beam=last.search_beam,
        output_beam=last.output_beam,
        max_active_states=last.max_active_states,
        reason=reason,
    )
