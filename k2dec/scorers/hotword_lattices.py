"""The token-level hotword bonus of :func:`k2dec.scorers.hotword_graph` put on transducer
lattices after the search, for lists whose biased decoding graph would be too large (the
``fast_beam_search`` family: LG intersected with the automaton, or the automaton itself).

Every path of a lattice gets exactly the bonus the biased graph gives its token sequence
(non-strict bonus and refund, ``word_start`` and ``partial`` as in
:mod:`k2dec.scorers.context_graph`; no refund on the final arc, because k2's RNN-T decoding
drops a graph's final weights), so a path's score is what it would have been in the lattice
of the biased graph. What differs is the search: it runs on the unbiased graph, so a path
that only the bonus would have kept inside ``beam`` / ``max_states`` / ``max_contexts`` is
pruned, and the biased lattice holds fewer hotword paths than the biased graph's would.

The intersection is computed on the fly: starting from (start state, root), the pairs
(lattice state, automaton node) reachable along the lattice's arcs are expanded one arc
layer at a time (a transducer lattice has one arc per frame on every path, so that is one
step per frame, vectorized over the states of every lattice of the batch), and only the
(node, token) steps met on the way become arcs of the acceptor that ``k2.intersect`` then
uses. Memory is linear in the list plus the pairs of the batch's lattices, never nodes
times tokens.
"""

from __future__ import annotations

import k2
import torch

from k2dec.scorers.context_graph import ContextGraph, HotwordSteps

__all__ = ["TokenLatticeHotwords"]


class TokenLatticeHotwords:
    """Adds the hotword bonus of every path's token sequence to transducer lattices.

    Args:
      context: the automaton of the list (:class:`~k2dec.scorers.ContextGraph`, its bonus
        per token).
      vocab_size: ``V``: token ids in the lattices' ``labels`` are in ``[0, V)``, 0 being
        blank (an epsilon for the automaton), ``-1`` on final arcs.
      word_start: bool per token id (whole words only), or None.
      partial: the share of a phrase's bonus a partial match holds, in ``[0, 1]``.
    """

    def __init__(self, context: ContextGraph, vocab_size: int,
                 word_start: torch.Tensor | None = None, partial: float = 1.0) -> None:
        if not isinstance(context, ContextGraph):
            raise TypeError(f"context must be a ContextGraph, got {type(context).__name__}")
        self.context = context
        self.vocab_size = int(vocab_size)
        self.steps = HotwordSteps([context], self.vocab_size, False, word_start, partial)
        root_next, root_score = self.steps.step(torch.zeros(1, dtype=torch.int64))
        self.root_next, self.root_score = root_next[0], root_score[0]

    def __call__(self, lattice: k2.Fsa) -> k2.Fsa:
        """``lattice`` (FsaVec ``[utt][state][arc]``, acyclic, token ids in ``labels``) with
        the bonus in its scores, the same paths, arcs in the same order along each path and
        the same attributes; connected and top-sorted, on ``lattice``'s device."""
        if not isinstance(lattice, k2.Fsa) or lattice.arcs.num_axes() != 3:
            raise ValueError("TokenLatticeHotwords needs an FsaVec [utt][state][arc]")
        if lattice.num_arcs == 0:
            return lattice
        labels = lattice.labels
        if int(labels.max()) >= self.vocab_size:
            raise ValueError(f"lattice has token id {int(labels.max())}, not below "
                             f"vocab_size {self.vocab_size}")
        cpu = k2.connect(lattice.to("cpu"))  # k2's pruned search leaves dead ends
        if cpu.num_arcs == 0:
            return lattice
        acceptor = self._acceptor(*self._reachable(cpu))
        out = k2.intersect(k2.arc_sort(cpu), acceptor, treat_epsilons_specially=True)
        return k2.top_sort(out).to(lattice.device)

    def _reachable(self, fsa: k2.Fsa) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The steps from nodes but the root (int64 keys ``node * V + token``, distinct),
        their next nodes and scores, met on the way from every lattice's start with the
        root through the (lattice state, node) pairs reachable one arc layer at a time (the
        root's steps are looked up in its row)."""
        shape = fsa.arcs.shape()
        splits1 = shape.row_splits(1).to(torch.int64)
        splits2 = shape.row_splits(2).to(torch.int64)
        arc_fsa = shape.row_ids(1).to(torch.int64)[shape.row_ids(2).to(torch.int64)]
        values = fsa.arcs.values()
        dst = values[:, 1].to(torch.int64) + splits1[arc_fsa]
        label = values[:, 2].to(torch.int64)
        num_nodes = self.context.num_nodes
        memo = _Memo()
        states = splits1[:-1][splits1[1:] > splits1[:-1]]  # start states
        nodes = torch.zeros_like(states)
        while states.numel():
            first = splits2[states]
            counts = splits2[states + 1] - first
            arcs = _ranges(first, counts)
            node = nodes.repeat_interleave(counts)
            lab = label[arcs]
            keep = lab >= 0  # a final arc ends the path
            arcs, node, lab = arcs[keep], node[keep], lab[keep]
            nxt = torch.where((node == 0) & (lab > 0), self.root_next[lab], node)  # blank: stays
            inner = (lab > 0) & (node > 0)
            if bool(inner.any()):
                nxt[inner] = memo.next(node[inner] * self.vocab_size + lab[inner], self._step)
            pairs = torch.unique(dst[arcs] * num_nodes + nxt)
            states, nodes = pairs // num_nodes, pairs % num_nodes
        return memo.keys, memo.nxt, memo.score

    def _step(self, keys: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(next node, score)`` of each step ``node * V + token`` of ``keys`` (distinct):
        the rows of the steps' distinct nodes, over their distinct tokens only."""
        node, token = keys // self.vocab_size, keys % self.vocab_size
        rows, row = torch.unique(node, return_inverse=True)
        columns, col = torch.unique(token, return_inverse=True)
        nxt, score = self.steps.step(rows, columns)
        return nxt[row, col], score[row, col]

    def _acceptor(self, keys: torch.Tensor, nxt: torch.Tensor, score: torch.Tensor) -> k2.Fsa:
        """The root's row, the steps ``keys`` (``node * V + token``) to ``nxt`` with
        ``score`` and a final arc (score 0) from every node as an acceptor whose state 0 is
        the root."""
        tokens = torch.arange(1, self.vocab_size)
        src_node = torch.cat([torch.zeros_like(tokens), keys // self.vocab_size])
        dst_node = torch.cat([self.root_next[tokens], nxt])
        nodes = torch.unique(torch.cat([torch.zeros(1, dtype=torch.int64), src_node,
                                        dst_node]))  # sorted: the root (node 0) first
        index = torch.full((self.context.num_nodes,), -1, dtype=torch.int64)
        index[nodes] = torch.arange(nodes.numel())
        n = nodes.numel()
        every = torch.arange(n)
        src = torch.cat([index[src_node], every])
        dst = torch.cat([index[dst_node], torch.full_like(every, n)])
        labels = torch.cat([tokens, keys % self.vocab_size, torch.full_like(every, -1)])
        scores = torch.cat([self.root_score[tokens], score, torch.zeros(n, dtype=torch.float64)])
        order = torch.sort(src, stable=True).indices
        arcs = torch.stack([src, dst, labels, torch.zeros_like(src)], 1)[order]
        fsa = k2.Fsa(arcs.to(torch.int32))
        fsa.scores = scores[order].to(torch.float32)
        return k2.arc_sort(fsa)


class _Memo:
    """The steps computed so far (sorted int64 keys ``node * V + token``, their next nodes
    and float64 scores), so that each is computed once per batch."""

    def __init__(self) -> None:
        self.keys = torch.zeros(0, dtype=torch.int64)
        self.nxt = torch.zeros(0, dtype=torch.int64)
        self.score = torch.zeros(0, dtype=torch.float64)

    def next(self, keys: torch.Tensor, compute) -> torch.Tensor:
        """The next node of every step of ``keys`` (int64, any order, repeats), computing
        (``compute(distinct keys) -> (next, score)``) those not seen before."""
        wanted, inverse = torch.unique(keys, return_inverse=True)
        pos = torch.searchsorted(self.keys, wanted)
        known = pos < self.keys.numel()
        known[known.clone()] = self.keys[pos[known]] == wanted[known]
        if not bool(known.all()):
            new = wanted[~known]
            nxt, score = compute(new)
            keys_all = torch.cat([self.keys, new])
            order = torch.argsort(keys_all)
            self.keys = keys_all[order]
            self.nxt = torch.cat([self.nxt, nxt])[order]
            self.score = torch.cat([self.score, score])[order]
            pos = torch.searchsorted(self.keys, wanted)
        return self.nxt[pos][inverse]


def _ranges(first: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """``cat([arange(f, f + c) for f, c in zip(first, counts)])`` (int64)."""
    total = int(counts.sum())
    starts = torch.cumsum(counts, 0) - counts
    return first.repeat_interleave(counts) + torch.arange(total) - starts.repeat_interleave(
        counts)
