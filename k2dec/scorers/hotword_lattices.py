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
uses. Arcs into dead ends (k2's pruned search leaves them) are found from k2's backward
scores and left out of the expansion and of the intersection, whose output is then
connected without ``k2.connect``. The steps expanded are kept for the next calls (most of a
list's steps met in one batch recur in the next), up to ``max_cached_steps``. Memory is
linear in the list plus the pairs of the batch's lattices plus that bound, never nodes
times tokens.
"""

from __future__ import annotations

import k2
import torch

from k2dec.scorers.context_graph import ContextGraph, HotwordSteps

__all__ = ["TokenLatticeHotwords"]

#: Default bound on the (node, token) steps :class:`TokenLatticeHotwords` keeps between
#: calls: ``2**20``, about 24 MB.
MAX_CACHED_STEPS = 2**20


class TokenLatticeHotwords:
    """Adds the hotword bonus of every path's token sequence to transducer lattices.

    Args:
      context: the automaton of the list (:class:`~k2dec.scorers.ContextGraph`, its bonus
        per token).
      vocab_size: ``V``: token ids in the lattices' ``labels`` are in ``[0, V)``, 0 being
        blank (an epsilon for the automaton), ``-1`` on final arcs.
      word_start: bool per token id (whole words only), or None.
      partial: the share of a phrase's bonus a partial match holds, in ``[0, 1]``.
      max_cached_steps: the automaton's steps met in earlier calls are kept (about 24
        bytes each) for the next ones while there are at most this many (else a call
        starts afresh): a list's common steps are expanded once, not once per batch.
    """

    def __init__(self, context: ContextGraph, vocab_size: int,
                 word_start: torch.Tensor | None = None, partial: float = 1.0,
                 max_cached_steps: int = MAX_CACHED_STEPS) -> None:
        if not isinstance(context, ContextGraph):
            raise TypeError(f"context must be a ContextGraph, got {type(context).__name__}")
        self.context = context
        self.vocab_size = int(vocab_size)
        self.steps = HotwordSteps([context], self.vocab_size, False, word_start, partial)
        root_next, root_score = self.steps.step(torch.zeros(1, dtype=torch.int64))
        self.root_next, self.root_score = root_next[0], root_score[0]
        self.max_cached_steps = int(max_cached_steps)
        self._cached = _Memo().table()

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
        cpu, live = self._live(lattice.to("cpu"))  # k2's pruned search leaves dead ends
        if not bool(live.any()):
            return lattice
        cached = self._cached
        memo = _Memo(*(cached if cached[0].numel() <= self.max_cached_steps else ()))
        keys = self._reachable(cpu, live, memo)
        self._cached = memo.table()
        acceptor = self._acceptor(keys, *memo.lookup(keys))
        out = k2.intersect(k2.arc_sort(cpu), acceptor, treat_epsilons_specially=True)
        return k2.top_sort(out).to(lattice.device)

    def _live(self, lattice: k2.Fsa) -> tuple[k2.Fsa, torch.Tensor]:
        """A copy of ``lattice`` (CPU) whose arcs into dead ends (states no path leads from
        to a final state) carry the token ``V``, which the acceptor has no step for, so that
        ``k2.intersect`` leaves them out and its output is connected; and the bool mask of
        the other (live) arcs. Cheaper than ``k2.connect`` (one pass of k2's backward
        scores over the structure: the scores are zeroed for it)."""
        if not lattice.properties & k2.fsa_properties.TOPSORTED_AND_ACYCLIC:
            lattice = k2.top_sort(lattice)
        out = lattice.clone()
        scores = out.scores.clone()  # a view of the arcs
        out.scores = torch.zeros_like(scores)  # coaccessible, whatever the scores
        back = out.get_backward_scores(use_double_scores=True, log_semiring=False)
        out.scores = scores
        shape = out.arcs.shape()
        splits1 = shape.row_splits(1).to(torch.int64)
        arc_fsa = shape.row_ids(1).to(torch.int64)[shape.row_ids(2).to(torch.int64)]
        dst = out.arcs.values()[:, 1].to(torch.int64) + splits1[arc_fsa]
        live = back[dst] > float("-inf")
        if not bool(live.all()):
            out.labels = torch.where(live, out.labels, torch.full_like(out.labels, self.vocab_size))
        return out, live

    def _reachable(self, fsa: k2.Fsa, live: torch.Tensor, memo: _Memo) -> torch.Tensor:
        """The distinct steps from nodes but the root (int64 keys ``node * V + token``,
        sorted) met on the way from every lattice's start with the root through the
        (lattice state, node) pairs reachable one arc layer at a time along the ``live``
        arcs (the root's steps are looked up in its row); ``memo`` gets them all."""
        shape = fsa.arcs.shape()
        splits1 = shape.row_splits(1).to(torch.int64)
        splits2 = shape.row_splits(2).to(torch.int64)
        arc_fsa = shape.row_ids(1).to(torch.int64)[shape.row_ids(2).to(torch.int64)]
        values = fsa.arcs.values()
        dst = values[:, 1].to(torch.int64) + splits1[arc_fsa]
        # a final arc ends the path, a dead one is left out: neither leads on
        label = torch.where(live, values[:, 2].to(torch.int64), -1)
        num_nodes, v = self.context.num_nodes, self.vocab_size
        met = []
        states = splits1[:-1][splits1[1:] > splits1[:-1]]  # start states
        nodes = torch.zeros_like(states)
        while states.numel():
            first = splits2[states]
            counts = splits2[states + 1] - first
            arcs = _ranges(first, counts)
            lab = label[arcs]
            keep = lab >= 0
            arcs, node, lab = arcs[keep], nodes.repeat_interleave(counts)[keep], lab[keep]
            inner = (lab > 0) & (node > 0)
            nxt = torch.where((node == 0) & (lab > 0), self.root_next[lab], node)  # blank: stays
            if bool(inner.any()):
                keys = node[inner] * v + lab[inner]
                nxt[inner] = memo.next(keys, self._step)
                met.append(keys)
            pairs = torch.unique(dst[arcs] * num_nodes + nxt)
            states, nodes = pairs // num_nodes, pairs % num_nodes
        return torch.unique(torch.cat(met)) if met else torch.zeros(0, dtype=torch.int64)

    def _step(self, keys: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(next node, score)`` of each step ``node * V + token`` of ``keys`` (distinct):
        the rows of the steps' distinct nodes, over their distinct tokens only."""
        node, token = keys // self.vocab_size, keys % self.vocab_size
        rows, row = torch.unique(node, return_inverse=True)
        columns, col = torch.unique(token, return_inverse=True)
        nxt, score = self.steps.step(rows, columns)
        return nxt[row, col], score[row, col]

    def _acceptor(self, keys: torch.Tensor, nxt: torch.Tensor, score: torch.Tensor
                  ) -> k2.Fsa:
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
    and float64 scores), so that each is computed once; starts from a :meth:`table`."""

    def __init__(self, keys: torch.Tensor | None = None, nxt: torch.Tensor | None = None,
                 score: torch.Tensor | None = None) -> None:
        empty = keys is None
        self.keys = torch.zeros(0, dtype=torch.int64) if empty else keys
        self.nxt = torch.zeros(0, dtype=torch.int64) if empty else nxt
        self.score = torch.zeros(0, dtype=torch.float64) if empty else score

    def table(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return self.keys, self.nxt, self.score

    def lookup(self, keys: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(next, score)`` of the steps ``keys`` (all in the memo)."""
        pos = torch.searchsorted(self.keys, keys)
        return self.nxt[pos], self.score[pos]

    def next(self, keys: torch.Tensor, compute) -> torch.Tensor:
        """The next node of every step of ``keys`` (int64, any order, repeats), computing
        (``compute(distinct keys) -> (next, score)``) those not seen before."""
        wanted, inverse = torch.unique(keys, return_inverse=True)
        pos = torch.searchsorted(self.keys, wanted)
        known = pos < self.keys.numel()
        known[known.clone()] = self.keys[pos[known]] == wanted[known]
        if not bool(known.all()):
            new = wanted[~known]  # sorted: merged into the sorted table, no sort
            nxt, score = compute(new)
            at = torch.searchsorted(self.keys, new) + torch.arange(new.numel())
            old = torch.ones(self.keys.numel() + new.numel(), dtype=torch.bool)
            old[at] = False
            self.keys = _merged(self.keys, new, old, at)
            self.nxt = _merged(self.nxt, nxt, old, at)
            self.score = _merged(self.score, score, old, at)
            pos = torch.searchsorted(self.keys, wanted)
        return self.nxt[pos][inverse]


def _merged(table: torch.Tensor, new: torch.Tensor, old: torch.Tensor, at: torch.Tensor
            ) -> torch.Tensor:
    """``table`` with ``new`` inserted at the positions ``at`` (``old``: the others)."""
    out = torch.empty(old.numel(), dtype=table.dtype)
    out[old] = table
    out[at] = new
    return out


def _ranges(first: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """``cat([arange(f, f + c) for f, c in zip(first, counts)])`` (int64)."""
    total = int(counts.sum())
    starts = torch.cumsum(counts, 0) - counts
    return first.repeat_interleave(counts) + torch.arange(total) - starts.repeat_interleave(
        counts)
