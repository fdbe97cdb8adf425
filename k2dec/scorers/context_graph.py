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

Two options change when the bonus is paid, not how much a completed phrase earns (icefall's
scheme is ``partial=1``, no ``word_start``; k2dec's methods default to ``partial=0.5`` with
whole words, see :mod:`k2dec.methods.hotword_biasing`):

- ``partial`` (in ``[0, 1]``): a partial match holds ``partial * node_score`` (that is what
  it earns on the way and what a break or the end refunds); the rest is paid when the
  phrase completes. ``0`` pays only completed phrases (no look-ahead for the beam).
- ``word_start`` (bool per token id, e.g. :func:`k2dec.lang.bpe_word_start_mask`): whole
  words only. A matched phrase counts when the next token starts a word, or at the end of
  the hypothesis (:meth:`HotwordScorer.final_score`); a token inside the word continues the
  match (a longer phrase) or breaks it (refund). Non-strict: the match restarts from the
  root on that word-start token; strict: the bonus of every phrase ending at the node is
  paid on leaving it by a word-start token.

Scale. The trie and its failure links are built in time linear in the list's tokens, once the
size bound is checked on the token counts (:func:`check_hotword_size`,
:data:`HOTWORD_MAX_STATES`). A step's next nodes are the root's row with the children of the
node's fail chain written over it (:class:`GotoRows`, ``O(S)`` memory), and the scores follow
from per-node values (:class:`HotwordSteps`). :class:`HotwordScorer` expands them into dense
tables ``[S, V]`` (next node, score: a search step is two gathers on any device) up to
:data:`HOTWORD_DENSE_ENTRIES`, and computes the rows each step needs beyond. Bonuses are
finite and at most :data:`HOTWORD_MAX_SCORE` in size (:func:`check_hotword_score`).

Graph searches take the automaton inside their decoding graph instead: :func:`hotword_graph`
(over tokens, for ``fast_beam_search``; intersected with LG for the LG methods) and
:func:`bias_word_graph` (over the words of a graph with word outputs, HLG / LG / HCLG, for
lattice decoding with ``k2.intersect_dense_pruned``; phrases as word ids from
:func:`encode_hotword_words`). Both check their size bound before building anything; a
word list too large to bias the graph with can bias the lattices instead
(:class:`LatticeHotwords`, carried by the graph: :func:`lattice_biased_graph`), and so can a
token list too large for ``fast_beam_search``'s graph
(:class:`k2dec.scorers.hotword_lattices.TokenLatticeHotwords`).
"""

from __future__ import annotations

import logging
import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import k2
import torch

from k2dec.graph.compile import refresh_labels_version
from k2dec.lang.case import bpe_case, match_case, vocabulary_case
from k2dec.primitives.files import text_lines
from k2dec.scorers.base import TableScorer

logger = logging.getLogger(__name__)

__all__ = [
    "HOTWORD_GRAPH_MAX_ARCS",
    "HOTWORD_MAX_SCORE",
    "HOTWORD_MAX_STATES",
    "ContextGraph",
    "GotoRows",
    "Hotword",
    "HotwordScorer",
    "HotwordGraphTooLarge",
    "HotwordSteps",
    "LatticeHotwords",
    "bias_word_graph",
    "check_hotword_score",
    "check_hotword_size",
    "encode_hotword_words",
    "encode_hotwords",
    "hotword_graph",
    "lattice_biased_graph",
    "read_hotwords",
    "rebuilt_fsa",
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
    """Read a hotwords file: one phrase per line, optionally followed by white space (spaces
    or tabs) and ``:SCORE`` (a per-token bonus for that phrase, a finite number in
    ``[-HOTWORD_MAX_SCORE, HOTWORD_MAX_SCORE]``), e.g. ``KUBERNETES CLUSTER :3.5``. Blank
    lines and lines starting with ``#`` are skipped.

    Raises:
      ValueError: naming the file (and line): a missing file, one that is not UTF-8 text,
        a malformed score, a score out of range (naming the phrase), a score without a
        phrase, or no phrase at all.
    """
    path = Path(path)
    out = []
    for lineno, raw in text_lines(path, "hotwords file"):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        phrase, tail = _split_score(line)
        if not phrase:
            raise ValueError(f"{path}:{lineno}: a score with no phrase (a line is 'PHRASE' "
                             "or 'PHRASE :SCORE')")
        score = None
        if tail is not None:
            try:
                score = float(tail)
            except ValueError:
                raise ValueError(f"{path}:{lineno}: bad score {tail!r} (a line is 'PHRASE' "
                                 "or 'PHRASE :SCORE')") from None
            check_hotword_score(score, f"{path}:{lineno}: phrase {phrase!r}")
        out.append(Hotword(phrase, score))
    if not out:
        raise ValueError(f"hotwords file {path} has no phrases (one per line; blank lines and "
                         "lines starting with # are skipped)")
    return out


def _split_score(line: str) -> tuple[str, str | None]:
    """``(phrase, score text or None)`` of a stripped line: the score follows the last ``:``
    that starts the line or comes after white space (any: spaces, tabs)."""
    for i in range(len(line) - 1, -1, -1):
        if line[i] == ":" and (i == 0 or line[i - 1].isspace()):
            return line[:i].strip(), line[i + 1:]
    return line, None


def _hotword(h: Hotword | str) -> Hotword:
    if isinstance(h, str):
        return Hotword(h)
    if not isinstance(h, Hotword):
        raise TypeError(f"hotwords must be str or Hotword, got {type(h).__name__}")
    return h


def encode_hotwords(hotwords: Sequence[Hotword | str], sp) -> list[tuple[list[int], float | None]]:
    """Token ids (sentencepiece model ``sp``) and score of each hotword, for
    :class:`ContextGraph`. Phrases are put in the case of the BPE model's pieces first
    (:func:`k2dec.lang.match_case`, as references are: ``kubernetes`` is spelled with the
    pieces of ``KUBERNETES`` by an upper-case model, not as unknown pieces).

    Raises:
      TypeError: a hotword that is neither a str nor a :class:`Hotword`.
    """
    case = bpe_case(sp)
    return [(list(sp.encode(match_case(h.text, case))), h.score)
            for h in map(_hotword, hotwords)]


def encode_hotword_words(hotwords: Sequence[Hotword | str],
                         word_table) -> list[tuple[list[int], float | None]]:
    """Word ids (``word_table``: a ``k2.SymbolTable`` of words.txt) and score of each hotword,
    for :func:`bias_word_graph`. A phrase is put in the case of the table's words first
    (:func:`k2dec.lang.match_case`) and split on white space; a phrase with a word that
    ``word_table`` lacks can never be output by a graph with these words, so it is skipped
    with a logged warning naming the word (the same list may serve token-level methods,
    which can spell any word).

    Raises:
      TypeError: a hotword that is neither a str nor a :class:`Hotword`.
    """
    case = vocabulary_case(word_table.symbols)
    out = []
    for h in map(_hotword, hotwords):
        words = match_case(h.text, case).split()
        missing = [w for w in words if w not in word_table]
        if missing:
            logger.warning("hotword phrase %r skipped for word graphs: %s not in words.txt",
                           h.text, ", ".join(repr(w) for w in missing))
            continue
        if words:
            out.append(([word_table[w] for w in words], h.score))
    return out


#: Bound on the states of one hotword list's automaton, checked before anything is built: a
#: list whose phrases have more tokens than this (each token can be a state) is refused
#: (2**19, about 100,000 phrases of two or three words of a 500-piece BPE model would need
#: about 10 times it; building it takes about 1 s and 150 MB per 100,000 tokens).
HOTWORD_MAX_STATES = 2**19
#: Bound on the absolute value of a hotword bonus (per token, or per word in the HLG
#: methods): beyond it a bonus outweighs any acoustic evidence (a frame's log-probs span a
#: few tens), hypotheses fill with hotword pieces and k2's float32 graph scores lose the
#: acoustic scores (``1e30`` put ``<sos/eos>`` into hypotheses).
HOTWORD_MAX_SCORE = 50.0


def check_hotword_score(value: object, where: str) -> float:
    """``value`` as a float, once it is a finite number in ``[-HOTWORD_MAX_SCORE,
    HOTWORD_MAX_SCORE]``; else ``ValueError`` (``TypeError`` for a non-number) starting with
    ``where`` (the phrase, file and line, or the setting's name)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{where}: a hotword score must be a number, got {value!r}")
    if not math.isfinite(value) or abs(value) > HOTWORD_MAX_SCORE:
        raise ValueError(f"{where}: a hotword score must be a finite number in "
                         f"[-{HOTWORD_MAX_SCORE:g}, {HOTWORD_MAX_SCORE:g}] (HOTWORD_MAX_SCORE), "
                         f"got {value!r}")
    return float(value)


def check_hotword_size(phrases: Sequence[tuple[Sequence[int], float | None]],
                       max_states: int = HOTWORD_MAX_STATES) -> int:
    """The states a :class:`ContextGraph` of ``phrases`` could have (their tokens plus the
    root), once that is at most ``max_states``; else a ``ValueError`` naming the number of
    phrases, the estimate and the bound. Linear in the list, nothing built."""
    estimate = 1 + sum(len(tokens) for tokens, _ in phrases)
    if estimate > max_states:
        raise ValueError(f"{len(phrases)} hotword phrases have {estimate - 1} tokens: their "
                         f"automaton could have {estimate} states, more than the bound "
                         f"{max_states} (HOTWORD_MAX_STATES); use fewer or shorter phrases")
    return estimate


class ContextGraph:
    """The Aho-Corasick automaton of one hotword list (see the module docstring), built in
    time linear in the list's tokens (a trie, then failure links breadth first) once its
    size is checked (:func:`check_hotword_size`).

    Args:
      phrases: ``(token ids, score or None)`` per phrase (e.g. :func:`encode_hotwords`);
        empty phrases are ignored.
      context_score: the default per-token bonus (icefall's ``--context-score``, default 2).
      max_states: the size bound (:data:`HOTWORD_MAX_STATES`).

    Attributes:
      num_nodes: ``S``, including the root (node 0); num_phrases: the phrases given.
      children: per node, ``{token: child}``; fail: per node, its fail node;
      node_score: per node, the sum of the bonuses from the root; is_end: per node, whether a
      phrase ends there; output: per node, the nearest node on its fail chain where a phrase
      ends (or -1).
    """

    def __init__(self, phrases: Sequence[tuple[Sequence[int], float | None]],
                 context_score: float = 2.0, max_states: int = HOTWORD_MAX_STATES) -> None:
        self.context_score = check_hotword_score(context_score, "context_score")
        phrases = list(phrases)
        check_hotword_size(phrases, max_states)
        self.num_phrases = len(phrases)
        self.children: list[dict[int, int]] = [{}]
        self.token = [-1]
        self.token_score = [0.0]
        self.is_end = [False]
        self.parent = [-1]
        for i, (tokens, score) in enumerate(phrases):
            self._insert([int(t) for t in tokens], self.context_score if score is None
                         else check_hotword_score(score, f"hotword phrase {i}"))
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
                self.token.append(tok)
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
                tok = self.token[node]
                f = self.fail[parent]
                while f != 0 and tok not in self.children[f]:
                    f = self.fail[f]
                self.fail[node] = self.children[f].get(tok, 0)
            f = self.fail[node]
            self.output[node] = f if self.is_end[f] else self.output[f]
            queue.extend(self.children[node].values())
        self._bfs_order = order

    def goto_rows(self, vocab_size: int) -> GotoRows:
        """The automaton's transitions over tokens ``[0, V)``, sparse (:class:`GotoRows`)."""
        for children in self.children:
            for tok in children:
                if tok >= vocab_size:
                    raise ValueError(f"hotword token id {tok} is not below vocab_size "
                                     f"{vocab_size}")
        root = torch.zeros(vocab_size, dtype=torch.int64)
        for tok, child in self.children[0].items():
            root[tok] = child
        sizes = torch.tensor([len(c) for c in self.children], dtype=torch.int64)
        splits = torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(sizes, 0)])
        tok = torch.tensor([t for c in self.children for t in c], dtype=torch.int64)
        dst = torch.tensor([n for c in self.children for n in c.values()], dtype=torch.int64)
        return GotoRows(root.unsqueeze(0), torch.zeros(self.num_nodes, dtype=torch.int64),
                        torch.tensor(self.fail, dtype=torch.int64), splits, tok, dst)

    def node_values(self, strict: bool, partial: float = 1.0) -> dict[str, torch.Tensor]:
        """Per node (``[S]`` each): ``held`` (float64, what a partial match holds),
        ``matched`` (bool, a phrase ends there or on its fail chain), ``keep`` (float64, the
        bonus of the phrase a matched node completes) and, ``strict``, ``out`` (float64, the
        bonuses of every phrase ending there)."""
        if isinstance(partial, bool) or not isinstance(partial, int | float) or not (
                0 <= partial <= 1):
            raise ValueError(f"partial must be a number in [0, 1], got {partial!r}")
        s = self.num_nodes
        node_score = torch.tensor(self.node_score, dtype=torch.float64)
        is_end = torch.tensor(self.is_end)
        output = torch.tensor(self.output)
        matched = is_end | (output >= 0)
        phrase = torch.where(is_end, torch.arange(s), output.clamp(min=0))
        values = {"held": partial * node_score, "matched": matched,
                  "keep": torch.where(matched, node_score[phrase], torch.zeros((),
                                      dtype=torch.float64))}
        if strict:
            out = torch.zeros(s, dtype=torch.float64)
            for node in self._bfs_order:  # an output node is shallower: done first
                own = node_score[node] if self.is_end[node] else 0.0
                out[node] = own + (out[output[node]] if output[node] >= 0 else 0.0)
            values["out"] = out
        return values

    def tables(self, vocab_size: int, strict: bool, word_start: torch.Tensor | None = None,
               partial: float = 1.0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Dense ``next`` (int64 ``[S, V]``), ``score`` (float64 ``[S, V]``) and ``final``
        (float64 ``[S]``) of the automaton over tokens ``[0, V)`` (see the module docstring:
        ``word_start``, bool with at least ``V`` entries, for whole words; ``partial`` in
        ``[0, 1]``, the share of the bonus a partial match holds). ``S x V`` entries: for
        graphs; :class:`HotwordScorer` computes the rows it needs instead."""
        steps = HotwordSteps([self], vocab_size, strict, word_start, partial)
        nxt, score = steps.dense()
        return nxt, score, steps.final


@dataclass
class GotoRows:
    """The transitions of one or more automata over tokens ``[0, V)``, sparse (``O(S)``
    memory): the row of node ``s`` is its automaton's root row (``root[graph[s]]``), then
    the children of every node on its fail chain written over it, the shallowest first, its
    own last (the Aho-Corasick ``goto``).

    Attributes:
      root: int64 ``[L, V]``; graph: int64 ``[S]``, each node's automaton; fail: int64
      ``[S]`` (a root fails to itself); splits: int64 ``[S + 1]``; tok, dst: int64 ``[E]``,
      the children of node ``s`` at ``splits[s]:splits[s + 1]``.
    """

    root: torch.Tensor
    graph: torch.Tensor
    fail: torch.Tensor
    splits: torch.Tensor
    tok: torch.Tensor
    dst: torch.Tensor

    def rows(self, states: torch.Tensor, columns: torch.Tensor | None = None
             ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(goto, root_goto)``: int64 ``[M, V]``, the next node of every token after each
        of ``states`` (int64 ``[M]``), and the row of each one's root; only the tokens
        ``columns`` (int64 ``[C]``, distinct) when given (``[M, C]``). As many scatters as
        the longest fail chain among ``states``."""
        root_goto = self.root.index_select(0, self.graph.index_select(0, states))
        col = None
        if columns is not None:
            root_goto = root_goto.index_select(1, columns)
            col = torch.full((self.root.shape[1],), -1, dtype=torch.int64,
                             device=columns.device)
            col[columns] = torch.arange(columns.numel(), device=columns.device)
        chain = [states]
        while True:
            up = self.fail.index_select(0, chain[-1])
            if torch.equal(up, chain[-1]):
                break
            chain.append(up)
        goto = root_goto.clone()
        for nodes in reversed(chain):
            self._write_children(goto, nodes, col)
        return goto, root_goto

    def _write_children(self, goto: torch.Tensor, nodes: torch.Tensor,
                        col: torch.Tensor | None) -> None:
        """``goto[i, t] = c`` for every child ``c`` by token ``t`` of ``nodes[i]`` but the
        roots (those fail to themselves: their children are in ``goto`` already); with
        ``col``, in column ``col[t]`` (tokens with ``col[t] < 0`` left out)."""
        start = self.splits.index_select(0, nodes)
        counts = self.splits.index_select(0, nodes + 1) - start
        counts = counts * (self.fail.index_select(0, nodes) != nodes)
        total = int(counts.sum()) if counts.numel() else 0
        if not total:
            return
        row = torch.repeat_interleave(torch.arange(nodes.numel(), device=nodes.device), counts)
        first = torch.cumsum(counts, 0) - counts
        pos = start.repeat_interleave(counts) + torch.arange(
            total, device=nodes.device) - first.repeat_interleave(counts)
        tok = self.tok[pos]
        if col is not None:
            tok = col[tok]
            keep = tok >= 0
            row, tok, pos = row[keep], tok[keep], pos[keep]
        goto[row, tok] = self.dst[pos]

    @staticmethod
    def cat(parts: Sequence[GotoRows], sizes: Sequence[int]) -> GotoRows:
        """The automata of ``parts`` (with ``sizes`` nodes each) as one, nodes numbered on."""
        offsets = torch.cumsum(torch.tensor([0, *sizes[:-1]], dtype=torch.int64), 0).tolist()
        edges = torch.cumsum(torch.tensor([0] + [int(p.splits[-1]) for p in parts[:-1]],
                                          dtype=torch.int64), 0).tolist()
        return GotoRows(
            torch.cat([p.root + o for p, o in zip(parts, offsets)]),
            torch.cat([p.graph + i for i, p in enumerate(parts)]),
            torch.cat([p.fail + o for p, o in zip(parts, offsets)]),
            torch.cat([parts[0].splits[:1]] + [p.splits[1:] + e for p, e in zip(parts, edges)]),
            torch.cat([p.tok for p in parts]),
            torch.cat([p.dst + o for p, o in zip(parts, offsets)]))

    def to(self, device: torch.device) -> GotoRows:
        return GotoRows(*(t.to(device) for t in (self.root, self.graph, self.fail, self.splits,
                                                 self.tok, self.dst)))


class HotwordSteps:
    """One step of the bonus-and-refund automaton (module docstring) of one or more
    :class:`ContextGraph` (nodes numbered on, graph by graph), for any rows: the next node
    and the score of every token, computed from :class:`GotoRows` and per-node values
    (``O(S + E)`` memory, never ``[S, V]``).

    Attributes:
      final: float64 ``[S]``, the score of ending at each node.
    """

    def __init__(self, graphs: Sequence[ContextGraph], vocab_size: int, strict: bool,
                 word_start: torch.Tensor | None = None, partial: float = 1.0,
                 device: torch.device | str = "cpu") -> None:
        device = torch.device(device)
        sizes = [g.num_nodes for g in graphs]
        self.goto = GotoRows.cat([g.goto_rows(vocab_size) for g in graphs], sizes).to(device)
        values = [g.node_values(strict, partial) for g in graphs]
        self.values = {k: torch.cat([v[k] for v in values]).to(device) for k in values[0]}
        self.roots = torch.cumsum(torch.tensor([0, *sizes[:-1]], dtype=torch.int64), 0).to(device)
        self.strict = strict
        self.word_start = (None if word_start is None
                           else _checked_word_start(word_start, vocab_size).to(device))
        held = self.values["held"]
        if strict:
            out = self.values["out"]
            self.final = -held if word_start is None else out - held
        else:
            self.final = -held if word_start is None else self.values["keep"] - held

    def dense(self, chunk: int = 4096) -> tuple[torch.Tensor, torch.Tensor]:
        """``(next, score)``: int64 / float64 ``[S, V]``, every node's :meth:`step`, filled
        ``chunk`` nodes at a time (no temporaries beyond a chunk)."""
        s, v = self.goto.graph.numel(), self.goto.root.shape[1]
        device = self.goto.root.device
        nxt = torch.empty(s, v, dtype=torch.int64, device=device)
        score = torch.empty(s, v, dtype=torch.float64, device=device)
        for start in range(0, s, chunk):
            states = torch.arange(start, min(s, start + chunk), device=device)
            nxt[start:start + chunk], score[start:start + chunk] = self.step(states)
        return nxt, score

    def step(self, states: torch.Tensor, columns: torch.Tensor | None = None
             ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(next, score)``: int64 / float64 ``[M, V]`` after each of ``states`` (int64
        ``[M]``); ``[M, C]`` for the tokens ``columns`` (int64 ``[C]``) only."""
        goto, root_goto = self.goto.rows(states, columns)
        v, ws = self.values, self.word_start
        if ws is not None and columns is not None:
            ws = ws.index_select(0, columns)
        held = v["held"]
        here = held.index_select(0, states).unsqueeze(1)
        zero = torch.zeros((), dtype=torch.float64, device=held.device)
        if self.strict:
            out = v["out"]
            bonus = out[goto] if ws is None else torch.where(
                ws.unsqueeze(0), out.index_select(0, states).unsqueeze(1), zero)
            return goto, held[goto] - here + bonus
        matched = v["matched"]
        if ws is None:  # a completed match is banked at once and restarts from the root
            banked = matched[goto]
            value = torch.where(banked, v["keep"][goto], held[goto])
            roots = self.roots.index_select(0, self.goto.graph.index_select(0, states))
            return torch.where(banked, roots.unsqueeze(1), goto), value - here
        # a matched phrase is banked (and the match restarts from the root) when the next
        # token starts a word; a token inside the word continues or breaks the match
        bank = matched.index_select(0, states).unsqueeze(1) & ws.unsqueeze(0)
        nxt = torch.where(bank, root_goto, goto)
        keep = v["keep"].index_select(0, states).unsqueeze(1)
        return nxt, held[nxt] - here + torch.where(bank, keep, zero)


def _checked_word_start(word_start: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """``word_start`` (bool, at least ``vocab_size`` entries, e.g.
    :func:`k2dec.lang.bpe_word_start_mask`, which may cover extra symbols) cut to ``[V]`` on
    the CPU."""
    if not isinstance(word_start, torch.Tensor) or word_start.dtype != torch.bool or (
            word_start.dim() != 1 or word_start.numel() < vocab_size):
        raise ValueError(f"word_start must be a 1-D bool tensor with at least {vocab_size} "
                         f"entries, got {getattr(word_start, 'dtype', type(word_start))} "
                         f"{tuple(getattr(word_start, 'shape', ()))}")
    return word_start[:vocab_size].cpu()


#: Default bound on the arcs of a hotword graph: the token graph of ``fast_beam_search``
#: (:func:`hotword_graph`, states times tokens) and a hotword-biased word graph
#: (:func:`bias_word_graph`): ``2**25`` arcs, about 1 GB while k2 builds it. The methods
#: bias their lattices instead past it (:class:`LatticeHotwords` over words,
#: :class:`k2dec.scorers.hotword_lattices.TokenLatticeHotwords` over tokens).
HOTWORD_GRAPH_MAX_ARCS = 2**25
#: States of the automaton expanded at a time while :func:`hotword_graph` writes its arcs.
GRAPH_CHUNK_STATES = 4096


def hotword_graph(graph: ContextGraph, vocab_size: int, blank_id: int = 0,
                  device: torch.device | str = "cpu",
                  word_start: torch.Tensor | None = None, partial: float = 1.0,
                  max_arcs: int = HOTWORD_GRAPH_MAX_ARCS, aux_labels: bool = True) -> k2.Fsa:
    """The hotword automaton as a decoding graph for ``fast_beam_search``
    (:class:`k2dec.transducer.FastBeamSearch`; on CPU and CUDA): a deterministic acceptor with
    one state per trie node, an arc for every (node, token) but ``blank_id`` carrying the
    non-strict bonus or refund of the module docstring, and a final arc from every node.

    It accepts every token sequence, so it replaces the trivial graph. k2's RNN-T decoding
    drops final weights, so a match still unfinished at the end of the utterance keeps its
    partial bonus (the scorer refunds it). ``word_start`` and ``partial``: see the module
    docstring. The arcs are written a few thousand states at a time straight into the
    graph's arcs tensor (scores as the bits of its last column: no ``[S, V]`` table, no
    second copy), already arc-sorted.

    Returns:
      ``k2.Fsa`` with ``S + 1`` states (the last is final), ``S * (V - 1) + S`` arcs,
      ``aux_labels`` equal to the labels (as ``k2.trivial_graph``; none with
      ``aux_labels=False``, which saves a quarter of the graph's memory), on ``device``.

    Raises:
      ValueError: ``S * V`` over ``max_arcs`` (checked before anything is built).
    """
    s = graph.num_nodes
    tokens = torch.tensor([v for v in range(vocab_size) if v != blank_id], dtype=torch.int64)
    per_state = tokens.numel() + 1
    if s * per_state > max_arcs:
        raise ValueError(f"the hotword graph of {graph.num_phrases} phrases would have {s} "
                         f"states x {per_state} arcs = {s * per_state} arcs, more than the "
                         f"bound {max_arcs} (HOTWORD_GRAPH_MAX_ARCS); use fewer or shorter "
                         "phrases, or a search that scores hotwords (modified_beam_search)")
    steps = HotwordSteps([graph], vocab_size, False, word_start, partial)
    arcs = torch.zeros(s, per_state, 4, dtype=torch.int32)
    scores = arcs.view(torch.float32)[:, :, 3]  # the score column, as float32
    arcs[:, :-1, 2] = tokens.to(torch.int32)
    arcs[:, -1, 1] = s
    arcs[:, -1, 2] = -1
    for start in range(0, s, GRAPH_CHUNK_STATES):
        stop = min(s, start + GRAPH_CHUNK_STATES)
        nxt, score = steps.step(torch.arange(start, stop))
        arcs[start:stop, :, 0] = torch.arange(start, stop, dtype=torch.int32).unsqueeze(1)
        arcs[start:stop, :-1, 1] = nxt[:, tokens]
        scores[start:stop, :-1] = score[:, tokens]
        del nxt, score
    fsa = k2.Fsa(arcs.view(-1, 4))  # scores from the last column's bits
    del arcs, scores
    if aux_labels:
        fsa.aux_labels = fsa.labels.clone()  # as k2.trivial_graph: the tokens are the output
    return k2.arc_sort(fsa).to(torch.device(device))


#: Up to this many entries (nodes times tokens) a :class:`HotwordScorer` expands its
#: automaton into dense tables (``2**25``: 16 bytes each, at most 512 MB; a search step is two
#: gathers); a larger one computes the rows each step needs (memory linear in the list, a
#: step several times slower).
HOTWORD_DENSE_ENTRIES = 2**25


class HotwordScorer(TableScorer):
    """Hotword biasing as a scorer (weight 1 gives icefall's behaviour: the bonuses are the
    graph's scores). Up to :data:`HOTWORD_DENSE_ENTRIES` nodes times tokens, dense tables
    (:attr:`dense`); beyond, a step computes the rows it needs (:class:`HotwordSteps`).

    Args:
      graphs: one :class:`ContextGraph` for every utterance, or a sequence with one per
        utterance (row ``utt`` uses ``graphs[utt]``: per-utterance hotword lists).
      vocab_size: ``V`` of the search.
      strict: see the module docstring (icefall: False in transducer searches, True in CTC
        prefix beam search).
      device: where the tables live (the search's device).
      word_start: bool per token id: whole words only (see the module docstring); None:
        a phrase completes on its last token (icefall).
      partial: the share of a phrase's bonus a partial match holds (icefall: 1).
      dense_entries: the bound on dense tables (:data:`HOTWORD_DENSE_ENTRIES`).
    """

    def __init__(self, graphs: ContextGraph | Sequence[ContextGraph], vocab_size: int,
                 strict: bool = False, device: torch.device | str = "cpu",
                 word_start: torch.Tensor | None = None, partial: float = 1.0,
                 dense_entries: int = HOTWORD_DENSE_ENTRIES) -> None:
        single = isinstance(graphs, ContextGraph)
        graphs = [graphs] if single else list(graphs)
        if not graphs or not all(isinstance(g, ContextGraph) for g in graphs):
            raise TypeError("graphs must be a ContextGraph or a non-empty sequence of them")
        if not isinstance(strict, bool):
            raise TypeError(f"strict must be a bool, got {strict!r}")
        self.vocab_size = vocab_size
        self.strict = strict
        self.per_utterance = not single
        self.steps = HotwordSteps(graphs, vocab_size, strict, word_start, partial, device)
        self.final = self.steps.final
        self.roots = self.steps.roots
        self.dense = self.final.numel() * vocab_size <= dense_entries
        if self.dense:  # a search step is two gathers
            self.next_state, self.score_table = self.steps.dense()

    def init_state(self, utt: torch.Tensor) -> torch.Tensor:
        utt = utt.to(self.roots.device)
        if not self.per_utterance:
            return self.roots[torch.zeros_like(utt)]
        if utt.numel() and int(utt.max()) >= self.roots.numel():
            raise ValueError(f"utterance {int(utt.max())} has no hotword list (got "
                             f"{self.roots.numel()} lists)")
        return self.roots[utt]

    def score(self, state: torch.Tensor,
              cand: torch.Tensor | None = None) -> tuple[torch.Tensor, None]:
        if self.dense:
            return super().score(state, cand)
        if cand is not None:
            raise ValueError(f"{type(self).__name__} scores every token; cand must be None")
        return self.steps.step(state)[1], None

    def score_tokens(self, state: torch.Tensor, rows: torch.Tensor,
                     tokens: torch.Tensor) -> tuple[torch.Tensor, None]:
        if self.dense:
            return super().score_tokens(state, rows, tokens)
        _, score = self.steps.step(state.index_select(0, rows))
        return score.gather(1, tokens.unsqueeze(1)).squeeze(1), None

    def advance(self, state: torch.Tensor, pending: None, rows: torch.Tensor,
                tokens: torch.Tensor, emit: torch.Tensor | None = None) -> torch.Tensor:
        if self.dense:
            return super().advance(state, pending, rows, tokens, emit)
        new = self.select(state, rows)
        nxt, _ = self.steps.step(new)
        moved = nxt.gather(1, tokens.unsqueeze(1)).squeeze(1)
        return moved if emit is None else torch.where(emit, moved, new)


class HotwordGraphTooLarge(ValueError):
    """A hotword-biased word graph would exceed its bound (:func:`bias_word_graph`); the
    HLG methods then bias their lattices instead (:class:`LatticeHotwords`)."""


class LatticeHotwords:
    """The word-level hotword bonus of :func:`bias_word_graph`, applied to lattices instead
    of the graph (for lists whose biased graph would be too large): every path of a lattice
    gets the bonus of its word sequence (non-strict bonus and refund, the final refund of an
    unfinished phrase), so a path's total is what the biased graph would give it; the search
    itself is not biased (a path pruned without the bonus stays pruned).

    Per lattice batch, only the automaton's states reachable with the batch's words are
    expanded, over those words only: memory is linear in the list plus
    ``reachable states x words in the batch``.

    Args:
      phrases: ``(word ids, score or None)`` per phrase (:func:`encode_hotword_words`).
      context_score: the default bonus per word.
    """

    def __init__(self, phrases: Sequence[tuple[Sequence[int], float | None]],
                 context_score: float) -> None:
        phrases = [([int(w) for w in ws], s) for ws, s in phrases if len(ws)]
        if not phrases or min(min(ws) for ws, _ in phrases) < 1:
            raise ValueError("LatticeHotwords needs phrases of word ids >= 1")
        self.other = max(max(ws) for ws, _ in phrases) + 1  # any word in no phrase
        self.context = ContextGraph(phrases, context_score)
        self.steps = HotwordSteps([self.context], self.other + 1, strict=False)

    def __call__(self, lattice: k2.Fsa) -> k2.Fsa:
        """``lattice`` (FsaVec with word ids in ``aux_labels``, at most one per arc) with
        the bonus in its scores (not in ``lm_scores``), on its device."""
        cpu = k2.connect(lattice.to("cpu"))  # k2's pruned search leaves dead ends
        words = _arc_words(cpu).clamp(max=self.other)
        vocab = torch.unique(words[words > 0])
        if cpu.num_arcs == 0 or vocab.numel() == 0:
            return lattice
        compact = torch.zeros(self.other + 1, dtype=torch.int64)
        compact[vocab] = torch.arange(1, vocab.numel() + 1)
        acceptor = self._acceptor(vocab)
        out = k2.top_sort(_intersect_words(cpu, compact[words], acceptor))
        if "hotword_lattice_bias" in dict(out.named_non_tensor_attr()):
            del out.hotword_lattice_bias  # k2 copies the graph's attributes to lattices
        return out.to(lattice.device)

    def _acceptor(self, vocab: torch.Tensor) -> k2.Fsa:
        """The automaton's states reachable with ``vocab`` (int64 word ids), an arc for every
        (state, word of ``vocab`` as ``1..W``) and a final arc refunding an unfinished
        match."""
        seen, frontier = {0}, [0]
        while frontier:
            nxt, _ = self.steps.step(torch.tensor(frontier), vocab)
            frontier = sorted(set(nxt.flatten().tolist()) - seen)
            seen.update(frontier)
        states = torch.tensor(sorted(seen))
        nxt, score = self.steps.step(states, vocab)
        index = torch.full((self.context.num_nodes,), -1, dtype=torch.int64)
        index[states] = torch.arange(states.numel())
        n, w = states.numel(), vocab.numel()
        src = torch.arange(n).repeat_interleave(w + 1)
        dst = torch.cat([index[nxt], torch.full((n, 1), n)], 1).flatten()
        labels = torch.cat([torch.arange(1, w + 1).expand(n, w),
                            torch.full((n, 1), -1)], 1).flatten()
        scores = torch.cat([score, self.steps.final[states].unsqueeze(1)], 1)
        arcs = torch.stack([src, dst, labels, torch.zeros_like(src)], 1).to(torch.int32)
        fsa = k2.Fsa(arcs)
        fsa.scores = scores.flatten().to(torch.float32)
        return k2.arc_sort(fsa)


def lattice_biased_graph(graph: k2.Fsa, bias: LatticeHotwords) -> k2.Fsa:
    """A copy of ``graph`` (same arcs and attributes) that carries ``bias`` as its
    ``hotword_lattice_bias``: :func:`k2dec.lattice.search_lattices` applies it to every
    lattice searched with it."""
    out = rebuilt_fsa(graph.to("cpu")).to(graph.device)
    out.hotword_lattice_bias = bias
    return out


def rebuilt_fsa(fsa: k2.Fsa) -> k2.Fsa:
    """``fsa`` (a single FSA) rebuilt from its arcs tensor, with the same attributes. The
    output of k2 ops such as ``k2.intersect`` / ``k2.arc_sort`` makes every
    ``k2.RnntDecodingStreams`` over it far slower to create (per batch, for a large LG) than
    a graph built from a tensor; a rebuilt copy is as fast as a loaded one."""
    out = k2.Fsa(fsa.arcs.values()[:, :4].clone())
    for name, value in fsa.named_tensor_attr(include_scores=False):
        setattr(out, name, value)
    for name, value in fsa.named_non_tensor_attr():
        if name != "labels_version":
            setattr(out, name, value)
    return out


def _arc_words(graph: k2.Fsa) -> torch.Tensor:
    """int64 ``[A]``: the word id on each arc of ``graph`` (``aux_labels``, a tensor or ragged
    with at most one word per arc), 0 where none."""
    aux = getattr(graph, "aux_labels", None)
    if aux is None:
        raise ValueError("graph has no aux_labels (word ids); hotwords over words need a "
                         "graph with word outputs (HLG, LG, HCLG)")
    if isinstance(aux, torch.Tensor):
        return aux.to(torch.int64).clamp(min=0)
    aux = aux.remove_values_leq(0)
    sizes = aux.shape.row_splits(1)[1:] - aux.shape.row_splits(1)[:-1]
    if sizes.numel() and int(sizes.max()) > 1:
        raise ValueError(f"graph has an arc with {int(sizes.max())} words in its aux_labels; "
                         "bias_word_graph supports at most one word per arc")
    words = torch.zeros(graph.num_arcs, dtype=torch.int64)
    words[sizes.to(torch.bool)] = aux.values.to(torch.int64)
    return words


def _word_acceptor(context: ContextGraph, num_labels: int) -> k2.Fsa:
    """The non-strict automaton of ``context`` (over labels ``[1, num_labels)``) as an
    acceptor: its states reachable from the root, an arc for every (state, label) with the
    bonus or refund, and a final arc from every state refunding an unfinished match."""
    nxt, score, final = context.tables(num_labels, strict=False)
    labels = torch.arange(1, num_labels)
    seen, frontier = {0}, [0]
    while frontier:  # states reachable from the root (a completed phrase goes back to it)
        frontier = sorted({int(x) for x in nxt[frontier][:, 1:].flatten()} - seen)
        seen.update(frontier)
    states = torch.tensor(sorted(seen))
    index = torch.full((context.num_nodes,), -1, dtype=torch.int64)
    index[states] = torch.arange(states.numel())
    n = states.numel()
    src = index[states].repeat_interleave(labels.numel())
    dst = index[nxt[states][:, labels].reshape(-1)]
    weights = score[states][:, labels].reshape(-1)
    src = torch.cat([src, index[states]])
    dst = torch.cat([dst, torch.full((n,), n)])
    lab = torch.cat([labels.repeat(n), torch.full((n,), -1)])
    weights = torch.cat([weights, final[states]])
    order = torch.sort(src, stable=True).indices
    arcs = torch.stack([src, dst, lab, torch.zeros_like(src)], dim=1)[order].to(torch.int32)
    fsa = k2.Fsa(arcs)
    fsa.scores = weights[order].to(torch.float32)
    return k2.arc_sort(fsa)


def bias_word_graph(graph: k2.Fsa, phrases: Sequence[tuple[Sequence[int], float | None]],
                    context_score: float = 2.0,
                    max_arcs: int = HOTWORD_GRAPH_MAX_ARCS) -> k2.Fsa:
    """``graph`` (a single FSA with word ids in ``aux_labels``: HLG, LG, HCLG) with every
    path's score raised by the hotword bonus of its word sequence: the graph intersected,
    on its word side, with the word-level Aho-Corasick automaton of ``phrases`` (non-strict
    bonus-and-refund of the module docstring, ``context_score`` or the phrase's score per
    word; the final arcs refund an unfinished match, so a path keeps only the bonuses of
    the phrases it completes).

    The result is an ordinary decoding graph: same labels (tokens, input of
    ``k2.intersect_dense_pruned``), ``aux_labels`` and other attributes as ``graph``
    (``lm_scores`` without the bonus, so LM rescoring keeps it), arc-sorted, on ``graph``'s
    device. Single-word phrases leave the graph's size as it is; every other state of the
    automaton (an unfinished multi-word phrase) may copy the part of the graph reachable
    before the next word.

    Args:
      graph: the decoding graph (not modified); aux_labels a tensor or ragged with at most
        one word per arc.
      phrases: ``(word ids, score or None)`` per phrase (:func:`encode_hotword_words`).
      context_score: the default bonus per word.
      max_arcs: bound on the result: ``graph.num_arcs`` times the automaton's reachable
        states must not exceed it (checked before k2 builds anything).

    Raises:
      ValueError: an FsaVec, a graph without word outputs or with several words on an arc,
        word ids < 1, or a result that could exceed ``max_arcs``.
    """
    phrases = _checked_phrases(graph, phrases, max_arcs)
    if not phrases:
        return graph
    device = graph.device
    g = graph.to("cpu")
    words = _arc_words(g)
    compact, context, num_labels = _compact_context(words, phrases, context_score)
    _check_biased_size(g.num_arcs, context, num_labels, max_arcs)
    out = _intersect_words(g, compact[words], _word_acceptor(context, num_labels))
    return rebuilt_fsa(k2.arc_sort(out)).to(device)


def _intersect_words(fsa: k2.Fsa, labels: torch.Tensor, acceptor: k2.Fsa) -> k2.Fsa:
    """``fsa`` (CPU, Fsa or FsaVec) intersected with ``acceptor`` on ``labels`` (int64 per
    arc: the acceptor's label of its word, 0 where none), connected, with ``fsa``'s own
    labels back."""
    a = fsa.clone()
    a.hotword_token_labels = fsa.labels.clone()
    refresh_labels_version(a)
    a.labels = torch.where(fsa.labels == -1, -1, labels).to(torch.int32)
    a = k2.arc_sort(a)
    out = k2.connect(k2.intersect(a, acceptor, treat_epsilons_specially=True))
    refresh_labels_version(out)
    out.labels = out.hotword_token_labels
    del out.hotword_token_labels
    return out


def _checked_phrases(graph: k2.Fsa, phrases: Sequence[tuple[Sequence[int], float | None]],
                     max_arcs: int) -> list[tuple[list[int], float | None]]:
    """The non-empty phrases as lists of word ids, once ``graph``, the ids and ``max_arcs``
    are checked."""
    if not isinstance(graph, k2.Fsa):
        raise TypeError(f"graph must be a k2.Fsa, got {type(graph).__name__}")
    if graph.arcs.num_axes() != 2:
        raise ValueError("graph must be a single FSA, not an FsaVec (bias each graph alone)")
    if isinstance(max_arcs, bool) or not isinstance(max_arcs, int) or max_arcs < 1:
        raise ValueError(f"max_arcs must be an int >= 1, got {max_arcs!r}")
    phrases = [([int(w) for w in ws], s) for ws, s in phrases if len(ws)]
    for ws, _ in phrases:
        if min(ws) < 1:
            raise ValueError(f"hotword word ids must be >= 1, got {ws}")
    return phrases


def _check_biased_size(graph_arcs: int, context: ContextGraph, num_labels: int,
                       max_arcs: int) -> None:
    """Raise ``ValueError`` (naming the phrases, the estimate and the bound) when the biased
    graph (``graph_arcs`` times the automaton's unfinished-phrase states) or the word
    acceptor (those states times ``num_labels``) could exceed ``max_arcs``: checked on the
    trie, before any table or graph is built."""
    states = _unfinished_states(context)
    for what, arcs in (("hotword-biased graph", graph_arcs * states),
                       ("word acceptor", num_labels * states)):
        if arcs > max_arcs:
            raise HotwordGraphTooLarge(
                f"{context.num_phrases} hotword phrases: the {what} could have {arcs} arcs "
                f"({states} unfinished-phrase states x {arcs // states}), more than the bound "
                f"max_arcs={max_arcs}; use fewer multi-word phrases (single words keep the "
                "graph's size) or a token-level method (modified_beam_search, "
                "ctc-prefix-beam-search)")


def _unfinished_states(context: ContextGraph) -> int:
    """The states of the non-strict automaton a path can be in: the root and the trie nodes
    with no phrase completed on the way to them (an upper bound, counted on the trie)."""
    count, stack = 1, [0]
    while stack:
        for child in context.children[stack.pop()].values():
            if not context.is_end[child] and context.output[child] < 0:
                count += 1
                stack.append(child)
    return count


def _compact_context(words: torch.Tensor, phrases: list[tuple[list[int], float | None]],
                     context_score: float) -> tuple[torch.Tensor, ContextGraph, int]:
    """The phrases' words numbered ``1..V`` (a lookup table from the graph's word ids
    ``words``: 0 stays 0, other words ``V + 1``), the automaton of the phrases in those
    numbers and its number of labels ``V + 2``."""
    vocab = sorted({w for ws, _ in phrases for w in ws})
    compact = torch.full((max(int(words.max()), vocab[-1]) + 1,), len(vocab) + 1,
                         dtype=torch.int64)
    compact[0] = 0
    compact[torch.tensor(vocab)] = torch.arange(1, len(vocab) + 1)
    lut = dict(zip(vocab, range(1, len(vocab) + 1)))
    context = ContextGraph([([lut[w] for w in ws], s) for ws, s in phrases], context_score)
    return compact, context, len(vocab) + 2
