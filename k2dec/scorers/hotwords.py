"""Hotword (contextual) biasing: an Aho-Corasick automaton over token ids whose bonuses a
search adds as a :class:`~k2dec.scorers.Scorer` (icefall's ``ContextGraph``, ``--context-file``
and ``--context-score``).

Scores. Every token of a phrase carries a bonus (``context_score``, or the phrase's own score;
a token shared by several phrases takes the largest). A node of the trie has
``node_score``, the sum of the bonuses from the root to it. A hypothesis' state is the node of
its current partial match. On a token the automaton moves to ``goto(state, token)`` (the trie
child, else the child of the longest proper suffix that has one, else the root) and pays
``node_score(new) - node_score(old)``: a continued match earns the token's bonus, a broken one
refunds what it had earned (and earns what the new partial match is worth). When a phrase is
complete the hypothesis keeps exactly that phrase's bonus:

- ``strict=False`` (icefall's transducer searches): the state returns to the root, with the
  bonus corrected to the completed phrase's ``node_score`` (a shorter phrase that is a suffix
  of the current match counts when the match itself is not complete);
- ``strict=True`` (icefall's CTC prefix search): the state stays, and the ``node_score`` of
  every phrase that ends at the new node (itself and its suffix phrases) is added once more,
  so a later refund of the partial match leaves those bonuses.

:meth:`HotwordScorer.final_score` refunds an unfinished partial match (``-node_score``).
Unlike icefall, ``node_score`` is always the sum along the path, also when a later phrase
raises the bonus of a shared prefix, so a broken match never keeps part of a bonus.

The automaton is expanded into dense tables ``[S, V]`` (next node, score), so a search step is
two gathers on any device.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import k2
import torch

from k2dec.scorers.base import TableScorer

__all__ = [
    "ContextGraph",
    "Hotword",
    "HotwordScorer",
    "encode_hotwords",
    "hotword_graph",
    "read_hotwords",
]


@dataclass(frozen=True)
class Hotword:
    """One biasing phrase.

    Attributes:
      text: the phrase as written.
      score: its per-token bonus, or None for the list's default (``context_score``).
    """

    text: str
    score: float | None = None


def read_hotwords(path: str | Path) -> list[Hotword]:
    """Read a hotwords file: one phrase per line, optionally followed by ``:SCORE`` (a
    per-token bonus for that phrase), e.g. ``KUBERNETES CLUSTER :3.5``. Blank lines and lines
    starting with ``#`` are skipped.

    Raises:
      ValueError: a missing file or a malformed score (naming the line).
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"hotwords file {str(path)!r} does not exist")
    out = []
    for lineno, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        score = None
        head, sep, tail = line.rpartition(" :")
        if sep:
            try:
                score = float(tail)
            except ValueError:
                raise ValueError(f"{path}:{lineno}: bad score {tail!r} (a line is 'PHRASE' "
                                 "or 'PHRASE :SCORE')") from None
            if not math.isfinite(score):
                raise ValueError(f"{path}:{lineno}: score must be finite, got {tail!r}")
            line = head.strip()
        if line:
            out.append(Hotword(line, score))
    return out


def encode_hotwords(hotwords: Sequence[Hotword | str], sp) -> list[tuple[list[int], float | None]]:
    """Token ids (sentencepiece model ``sp``) and score of each hotword, for
    :class:`ContextGraph`. Phrases are encoded as written (use the case the BPE model was
    trained on)."""
    out = []
    for h in hotwords:
        h = Hotword(h) if isinstance(h, str) else h
        out.append((list(sp.encode(h.text)), h.score))
    return out


class ContextGraph:
    """The Aho-Corasick automaton of one hotword list (see the module docstring).

    Args:
      phrases: ``(token ids, score or None)`` per phrase (e.g. :func:`encode_hotwords`);
        empty phrases are ignored.
      context_score: the default per-token bonus (icefall's ``--context-score``, default 2).

    Attributes:
      num_nodes: ``S``, including the root (node 0).
      children: per node, ``{token: child}``; fail: per node, its fail node;
      node_score: per node, the sum of the bonuses from the root; is_end: per node, whether a
      phrase ends there; output: per node, the nearest node on its fail chain where a phrase
      ends (or -1).
    """

    def __init__(self, phrases: Sequence[tuple[Sequence[int], float | None]],
                 context_score: float = 2.0) -> None:
        if not isinstance(context_score, int | float) or not math.isfinite(context_score):
            raise ValueError(f"context_score must be a finite number, got {context_score!r}")
        self.context_score = float(context_score)
        self.children: list[dict[int, int]] = [{}]
        self.token_score = [0.0]
        self.is_end = [False]
        self.parent = [-1]
        for tokens, score in phrases:
            self._insert([int(t) for t in tokens],
                         self.context_score if score is None else float(score))
        self.num_nodes = len(self.children)
        self.node_score = [0.0] * self.num_nodes
        self.fail = [0] * self.num_nodes
        self.output = [-1] * self.num_nodes
        self._link()

    def _insert(self, tokens: list[int], score: float) -> None:
        node = 0
        for i, tok in enumerate(tokens):
            if tok < 0:
                raise ValueError(f"hotword token ids must be >= 0, got {tok}")
            child = self.children[node].get(tok)
            if child is None:
                child = len(self.children)
                self.children[node][tok] = child
                self.children.append({})
                self.token_score.append(score)
                self.is_end.append(False)
                self.parent.append(node)
            else:
                self.token_score[child] = max(self.token_score[child], score)
            if i == len(tokens) - 1:
                self.is_end[child] = True
            node = child

    def _link(self) -> None:
        """Node scores, fail and output links, breadth first (parents and fail targets are
        shallower, so they are done first)."""
        queue = deque(self.children[0].values())
        order = []
        while queue:
            node = queue.popleft()
            order.append(node)
            parent = self.parent[node]
            self.node_score[node] = self.node_score[parent] + self.token_score[node]
            if parent != 0:
                tok = next(t for t, c in self.children[parent].items() if c == node)
                f = self.fail[parent]
                while f != 0 and tok not in self.children[f]:
                    f = self.fail[f]
                self.fail[node] = self.children[f].get(tok, 0)
            f = self.fail[node]
            self.output[node] = f if self.is_end[f] else self.output[f]
            queue.extend(self.children[node].values())
        self._bfs_order = order

    def tables(self, vocab_size: int,
               strict: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Dense ``next`` (int64 ``[S, V]``), ``score`` (float64 ``[S, V]``) and ``final``
        (float64 ``[S]``) of the automaton over tokens ``[0, V)`` (see the module docstring)."""
        for children in self.children:
            for tok in children:
                if tok >= vocab_size:
                    raise ValueError(f"hotword token id {tok} is not below vocab_size "
                                     f"{vocab_size}")
        s = self.num_nodes
        goto = torch.zeros(s, vocab_size, dtype=torch.int64)
        for node in [0] + self._bfs_order:
            if node != 0:
                goto[node] = goto[self.fail[node]]
            for tok, child in self.children[node].items():
                goto[node, tok] = child
        node_score = torch.tensor(self.node_score, dtype=torch.float64)
        is_end = torch.tensor(self.is_end)
        output = torch.tensor(self.output)
        matched = is_end | (output >= 0)
        if strict:
            out_score = torch.zeros(s, dtype=torch.float64)
            for node in self._bfs_order:  # an output node is shallower: done first
                own = node_score[node] if self.is_end[node] else 0.0
                out_score[node] = own + (out_score[output[node]] if output[node] >= 0 else 0.0)
            extra = out_score
            nxt = goto
        else:
            phrase = torch.where(is_end, torch.arange(s), output.clamp(min=0))
            extra = torch.where(matched, node_score[phrase] - node_score, torch.zeros(s,
                                dtype=torch.float64))
            nxt = torch.where(matched[goto], torch.zeros_like(goto), goto)
        score = node_score[goto] - node_score.unsqueeze(1) + extra[goto]
        return nxt, score, -node_score


def hotword_graph(graph: ContextGraph, vocab_size: int, blank_id: int = 0,
                  device: torch.device | str = "cpu") -> k2.Fsa:
    """The hotword automaton as a decoding graph for ``fast_beam_search``
    (:class:`k2dec.transducer.FastBeamSearch`; on CPU and CUDA): a deterministic acceptor with
    one state per trie node, an arc for every (node, token) but ``blank_id`` carrying the
    non-strict bonus or refund of the module docstring, and a final arc from every node.

    It accepts every token sequence, so it replaces the trivial graph. k2's RNN-T decoding
    drops final weights, so a match still unfinished at the end of the utterance keeps its
    partial bonus (the scorer refunds it).

    Returns:
      ``k2.Fsa`` with ``S + 1`` states (the last is final), ``S * (V - 1) + S`` arcs, on
      ``device``.
    """
    nxt, score, _ = graph.tables(vocab_size, strict=False)
    s = graph.num_nodes
    tokens = torch.tensor([v for v in range(vocab_size) if v != blank_id], dtype=torch.int64)
    src = torch.arange(s).repeat_interleave(tokens.numel())
    dst = nxt[:, tokens].reshape(-1)
    labels = tokens.repeat(s)
    weights = score[:, tokens].reshape(-1).to(torch.float32)
    final_src = torch.arange(s)
    src = torch.cat([src, final_src])
    dst = torch.cat([dst, torch.full_like(final_src, s)])
    labels = torch.cat([labels, torch.full_like(final_src, -1)])
    weights = torch.cat([weights, torch.zeros(s)])
    order = torch.sort(src, stable=True).indices
    arcs = torch.stack([src, dst, labels, torch.zeros_like(src)], dim=1)[order].to(torch.int32)
    fsa = k2.Fsa(arcs)
    fsa.scores = weights[order]
    return k2.arc_sort(fsa).to(torch.device(device))


class HotwordScorer(TableScorer):
    """Hotword biasing as a scorer (weight 1 gives icefall's behaviour: the bonuses are the
    graph's scores).

    Args:
      graphs: one :class:`ContextGraph` for every utterance, or a sequence with one per
        utterance (row ``utt`` uses ``graphs[utt]``: per-utterance hotword lists).
      vocab_size: ``V`` of the search.
      strict: see the module docstring (icefall: False in transducer searches, True in CTC
        prefix beam search).
      device: where the tables live (the search's device).
    """

    def __init__(self, graphs: ContextGraph | Sequence[ContextGraph], vocab_size: int,
                 strict: bool = False, device: torch.device | str = "cpu") -> None:
        single = isinstance(graphs, ContextGraph)
        graphs = [graphs] if single else list(graphs)
        if not graphs or not all(isinstance(g, ContextGraph) for g in graphs):
            raise TypeError("graphs must be a ContextGraph or a non-empty sequence of them")
        if not isinstance(strict, bool):
            raise TypeError(f"strict must be a bool, got {strict!r}")
        self.vocab_size = vocab_size
        self.strict = strict
        self.per_utterance = not single
        nxt, score, final, roots = [], [], [], []
        offset = 0
        for g in graphs:
            n, s, f = g.tables(vocab_size, strict)
            nxt.append(n + offset)
            score.append(s)
            final.append(f)
            roots.append(offset)
            offset += g.num_nodes
        device = torch.device(device)
        self.next_state = torch.cat(nxt).to(device)
        self.score_table = torch.cat(score).to(device)
        self.final = torch.cat(final).to(device)
        self.roots = torch.tensor(roots, dtype=torch.int64, device=device)

    def init_state(self, utt: torch.Tensor) -> torch.Tensor:
        utt = utt.to(self.roots.device)
        if not self.per_utterance:
            return self.roots[torch.zeros_like(utt)]
        if utt.numel() and int(utt.max()) >= self.roots.numel():
            raise ValueError(f"utterance {int(utt.max())} has no hotword list (got "
                             f"{self.roots.numel()} lists)")
        return self.roots[utt]
