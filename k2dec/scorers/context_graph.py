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

The automaton is expanded into dense tables ``[S, V]`` (next node, score), so a search step is
two gathers on any device.

Graph searches take the automaton inside their decoding graph instead: :func:`hotword_graph`
(over tokens, for ``fast_beam_search``; intersected with LG for the LG methods) and
:func:`bias_word_graph` (over the words of a graph with word outputs, HLG / LG / HCLG, for
lattice decoding with ``k2.intersect_dense_pruned``; phrases as word ids from
:func:`encode_hotword_words`).
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
from k2dec.primitives.files import text_lines
from k2dec.primitives.sizes import check_finite
from k2dec.scorers.base import TableScorer

logger = logging.getLogger(__name__)

__all__ = [
    "HOTWORD_GRAPH_MAX_ARCS",
    "ContextGraph",
    "Hotword",
    "HotwordScorer",
    "bias_word_graph",
    "encode_hotword_words",
    "encode_hotwords",
    "hotword_graph",
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
    """Read a hotwords file: one phrase per line, optionally followed by ``:SCORE`` (a
    per-token bonus for that phrase), e.g. ``KUBERNETES CLUSTER :3.5``. Blank lines and lines
    starting with ``#`` are skipped.

    Raises:
      ValueError: naming the file (and line): a missing file, one that is not UTF-8 text,
        a malformed score, a score without a phrase, or no phrase at all.
    """
    path = Path(path)
    out = []
    for lineno, raw in text_lines(path, "hotwords file"):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        score = None
        if line.startswith(":"):
            line = " " + line  # a score with no phrase before it
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
        if not line:
            raise ValueError(f"{path}:{lineno}: a score with no phrase (a line is 'PHRASE' "
                             "or 'PHRASE :SCORE')")
        out.append(Hotword(line, score))
    if not out:
        raise ValueError(f"hotwords file {path} has no phrases (one per line; blank lines and "
                         "lines starting with # are skipped)")
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


def encode_hotword_words(hotwords: Sequence[Hotword | str],
                         word_table) -> list[tuple[list[int], float | None]]:
    """Word ids (``word_table``: a ``k2.SymbolTable`` of words.txt) and score of each hotword,
    for :func:`bias_word_graph`. A phrase is split on white space; a phrase with a word that
    ``word_table`` lacks can never be output by a graph with these words, so it is skipped
    with a logged warning naming the word (the same list may serve token-level methods,
    which can spell any word).

    Raises:
      TypeError: a hotword that is neither a str nor a :class:`Hotword`.
    """
    out = []
    for h in hotwords:
        if isinstance(h, str):
            h = Hotword(h)
        if not isinstance(h, Hotword):
            raise TypeError(f"hotwords must be str or Hotword, got {type(h).__name__}")
        words = h.text.split()
        missing = [w for w in words if w not in word_table]
        if missing:
            logger.warning("hotword phrase %r skipped for word graphs: %s not in words.txt",
                           h.text, ", ".join(repr(w) for w in missing))
            continue
        if words:
            out.append(([word_table[w] for w in words], h.score))
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
        check_finite("context_score", context_score)
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

    def tables(self, vocab_size: int, strict: bool, word_start: torch.Tensor | None = None,
               partial: float = 1.0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Dense ``next`` (int64 ``[S, V]``), ``score`` (float64 ``[S, V]``) and ``final``
        (float64 ``[S]``) of the automaton over tokens ``[0, V)`` (see the module docstring:
        ``word_start``, bool with at least ``V`` entries, for whole words; ``partial`` in
        ``[0, 1]``, the share of the bonus a partial match holds)."""
        if isinstance(partial, bool) or not isinstance(partial, int | float) or not (
                0 <= partial <= 1):
            raise ValueError(f"partial must be a number in [0, 1], got {partial!r}")
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
        zero = torch.zeros((), dtype=torch.float64)
        held = partial * node_score  # what a partial match holds (refunded if it breaks)
        if strict:
            out_score = torch.zeros(s, dtype=torch.float64)
            for node in self._bfs_order:  # an output node is shallower: done first
                own = node_score[node] if self.is_end[node] else 0.0
                out_score[node] = own + (out_score[output[node]] if output[node] >= 0 else 0.0)
            step = held[goto] - held.unsqueeze(1)
            if word_start is None:
                return goto, step + out_score[goto], -held
            # a phrase counts when the token after it starts a word (or at the end)
            ws = _checked_word_start(word_start, vocab_size).unsqueeze(0)
            return goto, step + torch.where(ws, out_score.unsqueeze(1), zero), out_score - held
        phrase = torch.where(is_end, torch.arange(s), output.clamp(min=0))
        keep = torch.where(matched, node_score[phrase], zero)
        if word_start is None:
            nxt = torch.where(matched[goto], torch.zeros_like(goto), goto)
            value = torch.where(matched, keep, held)  # a completed match is banked at once
            return nxt, value[goto] - held.unsqueeze(1), -held
        # a matched phrase is banked (and the match restarts from the root) when the next
        # token starts a word; a token inside the word continues or breaks the match
        bank = matched.unsqueeze(1) & _checked_word_start(word_start, vocab_size).unsqueeze(0)
        nxt = torch.where(bank, goto[0].expand(s, vocab_size), goto)
        score = held[nxt] - held.unsqueeze(1) + torch.where(bank, keep.unsqueeze(1), zero)
        return nxt, score, keep - held


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


def hotword_graph(graph: ContextGraph, vocab_size: int, blank_id: int = 0,
                  device: torch.device | str = "cpu",
                  word_start: torch.Tensor | None = None, partial: float = 1.0) -> k2.Fsa:
    """The hotword automaton as a decoding graph for ``fast_beam_search``
    (:class:`k2dec.transducer.FastBeamSearch`; on CPU and CUDA): a deterministic acceptor with
    one state per trie node, an arc for every (node, token) but ``blank_id`` carrying the
    non-strict bonus or refund of the module docstring, and a final arc from every node.

    It accepts every token sequence, so it replaces the trivial graph. k2's RNN-T decoding
    drops final weights, so a match still unfinished at the end of the utterance keeps its
    partial bonus (the scorer refunds it). ``word_start`` and ``partial``: see the module
    docstring.

    Returns:
      ``k2.Fsa`` with ``S + 1`` states (the last is final), ``S * (V - 1) + S`` arcs,
      ``aux_labels`` equal to the labels (as ``k2.trivial_graph``), on ``device``.
    """
    nxt, score, _ = graph.tables(vocab_size, strict=False, word_start=word_start,
                                 partial=partial)
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
    fsa.aux_labels = fsa.labels.clone()  # as k2.trivial_graph: the tokens are the output
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
      word_start: bool per token id: whole words only (see the module docstring); None:
        a phrase completes on its last token (icefall).
      partial: the share of a phrase's bonus a partial match holds (icefall: 1).
    """

    def __init__(self, graphs: ContextGraph | Sequence[ContextGraph], vocab_size: int,
                 strict: bool = False, device: torch.device | str = "cpu",
                 word_start: torch.Tensor | None = None, partial: float = 1.0) -> None:
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
            n, s, f = g.tables(vocab_size, strict, word_start, partial)
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


#: Default bound on the arcs of a hotword-biased word graph (:func:`bias_word_graph`):
#: ``2**25`` arcs, about 1.5 GB while k2 builds it.
HOTWORD_GRAPH_MAX_ARCS = 2**25


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
    compact, acceptor = _compact_word_acceptor(words, phrases, context_score)
    num_states = acceptor.shape[0] - 1
    if g.num_arcs * num_states > max_arcs:
        raise ValueError(f"the hotword-biased graph could have {g.num_arcs} x {num_states} "
                         f"arcs (graph arcs x unfinished-phrase states), more than max_arcs="
                         f"{max_arcs}; use fewer multi-word phrases or raise the bound")
    a = g.clone()
    a.hotword_token_labels = g.labels.clone()
    refresh_labels_version(a)
    a.labels = torch.where(g.labels == -1, -1, compact[words]).to(torch.int32)
    a = k2.arc_sort(a)
    out = k2.connect(k2.intersect(a, acceptor, treat_epsilons_specially=True))
    refresh_labels_version(out)
    out.labels = out.hotword_token_labels
    del out.hotword_token_labels
    return rebuilt_fsa(k2.arc_sort(out)).to(device)


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


def _compact_word_acceptor(words: torch.Tensor, phrases: list[tuple[list[int], float | None]],
                           context_score: float) -> tuple[torch.Tensor, k2.Fsa]:
    """The phrases' words numbered ``1..V`` (a lookup table from the graph's word ids
    ``words``: 0 stays 0, other words ``V + 1``) and the word acceptor of the phrases in
    those numbers."""
    vocab = sorted({w for ws, _ in phrases for w in ws})
    compact = torch.full((max(int(words.max()), vocab[-1]) + 1,), len(vocab) + 1,
                         dtype=torch.int64)
    compact[0] = 0
    compact[torch.tensor(vocab)] = torch.arange(1, len(vocab) + 1)
    lut = dict(zip(vocab, range(1, len(vocab) + 1)))
    context = ContextGraph([([lut[w] for w in ws], s) for ws, s in phrases], context_score)
    return compact, _word_acceptor(context, len(vocab) + 2)
