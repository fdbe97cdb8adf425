"""Best alignments of many key sequences of an utterance with one intersection.

The key sequences of an utterance's paths (distinct word or token sequences) are merged into a
prefix tree (trie) whose node for a prefix is shared by every path starting with it, and whose
final arc from a path's last node belongs to that path. One ``k2.intersect_device`` of the
utterance's keyed lattice with its trie then aligns all paths at once: the work on a common
prefix is done once instead of once per path. Every path of the product ends in the final arc
of exactly one key sequence, so the best alignment of a sequence is the best path of the
product ending in that sequence's final arc: one tropical forward pass over the product gives
the best entering arc of every state, and following those back from each sequence's best final
arc gives its alignment, for all paths together.
"""

from __future__ import annotations

import k2
import torch

__all__ = ["PATH_ATTR", "build_tries", "trie_best_arcs"]

PATH_ATTR = "nbest_path1"
"""Int32 arc attribute of a trie: 1 + the index of the path whose final arc it is (0 on the
other arcs); it survives the intersection, so final arcs of the product name their path."""


def build_tries(key_seqs: k2.RaggedTensor, path_to_utt: torch.Tensor, num_utts: int) -> k2.Fsa:
    """One trie acceptor per utterance, with epsilon self-loops on every state but the final.

    Args:
      key_seqs: int32 ragged ``[path][symbol]`` (symbols > 0), distinct within an utterance.
      path_to_utt: int ``[num_paths]``, non-decreasing: the utterance of each path.
      num_utts: number of utterances (an utterance without paths gets a trie accepting
        nothing: a start state and a final state, no arcs).

    Returns:
      FsaVec ``[utt][state][arc]`` on ``key_seqs``' device: state 0 is the root, the last
      state is final; attribute :data:`PATH_ATTR`.
    """
    device = key_seqs.device
    num_paths = key_seqs.dim0
    path_utt = path_to_utt.to(device, torch.int64)
    node, parents, symbols = _trie_nodes(key_seqs, path_utt, num_utts)
    next_id = num_utts + sum(p.numel() for p in parents)
    node_parent = torch.cat(parents) if parents else torch.zeros(0, dtype=torch.int64,
                                                                 device=device)
    node_symbol = torch.cat(symbols) if symbols else torch.zeros_like(node_parent)
    utt_of_node = torch.empty(next_id, dtype=torch.int64, device=device)
    utt_of_node[:num_utts] = torch.arange(num_utts, device=device)
    for level_parents, start in _levels(parents, num_utts):
        utt_of_node[start:start + level_parents.numel()] = utt_of_node[level_parents]
    state_splits, local = _local_states(utt_of_node, num_utts)
    final_local = state_splits[1:] - state_splits[:-1] - 1
    # arcs: parent -> node (symbol); each path's last node -> final (-1)
    child = torch.arange(num_utts, next_id, device=device)
    src = torch.cat([local[node_parent], local[node]])
    dst = torch.cat([local[child], final_local[path_utt]])
    label = torch.cat([node_symbol, torch.full((num_paths,), -1, dtype=torch.int64,
                                               device=device)])
    arc_utt = torch.cat([utt_of_node[child], path_utt])
    path1 = torch.cat([torch.zeros_like(node_symbol), torch.arange(1, num_paths + 1,
                                                                   device=device)])
    return k2.add_epsilon_self_loops(_arcs_to_fsa_vec(state_splits, arc_utt, src, dst, label,
                                                      path1))


def _trie_nodes(key_seqs: k2.RaggedTensor, path_utt: torch.Tensor, num_utts: int
                ) -> tuple[torch.Tensor, list[torch.Tensor], list[torch.Tensor]]:
    """Node ids (roots ``0..num_utts-1``, then every distinct ``(parent, symbol)`` by level):
    each path's last node, and per level the parent and symbol of its new nodes."""
    splits = key_seqs.shape.row_splits(1).to(torch.int64)
    lengths = splits[1:] - splits[:-1]
    values = key_seqs.values.to(torch.int64)
    node = path_utt.clone()  # each path's node at the current level
    parents, symbols = [], []
    next_id = num_utts
    base = int(values.max()) + 1 if values.numel() else 1
    max_len = int(lengths.max()) if key_seqs.dim0 else 0
    for level in range(max_len):
        live = (lengths > level).nonzero().squeeze(1)
        sym = values[splits[live] + level]
        key = node[live] * base + sym
        unique, inverse = torch.unique(key, return_inverse=True)
        parents.append(torch.div(unique, base, rounding_mode="floor"))
        symbols.append(unique % base)
        node[live] = next_id + inverse
        next_id += unique.numel()
    return node, parents, symbols


def _local_states(utt_of_node: torch.Tensor, num_utts: int
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """Local state numbers: per utterance, root first, then its nodes by id; then the final
    state. Returns the state row splits ``[num_utts + 1]`` and each node's local state."""
    device, next_id = utt_of_node.device, utt_of_node.numel()
    order = torch.sort(utt_of_node, stable=True).indices
    states_per_utt = torch.bincount(utt_of_node, minlength=num_utts) + 1  # + final
    state_splits = torch.zeros(num_utts + 1, dtype=torch.int64, device=device)
    state_splits[1:] = torch.cumsum(states_per_utt, 0)
    local = torch.empty(next_id, dtype=torch.int64, device=device)
    rank = torch.arange(next_id, device=device) - (state_splits[:-1] - torch.arange(
        num_utts, device=device))[utt_of_node[order]]
    local[order] = rank
    return state_splits, local


def _arcs_to_fsa_vec(state_splits: torch.Tensor, arc_utt: torch.Tensor, src: torch.Tensor,
                     dst: torch.Tensor, label: torch.Tensor, path1: torch.Tensor) -> k2.Fsa:
    """The FsaVec of arcs given by utterance, local source and destination states and label
    (score 0), sorted by source state, with :data:`PATH_ATTR` ``path1``."""
    device = src.device
    global_src = state_splits[arc_utt] + src
    by_src = torch.sort(global_src, stable=True).indices
    num_states = int(state_splits[-1])
    arcs_per_state = torch.bincount(global_src, minlength=num_states)
    arc_splits = torch.zeros(num_states + 1, dtype=torch.int64, device=device)
    arc_splits[1:] = torch.cumsum(arcs_per_state, 0)
    shape = k2.ragged.create_ragged_shape2(row_splits=state_splits.to(torch.int32)).compose(
        k2.ragged.create_ragged_shape2(row_splits=arc_splits.to(torch.int32)))
    zeros = torch.zeros(label.numel(), dtype=torch.float32, device=device)
    arcs = torch.stack([src[by_src].to(torch.int32), dst[by_src].to(torch.int32),
                        label[by_src].to(torch.int32),
                        zeros.view(torch.int32)], dim=1).contiguous()
    trie = k2.Fsa(_ragged_arc(shape, arcs))
    setattr(trie, PATH_ATTR, path1[by_src].to(torch.int32))
    return trie


def _ragged_arc(shape: k2.RaggedShape, arcs: torch.Tensor):
    """k2's arc container from a ``[fsa][state][arc]`` shape and int32 ``(num_arcs, 4)`` rows
    ``(src, dst, label, score bits)`` (what ``k2.Fsa`` takes for an FsaVec)."""
    import _k2  # k2's extension module; its Python layer builds FsaVecs the same way

    return _k2.RaggedArc(shape, arcs)


def _levels(parents: list[torch.Tensor], first: int):
    """``(parents of level i, id of its first node)`` for each level, in order."""
    start = first
    for p in parents:
        yield p, start
        start += p.numel()


def trie_best_arcs(product: k2.Fsa, num_paths: int, use_double_scores: bool = True
                   ) -> tuple[k2.RaggedTensor, torch.Tensor]:
    """The best path of ``product`` (a top-sorted intersection of keyed lattices with
    :func:`build_tries`) ending in each trie path's final arc.

    Returns:
      ``(arcs, found)``: int32 ragged ``[path][arc]``, the arc indexes (into ``product``) of
      each path's best alignment from the start state to its final arc (empty where the path
      has none), and bool ``[num_paths]``, whether it has one.
    """
    device = product.device
    entering = product._get_entering_arcs(use_double_scores).to(torch.int64)
    forward = product._get_forward_scores(use_double_scores, log_semiring=False)
    arcs = product.arcs.values()[:, :3].to(torch.int64)
    shape = product.arcs.shape()
    state_offsets = shape.row_splits(1).to(torch.int64)
    arc_fsa = shape.row_ids(1).to(torch.int64)[shape.row_ids(2).to(torch.int64)]
    src = state_offsets[arc_fsa] + arcs[:, 0]
    path1 = getattr(product, PATH_ATTR).to(torch.int64)
    finals = (path1 > 0).nonzero().squeeze(1)
    score = forward[src[finals]] + product.scores[finals].to(forward.dtype)
    # the best final arc of each path: highest score, ties to the lowest arc index
    best = torch.full((num_paths,), -1, dtype=torch.int64, device=device)
    if finals.numel():
        order = torch.sort(score, descending=True, stable=True).indices
        ranked = finals[order]
        owner = path1[ranked] - 1
        first = torch.ones_like(owner, dtype=torch.bool)
        by_owner = torch.sort(owner, stable=True).indices
        first[by_owner[1:]] = owner[by_owner[1:]] != owner[by_owner[:-1]]
        best[owner[first]] = ranked[first]
        ok = score[order][first] > float("-inf")
        best[owner[first][~ok]] = -1
    found = best >= 0
    # follow the best entering arcs back to the start state, all paths at once
    steps, owners = [], []
    cur = best[found]
    who = found.nonzero().squeeze(1)
    while cur.numel():
        steps.append(cur)
        owners.append(who)
        prev = entering[src[cur]]
        keep = prev >= 0
        cur, who = prev[keep], who[keep]
    if steps:
        all_arcs = torch.cat(steps)
        all_owner = torch.cat(owners)
        step_no = torch.cat([torch.full_like(s, i) for i, s in enumerate(steps)])
        # by path, then from the start state (reverse of the backtracking order)
        order = torch.sort(all_owner * (len(steps) + 1) + (len(steps) - step_no),
                           stable=True).indices
        values = all_arcs[order].to(torch.int32)
        counts = torch.bincount(all_owner, minlength=num_paths)
    else:
        values = torch.zeros(0, dtype=torch.int32, device=device)
        counts = torch.zeros(num_paths, dtype=torch.int64, device=device)
    splits = torch.zeros(num_paths + 1, dtype=torch.int32, device=device)
    splits[1:] = torch.cumsum(counts, 0)
    ragged = k2.RaggedTensor(k2.ragged.create_ragged_shape2(row_splits=splits), values)
    return ragged, found
