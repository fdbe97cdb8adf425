"""Intersecting n-best key sequences with their utterances' lattices, memory bounded.

Each path's key sequence (word or token ids, as an acceptor with epsilon self-loops) is
intersected with the keyed lattice (:func:`~k2dec.nbest.keys.keyed_lattice`) of its utterance
by ``k2.intersect_device``, in chunks whose lattice arcs add up to a budget: each path's
intersection is about as big as its utterance's lattice (~0.5 KB per arc), so memory stays
flat however many paths there are. :func:`best_alignments` keeps the best alignment of every
path (what :meth:`~k2dec.nbest.Nbest.intersect` returns), by default through one prefix tree
of an utterance's paths (:mod:`k2dec.nbest.trie`); :func:`key_total_scores` keeps the total
score of all alignments.

The key sequences come as int32 ragged ``[path][symbol]`` with a ``k2.RaggedShape``
``[utt][path]`` saying which utterance each path belongs to (an n-best's ``key_seqs`` and
``shape``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import k2
import torch

from .chunking import chunk_end
from .config import NbestConfig
from .keys import DedupKey, check_lattice, keyed_lattice, paths_to_fsa, restore_labels
from .trie import PATH_ATTR, build_tries, trie_best_arcs

__all__ = ["IntersectStatus", "arcs_per_fsa", "best_alignments", "intersect_chunks",
           "intersect_lattice", "intersect_tries", "key_total_scores", "top_sorted"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class IntersectStatus:
    """How :meth:`Nbest.intersect` went: chunk size used and whether it had to back off."""

    chunk_size: int
    backoffs: int = 0
    message: str = ""


def intersect_lattice(lattice: k2.Fsa | None, sampled: k2.Fsa | None, num_utts: int
                      ) -> k2.Fsa:
    """``lattice``, or ``sampled`` (the lattice an n-best was sampled from) when ``None``,
    checked to be an FsaVec of ``num_utts`` utterances."""
    if lattice is None:
        if sampled is None:
            raise ValueError("no lattice to intersect with: this n-best does not keep the "
                             "one it was sampled from; pass it")
        lattice = sampled
    check_lattice(lattice)
    if lattice.shape[0] != num_utts:
        raise ValueError(f"lattice has {lattice.shape[0]} utterances, the n-best has {num_utts}")
    return lattice


def _check_limits(max_arcs: int, num_paths: int) -> None:
    if max_arcs < 1:
        raise ValueError(f"max_arcs must be >= 1, got {max_arcs}")
    if num_paths == 0:
        raise ValueError("the n-best has no paths to intersect")


def best_alignments(
    lattice: k2.Fsa, key: DedupKey, key_seqs: k2.RaggedTensor, shape: k2.RaggedShape,
    chunk_size: int = 2000, use_double_scores: bool = True,
    max_arcs: int = NbestConfig.max_intersect_arcs, trie: bool = True,
) -> tuple[k2.Fsa, IntersectStatus]:
    """The best alignment in ``lattice`` (FsaVec ``[utt][state][arc]``) of every key sequence.

    Path by path (``trie=False``), the key sequences are intersected in chunks of at most
    ``chunk_size`` paths touching at most ``max_arcs`` lattice arcs in all
    (:func:`intersect_chunks`); time is proportional to the paths times their lattices' arcs.
    With ``trie`` (the default) the paths of an utterance share that work: their key sequences
    form a prefix tree intersected with the lattice once (:func:`intersect_tries`). Memory is
    bounded as path by path: an utterance's paths are split into tries of at most ``max_arcs
    // lattice arcs`` paths (one at least), intersected in chunks whose lattice arcs times
    paths stay within ``max_arcs`` (a bound on the product, never larger than the separate
    intersections). The alignments are those of path by path; only among alignments of
    exactly equal score may another one be chosen. If a key sequence has no alignment in
    ``lattice`` (not the one the paths came from), all paths go path by path, which gives that
    one an empty FSA.

    Returns:
      ``(fsa, status)``: FsaVec ``[path][state][arc]`` of linear FSAs carrying the lattice's
      attributes (``scores``, ``lm_scores``, ``aux_labels``, ...) along each best path, and
      how the intersection went.
    """
    keyed = k2.arc_sort(keyed_lattice(lattice, key))
    fsa = status = None
    if trie:
        fsa, status = intersect_tries(keyed, key_seqs, shape, use_double_scores, max_arcs)
    if fsa is None:
        results, status = intersect_chunks(
            keyed, key_seqs, shape.row_ids(1), chunk_size,
            lambda inter: k2.shortest_path(inter, use_double_scores=use_double_scores),
            max_arcs,
        )
        fsa = results[0] if len(results) == 1 else k2.cat(results)
    return restore_labels(fsa, key), status


def key_total_scores(
    lattice: k2.Fsa, key: DedupKey, key_seqs: k2.RaggedTensor, shape: k2.RaggedShape,
    log_semiring: bool = True, chunk_size: int = 2000,
    max_arcs: int = NbestConfig.max_intersect_arcs,
) -> torch.Tensor:
    """float64 ``[num_paths]``: the total score of *all* alignments of each key sequence in
    ``lattice`` (log-sum with ``log_semiring``, else the best one); chunked like
    :func:`best_alignments` path by path."""

    def totals(inter: k2.Fsa) -> torch.Tensor:
        inter = k2.top_sort(inter)
        return inter.get_tot_scores(use_double_scores=True, log_semiring=log_semiring)

    keyed = k2.arc_sort(keyed_lattice(lattice, key))
    results, _ = intersect_chunks(keyed, key_seqs, shape.row_ids(1), chunk_size, totals,
                                  max_arcs)
    return torch.cat(results).to(torch.float64)


def intersect_chunks(keyed: k2.Fsa, key_seqs: k2.RaggedTensor, path_to_utt: torch.Tensor,
                     chunk_size: int, reduce: Callable[[k2.Fsa], object], max_arcs: int
                     ) -> tuple[list, IntersectStatus]:
    """Intersect the key sequences with their utterances' arc-sorted keyed lattices
    ``keyed`` chunk by chunk; ``reduce(inter)`` turns each chunk's path lattices into what the
    caller keeps (the list returned, in path order). On a CUDA out-of-memory error both
    limits are halved (down to one path), and the back-off is logged and recorded."""
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    num_paths = key_seqs.dim0
    _check_limits(max_arcs, num_paths)
    device = keyed.device
    paths = k2.add_epsilon_self_loops(k2.linear_fsa(key_seqs.to(device)))
    path_to_utt = path_to_utt.to(device)
    cost = arcs_per_fsa(keyed).to(torch.int64)[path_to_utt.to(torch.int64)].cpu()
    results: list = []
    backoffs = start = 0
    size, budget = chunk_size, max_arcs
    while start < num_paths:
        end = chunk_end(cost, start, size, budget)
        idx = torch.arange(start, end, dtype=torch.int32, device=device)
        try:
            chunk = k2.index_fsa(paths, idx)
            inter = k2.intersect_device(
                keyed, chunk, b_to_a_map=path_to_utt[start:end], sorted_match_a=True
            )
            results.append(reduce(top_sorted(inter)))
        except torch.cuda.OutOfMemoryError as e:  # on CPU, max_arcs bounds the memory
            if end - start == 1:
                raise
            size = max(1, (end - start) // 2)
            budget = max(1, budget // 2)
            backoffs += 1
            logger.warning("Nbest.intersect: out of memory (%s); chunk size -> %d paths, "
                           "%d lattice arcs", e, size, budget)
            continue
        start = end
    status = IntersectStatus(
        chunk_size=size, backoffs=backoffs,
        message=f"backed off {backoffs} times" if backoffs else "",
    )
    return results, status


def _trie_groups(utt_arcs: torch.Tensor, shape: k2.RaggedShape, max_arcs: int
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Groups of an utterance's paths whose lattice arcs x paths stay within ``max_arcs``
    (one path at least), numbered in path order: each path's group, each group's utterance
    and the groups' first paths (int64, on the CPU; the last entry is the number of paths)."""
    num_paths = shape.tot_size(1)
    path_utt = shape.row_ids(1).to("cpu", torch.int64)
    per_group = torch.clamp(max_arcs // torch.clamp(utt_arcs, min=1), min=1)
    paths_per_utt = shape.row_splits(1).to("cpu", torch.int64)
    rank = torch.arange(num_paths, dtype=torch.int64) - paths_per_utt[path_utt]
    sub = torch.div(rank, per_group[path_utt], rounding_mode="floor")
    # group id: (utterance, sub-group), numbered in path order (non-decreasing)
    new_group = torch.ones(num_paths, dtype=torch.bool)
    new_group[1:] = (path_utt[1:] != path_utt[:-1]) | (sub[1:] != sub[:-1])
    path_group = torch.cumsum(new_group.to(torch.int64), 0) - 1
    group_starts = torch.cat([new_group.nonzero().squeeze(1), torch.tensor([num_paths])])
    return path_group, path_utt[new_group], group_starts


def intersect_tries(keyed: k2.Fsa, key_seqs: k2.RaggedTensor, shape: k2.RaggedShape,
                    use_double_scores: bool, max_arcs: int
                    ) -> tuple[k2.Fsa | None, IntersectStatus | None]:
    """Best alignments (in the arc-sorted keyed lattices ``keyed``) through one trie per
    group of an utterance's paths, a group's lattice arcs x paths within ``max_arcs`` so that
    memory is bounded for any number of paths, as with :func:`intersect_chunks`; ``(None,
    None)`` when some key sequence has no alignment."""
    num_paths = shape.tot_size(1)
    _check_limits(max_arcs, num_paths)
    device = keyed.device
    utt_arcs = arcs_per_fsa(keyed).to("cpu", torch.int64)
    path_group, group_utt, group_starts = _trie_groups(utt_arcs, shape, max_arcs)
    num_groups = int(path_group[-1]) + 1
    tries = build_tries(key_seqs.to(device), path_group.to(device), num_groups)
    cost = utt_arcs[group_utt] * (group_starts[1:] - group_starts[:-1])
    group_utt_dev = group_utt.to(device, torch.int32)
    pieces = []
    start = 0
    while start < num_groups:
        end = chunk_end(cost, start, num_groups, max_arcs)
        groups = torch.arange(start, end, dtype=torch.int32, device=device)
        product = k2.intersect_device(keyed, k2.index_fsa(tries, groups),
                                      b_to_a_map=group_utt_dev[start:end], sorted_match_a=True)
        product = top_sorted(product)
        arcs, found = trie_best_arcs(product, num_paths, use_double_scores)
        first, last = int(group_starts[start]), int(group_starts[end])
        if not bool(found[first:last].all()):
            return None, None
        delattr(product, PATH_ATTR)
        chunk_arcs, _ = arcs.index(torch.arange(first, last, dtype=torch.int32, device=device),
                                   axis=0)
        pieces.append(paths_to_fsa(product, chunk_arcs))
        start = end
    fsa = pieces[0] if len(pieces) == 1 else k2.cat(pieces)
    return fsa, IntersectStatus(chunk_size=num_paths)


def top_sorted(fsas: k2.Fsa) -> k2.Fsa:
    """``fsas`` itself when k2 flags it top-sorted (intersections of top-sorted lattices with
    linear paths are), else ``k2.connect(fsas)``. Shortest paths and total scores need only
    top-sorted input; dead-end states do not change them, and skipping ``connect`` on a
    product that is mostly dead ends is several times faster."""
    if fsas.properties & k2.fsa_properties.TOPSORTED_AND_ACYCLIC == \
            k2.fsa_properties.TOPSORTED_AND_ACYCLIC:
        return fsas
    return k2.connect(fsas)


def arcs_per_fsa(fsas: k2.Fsa) -> torch.Tensor:
    """Number of arcs of each FSA of an FsaVec (int32 ``[num_fsas]``)."""
    shape = fsas.arcs.shape()
    splits = shape.row_splits(2)[shape.row_splits(1).to(torch.int64)]
    return splits[1:] - splits[:-1]
