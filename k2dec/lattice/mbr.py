"""Minimum Bayes risk decoding on lattices: confusion networks (sausages), the consensus
hypothesis, and word confidences.

The algorithm is the edit-distance recursion of Xu, Povey, Mangu and Zhu, "Minimum Bayes risk
decoding and system combination based on a recursion for edit distance" (Computer Speech and
Language, 2011), which Kaldi's ``lattice-mbr-decode`` and ``lattice-to-ctm-conf`` run; this is
our own batched implementation on k2 FsaVecs.

Given a hypothesis ``R`` with ``K`` words, padded with epsilons to ``Q = 2K + 1`` positions
(``eps r_1 eps r_2 ... r_K eps``), a forward pass over the lattice computes, for every state
``n`` and position ``q``, ``alpha'(n, q)``: an approximation of the expected edit distance
between the word sequences of the paths reaching ``n`` and ``R[1..q]``. Each arc takes the
cheapest of three moves per position (its word aligned to ``r_q``; its word inserted; ``r_q``
deleted), computed from the posterior-weighted averages of its source state; arcs without a word
pass their source's values on unchanged. A backward pass follows the chosen moves and gives,
for every position (a *bin* of the sausage), the posterior of each word aligned to it
(``0`` = epsilon). The hypothesis is then replaced by the best word of every bin, and the two
passes repeat until no bin changes (or ``max_iterations``).

What it guarantees (``tests/lattice/test_mbr.py`` checks each against exhaustive path
enumeration):

- the posteriors of every bin sum to 1;
- ``expected_errors`` (``alpha'`` at the final state) is an upper bound on the true expected
  edit distance between the returned hypothesis and a path drawn from the lattice;
- the bound does not grow from one iteration to the next (up to ``DELTA`` per word);
- on lattices whose paths have at most one word, the bound is exact and the result is the
  exact minimum-expected-edit-distance hypothesis.

In general the consensus is an approximation of the MBR hypothesis, as in Kaldi.

Vectorization: all utterances of a group are processed together; the passes loop over the
*levels* of the lattice (states grouped by the length of the longest path reaching them; for
lattices of dense intersection a level is a frame), every level one set of tensor operations
over all its arcs and all positions. The edit-distance chain along the positions is a
cumulative minimum, its backward counterpart a segmented reverse cumulative sum.

Word times are not taken from the lattice here: k2's determinized graphs (HLG, LG) emit a word
label where the word becomes unambiguous, often on its last token, so word arcs do not mark
word boundaries. See :func:`k2dec.primitives.best_paths.word_spans` for times from a path's tokens.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import NamedTuple

import k2
import torch

from k2dec.lattice.posteriors import (
    PosteriorConfig,
    global_states,
    lattice_arc_words,
    plain_topology,
    scaled_arc_scores,
    state_depths,
)
from k2dec.lattice.prune import MAX_LATTICE_ARCS
from k2dec.lattice.search import LatticeResult, lattice_fsa_vec
from k2dec.primitives.ragged import add_at, ragged_from_row_ids
from k2dec.primitives.sizes import check_int_range

logger = logging.getLogger(__name__)

__all__ = ["DELTA", "MbrConfig", "MbrResult", "Sausages", "mbr_decode"]

DELTA = 2.0**-17
"""Extra cost of inserting a word between two positions rather than into an epsilon position
of the padded hypothesis (Kaldi's ``delta()``, 1e-5 there): it makes insertions land in the
epsilon bins, so that they show up in the sausage. A power of two, so that sums of edit costs
and multiples of it are exact in float64 and ties between moves do not depend on the order of
additions."""

GRID = 2.0**-32
"""``alpha'`` of every state is rounded to a multiple of this once all its arcs are summed.
Mathematically tied moves (frequent: an error costs 1 wherever it is aligned) then compare
equal, so the choice between them follows the tie rule and not the rounding of a particular
order of floating-point additions (which differs between CPU and CUDA, and between batch
compositions). The rounding moves ``expected_errors`` by less than ``depth * GRID``."""


@dataclass(frozen=True)
class MbrConfig:
    """Settings of :func:`mbr_decode`.

    Attributes:
      posterior: scaling of the lattice scores (acoustic scale, LM scale).
      decode_mbr: True: iterate to the consensus hypothesis (``lattice-mbr-decode``). False:
        keep the initial hypothesis and only compute its sausage and word confidences
        (``lattice-to-ctm-conf --decode-mbr=false``).
      max_iterations: at most this many passes per utterance (Kaldi stops after about 100).
      max_cells: memory budget: utterances are processed in groups whose total number of
        lattice states times (positions + 1) stays below this; two float64 tables of that many
        cells are held (128 MiB at the default). A single utterance above the budget is
        processed alone (its size is bounded by ``max_lattice_arcs``).
      max_lattice_arcs: the MBR methods first prune a lattice with more arcs to this many
        (:func:`k2dec.lattice.prune_lattice`, the narrowest output beam keeping them; recorded
        in the utterance's notes), so that one utterance's tables stay bounded too
        (``None``: never).
    """

    posterior: PosteriorConfig = field(default_factory=PosteriorConfig)
    decode_mbr: bool = True
    max_iterations: int = 100
    max_cells: int = 1 << 23
    max_lattice_arcs: int | None = MAX_LATTICE_ARCS

    def __post_init__(self) -> None:
        if not isinstance(self.posterior, PosteriorConfig):
            raise TypeError(f"posterior must be a PosteriorConfig, got {self.posterior!r}")
        if not isinstance(self.decode_mbr, bool):
            raise TypeError(f"decode_mbr must be a bool, got {self.decode_mbr!r}")
        check_int_range(self, "max_iterations", 1, 10_000)
        check_int_range(self, "max_cells", 1, 1 << 26)
        check_int_range(self, "max_lattice_arcs", 1, 1_000_000, optional=True)


@dataclass(frozen=True)
class Sausages:
    """Confusion networks of a batch.

    Attributes:
      words: int32 ``k2.RaggedTensor`` ``[utt][bin][entry]``: the words of each bin, most
        probable first (0 = epsilon, i.e. no word). Bins are the positions of the padded final
        hypothesis (``2K + 1`` for ``K`` words), in order; every bin has at least one entry.
      posteriors: float64 ``k2.RaggedTensor`` with the same shape: each entry's posterior;
        each bin sums to 1.
    """

    words: k2.RaggedTensor
    posteriors: k2.RaggedTensor

    def tolist(self) -> list[list[list[tuple[int, float]]]]:
        """``[utt][bin]`` lists of ``(word, posterior)`` (the edge of the library)."""
        words, posts = self.words.tolist(), self.posteriors.tolist()
        return [[list(zip(wb, pb)) for wb, pb in zip(wu, pu)] for wu, pu in zip(words, posts)]


@dataclass(frozen=True)
class MbrResult:
    """Output of :func:`mbr_decode` for ``N`` utterances (in the lattice's order).

    Attributes:
      words: int32 ``k2.RaggedTensor`` ``[utt][word]``: the consensus hypothesis (the initial
        hypothesis when ``decode_mbr`` is False).
      confidences: float64 ``k2.RaggedTensor`` ``[utt][word]``: each word's posterior in its
        bin.
      sausages: the confusion networks.
      expected_errors: float64 ``(N,)``: the recursion's value at the final state, an upper
        bound on the expected edit distance of ``words`` (of the hypothesis before the last
        update when not converged); NaN for utterances whose lattice has no complete path.
      iterations: int64 ``(N,)``: passes run (0 for utterances without a complete path).
      converged: bool ``(N,)``: the last pass changed no bin (always True with
        ``decode_mbr=False``).
      has_path: bool ``(N,)``: the lattice has a complete path (others get empty outputs).
    """

    words: k2.RaggedTensor
    confidences: k2.RaggedTensor
    sausages: Sausages
    expected_errors: torch.Tensor
    iterations: torch.Tensor
    converged: torch.Tensor
    has_path: torch.Tensor


def _ragged_positions(ragged: k2.RaggedTensor) -> tuple[torch.Tensor, torch.Tensor]:
    """int64 row and position within the row of every element of a 2-axis ragged tensor."""
    row_ids = ragged.shape.row_ids(1).to(torch.int64)
    splits = ragged.shape.row_splits(1).to(torch.int64)
    pos = torch.arange(row_ids.numel(), device=row_ids.device) - splits[row_ids]
    return row_ids, pos


def _padded_hyps(hyps: k2.RaggedTensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Epsilon-padded hypotheses: int64 ``(n, Qmax + 1)`` with ``r[u, 2k + 2] = word k``,
    ``r[u, odd q] = 0`` for ``q <= Q_u`` and ``-1`` after ``Q_u``; and ``Q_u = 2 K_u + 1``."""
    splits = hyps.shape.row_splits(1).to(torch.int64)
    num_words = splits[1:] - splits[:-1]
    q_len = 2 * num_words + 1
    n = num_words.numel()
    width = int(q_len.max()) + 1 if n else 1
    cols = torch.arange(width, device=splits.device)
    r = torch.where(cols.unsqueeze(0) <= q_len.unsqueeze(1), 0, -1).to(torch.int64)
    rows, pos = _ragged_positions(hyps)
    r[rows, 2 * pos + 2] = hyps.values.to(torch.int64)
    return r, q_len


@dataclass(frozen=True)
class _Stats:
    """One pass over a group: gamma entries ``(utt, bin, word, posterior)`` with bins 1-based,
    and ``L`` per utterance."""

    utt: torch.Tensor
    bin: torch.Tensor
    word: torch.Tensor
    post: torch.Tensor
    expected_errors: torch.Tensor


def _levels(depth_of_dst: torch.Tensor) -> tuple[torch.Tensor, list[tuple[int, int]]]:
    """Arcs sorted by the depth of their destination, and the ``[begin, end)`` range of each
    depth ``1..D`` in that order."""
    order = torch.sort(depth_of_dst, stable=True).indices
    sorted_depth = depth_of_dst[order]
    max_depth = int(sorted_depth.max()) if sorted_depth.numel() else 0
    bounds = torch.searchsorted(
        sorted_depth, torch.arange(max_depth + 2, device=sorted_depth.device)).tolist()
    return order, [(bounds[d], bounds[d + 1]) for d in range(1, max_depth + 1)]


def _arc_moves(alpha_src, word, r_rows, c_rows):
    """For arcs with a word: the three candidate costs and ``alpha'`` of the arc.

    Args:
      alpha_src: float64 ``(m, Q + 1)`` alpha' of the source states.
      word: int64 ``(m,)``; r_rows: int64 ``(m, Q + 1)`` padded hypothesis of each arc's
        utterance; c_rows: float64 ``(m, Q + 1)`` cumulative deletion costs ``C(q)``.

    Returns:
      ``(a1, a2, a3, value)``: ``a1, a3`` of shape ``(m, Q)`` (positions 1..Q), ``a2`` and
      ``value`` of shape ``(m, Q + 1)``.
    """
    sub = (word.unsqueeze(1) != r_rows[:, 1:]).to(torch.float64)
    a1 = alpha_src[:, :-1] + sub
    a2 = (alpha_src + 1.0) + DELTA
    b = a2.clone()
    b[:, 1:] = torch.minimum(a1, a2[:, 1:])
    # value(q) = min(b(q), value(q - 1) + c(q)) = C(q) + min_{j <= q} (b(j) - C(j))
    value = c_rows + torch.cummin(b - c_rows, dim=1).values
    a3 = value[:, :-1] + (c_rows[:, 1:] - c_rows[:, :-1])
    return a1, a2, a3, value


class _Arcs(NamedTuple):
    """The arcs of a group's FsaVec: global source and destination states, utterance, word
    (int64), posterior weight (float64), and the depth-level order of :func:`_levels`."""

    src: torch.Tensor
    dst: torch.Tensor
    utt: torch.Tensor
    word: torch.Tensor
    weight: torch.Tensor
    order: torch.Tensor
    levels: list[tuple[int, int]]


def _arc_table(fsa: k2.Fsa) -> _Arcs:
    """The :class:`_Arcs` of ``fsa``, with each arc's posterior given its source state."""
    src, dst = global_states(fsa)
    utt_of_arc = fsa.arcs.shape().row_ids(1).to(torch.int64)[src]
    alpha = fsa.get_forward_scores(use_double_scores=True, log_semiring=True)
    weight = torch.exp(alpha[src] + fsa.scores.to(torch.float64) - alpha[dst])
    weight = torch.nan_to_num(weight, nan=0.0, posinf=0.0)
    order, levels = _levels(state_depths(fsa)[dst])
    return _Arcs(src, dst, utt_of_arc, fsa.word.to(torch.int64), weight, order, levels)


def _acc_stats(fsa: k2.Fsa, hyps: k2.RaggedTensor) -> _Stats:
    """One forward and backward pass (Xu et al.'s Figures 4 and 5) for every utterance of
    ``fsa`` (all with a complete path) against the hypotheses ``hyps`` ``[utt][word]``."""
    n = fsa.shape[0]
    state_splits = fsa.arcs.shape().row_splits(1).to(torch.int64)
    starts, finals = state_splits[:-1], state_splits[1:] - 1
    arcs = _arc_table(fsa)
    r, q_len = _padded_hyps(hyps)
    width = r.shape[1]
    c = torch.zeros(n, width, dtype=torch.float64, device=fsa.device)
    c[:, 1:] = torch.cumsum((r[:, 1:] != 0).to(torch.float64), dim=1)
    alpha_d = _forward_pass(arcs, r, c, starts, fsa.arcs.shape().tot_size(1))
    expected_errors = alpha_d[finals, q_len]
    num_words = int(arcs.word.max()) + 1 if arcs.word.numel() else 1
    keys, vals = _backward_pass(arcs, r, c, alpha_d, (starts, finals, q_len), num_words)
    key = torch.cat(keys)
    uniq, inverse = torch.unique(key, return_inverse=True)
    post = torch.zeros(uniq.numel(), dtype=torch.float64, device=fsa.device)
    add_at(post, inverse, torch.cat(vals))
    rest = uniq // num_words
    return _Stats(utt=rest // width, bin=rest % width, word=uniq % num_words, post=post,
                  expected_errors=expected_errors)


def _forward_pass(arcs: _Arcs, r: torch.Tensor, c: torch.Tensor, starts: torch.Tensor,
                  num_states: int) -> torch.Tensor:
    """``alpha'`` of every state, float64 ``(num_states, Qmax + 1)``, rounded to ``GRID``."""
    alpha_d = torch.zeros(num_states, r.shape[1], dtype=torch.float64, device=r.device)
    alpha_d[starts] = c
    for begin, end in arcs.levels:
        level = arcs.order[begin:end]
        s, u, w = arcs.src[level], arcs.utt[level], arcs.word[level]
        value = alpha_d[s]
        has_word = w > 0
        if bool(has_word.any()):
            _, _, _, moved = _arc_moves(value[has_word], w[has_word], r[u[has_word]],
                                        c[u[has_word]])
            value[has_word] = moved
        add_at(alpha_d, arcs.dst[level], arcs.weight[level].unsqueeze(1) * value)
        into = arcs.dst[level]
        alpha_d[into] = torch.round(alpha_d[into] / GRID) * GRID
    return alpha_d


def _backward_pass(arcs: _Arcs, r: torch.Tensor, c: torch.Tensor, alpha_d: torch.Tensor,
                   ends: tuple[torch.Tensor, torch.Tensor, torch.Tensor], num_words: int
                   ) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """``beta'`` over the levels in reverse: the keys ``(utt * width + bin) * num_words +
    word`` and posteriors of the word-to-bin alignments (``ends``: start states, final states,
    ``Q`` per utterance)."""
    starts, finals, q_len = ends
    n, width = r.shape
    beta_d = torch.zeros_like(alpha_d)
    beta_d[finals, q_len] = 1.0
    keys, vals = [], []

    def emit(utt, pos, wrd, val):
        keep = val != 0
        keys.append((utt[keep] * width + pos[keep]) * num_words + wrd[keep])
        vals.append(val[keep])

    positions = torch.arange(width, device=r.device)
    for begin, end in reversed(arcs.levels):
        level = arcs.order[begin:end]
        s, u, w = arcs.src[level], arcs.utt[level], arcs.word[level]
        x = arcs.weight[level].unsqueeze(1) * beta_d[arcs.dst[level]]
        has_word = w > 0
        to_src = x.clone()  # arcs without a word pass beta' back unchanged
        if bool(has_word.any()):
            xs, sw, uw = x[has_word], w[has_word], u[has_word]
            a1, a2, a3, _ = _arc_moves(alpha_d[s[has_word]], sw, r[uw], c[uw])
            move1 = (a1 <= a2[:, 1:]) & (a1 <= a3)
            move2 = ~move1 & (a2[:, 1:] <= a3)
            move3 = ~move1 & ~move2
            beta_arc, back = _word_arc_beta(xs, move1, move2, move3, positions)
            to_src[has_word] = back
            m = xs.shape[0]
            pos = positions[1:].unsqueeze(0).expand(m, width - 1)
            utt_b = uw.unsqueeze(1).expand(m, width - 1)
            emit(utt_b[move1], pos[move1], sw.unsqueeze(1).expand(m, width - 1)[move1],
                 beta_arc[:, 1:][move1])
            emit(utt_b[move3], pos[move3], torch.zeros_like(pos[move3]), beta_arc[:, 1:][move3])
        add_at(beta_d, s, to_src)
    # the start state: the remaining positions are deletions
    at_start = torch.flip(torch.cumsum(torch.flip(beta_d[starts], [1]), dim=1), [1])
    pos = positions[1:].unsqueeze(0).expand(n, width - 1)
    emit(torch.arange(n, device=r.device).unsqueeze(1).expand(n, width - 1).reshape(-1),
         pos.reshape(-1), torch.zeros(n * (width - 1), dtype=torch.int64, device=r.device),
         at_start[:, 1:].reshape(-1))
    return keys, vals


def _word_arc_beta(xs: torch.Tensor, move1: torch.Tensor, move2: torch.Tensor,
                   move3: torch.Tensor, positions: torch.Tensor
                   ) -> tuple[torch.Tensor, torch.Tensor]:
    """For arcs with a word: ``beta'`` of each arc and position, and what flows back to the
    source state, following the chosen moves (``move1..3`` of shape ``(m, Q)``)."""
    width = xs.shape[1]
    # beta_arc(q) = x(q) + [move3 at q + 1] * beta_arc(q + 1): sums over runs
    carry = torch.zeros_like(xs, dtype=torch.bool)
    carry[:, :-1] = move3
    stop = torch.where(carry, width - 1, positions.unsqueeze(0).expand_as(carry))
    stop = torch.flip(torch.cummin(torch.flip(stop, [1]), dim=1).values, [1])
    tail = torch.zeros(xs.shape[0], width + 1, dtype=torch.float64, device=xs.device)
    tail[:, :-1] = torch.flip(torch.cumsum(torch.flip(xs, [1]), dim=1), [1])
    beta_arc = tail[:, :-1] - torch.gather(tail, 1, stop + 1)
    back = torch.zeros_like(xs)
    back[:, :-1] += torch.where(move1, beta_arc[:, 1:], 0.0)
    back[:, 1:] += torch.where(move2, beta_arc[:, 1:], 0.0)
    back[:, 0] += beta_arc[:, 0]
    return beta_arc, back


def _best_per_bin(stats: _Stats, r: torch.Tensor) -> torch.Tensor:
    """Bool mask of the stats entries that are the best word of their ``(utt, bin)``; ties go
    to the current word ``r[utt, bin]``, then to the lower id."""
    current = r[stats.utt, stats.bin]
    order = torch.arange(stats.post.numel(), device=r.device)
    for key in (stats.word, (stats.word != current).to(torch.int64), -stats.post,
                stats.utt * r.shape[1] + stats.bin):
        order = order[torch.sort(key[order], stable=True).indices]
    group = stats.utt[order] * r.shape[1] + stats.bin[order]
    first = torch.ones_like(group, dtype=torch.bool)
    first[1:] = group[1:] != group[:-1]
    best = torch.zeros_like(first)
    best[order[first]] = True
    return best


def _groups(num_states: list[int], q_len: list[int], budget: int) -> list[list[int]]:
    """Consecutive groups of utterances with ``sum(states) * (max positions + 1) <= budget``
    (an utterance above the budget alone)."""
    groups: list[list[int]] = []
    current: list[int] = []
    states = width = 0
    for i, (ns, q) in enumerate(zip(num_states, q_len)):
        if current and (states + ns) * (max(width, q + 1)) > budget:
            groups.append(current)
            current, states, width = [], 0, 0
        current.append(i)
        states += ns
        width = max(width, q + 1)
    if current:
        groups.append(current)
    return groups


def _path_words(fsa: k2.Fsa) -> k2.RaggedTensor:
    """Words along the best path of each FSA: int32 ``[utt][word]``."""
    best = k2.shortest_path(fsa, use_double_scores=True)
    words = k2.RaggedTensor(best.arcs.shape().remove_axis(1), best.word.contiguous())
    return words.remove_values_leq(0)


def _to_ragged(hyps, n: int, device: torch.device) -> k2.RaggedTensor:
    if isinstance(hyps, k2.RaggedTensor):
        if hyps.num_axes != 2 or hyps.dim0 != n:
            raise ValueError(f"hyps must be a 2-axis ragged tensor with {n} rows, got "
                             f"{hyps.num_axes} axes and {hyps.dim0} rows")
        ragged = hyps.to(device)
    else:
        hyps = [list(h) for h in hyps]
        if len(hyps) != n:
            raise ValueError(f"hyps has {len(hyps)} entries but the lattice has {n} "
                             "utterances")
        for i, h in enumerate(hyps):
            if any(not isinstance(w, int) or w <= 0 for w in h):
                raise ValueError(f"hyps[{i}] must hold word ids > 0, got {h}")
        ragged = k2.RaggedTensor(hyps, dtype=torch.int32, device=device)
    if ragged.values.numel() and int(ragged.values.min()) <= 0:
        raise ValueError("hyps must hold word ids > 0")
    return ragged


def mbr_decode(
    lattice: LatticeResult | k2.Fsa,
    config: MbrConfig = MbrConfig(),  # noqa: B008 (frozen, immutable)
    hyps: k2.RaggedTensor | list[list[int]] | None = None,
    attribute: str = "aux_labels",
) -> MbrResult:
    """Sausages, consensus hypotheses and word confidences of a batch of lattices.

    Args:
      lattice: FsaVec ``[utt][state][arc]`` (or a :class:`~k2dec.lattice.LatticeResult`),
        acyclic, with output symbols in ``attribute``: HLG / HCLG / LG lattices (words),
        rescored lattices (``RescoreResult.lattice``), transducer lattices of the trivial graph
        (tokens). Not modified.
      config: see :class:`MbrConfig`.
      hyps: initial hypotheses, ``N`` word-id sequences (a list of lists or an int32 ragged
        tensor ``[utt][word]``); default: the best path of each (scaled) lattice. With
        ``decode_mbr=False`` these are the hypotheses whose confidences are computed.
      attribute: the arc attribute holding the output symbols.

    Returns:
      :class:`MbrResult`.
    """
    if not isinstance(config, MbrConfig):
        raise TypeError(f"config must be an MbrConfig, got {type(config).__name__}")
    work = _word_lattice(lattice, config, attribute)
    device = work.device
    n = work.shape[0]
    tot = work.get_tot_scores(use_double_scores=True, log_semiring=True)
    has_path = torch.isfinite(tot).to("cpu")
    current = _path_words(work) if hyps is None else _to_ragged(hyps, n, device)

    progress = _Progress(hyp_rows=current.tolist(),
                         expected_errors=torch.full((n,), float("nan"), dtype=torch.float64),
                         iterations=torch.zeros(n, dtype=torch.int64),
                         converged=torch.ones(n, dtype=torch.bool))
    work_states = work.arcs.shape().row_splits(1).to("cpu", torch.int64).diff().tolist()
    active = [i for i in range(n) if bool(has_path[i])]
    for it in range(config.max_iterations):
        if not active:
            break
        next_active = []
        for group in _groups([work_states[i] for i in active],
                             [2 * len(progress.hyp_rows[i]) + 1 for i in active],
                             config.max_cells):
            next_active += _mbr_pass(work, [active[j] for j in group], it, config, progress)
        active = sorted(next_active)
    return _assemble(n, device, progress.final_stats, progress.final_words,
                     progress.expected_errors, progress.iterations,
                     progress.converged & has_path, has_path)


def _word_lattice(lattice: LatticeResult | k2.Fsa, config: MbrConfig, attribute: str
                  ) -> k2.Fsa:
    """The connected, top-sorted lattice with scaled scores and its words in ``word``."""
    lat, words = lattice_arc_words(lattice_fsa_vec(lattice), attribute)
    work = plain_topology(lat, scaled_arc_scores(lat, config.posterior))
    work.word = words.to(torch.int32)
    work = k2.connect(work)
    if not work.properties & k2.fsa_properties.TOPSORTED:
        work = k2.top_sort(work)
    return work


@dataclass
class _Progress:
    """What the passes found so far: the current hypothesis of each utterance (updated after
    each pass), its CPU ``(N,)`` summaries, and the stats and words of finished groups."""

    hyp_rows: list[list[int]]
    expected_errors: torch.Tensor
    iterations: torch.Tensor
    converged: torch.Tensor
    final_stats: list[_Stats] = field(default_factory=list)
    final_words: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]] = field(
        default_factory=list)


def _mbr_pass(work: k2.Fsa, utts: list[int], it: int, config: MbrConfig,
              progress: _Progress) -> list[int]:
    """Pass ``it`` over the utterances ``utts``: update ``progress``, return those that go on."""
    device = work.device
    index = torch.tensor(utts, dtype=torch.int32, device=device)
    sub = k2.index_fsa(work, index)
    sub_hyps = k2.RaggedTensor([progress.hyp_rows[i] for i in utts], dtype=torch.int32,
                               device=device)
    stats = _acc_stats(sub, sub_hyps)
    r, q_len = _padded_hyps(sub_hyps)
    best = _best_per_bin(stats, r)
    chosen = torch.zeros_like(r)
    chosen[stats.utt[best], stats.bin[best]] = stats.word[best]
    cols = torch.arange(r.shape[1], device=device).unsqueeze(0)
    valid = (cols >= 1) & (cols <= q_len.unsqueeze(1))
    changed = ((chosen != r) & valid).any(dim=1)
    if not config.decode_mbr:
        changed = torch.zeros_like(changed)
        chosen = torch.where(valid, r, chosen)
    done = ~changed | (it + 1 == config.max_iterations)
    glob = index.to(torch.int64)
    where = glob.cpu()
    progress.iterations[where] = it + 1
    progress.expected_errors[where] = stats.expected_errors.cpu()
    progress.converged[where] = ~changed.cpu()
    new_rows = _rows_of(chosen[changed], valid[changed])
    for j, u in enumerate(torch.nonzero(changed.cpu()).flatten().tolist()):
        progress.hyp_rows[utts[u]] = new_rows[j]
    finished = done[stats.utt]
    progress.final_stats.append(_Stats(
        utt=glob[stats.utt[finished]], bin=stats.bin[finished], word=stats.word[finished],
        post=stats.post[finished], expected_errors=stats.expected_errors))
    # the output words: chosen non-epsilon bins of finished utterances
    pick = valid & (chosen > 0) & done.unsqueeze(1)
    rows_p, bins_p = torch.nonzero(pick, as_tuple=True)
    progress.final_words.append((glob[rows_p], bins_p, chosen[rows_p, bins_p],
                                 _post_at(stats, rows_p, bins_p, chosen[rows_p, bins_p],
                                          r.shape[1])))
    return where[~done.cpu()].tolist()


def _rows_of(chosen: torch.Tensor, valid: torch.Tensor) -> list[list[int]]:
    """Non-epsilon words of each row of a padded hypothesis table."""
    keep = valid & (chosen > 0)
    n = chosen.shape[0]
    rows, cols = torch.nonzero(keep, as_tuple=True)
    return ragged_from_row_ids(rows, chosen[rows, cols].to(torch.int32), n).tolist()


def _post_at(stats: _Stats, rows: torch.Tensor, bins: torch.Tensor, words: torch.Tensor,
             width: int) -> torch.Tensor:
    """Posterior of ``words`` in ``(rows, bins)`` (0 where the bin has no such entry)."""
    num = int(torch.max(stats.word.max(), words.max()).item()) + 1 if words.numel() else 1
    key = (stats.utt * width + stats.bin) * num + stats.word
    want = (rows * width + bins) * num + words
    order = torch.argsort(key)
    key_sorted = key[order]
    pos = torch.searchsorted(key_sorted, want).clamp(max=max(key.numel() - 1, 0))
    found = key_sorted[pos] == want if key.numel() else torch.zeros_like(want, dtype=torch.bool)
    out = torch.zeros(want.numel(), dtype=torch.float64, device=want.device)
    if key.numel():
        out[found] = stats.post[order[pos[found]]]
    return out


def _assemble(n, device, final_stats, final_words, expected_errors, iterations, converged,
              has_path) -> MbrResult:
    empty_i = torch.zeros(0, dtype=torch.int64, device=device)
    empty_f = torch.zeros(0, dtype=torch.float64, device=device)
    utt = torch.cat([s.utt for s in final_stats]) if final_stats else empty_i
    bins = torch.cat([s.bin for s in final_stats]) if final_stats else empty_i
    word = torch.cat([s.word for s in final_stats]) if final_stats else empty_i
    post = torch.cat([s.post for s in final_stats]) if final_stats else empty_f
    # sausages: sort by (utt, bin, -posterior, word)
    order = torch.arange(utt.numel(), device=device)
    max_bin = int(bins.max()) + 1 if bins.numel() else 1
    for key in (word, -post, utt * max_bin + bins):
        order = order[torch.sort(key[order], stable=True).indices]
    utt, bins, word, post = utt[order], bins[order], word[order], post[order]
    bin_key = utt * max_bin + bins
    new_bin = torch.ones_like(bin_key, dtype=torch.bool)
    new_bin[1:] = bin_key[1:] != bin_key[:-1]
    bin_index = torch.cumsum(new_bin.to(torch.int64), 0) - 1  # entry -> bin number
    bin_utt = utt[new_bin]
    num_bins = int(new_bin.sum())
    utt_bin = ragged_from_row_ids(bin_utt, torch.zeros(num_bins, dtype=torch.int32,
                                                       device=device), n).shape
    bin_entry = ragged_from_row_ids(bin_index, torch.zeros(utt.numel(), dtype=torch.int32,
                                                           device=device), num_bins).shape
    shape3 = utt_bin.compose(bin_entry)
    sausages = Sausages(words=k2.RaggedTensor(shape3, word.to(torch.int32).contiguous()),
                        posteriors=k2.RaggedTensor(shape3, post.contiguous()))

    w_utt = torch.cat([w[0] for w in final_words]) if final_words else empty_i
    w_bin = torch.cat([w[1] for w in final_words]) if final_words else empty_i
    w_word = torch.cat([w[2] for w in final_words]) if final_words else empty_i
    w_conf = torch.cat([w[3] for w in final_words]) if final_words else empty_f
    order = torch.arange(w_utt.numel(), device=device)
    width = int(w_bin.max()) + 1 if w_bin.numel() else 1
    order = order[torch.sort((w_utt * width + w_bin)[order], stable=True).indices]
    words = ragged_from_row_ids(w_utt[order], w_word[order].to(torch.int32), n)
    confidences = ragged_from_row_ids(w_utt[order], w_conf[order], n)
    return MbrResult(words=words, confidences=confidences, sausages=sausages,
                     expected_errors=expected_errors, iterations=iterations,
                     converged=converged, has_path=has_path)
