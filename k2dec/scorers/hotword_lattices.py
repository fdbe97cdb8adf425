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

    def __call__(self, lattice: k2.Fsa) -> k2.Fsa:
        """``lattice`` (FsaVec ``[utt][state][arc]``, acyclic, token ids in ``labels``) with
        the bonus in its scores, the same paths, arcs in the same order along each path and
        the same attributes; top-sorted, on ``lattice``'s device."""
        if not isinstance(lattice, k2.Fsa) or lattice.arcs.num_axes() != 3:
            raise ValueError("TokenLatticeHotwords needs an FsaVec [utt][state][arc]")
        cpu = lattice.to("cpu")
        if cpu.num_arcs == 0:
            return lattice
        labels = cpu.labels
        if int(labels.max()) >= self.vocab_size:
            raise ValueError(f"lattice has token id {int(labels.max())}, not below "
                             f"vocab_size {self.vocab_size}")
        steps, finals = self._reachable(cpu)
        acceptor = self._acceptor(steps, finals)
        out = k2.intersect(k2.arc_sort(cpu), acceptor, treat_epsilons_specially=True)
        return k2.top_sort(k2.connect(out)).to(lattice.device)

    def _reachable(self, fsa: k2.Fsa) -> tuple[torch.Tensor, torch.Tensor]:
        """The (node, token) steps (int64 ``[K, 2]``, distinct) taken from the (lattice
        state, node) pairs reachable from every lattice's start with the root, and the
        nodes (int64, distinct) at which a final arc is taken."""
        shape = fsa.arcs.shape()
        splits1 = shape.row_splits(1).to(torch.int64)
        splits2 = shape.row_splits(2).to(torch.int64)
        arc_fsa = shape.row_ids(1).to(torch.int64)[shape.row_ids(2).to(torch.int64)]
        values = fsa.arcs.values()
        dst = values[:, 1].to(torch.int64) + splits1[arc_fsa]
        label = values[:, 2].to(torch.int64)
        num_nodes = self.context.num_nodes
        states = splits1[:-1][splits1[1:] > splits1[:-1]]  # start states
        nodes = torch.zeros_like(states)
        found, finals = [], []
        while states.numel():
            first = splits2[states]
            counts = splits2[states + 1] - first
            arcs = _ranges(first, counts)
            node = nodes.repeat_interleave(counts)
            lab = label[arcs]
            nxt = node.clone()
            tok = lab > 0
            if bool(tok.any()):
                keys, inverse = torch.unique(node[tok] * self.vocab_size + lab[tok],
                                             return_inverse=True)
                found.append(keys)
                nxt[tok] = self._goto(keys)[inverse]
            final = lab < 0
            finals.append(node[final])
            pairs = torch.unique(dst[arcs][~final] * num_nodes + nxt[~final])
            states, nodes = pairs // num_nodes, pairs % num_nodes
        keys = torch.unique(torch.cat(found)) if found else torch.zeros(0, dtype=torch.int64)
        steps = torch.stack([keys // self.vocab_size, keys % self.vocab_size], 1)
        return steps, torch.unique(torch.cat(finals))

    def _goto(self, keys: torch.Tensor) -> torch.Tensor:
        """The next node of each step ``node * V + token`` of ``keys`` (int64, distinct)."""
        return self._step(keys)[0]

    def _step(self, keys: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(next node, score)`` of each step ``node * V + token`` of ``keys``: the rows of
        the steps' distinct nodes, over their distinct tokens only."""
        node, token = keys // self.vocab_size, keys % self.vocab_size
        rows, row = torch.unique(node, return_inverse=True)
        columns, col = torch.unique(token, return_inverse=True)
        nxt, score = self.steps.step(rows, columns)
        return nxt[row, col], score[row, col]

    def _acceptor(self, steps: torch.Tensor, finals: torch.Tensor) -> k2.Fsa:
        """The automaton's ``steps`` (``[K, 2]``: node, token) as an acceptor whose state 0 is
        the root, with a final arc (score 0) from every node of ``finals``."""
        nxt, score = self._step(steps[:, 0] * self.vocab_size + steps[:, 1])
        nodes = torch.unique(torch.cat([torch.zeros(1, dtype=torch.int64), steps[:, 0], nxt,
                                        finals]))  # sorted: the root (node 0) first
        index = torch.full((self.context.num_nodes,), -1, dtype=torch.int64)
        index[nodes] = torch.arange(nodes.numel())
        n = nodes.numel()
        finals = index[finals]
        src = torch.cat([index[steps[:, 0]], finals])
        dst = torch.cat([index[nxt], torch.full_like(finals, n)])
        labels = torch.cat([steps[:, 1], torch.full_like(finals, -1)])
        scores = torch.cat([score.to(torch.float32), torch.zeros(finals.numel())])
        order = torch.sort(src, stable=True).indices
        arcs = torch.stack([src, dst, labels, torch.zeros_like(src)], 1)[order]
        fsa = k2.Fsa(arcs.to(torch.int32))
        fsa.scores = scores[order]
        return k2.arc_sort(fsa)


def _ranges(first: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """``cat([arange(f, f + c) for f, c in zip(first, counts)])`` (int64)."""
    total = int(counts.sum())
    starts = torch.cumsum(counts, 0) - counts
    return first.repeat_interleave(counts) + torch.arange(total) - starts.repeat_interleave(
        counts)
