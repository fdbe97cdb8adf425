"""Lattice-free one-best search: a batched token-passing Viterbi beam search through a decoding
graph whose arcs each consume one frame (H, HL, HLG, HCLG built on a CTC or HMM topology).

``k2.intersect_dense_pruned`` builds a lattice of every arc that survives pruning and
``k2.shortest_path`` then reads its best path; for 1best only the best incoming arc of each
active state is ever needed. This search keeps exactly that: per frame, for the active states of
every utterance of the batch (flat tensors, one row per token, with its utterance), it expands
their arcs through the graph's row splits, scores each arc as ``state score + arc score +
log-prob of the arc's label at that frame``, keeps the best incoming arc of every destination
state (a segment max over ``(utterance, state)`` keys), prunes to ``search_beam`` below each
utterance's best and to its ``max_active_states`` best, and stores one back-pointer per
surviving token. At an utterance's last frame the final (``-1``) arcs close the search and the
stored back-pointers give the arc path. One Python loop over frames; everything inside it is a
torch op over the whole batch, on the inputs' device.

In k2's dense intersection every arc whose label is not ``-1`` consumes a frame (label 0 is the
CTC blank, not an epsilon), and ``-1`` arcs consume the extra last frame; this search uses the
same semantics, so with beams that prune nothing it finds the best path of
``k2.intersect_dense`` + ``k2.shortest_path``.
"""

from __future__ import annotations

import logging
import math
import warnings
from dataclasses import dataclass

import k2
import torch

from k2dec.lattice.dense import (
    PrunedFrames,
    check_vocab,
    original_frames,
    prune_frames,
    validate_log_probs,
)
from k2dec.lattice.one_best import AuxLabels, Hypothesis, assemble_hypotheses
from k2dec.lattice.search import (
    LatticeConfig,
    LatticeStatus,
    config_subsampling,
    utterance_report,
)
from k2dec.primitives.best_paths import ctc_collapse
from k2dec.primitives.per_graph import PerGraph
from k2dec.primitives.ragged import ragged_from_row_ids, ragged_select

logger = logging.getLogger(__name__)

__all__ = ["GraphTables", "ViterbiPaths", "graph_tables", "viterbi_one_best", "viterbi_paths"]


@dataclass(frozen=True)
class GraphTables:
    """A decoding graph's arcs as flat tensors for :func:`viterbi_paths` (on the graph's device).

    Attributes:
      num_states: ``S``, states of the graph (state 0 is the start state).
      emit_splits: int64 ``(S + 1,)``: the emitting arcs (label ``!= -1``) of state ``s`` are
        ``emit_*[emit_splits[s]:emit_splits[s + 1]]``.
      emit_arc: int64 ``(E,)``: the graph's arc index of each emitting arc.
      emit_dest: int64 ``(E,)``: destination state. emit_label: int64 ``(E,)``: token id.
      emit_score: float32 ``(E,)``: the arc's score (the graph's ``scores``).
      final_score: float32 ``(S,)``: the best score of a ``-1`` (final) arc leaving each state
        (``-inf`` where there is none). final_arc: int64 ``(S,)``: that arc's index (``-1``).
    """

    num_states: int
    emit_splits: torch.Tensor
    emit_arc: torch.Tensor
    emit_dest: torch.Tensor
    emit_label: torch.Tensor
    emit_score: torch.Tensor
    final_score: torch.Tensor
    final_arc: torch.Tensor


def graph_tables(graph: k2.Fsa) -> GraphTables:
    """:class:`GraphTables` of a single FSA (2 axes), computed once per graph object and kept
    while its arcs and scores are unchanged (keyed on their storage and torch version
    counters; a new ``scores`` tensor is a new key)."""
    return _TABLES(graph)


def _build_tables(graph: k2.Fsa) -> GraphTables:
    arcs = graph.arcs.values().to(torch.int64)  # (num_arcs, 4): src, dest, label, score bits
    num_states = int(graph.shape[0])
    device = arcs.device
    src, dest, label = arcs[:, 0], arcs[:, 1], arcs[:, 2]
    scores = graph.scores.detach().to(torch.float32)
    emitting = label != -1
    emit_arc = torch.nonzero(emitting).flatten()
    counts = torch.zeros(num_states, dtype=torch.int64, device=device)
    counts.index_add_(0, src[emit_arc], torch.ones_like(emit_arc))
    emit_splits = torch.zeros(num_states + 1, dtype=torch.int64, device=device)
    emit_splits[1:] = torch.cumsum(counts, 0)
    final = torch.nonzero(~emitting).flatten()
    final_score = torch.full((num_states,), -math.inf, dtype=torch.float32, device=device)
    final_arc = torch.full((num_states,), -1, dtype=torch.int64, device=device)
    if final.numel() > 0:
        _scatter(final_score, src[final], scores[final], "amax")
        best = scores[final] == final_score[src[final]]
        winners = final[best]
        _scatter(final_arc, src[winners], winners, "amin", include_self=False)
    return GraphTables(num_states, emit_splits, emit_arc, dest[emit_arc], label[emit_arc],
                       scores[emit_arc].contiguous(), final_score, final_arc)


_TABLES: PerGraph[GraphTables] = PerGraph(_build_tables)


def _scatter(out: torch.Tensor, index: torch.Tensor, src: torch.Tensor, reduce: str,
             include_self: bool = True) -> torch.Tensor:
    """``out.scatter_reduce_(0, index, src, reduce)`` without torch 1.13's warning that the
    function is in beta (its semantics are those of later torch releases)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="scatter_reduce", category=UserWarning)
        return out.scatter_reduce_(0, index, src, reduce, include_self=include_self)


@dataclass(frozen=True)
class ViterbiPaths:
    """Best paths of a batch from :func:`viterbi_paths`.

    Attributes:
      arcs: int64 ``(N, T_max)``: the graph's arc index consumed by utterance ``i`` at frame
        ``t`` (``t < num_frames[i]``), ``-1`` past its end or when it has no path.
      final_arc: int64 ``(N,)``: the ``-1`` arc that ends each path (``-1`` when none).
      scores: float32 ``(N,)``: the paths' scores (``-inf``: no path survived).
      num_frames: int64 CPU ``(N,)``: frames searched per utterance.
    """

    arcs: torch.Tensor
    final_arc: torch.Tensor
    scores: torch.Tensor
    num_frames: torch.Tensor

    @property
    def found(self) -> torch.Tensor:
        """bool CPU ``(N,)``: whether each utterance has a complete path."""
        return (self.final_arc >= 0).to("cpu")


def viterbi_paths(
    log_probs: torch.Tensor,
    num_frames: torch.Tensor,
    tables: GraphTables,
    search_beam: float,
    max_active_states: int,
) -> ViterbiPaths:
    """The pruned Viterbi search of a batch (no input checks: see :func:`viterbi_one_best`).

    Args:
      log_probs: float32 ``(N, T, V)`` on the graph's device; frame ``t`` of utterance ``i``
        is used for ``t < num_frames[i]``; ``-inf`` entries are allowed.
      num_frames: int64 CPU ``(N,)``, each in ``[1, T]``.
      tables: the graph (:func:`graph_tables`), labels in ``[0, V)`` on emitting arcs.
      search_beam: tokens more than this below their utterance's best token of the same
        frame are dropped.
      max_active_states: at most this many tokens (states) per utterance and frame; the best
        are kept.

    Memory is bounded by ``max_active_states``: the back-pointers keep at most
    ``N * max_active_states`` tokens per frame (16 bytes each), and a frame's candidate arcs
    are at most ``N * max_active_states`` times the graph's largest out-degree. ``N`` times
    the graph's number of states must stay below ``2**31`` (the keys of the per-state
    maximum).

    Returns:
      :class:`ViterbiPaths`.
    """
    n, t_max, v = log_probs.shape
    if n * tables.num_states >= 1 << 31:
        raise ValueError(f"batch of {n} utterances x {tables.num_states} graph states is too "
                         "large for one search (at most 2**31 - 1); split the batch")
    device = log_probs.device
    lp = log_probs.detach().contiguous().view(-1)
    ends = num_frames.to(device)
    tokens = _Tokens(n, device)
    back: list[tuple[torch.Tensor, torch.Tensor]] = []
    final = _Finals(n, device)
    last_end = set(num_frames.tolist())
    for t in range(t_max):
        kept = None
        if t in last_end:
            final.close(tokens, tables, ends == t)
            tokens, kept = tokens.alive(ends > t)
        step, per_utt = _expand(tokens, tables, lp, (t, t_max, v))
        step = _prune(step, per_utt, tables, search_beam, max_active_states)
        if kept is not None:
            step.prev = kept.gather(0, step.prev)
        tokens = _Tokens(n, device, step.utt, step.state, step.score)
        back.append((step.prev, step.arc))
    final.close(tokens, tables, ends == t_max)
    arcs = _backtrack(back, final, ends, n, t_max)
    return ViterbiPaths(arcs=arcs, final_arc=final.arc, scores=final.score,
                        num_frames=num_frames)


class _Tokens:
    """The tokens of one frame, sorted by utterance: utterance, graph state and score."""

    def __init__(self, n: int, device: torch.device, utt: torch.Tensor | None = None,
                 state: torch.Tensor | None = None, score: torch.Tensor | None = None) -> None:
        if utt is None:  # the start: state 0 of every utterance, score 0
            utt = torch.arange(n, device=device)
            state = torch.zeros(n, dtype=torch.int64, device=device)
            score = torch.zeros(n, dtype=torch.float32, device=device)
        self.utt, self.state, self.score = utt, state, score
        self.per_utt = torch.bincount(utt, minlength=n)

    def alive(self, utt_alive: torch.Tensor) -> tuple[_Tokens, torch.Tensor]:
        """The tokens of the utterances where ``utt_alive`` (bool ``(N,)``) and their indexes
        here."""
        idx = torch.nonzero(utt_alive.gather(0, self.utt)).flatten()
        return _Tokens(utt_alive.numel(), idx.device, self.utt.gather(0, idx),
                       self.state.gather(0, idx), self.score.gather(0, idx)), idx


class _Finals:
    """Per utterance, the best final token: score, its index in its frame's tokens and the
    final arc taken."""

    def __init__(self, n: int, device: torch.device) -> None:
        self.score = torch.full((n,), -math.inf, dtype=torch.float32, device=device)
        self.token = torch.full((n,), -1, dtype=torch.int64, device=device)
        self.arc = torch.full((n,), -1, dtype=torch.int64, device=device)

    def close(self, tokens: _Tokens, tables: GraphTables, done_utt: torch.Tensor) -> None:
        """Take the final arcs of the utterances where ``done_utt`` (bool ``(N,)``)."""
        idx = torch.nonzero(done_utt.gather(0, tokens.utt)).flatten()
        if idx.numel() == 0:
            return
        utt, state = tokens.utt[idx], tokens.state[idx]
        total = tokens.score[idx] + tables.final_score[state]
        best = _scatter(torch.full_like(self.score, -math.inf), utt, total, "amax")
        win = (total == best[utt]) & (total > -math.inf)
        first = torch.full_like(self.token, idx.numel())
        _scatter(first, utt[win], torch.nonzero(win).flatten(), "amin")
        has = first < idx.numel()
        pos = first[has]
        self.score[has] = best[has]
        self.token[has] = idx[pos]
        self.arc[has] = tables.final_arc[state[pos]]


@dataclass
class _Step:
    """Candidate tokens of the next frame: utterance, destination state, score, the index of
    the token they come from and the graph arc they take."""

    utt: torch.Tensor
    state: torch.Tensor
    score: torch.Tensor
    prev: torch.Tensor
    arc: torch.Tensor

    def take(self, index: torch.Tensor) -> _Step:
        return _Step(self.utt.gather(0, index), self.state.gather(0, index),
                     self.score.gather(0, index), self.prev.gather(0, index),
                     self.arc.gather(0, index))


def _expand(tokens: _Tokens, tables: GraphTables, lp: torch.Tensor,
            frame: tuple[int, int, int]) -> tuple[_Step, torch.Tensor]:
    """Every emitting arc out of ``tokens`` scored on frame ``t`` (``frame``: ``(t, T,
    V)``), and the arcs per utterance (int64 ``(N,)``; the arcs are grouped by utterance, as
    the tokens are). ``prev`` indexes ``tokens``; ``utt`` is the tokens' (per token, not per
    arc), ``state`` and ``arc`` the arcs' positions in ``tables`` (:func:`_prune` reads
    utterances, destinations and arc ids of the survivors only)."""
    t, t_max, v = frame
    device = tokens.state.device
    starts = tables.emit_splits.gather(0, tokens.state)
    counts = tables.emit_splits.gather(0, tokens.state + 1) - starts
    ends = torch.cumsum(counts, 0)
    total = int(ends[-1]) if ends.numel() > 0 else 0
    which = torch.repeat_interleave(torch.arange(counts.numel(), device=device), counts,
                                    output_size=total)
    pos = (starts - ends + counts).gather(0, which) + torch.arange(total, device=device)
    base = (tokens.utt * t_max + t) * v
    score = tokens.score.gather(0, which) + tables.emit_score.gather(0, pos)
    score += lp.gather(0, base.gather(0, which) + tables.emit_label.gather(0, pos))
    n = tokens.per_utt.numel()
    token_ends = torch.cumsum(tokens.per_utt, 0)
    arc_ends = torch.cat([ends.new_zeros(1), ends]).gather(0, token_ends)
    per_utt = torch.diff(arc_ends, prepend=arc_ends.new_zeros(1)) if n > 0 else arc_ends
    return _Step(tokens.utt, pos, score, which, pos), per_utt


_LOW32 = (1 << 32) - 1


def _score_rank(score: torch.Tensor) -> torch.Tensor:
    """int64 in ``[0, 2**32)``, smaller for larger float32 ``score`` (an order-reversing
    map of the float order onto integers, ``-inf`` included)."""
    bits = score.contiguous().view(torch.int32).to(torch.int64)
    ordered = torch.where(bits >= 0, bits + (1 << 31), (1 << 31) - 1 - (bits & 0x7FFFFFFF))
    return _LOW32 - ordered


def _prune(step: _Step, per_utt: torch.Tensor, tables: GraphTables, beam: float,
           max_active: int) -> _Step:
    """The beam, then the best incoming arc per (utterance, state), then ``max_active`` per
    utterance (``step`` and ``per_utt`` from :func:`_expand`). The result is sorted by
    utterance (then by state, or by score where ``max_active`` cut)."""
    score = step.score
    if score.numel() == 0:
        return _Step(*(step.utt.new_zeros(0) for _ in range(2)), score,
                     *(step.utt.new_zeros(0) for _ in range(2)))
    splits = torch.cat([per_utt.new_zeros(1), torch.cumsum(per_utt, 0)]).to(torch.int32)
    shape = k2.ragged.create_ragged_shape2(splits, None, score.numel())
    best = k2.RaggedTensor(shape, score).max(initial_value=-math.inf)
    # the lowest finite float32 at least: a -inf score never passes
    floor = (best - beam).clamp(min=torch.finfo(torch.float32).min)
    cutoff = torch.repeat_interleave(floor, per_utt, output_size=score.numel())
    idx = torch.nonzero(score >= cutoff).flatten()
    prev = step.prev.gather(0, idx)
    pos = step.arc.gather(0, idx)
    score = score.gather(0, idx)
    utt = step.utt.gather(0, prev)
    dest = tables.emit_dest.gather(0, pos)
    key = utt * tables.num_states + dest
    # one sort by (utterance, state, score descending): the first of each key is its best
    order = torch.sort((key << 32) | _score_rank(score), stable=True).indices
    key = key.gather(0, order)
    first = torch.ones_like(key, dtype=torch.bool)
    first[1:] = key[1:] != key[:-1]
    win = order.gather(0, torch.nonzero(first).flatten())
    step = _Step(utt.gather(0, win), dest.gather(0, win), score.gather(0, win),
                 prev.gather(0, win), tables.emit_arc.gather(0, pos.gather(0, win)))
    return _cap_active(step, per_utt.numel(), max_active)


def _cap_active(step: _Step, n: int, max_active: int) -> _Step:
    """At most ``max_active`` tokens per utterance, the best ones (``step`` sorted by
    utterance)."""
    counts = torch.bincount(step.utt, minlength=n)
    if int(counts.max()) <= max_active:
        return step
    order = torch.sort((step.utt << 32) | _score_rank(step.score), stable=True).indices
    starts = torch.cumsum(counts, 0) - counts
    utt = step.utt.gather(0, order)
    rank = torch.arange(utt.numel(), device=utt.device) - starts.gather(0, utt)
    return step.take(order.gather(0, torch.nonzero(rank < max_active).flatten()))


def _backtrack(back: list[tuple[torch.Tensor, torch.Tensor]], final: _Finals,
               ends: torch.Tensor, n: int, t_max: int) -> torch.Tensor:
    """int64 ``(N, T_max)``: the arc of every frame of every utterance with a path."""
    device = ends.device
    arcs = torch.full((n, t_max), -1, dtype=torch.int64, device=device)
    found = final.token >= 0
    cur = torch.full((n,), -1, dtype=torch.int64, device=device)
    for t in range(t_max, 0, -1):
        start = found & (ends == t)
        cur[start] = final.token[start]
        alive = torch.nonzero(found & (ends >= t)).flatten()
        if alive.numel() == 0:
            continue
        prev, arc = back[t - 1]
        idx = cur[alive]
        arcs[alive, t - 1] = arc[idx]
        cur[alive] = prev[idx]
    return arcs


def viterbi_one_best(
    log_probs: torch.Tensor,
    log_probs_lens: torch.Tensor,
    graph: k2.Fsa,
    config: LatticeConfig = LatticeConfig(),  # noqa: B008 (frozen, immutable)
    aux_labels: AuxLabels = AuxLabels.WORDS,
    subsampling_factor: int | None = None,
    allow_truncate: int = 0,
    blank_id: int = 0,
) -> list[Hypothesis]:
    """1best through ``graph`` without a lattice: :func:`viterbi_paths`, then tokens and words.

    Takes what :func:`~k2dec.lattice.one_best.one_best_decoding` takes and returns the same
    records. From ``config`` it reads ``search_beam`` (below each utterance's best token of a
    frame), ``max_active_states`` (per utterance and frame: the best are kept),
    ``retry_scales`` (utterances with no complete path are searched again with
    :meth:`LatticeConfig.scaled` settings, without approximations), ``token_top_k``,
    ``blank_skip_threshold``, ``blank_id`` and ``subsampling_factor``; ``output_beam`` and
    ``min_active_states`` shape lattices and have no meaning here. With beams that prune
    nothing the paths and scores are those of ``k2.intersect_dense`` + ``k2.shortest_path``.

    Args:
      log_probs: float32 ``(N, T, V)``.
      log_probs_lens: integer ``(N,)`` valid frames (see
        :func:`~k2dec.lattice.dense.validate_log_probs`).
      graph: one FSA (2 axes, or an FsaVec holding one) on ``log_probs.device`` whose labels
        are token ids in ``[-1, V)``, shared by the batch; scores as they are (scale them
        before). Not modified.
      aux_labels: what the graph's ``aux_labels`` hold (:class:`AuxLabels`); tensor or
        ragged.

    Returns:
      ``N`` hypotheses in the caller's order (an utterance with no complete path: empty,
      ``score=-inf``, ``status=EMPTY`` and the reason).
    """
    if not isinstance(config, LatticeConfig):
        raise TypeError(f"config must be a LatticeConfig, got {type(config).__name__}")
    if not isinstance(aux_labels, AuxLabels):
        raise TypeError(f"aux_labels must be an AuxLabels, got {aux_labels!r}")
    if config.allow_partial:
        raise ValueError("LatticeConfig.allow_partial=True is a setting of the lattice search; "
                         "the lattice-free search has none (set search.lattice_free=false)")
    factor = config_subsampling(config, subsampling_factor)
    num_frames = validate_log_probs(log_probs, log_probs_lens, factor, allow_truncate)
    graph = _single_graph(graph, log_probs.device)
    check_vocab(graph, log_probs.shape[2])
    if aux_labels is AuxLabels.TOKENS and not hasattr(graph, "aux_labels"):
        raise ValueError("aux_labels=AuxLabels.TOKENS but the graph has no aux_labels")
    found = _search_with_retries(log_probs, num_frames, graph_tables(graph), config)
    return _hypotheses(found, graph, aux_labels, blank_id, config)


def _single_graph(graph: k2.Fsa, device: torch.device) -> k2.Fsa:
    """``graph`` as one FSA (2 axes), checked."""
    if not isinstance(graph, k2.Fsa):
        raise TypeError(f"graph must be a k2.Fsa, got {type(graph).__name__}")
    if graph.device != device:
        raise ValueError(f"graph is on {graph.device} but log_probs is on {device}; move one "
                         "of them")
    if graph.arcs.num_axes() == 3:
        if graph.shape[0] != 1:
            raise ValueError(f"graph is an FsaVec of {graph.shape[0]} FSAs; the lattice-free "
                             "search takes one graph shared by the batch")
        graph = graph[0]
    if graph.num_arcs == 0:
        raise ValueError("graph has no arcs")
    if "hotword_lattice_bias" in dict(graph.named_non_tensor_attr()):
        raise ValueError("graph carries a hotword lattice bias (too large to bias in the "
                         "graph), which only the lattice search applies")
    return graph


@dataclass
class _Found:
    """Per caller utterance: arc (and original frame) of every position, the final arc, score,
    status and the settings of its last attempt."""

    arcs: torch.Tensor  # int64 (N, T)
    frames: torch.Tensor  # int64 (N, T)
    final_arc: torch.Tensor  # int64 (N,)
    scores: torch.Tensor  # float32 (N,)
    num_frames: torch.Tensor  # int64 CPU (N,), original frames
    status: list[LatticeStatus]
    settings: list[LatticeConfig]


def _search_with_retries(log_probs: torch.Tensor, num_frames: torch.Tensor,
                         tables: GraphTables, config: LatticeConfig) -> _Found:
    n, t, _ = log_probs.shape
    device = log_probs.device
    found = _Found(torch.full((n, t), -1, dtype=torch.int64, device=device),
                   torch.full((n, t), -1, dtype=torch.int64, device=device),
                   torch.full((n,), -1, dtype=torch.int64, device=device),
                   torch.full((n,), -math.inf, dtype=torch.float32, device=device),
                   num_frames, [LatticeStatus.OK] * n, [config] * n)
    pruned = None
    if config.approximate:
        pruned = prune_frames(log_probs, num_frames, config.token_top_k,
                              config.blank_skip_threshold, config.blank_id)
        paths = viterbi_paths(pruned.log_probs, pruned.num_frames, tables, config.search_beam,
                              config.max_active_states)
    else:
        paths = viterbi_paths(log_probs, num_frames, tables, config.search_beam,
                              config.max_active_states)
    everyone = torch.arange(n)
    _place(found, everyone, paths, pruned)
    pending = everyone[~paths.found]
    for scale in config.retry_scales:
        if pending.numel() == 0:
            break
        wider = config.scaled(scale)
        logger.info("%d utterance(s) gave no complete path; retrying with search_beam=%g, "
                    "max_active_states=%d", pending.numel(), wider.search_beam,
                    wider.max_active_states)
        rows = pending.to(device)
        paths = viterbi_paths(log_probs[rows], num_frames[pending], tables, wider.search_beam,
                              wider.max_active_states)
        for u in pending.tolist():
            found.settings[u] = wider
        ok = paths.found
        _place(found, pending[ok], _subset(paths, ok), None)
        for u in pending[ok].tolist():
            found.status[u] = LatticeStatus.RETRIED
        pending = pending[~ok]
    for u in pending.tolist():
        found.status[u] = LatticeStatus.EMPTY
    return found


def _subset(paths: ViterbiPaths, keep: torch.Tensor) -> ViterbiPaths:
    rows = torch.nonzero(keep).flatten()
    dev = paths.arcs.device
    return ViterbiPaths(paths.arcs[rows.to(dev)], paths.final_arc[rows.to(dev)],
                        paths.scores[rows.to(dev)], paths.num_frames[rows])


def _place(found: _Found, utts: torch.Tensor, paths: ViterbiPaths,
           pruned: PrunedFrames | None) -> None:
    """Write ``paths`` (of the caller's utterances ``utts``, int64 CPU) into ``found``."""
    if utts.numel() == 0:
        return
    device = found.arcs.device
    rows = utts.to(device)
    width = paths.arcs.shape[1]
    position = torch.arange(width, device=device).unsqueeze(0).expand(utts.numel(), width)
    frames = position
    if pruned is not None and pruned.kept is not None:
        frames = original_frames(position.reshape(-1), rows.repeat_interleave(width), pruned,
                                 found.num_frames).to(torch.int64).view(-1, width)
    found.arcs[rows, :width] = paths.arcs
    found.arcs[rows, width:] = -1
    found.frames[rows, :width] = frames
    found.final_arc[rows] = paths.final_arc
    found.scores[rows] = paths.scores


def _hypotheses(found: _Found, graph: k2.Fsa, aux_labels: AuxLabels, blank_id: int,
                config: LatticeConfig) -> list[Hypothesis]:
    """Tokens (CTC collapse of the labels) and aux ids of the found paths."""
    n, t = found.arcs.shape
    device = found.arcs.device
    ends = found.num_frames.to(device)
    # the final arc after the last frame, at frame num_frames (as in a lattice)
    arcs = torch.cat([found.arcs, torch.full((n, 1), -1, dtype=torch.int64, device=device)], 1)
    frames = torch.cat([found.frames, ends.unsqueeze(1)], 1)
    has = found.final_arc >= 0
    rows = torch.nonzero(has).flatten()
    arcs[rows, ends[rows]] = found.final_arc[rows]
    frames[rows, ends[rows]] = ends[rows]
    valid = arcs >= 0
    row_ids = torch.arange(n, device=device).unsqueeze(1).expand(n, t + 1)[valid]
    arc_ids = arcs[valid]
    arc_frames = frames[valid].to(torch.int32)
    aux_ids, aux_frames = _aux_ids(graph, arc_ids, arc_frames, row_ids, n)
    if aux_labels is AuxLabels.WORDS:
        labels = ragged_from_row_ids(row_ids, graph.labels[arc_ids].contiguous(), n)
        frame_r = ragged_from_row_ids(row_ids, arc_frames, n)
        tokens, token_frames = ctc_collapse(labels, frame_r, blank_id=blank_id)
        words, word_frames = aux_ids, aux_frames
    else:
        tokens, token_frames, words, word_frames = aux_ids, aux_frames, None, None
    reports = tuple(utterance_report(config, found.settings[u], found.status[u],
                                     int(found.num_frames[u])) for u in range(n))
    for u, r in enumerate(reports):
        if r.status is LatticeStatus.EMPTY:
            logger.warning("utterance %d: %s", u, r.reason)
    return assemble_hypotheses(n, tokens, token_frames, words, word_frames, found.scores.double(),
                     reports)


def _aux_ids(graph: k2.Fsa, arc_ids: torch.Tensor, arc_frames: torch.Tensor,
             row_ids: torch.Tensor, n: int) -> tuple[k2.RaggedTensor, k2.RaggedTensor] | \
        tuple[None, None]:
    """The positive ``aux_labels`` along the paths (``[utt][id]``) and the frame of the arc
    that carries each; ``(None, None)`` when the graph has none."""
    if not hasattr(graph, "aux_labels"):
        return None, None
    aux = graph.aux_labels
    if isinstance(aux, k2.RaggedTensor):
        picked, _ = aux.index(arc_ids.to(torch.int32), axis=0, need_value_indexes=False)
        arc_of_id = picked.shape.row_ids(1).to(torch.int64)
        values = picked.values
        rows, frames = row_ids[arc_of_id], arc_frames[arc_of_id]
    else:
        values, rows, frames = aux[arc_ids], row_ids, arc_frames
    ids = ragged_from_row_ids(rows, values.to(torch.int32).contiguous(), n)
    frame_r = ragged_from_row_ids(rows, frames.contiguous(), n)
    keep = values > 0
    return ragged_select(ids, keep), ragged_select(frame_r, keep)
