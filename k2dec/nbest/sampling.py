"""Sampling paths from lattices so that the samples are a function of the lattice alone.

``k2.random_paths`` draws path ``j`` of ``n`` by "arithmetic decoding" of the single number
``(j + 0.5) / n``: at every state it picks the arc whose cumulative-probability interval holds
the number, then rescales the number to that interval. Rescaling multiplies any error by the
inverse of the interval width at every branching, so a score change of 1e-5 in the lattice
(what evaluating the same network on another batch composition gives) changes most of the
sampled paths of a long utterance: in k2dec's measurements on the shipped model, a 20 s
utterance decoded alone and in a batch of ten shared none of its 30 sampled word sequences.

:func:`sample_paths` instead draws a fresh uniform number at every step of every path from a
counter-based hash of ``(seed, path index, step)``. The draws do not depend on the
utterance's position in its batch or on the other utterances, and a small score change only
changes a step whose number falls within that change of an interval boundary (probability of
the order of the change), instead of every later step. All paths of all utterances advance
together, one vectorized step per arc of the longest path.
"""

from __future__ import annotations

import k2
import torch

from .keys import DedupKey, keyed_lattice, paths_to_fsa, restore_labels

__all__ = ["distinct_paths", "k2_random_paths", "sample_paths", "uniform_hash"]

_MASK32 = 0xFFFFFFFF
#: draws computed at once (a table [steps, num_paths]) instead of step by step
_STEPS_PER_TABLE = 128


def _mul32(x: torch.Tensor, c: int) -> torch.Tensor:
    """``(x * c) mod 2**32`` for int64 ``x`` in ``[0, 2**32)`` without int64 overflow."""
    lo = (x & 0xFFFF) * c
    hi = ((x >> 16) * c) & 0xFFFF
    return (lo + (hi << 16)) & _MASK32


def _hash32(x: torch.Tensor) -> torch.Tensor:
    """An avalanching 32-bit integer hash (xor-shift-multiply), on int64 values in
    ``[0, 2**32)``."""
    x = x & _MASK32
    x = x ^ (x >> 16)
    x = _mul32(x, 0x7FEB352D)
    x = x ^ (x >> 15)
    x = _mul32(x, 0x846CA68B)
    return x ^ (x >> 16)


def uniform_hash(seed: int, path: torch.Tensor, step: torch.Tensor) -> torch.Tensor:
    """float64 numbers in ``[0, 1)``, one per element of ``path`` and ``step`` (int64 tensors
    of one shape), a deterministic function of ``(seed, path, step)`` only."""
    x = _hash32(step)
    x = _hash32(x ^ (path & _MASK32))
    x = _hash32(x ^ (int(seed) & _MASK32))
    hi = _hash32(x ^ 0x5BD1E995)
    # 53 random bits: 32 from x, 21 from hi.
    bits = (x << 21) | (hi >> 11)
    return bits.to(torch.float64) * (1.0 / float(1 << 53))


def _draws(seed: int, num_paths: int, first_step: int, num_steps: int,
           device: torch.device) -> torch.Tensor:
    """float64 ``[num_steps, num_paths]``: the number of path ``j`` at step ``first_step + i``.

    Stratified over the ``num_paths`` paths of an FSA: at each step path ``j`` falls in
    stratum ``rank(j)`` of ``num_paths`` equal strata (the ranks a pseudo-random permutation
    that changes at every step) and is uniform within it, so paths that share a state spread
    over its arcs like k2's evenly spaced numbers while every step is a fresh draw."""
    steps = torch.arange(first_step, first_step + num_steps, device=device).unsqueeze(1)
    paths = torch.arange(num_paths, device=device).unsqueeze(0)
    steps, paths = torch.broadcast_tensors(steps, paths)
    keys = uniform_hash(seed ^ 0x2545F491, paths, steps)
    rank = torch.argsort(torch.argsort(keys, dim=1), dim=1)
    return (rank + uniform_hash(seed, paths, steps)) / num_paths


def sample_paths(
    fsas: k2.Fsa, num_paths: int, seed: int = 0, use_double_scores: bool = True
) -> k2.RaggedTensor:
    """Sample ``num_paths`` paths through each FSA with probability proportional to
    ``exp(score)`` (log semiring), like ``k2.random_paths``, but with per-step random numbers
    that depend on ``(seed, path index within its FSA, step)`` only (see the module
    docstring).

    Args:
      fsas: FsaVec ``[fsa][state][arc]``, acyclic, on any device.
      num_paths: paths per FSA (``>= 1``).
      seed: changes every draw.
      use_double_scores: compute the arc probabilities in float64.

    Returns:
      int32 ``k2.RaggedTensor`` ``[fsa][path][arc]`` of arc indexes (idx012) into ``fsas``,
      each path running from the start state to the final state (its last arc is the final
      arc). An FSA without a successful path (empty, or total score ``-inf``) gets no paths.
    """
    if len(fsas.shape) != 3:
        raise ValueError(f"fsas must be an FsaVec [fsa][state][arc], got shape {fsas.shape}")
    if not isinstance(num_paths, int) or num_paths < 1:
        raise ValueError(f"num_paths must be an int >= 1, got {num_paths!r}")
    device = fsas.device
    counts, paths_split = _paths_split(fsas, num_paths, use_double_scores)
    total = int(paths_split[-1])
    paths_shape = k2.ragged.create_ragged_shape2(paths_split.to(torch.int32), None, total)
    if total == 0:
        arcs_shape = k2.ragged.create_ragged_shape2(
            torch.zeros(1, dtype=torch.int32, device=device), None, 0)
        empty = torch.zeros(0, dtype=torch.int32, device=device)
        return k2.RaggedTensor(paths_shape.compose(arcs_shape), empty)
    path_ids, arcs = _walk_paths(fsas, num_paths, seed, (counts, paths_split),
                                 use_double_scores)
    order = torch.sort(path_ids, stable=True).indices
    lengths = torch.bincount(path_ids, minlength=total)
    arcs_split_out = torch.zeros(total + 1, dtype=torch.int64, device=device)
    torch.cumsum(lengths, 0, out=arcs_split_out[1:])
    arcs_shape = k2.ragged.create_ragged_shape2(arcs_split_out.to(torch.int32), None,
                                                int(arcs.numel()))
    return k2.RaggedTensor(paths_shape.compose(arcs_shape), arcs[order].to(torch.int32))


def _paths_split(fsas: k2.Fsa, num_paths: int, use_double_scores: bool
                 ) -> tuple[torch.Tensor, torch.Tensor]:
    """The paths of each FSA, int64 ``[num_fsas]`` (``num_paths`` with a successful path,
    else 0), and their row splits, int64 ``[num_fsas + 1]``."""
    num_fsas = fsas.shape[0]
    counts = torch.zeros(num_fsas, dtype=torch.int64, device=fsas.device)
    if fsas.num_arcs > 0:
        tot = fsas._get_tot_scores(use_double_scores=use_double_scores, log_semiring=True)
        counts = torch.where(tot > float("-inf"), num_paths, 0).to(torch.int64)
    paths_split = torch.zeros(num_fsas + 1, dtype=torch.int64, device=fsas.device)
    torch.cumsum(counts, 0, out=paths_split[1:])
    return counts, paths_split


def _walk_paths(fsas: k2.Fsa, num_paths: int, seed: int,
                paths: tuple[torch.Tensor, torch.Tensor], use_double_scores: bool
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """Walk every path from its start state to its final state, one step for all paths at a
    time: the path (int64) and arc idx012 (int64) of every step taken, step by step."""
    device = fsas.device
    shape = fsas.arcs.shape()
    states_split = shape.row_splits(1).to(torch.int64)  # [num_fsas + 1]
    arcs_split = shape.row_splits(2).to(torch.int64)  # [num_states + 1]
    counts, paths_split = paths
    total = int(paths_split[-1])
    cdf = fsas._get_arc_cdf(use_double_scores=use_double_scores, log_semiring=True)
    dest = fsas.arcs.values()[:, 1].to(torch.int64)  # dest state idx1
    path_fsa = torch.repeat_interleave(torch.arange(fsas.shape[0], device=device), counts)
    path_idx1 = torch.arange(total, device=device) - paths_split[path_fsa]
    first_state = states_split[path_fsa]
    final_state = states_split[path_fsa + 1] - 1

    cur = first_state.clone()  # state idx01 of every path
    active = torch.arange(total, device=device)
    taken_paths: list[torch.Tensor] = []
    taken_arcs: list[torch.Tensor] = []
    max_steps = int((states_split[1:] - states_split[:-1]).max())
    step = 0
    while active.numel() > 0:
        if step >= max_steps:
            raise RuntimeError("sample_paths: a path did not reach the final state (cyclic "
                               "FSA?)")
        state = cur[active]
        begin = arcs_split[state]
        degree = arcs_split[state + 1] - begin
        if bool((degree == 0).any()):
            raise ValueError("sample_paths: reached a non-final state without arcs (an FSA "
                             "with dead ends that k2 says has a successful path)")
        if step % _STEPS_PER_TABLE == 0:
            table = _draws(seed, num_paths, step, _STEPS_PER_TABLE, device)
        u = table[step % _STEPS_PER_TABLE][path_idx1[active]]
        # For each active path, the number of its state's arcs after the first whose
        # interval starts at or below u: the chosen arc (std::upper_bound, as in k2).
        row_ids = torch.repeat_interleave(torch.arange(active.numel(), device=device), degree)
        row_start = torch.cumsum(degree, 0) - degree
        offset = torch.arange(row_ids.numel(), device=device) - row_start[row_ids]
        arc = begin[row_ids] + offset
        hit = (offset > 0) & (cdf[arc] <= u[row_ids])
        chosen = begin + torch.zeros_like(begin).index_add_(0, row_ids, hit.to(torch.int64))
        taken_paths.append(active)
        taken_arcs.append(chosen)
        cur[active] = dest[chosen] + first_state[active]
        active = active[cur[active] != final_state[active]]
        step += 1
    return torch.cat(taken_paths), torch.cat(taken_arcs)


def k2_random_paths(fsas: k2.Fsa, num_paths: int, use_double_scores: bool = True
                    ) -> k2.RaggedTensor:
    """``k2.random_paths`` (icefall's sampler: the same paths for the same lattice), with
    :func:`sample_paths`' contract for FSAs without a successful path (no arcs, e.g. the
    one-state lattice of an utterance without frames, or total score ``-inf``): they get no
    paths (``k2.random_paths`` aborts on them). The others are sampled
    together as ``k2.random_paths`` samples them in a batch of their own.

    Returns:
      int32 ``k2.RaggedTensor`` ``[fsa][path][arc]`` of arc indexes (idx012) into ``fsas``.
    """
    device = fsas.device
    n = fsas.shape[0]
    start = fsas.arcs.shape().remove_axis(1).row_splits(1).to(torch.int64)
    has = start[1:] > start[:-1]  # FSAs with arcs
    if fsas.num_arcs > 0:
        tot = fsas._get_tot_scores(use_double_scores=use_double_scores, log_semiring=True)
        has &= tot > float("-inf")
    if bool(has.all()):
        return k2.random_paths(fsas, use_double_scores=use_double_scores, num_paths=num_paths)
    keep = torch.nonzero(has).flatten()
    counts = torch.zeros(n, dtype=torch.int64, device=device)
    arcs_shape = k2.ragged.create_ragged_shape2(
        torch.zeros(1, dtype=torch.int32, device=device), None, 0)
    values = torch.zeros(0, dtype=torch.int32, device=device)
    if keep.numel():
        sub = k2.index_fsa(fsas, keep.to(torch.int32))
        path = k2.random_paths(sub, use_double_scores=use_double_scores, num_paths=num_paths)
        per_sub = path.shape.row_splits(1).to(torch.int64)
        counts[keep] = per_sub[1:] - per_sub[:-1]
        # arc idx012 into `sub` -> into `fsas`: the same arc of the FSA it was taken from
        sub_of_arc = path.shape.row_ids(1).to(torch.int64)[path.shape.row_ids(2).to(torch.int64)]
        sub_start = sub.arcs.shape().remove_axis(1).row_splits(1).to(torch.int64)
        values = (path.values.to(torch.int64) - sub_start[sub_of_arc]
                  + start[keep][sub_of_arc]).to(torch.int32)
        arcs_shape = path.shape.get_layer(1)
    splits = torch.zeros(n + 1, dtype=torch.int64, device=device)
    torch.cumsum(counts, 0, out=splits[1:])
    paths_shape = k2.ragged.create_ragged_shape2(splits.to(torch.int32), None, int(splits[-1]))
    return k2.RaggedTensor(paths_shape.compose(arcs_shape), values)


def distinct_paths(lattice: k2.Fsa, key: DedupKey, num_paths: int, nbest_scale: float,
                   sampler: str = "hashed", seed: int = 0, use_double_scores: bool = True
                   ) -> tuple[k2.Fsa, k2.RaggedShape, k2.RaggedTensor]:
    """Sample ``num_paths`` paths per utterance of ``lattice`` (FsaVec ``[utt][state][arc]``)
    with its scores times ``nbest_scale`` and keep the first of each distinct key sequence.

    ``sampler`` is ``"hashed"`` (:func:`sample_paths` with ``seed``) or ``"k2"``
    (:func:`k2_random_paths`); ``lattice`` is not modified.

    Returns:
      ``(fsa, shape, key_seqs)``: the kept alignments as linear FSAs ``[path][state][arc]``
      carrying the (unscaled) scores and attributes of the arcs taken, the ``k2.RaggedShape``
      ``[utt][path]``, and int32 ragged ``[path][symbol]`` key sequences (no zeros). An
      utterance whose lattice has no successful path gets zero paths.
    """
    keyed = keyed_lattice(lattice, key)
    sampling = keyed.clone()
    sampling.scores = keyed.scores * nbest_scale
    if sampler == "k2":
        path = k2_random_paths(sampling, num_paths, use_double_scores)
    else:
        path = sample_paths(sampling, num_paths, seed=seed, use_double_scores=use_double_scores)
    # path: [utt][path][arc] of arc indexes into `keyed`
    key_seq = k2.ragged.index(keyed.labels.contiguous(), path)
    key_seq = key_seq.remove_values_leq(0)
    unique, _, new2old = key_seq.unique(need_num_repeats=False, need_new2old_indexes=True)
    kept, _ = path.index(new2old, axis=1, need_value_indexes=False)
    arcs = kept.remove_axis(0)  # [path][arc]
    fsa = restore_labels(paths_to_fsa(keyed, arcs), key)
    return fsa, unique.shape.get_layer(0), unique.remove_axis(0)
