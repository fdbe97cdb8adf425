"""``get_lattice``: pruned intersection of a decoding graph with network outputs.

k2 1.23.4 has no ``allow_partial``: an utterance whose best path is pruned away (or which the graph
cannot accept at all) comes back as an empty FSA. ``get_lattice`` retries such utterances with
wider beams and reports, per utterance, whether that worked and why not, so no utterance vanishes
silently.
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass

import k2
import torch

from k2dec.lattice.dense import DenseInput, check_vocab, make_dense_fsa_vec
from k2dec.utils import FRAME_ATTR

logger = logging.getLogger(__name__)

__all__ = [
    "LatticeConfig",
    "LatticeResult",
    "LatticeStatus",
    "UtteranceReport",
    "arcs_per_fsa",
    "get_lattice",
    "prepare_graph",
]


@dataclass(frozen=True)
class LatticeConfig:
    """Pruning settings of ``k2.intersect_dense_pruned`` (icefall's defaults).

    Attributes:
      search_beam: decoding beam; larger is slower and more exact.
      output_beam: lattice beam relative to the best path (Kaldi's ``lattice-beam``).
      min_active_states: try to keep at least this many graph states active per frame.
      max_active_states: try to keep at most this many graph states active per frame.
      retry_scales: when an utterance's lattice is empty, decode it again with both beams and
        ``max_active_states`` multiplied by each factor in turn, until it is non-empty.
        ``()`` disables retries (empty lattices are still reported).
    """

    search_beam: float = 20.0
    output_beam: float = 8.0
    min_active_states: int = 30
    max_active_states: int = 10000
    retry_scales: tuple[float, ...] = (2.0, 8.0)

    def __post_init__(self) -> None:
        if not self.search_beam > 0:
            raise ValueError(f"search_beam must be > 0, got {self.search_beam}")
        if not self.output_beam > 0:
            raise ValueError(f"output_beam must be > 0, got {self.output_beam}")
        if self.min_active_states < 0:
            raise ValueError(f"min_active_states must be >= 0, got {self.min_active_states}")
        if self.max_active_states < max(1, self.min_active_states):
            raise ValueError(
                f"max_active_states must be >= max(1, min_active_states="
                f"{self.min_active_states}), got {self.max_active_states}"
            )
        for s in self.retry_scales:
            if not s > 1:
                raise ValueError(f"retry_scales must all be > 1, got {self.retry_scales}")

    def scaled(self, factor: float) -> LatticeConfig:
        """A copy with beams and ``max_active_states`` multiplied by ``factor``."""
        return LatticeConfig(
            search_beam=self.search_beam * factor,
            output_beam=self.output_beam * factor,
            min_active_states=self.min_active_states,
            max_active_states=int(self.max_active_states * factor),
            retry_scales=(),
        )


class LatticeStatus(enum.Enum):
    """What happened to one utterance in :func:`get_lattice`."""

    OK = "ok"
    """Non-empty lattice at the configured beams."""
    RETRIED = "retried"
    """Empty at the configured beams, non-empty after widening them."""
    EMPTY = "empty"
    """Empty even at the widest retry beams; the utterance has no hypothesis."""


@dataclass(frozen=True)
class UtteranceReport:
    """Per-utterance outcome of :func:`get_lattice`.

    Attributes:
      status: see :class:`LatticeStatus`.
      num_frames: frames decoded (after subsampling/truncation).
      search_beam, output_beam, max_active_states: the settings of the last attempt.
      reason: human-readable explanation for ``RETRIED``/``EMPTY``; ``""`` for ``OK``.
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


def _intersect(graph: k2.Fsa, dense: k2.DenseFsaVec, config: LatticeConfig) -> k2.Fsa:
    return k2.intersect_dense_pruned(
        graph,
        dense,
        search_beam=config.search_beam,
        output_beam=config.output_beam,
        min_active_states=config.min_active_states,
        max_active_states=config.max_active_states,
        frame_idx_name=FRAME_ATTR,
    )


def get_lattice(
    log_probs: torch.Tensor,
    lengths: torch.Tensor,
    graph: k2.Fsa,
    config: LatticeConfig = LatticeConfig(),  # noqa: B008 (frozen, immutable)
    subsampling_factor: int = 1,
    allow_truncate: int = 0,
) -> LatticeResult:
    """Decode a batch into lattices with ``k2.intersect_dense_pruned``.

    Args:
      log_probs: float32 ``(N, T, V)`` network outputs (log-softmax or log-likelihoods).
      lengths: integer ``(N,)`` valid frames per utterance before subsampling.
      graph: decoding graph (H, HL, HLG, HCLG with pdf/token-id labels): a single Fsa or an
        FsaVec of 1 or N graphs, on ``log_probs.device``; labels must be in ``[-1, V)``.
        Not modified (an arc-sorted copy is made when needed).
      config: pruning settings.
      subsampling_factor, allow_truncate: see :func:`make_dense_fsa_vec`.

    Returns:
      :class:`LatticeResult` with the lattice FsaVec in the caller's order and one report per
      utterance.
    """
    if not isinstance(config, LatticeConfig):
        raise TypeError(f"config must be a LatticeConfig, got {type(config).__name__}")
    dense = make_dense_fsa_vec(log_probs, lengths, subsampling_factor, allow_truncate)
    check_vocab(graph, dense.vocab_size)
    graph = prepare_graph(graph, log_probs.shape[0], log_probs.device)
    return _decode_dense(log_probs, dense, graph, config)


def _decode_dense(
    log_probs: torch.Tensor, dense: DenseInput, graph: k2.Fsa, config: LatticeConfig
) -> LatticeResult:
    order = dense.order
    n = order.numel()
    lattice = _intersect(_graph_subset(graph, order), dense.dense_fsa_vec, config)
    num_frames = dense.num_frames

    # pieces[k] is an FsaVec; where[u] = (piece, index in piece) for caller utterance u
    pieces = [lattice]
    inv = dense.inverse_order
    where_piece = torch.zeros(n, dtype=torch.int64)
    where_index = inv.clone()
    settings = {u: config for u in range(n)}
    status = {u: LatticeStatus.OK for u in range(n)}

    empty_sorted = (arcs_per_fsa(lattice) == 0).nonzero().flatten()
    pending = order[empty_sorted]  # caller indexes, in decreasing number of frames
    for factor in config.retry_scales:
        if pending.numel() == 0:
            break
        wider = config.scaled(factor)
        logger.info(
            "%d utterance(s) gave empty lattices; retrying with search_beam=%g, output_beam=%g, "
            "max_active_states=%d",
            pending.numel(), wider.search_beam, wider.output_beam, wider.max_active_states,
        )
        segments = torch.stack(
            [pending, torch.zeros_like(pending), num_frames[pending]], dim=1
        ).to(torch.int32)
        retry = _intersect(
            _graph_subset(graph, pending), k2.DenseFsaVec(log_probs, segments), wider
        )
        found = arcs_per_fsa(retry) > 0
        pieces.append(retry)
        for j, u in enumerate(pending.tolist()):
            settings[u] = wider
            if bool(found[j]):
                where_piece[u] = len(pieces) - 1
                where_index[u] = j
                status[u] = LatticeStatus.RETRIED
        pending = pending[~found]
    for u in pending.tolist():
        status[u] = LatticeStatus.EMPTY

    if len(pieces) > 1:
        offsets = torch.tensor([0] + [p.shape[0] for p in pieces[:-1]]).cumsum(0)
        lattice = k2.cat(pieces)
        index = offsets[where_piece] + where_index
    else:
        index = where_index
    lattice = k2.index_fsa(lattice, index.to(device=lattice.device, dtype=torch.int32))

    reports = []
    for u in range(n):
        c = settings[u]
        frames = int(num_frames[u])
        if status[u] is LatticeStatus.OK:
            reason = ""
        elif status[u] is LatticeStatus.RETRIED:
            reason = (
                f"empty lattice at search_beam={config.search_beam:g}, "
                f"output_beam={config.output_beam:g}, "
                f"max_active_states={config.max_active_states}; "
                f"found at search_beam={c.search_beam:g}"
            )
        else:
            reason = (
                f"no path survived {frames} frames even at search_beam={c.search_beam:g}, "
                f"output_beam={c.output_beam:g}, max_active_states={c.max_active_states}: "
                "the graph may accept no token sequence of this length, or every accepted "
                "sequence is far below the best partial path"
            )
            logger.warning("utterance %d: %s", u, reason)
        reports.append(
            UtteranceReport(
                status=status[u],
                num_frames=frames,
                search_beam=c.search_beam,
                output_beam=c.output_beam,
                max_active_states=c.max_active_states,
                reason=reason,
            )
        )
    return LatticeResult(lattice=lattice, reports=tuple(reports))
