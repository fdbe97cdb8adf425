"""Hotword biasing of the graph-based methods: their decoding graph with the hotword automaton
inside, built once per graph, list, bonus and device (kept in ``Resources.cache``).

- over tokens (:func:`token_biased_graph`, :func:`hotword_fast_beam_search`):
  ``fast_beam_search`` and its n-best / MBR variants (the automaton is the graph) and the
  ``fast_beam_search_*_LG`` methods (LG intersected with it); a list whose biased graph
  could pass its bound (:data:`HOTWORD_LG_MAX_ARCS` with LG,
  :data:`~k2dec.scorers.HOTWORD_GRAPH_MAX_ARCS` without; checked on the trie before
  building) puts the same bonus on each lattice instead
  (:class:`~k2dec.scorers.hotword_lattices.TokenLatticeHotwords`: every path gets the bonus
  the biased graph gives its tokens, but the search itself is not biased, so a path only the
  bonus would have kept in the beam is pruned; figures: BENCHMARKS.md ``hotwords``);
- over words (:func:`word_biased_graph`): the HLG methods (``1best``, the n-best family,
  ``whole-lattice-rescoring``, ``mbr``), whose graph is intersected on its word side with the
  word-level automaton of ``Resources.hotword_words`` (:func:`k2dec.scorers.bias_word_graph`:
  the bonus is per word, and the final arcs refund an unfinished phrase); a list whose biased
  graph could pass ``word_hotwords.max_arcs`` (checked before building) puts the same bonus on
  each lattice instead (:class:`k2dec.scorers.LatticeHotwords`; the search is not biased).

The bonus is not scaled by the graph's scale (``graph.scale``) and is not
part of ``lm_scores``: n-best rescoring keeps it in the acoustic part ``am = scores -
lm_scores``.

Per-utterance lists: the methods take one list for the whole job. The graph functions
underneath take one graph per utterance: build each utterance's graph with
:func:`k2dec.scorers.bias_word_graph` and pass an FsaVec of them to
:func:`k2dec.lattice.get_lattice`, or give each stream its graph with
``FastBeamSearch.new_stream(decoding_graph=...)`` (memory grows with the number of graphs).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import k2
import torch

from ..primitives.sizes import check_int_range
from ..scorers import (
    HOTWORD_GRAPH_MAX_ARCS,
    ContextGraph,
    HotwordScorer,
    WeightedScorer,
    bias_word_graph,
    check_hotword_score,
    hotword_graph,
)
from ..scorers.context_graph import (
    HotwordGraphTooLarge,
    LatticeHotwords,
    lattice_biased_graph,
    rebuilt_fsa,
)
from ..scorers.hotword_lattices import TokenLatticeHotwords
from ..transducer import (
    FastBeamSearch,
    FastBeamSearchConfig,
    FastBeamSearchResult,
    FastBeamSearchStream,
    fast_beam_search_lattice,
    one_best,
)
from .resources import Resources, TransducerInputs

__all__ = ["HOTWORDS_PARTIAL_SHARE", "HOTWORDS_SCORE", "HOTWORDS_WHOLE_WORDS",
           "HOTWORD_GRAPH_MAX_ARCS", "HOTWORD_LG_MAX_ARCS", "ICEFALL_HOTWORDS_SCORE",
           "WORD_HOTWORDS_SCORE", "HotwordConfig", "LatticeBiasedSearch", "WordHotwordConfig",
           "check_hotwords", "hotword_fast_beam_search", "hotword_fast_beam_search_lattice",
           "hotword_scorers",
           "token_biased_graph", "transducer_graph", "word_biased_graph"]

logger = logging.getLogger(__name__)

#: The bonus of a hotword per token in the token-level methods (transducer, CTC prefix, AED
#: searches) for a phrase without its own score in the hotwords file; what a token earns
#: before its phrase is complete is ``HOTWORDS_PARTIAL_SHARE`` of it. icefall's
#: ``--context-score`` is 2.0 (:data:`ICEFALL_HOTWORDS_SCORE`, set by ``--icefall-compat``);
#: k2dec's 1.0 because on the shipped model and test sets it raised the hotwords' recall
#: many times over while the other words' WER rose much less than at 2.0 in every
#: token-level method (figures: BENCHMARKS.md ``scorers``).
HOTWORDS_SCORE = 1.0
#: icefall's ``--context-score``.
ICEFALL_HOTWORDS_SCORE = 2.0
#: The bonus per word in the HLG methods (words there are a few BPE tokens of the shipped
#: model): other words' WER was not worse at 1, 2 or 4 (BENCHMARKS.md ``scorers``).
WORD_HOTWORDS_SCORE = 2.0
#: The share of a phrase's bonus its tokens earn while the phrase is incomplete (refunded if
#: the match breaks); the rest is paid when it completes. icefall pays everything on the way
#: (1.0). k2dec's 0.5 because on the shipped model and test sets paying everything early
#: pulled other words into hotword prefixes; with half of it early and whole words, the other
#: words' WER rose several times less at the same or higher recall (lower for
#: ctc-prefix-beam-search; figures: BENCHMARKS.md ``scorers``).
HOTWORDS_PARTIAL_SHARE = 0.5
#: Whether a phrase completes only at a word end (the next token starts a word, or the
#: hypothesis ends), so that ``DIFFERENT`` earns nothing inside ``DIFFERENTS``. icefall:
#: False (a phrase completes on its last token). Needs ``Resources.word_start`` (BPE token
#: tables); without it phrases complete on their last token.
HOTWORDS_WHOLE_WORDS = True
#: Bound on the token hotword graph (states x tokens) that the ``fast_beam_search_*_LG``
#: methods intersect with LG: ``2**22``, about 1,600 two- or three-word phrases of the
#: shipped 256-piece model; on the shipped LG 1,000 phrases took 1.1 GB in all and 10,000
#: would take 2.8 GB (BENCHMARKS.md ``hotwords``), past the 1.5 GB target. Checked on the
#: trie before building; a larger list biases the lattices instead (same bonus per path,
#: unbiased search).
HOTWORD_LG_MAX_ARCS = 2**22


@dataclass(frozen=True)
class HotwordConfig:
    """Hotword biasing of a token-level method (the transducer, CTC prefix and attention
    searches, the fast_beam_search family), one part every such method's config composes as
    its ``hotwords`` part (``--set hotwords.token_score=...`` reaches it). Used when
    ``Resources.hotwords`` are given (``--hotwords``).

    Attributes:
      token_score: the bonus per token of a phrase without its own score in the hotwords
        file (:data:`HOTWORDS_SCORE`; icefall's ``--context-score`` is 2.0); formerly
        ``hotwords_score``.
      partial_share: the share of it a token earns while its phrase is incomplete
        (:data:`HOTWORDS_PARTIAL_SHARE`), in ``[0, 1]``.
      whole_words: a phrase completes only at a word end (:data:`HOTWORDS_WHOLE_WORDS`).
        icefall's scheme is ``hotwords.partial_share=1.0``, ``hotwords.whole_words=false``
        with ``hotwords.token_score=2.0``, which ``--icefall-compat`` sets.
    """

    token_score: float = HOTWORDS_SCORE
    partial_share: float = HOTWORDS_PARTIAL_SHARE
    whole_words: bool = HOTWORDS_WHOLE_WORDS

    def __post_init__(self) -> None:
        check_hotwords(self)


@dataclass(frozen=True)
class WordHotwordConfig:
    """Hotword biasing of the HLG methods, the part their configs compose as
    ``word_hotwords``: used when ``Resources.hotword_words`` are given (``--hotwords``). HLG
    (after its ``graph.scale``) is intersected with the word-level hotword automaton
    (:func:`k2dec.scorers.bias_word_graph`).

    Attributes:
      word_score: the bonus per word of a hotword (a phrase without its own score); not
        scaled, not in ``lm_scores`` (n-best rescoring keeps it in the acoustic part;
        whole-lattice rescoring divides that part by its LM scale), refunded for an
        unfinished phrase. Not the token-level methods' bonus per token
        (:attr:`HotwordConfig.token_score`). Formerly ``hotwords_score``.
      max_arcs: bound on the biased HLG's arcs (HLG's arcs times the automaton's
        unfinished-phrase states; single-word phrases keep HLG's size), checked before it
        is built. Formerly ``hotwords_max_arcs``.
    """

    word_score: float = WORD_HOTWORDS_SCORE
    max_arcs: int = HOTWORD_GRAPH_MAX_ARCS

    def __post_init__(self) -> None:
        check_hotword_score(self.word_score, "word_hotwords.word_score")
        check_int_range(self, "max_arcs", 1, 1 << 26)


def check_hotwords(cfg: HotwordConfig) -> None:
    """Raise ``ValueError``/``TypeError`` on a bad hotword field (``token_score``: a
    finite number in ``[-HOTWORD_MAX_SCORE, HOTWORD_MAX_SCORE]``,
    :func:`k2dec.scorers.check_hotword_score`)."""
    check_hotword_score(cfg.token_score, "hotwords.token_score")
    share = cfg.partial_share
    if isinstance(share, bool) or not isinstance(share, int | float) or not 0 <= share <= 1:
        raise ValueError(f"partial_share must be a number in [0, 1], got {share!r}")
    if not isinstance(cfg.whole_words, bool):
        raise TypeError(f"whole_words must be a bool, got {cfg.whole_words!r}")


def _hotword_word_start(res: Resources, cfg: HotwordConfig) -> torch.Tensor | None:
    """The word-start mask the hotword automaton uses (None: phrases complete on their last
    token)."""
    if not cfg.whole_words:
        return None
    if res.word_start is None:
        key = ("hotwords_no_word_start",)
        if key not in res.cache:
            res.cache[key] = True
            logger.warning("hotwords.whole_words needs Resources.word_start (a BPE token "
                           "table); hotword phrases complete on their last token")
        return None
    return res.word_start


def _setting(cfg: HotwordConfig, res: Resources) -> tuple:
    ws = _hotword_word_start(res, cfg)
    return (float(cfg.token_score), float(cfg.partial_share),
            None if ws is None else id(ws))


def token_biased_graph(res: Resources, graph: k2.Fsa | None, cfg: HotwordConfig,
                       vocab_size: int, blank_id: int, device: torch.device
                       ) -> k2.Fsa | TokenLatticeHotwords | None:
    """``graph`` (``None``: the trivial graph) biased by ``Resources.hotwords`` (token ids)
    with the hotword settings of ``cfg``: the token hotword automaton
    (:func:`k2dec.scorers.hotword_graph`, without ``aux_labels``), intersected with
    ``graph`` when there is one (on CPU, then moved; every path keeps its graph score plus
    the bonuses of its tokens, and ``graph``'s outputs). ``graph`` itself when there are no
    hotwords.

    A list whose biased graph could pass its bound (:data:`HOTWORD_LG_MAX_ARCS` with a
    graph, :data:`~k2dec.scorers.HOTWORD_GRAPH_MAX_ARCS` without; checked on the trie before
    anything is built) gives a :class:`~k2dec.scorers.hotword_lattices.TokenLatticeHotwords`
    instead: the search then runs on ``graph`` and the bonus goes on its lattices
    (:func:`hotword_fast_beam_search`)."""
    if not res.hotwords:
        return graph
    key = ("hotword_graph", id(res.hotwords), _setting(cfg, res), vocab_size, str(device),
           None if graph is None else id(graph))
    if key not in res.cache:
        context = ContextGraph(res.hotwords, cfg.token_score)
        word_start = _hotword_word_start(res, cfg)
        bound = HOTWORD_GRAPH_MAX_ARCS if graph is None else HOTWORD_LG_MAX_ARCS
        arcs = context.num_nodes * vocab_size
        if arcs > bound:
            logger.info("%d hotword phrases: their token graph would have %d states x %d "
                        "tokens = %d arcs, more than %d: biasing the lattices instead of the "
                        "graph", context.num_phrases, context.num_nodes, vocab_size, arcs,
                        bound)
            res.cache[key] = TokenLatticeHotwords(context, vocab_size, word_start,
                                                  cfg.partial_share)
            return res.cache[key]
        # no aux_labels: with LG its own outputs (words) stay; without, the lattices get
        # their tokens back (hotword_fast_beam_search), a quarter of the graph's memory
        hot = hotword_graph(context, vocab_size, blank_id, "cpu", word_start, cfg.partial_share,
                            aux_labels=False)
        del context
        if graph is not None:
            base = k2.arc_sort(graph.to("cpu"))
            hot = rebuilt_fsa(k2.arc_sort(k2.connect(k2.intersect(
                base, hot, treat_epsilons_specially=True))))
        res.cache[key] = hot.to(device)
    return res.cache[key]


def transducer_graph(inputs: TransducerInputs, res: Resources, cfg: HotwordConfig,
                     graph: k2.Fsa | None) -> k2.Fsa | TokenLatticeHotwords | None:
    """The decoding graph of a fast_beam_search method: ``graph`` (``None``: the trivial
    graph) biased by ``Resources.hotwords`` with the hotword settings of ``cfg``
    (:func:`token_biased_graph`) for ``inputs``' model and device."""
    return token_biased_graph(res, graph, cfg, int(inputs.model.decoder.vocab_size),
                              int(inputs.model.decoder.blank_id), inputs.encoder_out.device)


def hotword_fast_beam_search(inputs: TransducerInputs, res: Resources, cfg: HotwordConfig,
                             graph: k2.Fsa | None,
                             search: FastBeamSearchConfig) -> FastBeamSearchResult:
    """:func:`k2dec.transducer.fast_beam_search` through ``graph`` (``None``: the trivial
    graph) biased by ``Resources.hotwords``: the lattices of
    :func:`hotword_fast_beam_search_lattice` and their one-best hypotheses."""
    lattice = hotword_fast_beam_search_lattice(inputs, res, cfg, graph, search)
    return FastBeamSearchResult(lattice, one_best(lattice, inputs.encoder_out_lens.tolist()),
                                search)


def hotword_fast_beam_search_lattice(inputs: TransducerInputs, res: Resources,
                                     cfg: HotwordConfig, graph: k2.Fsa | None,
                                     search: FastBeamSearchConfig) -> k2.Fsa:
    """The lattice FsaVec of fast_beam_search through ``graph`` (``None``: the trivial
    graph) biased by ``Resources.hotwords`` (no one-best hypotheses: for the n-best
    methods): through the biased graph while it fits its bound, else through ``graph`` with
    the bonus put on the lattices (every path gets the bonus of its tokens, as in the biased
    graph; the search itself is not biased)."""
    model, enc, lens = inputs.model, inputs.encoder_out, inputs.encoder_out_lens
    biased = transducer_graph(inputs, res, cfg, graph)
    if isinstance(biased, TokenLatticeHotwords):
        return biased(fast_beam_search_lattice(model, enc, lens, graph, search))
    lattice = fast_beam_search_lattice(model, enc, lens, biased, search)
    if biased is not graph and graph is None:  # the trivial graph's outputs: its tokens
        lattice.aux_labels = lattice.labels.clone()
    return lattice


class LatticeBiasedSearch:
    """A streaming :class:`~k2dec.transducer.FastBeamSearch` whose results are read from
    its lattices with the hotword bonus put on them (:class:`TokenLatticeHotwords`: a list
    too large for the biased graph); the same ``new_stream`` / ``decode_chunk`` /
    ``results`` protocol."""

    def __init__(self, search: FastBeamSearch, bias: TokenLatticeHotwords) -> None:
        self.search, self.bias = search, bias

    def new_stream(self, device: torch.device | str = "cpu") -> FastBeamSearchStream:
        return self.search.new_stream(device)

    def decode_chunk(self, streams, encoder_out: torch.Tensor,
                     encoder_out_lens: torch.Tensor) -> None:
        self.search.decode_chunk(streams, encoder_out, encoder_out_lens)

    def results(self, streams, final: bool = True) -> list:
        """The one-best hypotheses (:class:`~k2dec.transducer.TransducerHypothesis`) of the
        biased lattices (see :meth:`FastBeamSearch.lattice` for ``final``)."""
        lattice = self.bias(self.search.lattice(streams, final))
        return one_best(lattice, [s.num_frames for s in streams])


def word_biased_graph(res: Resources, graph: k2.Fsa, score: float,
                      max_arcs: int = HOTWORD_GRAPH_MAX_ARCS) -> k2.Fsa:
    """``graph`` (word ids in ``aux_labels``) biased by ``Resources.hotword_words``
    (:func:`k2dec.scorers.bias_word_graph`, ``score`` per word); ``graph`` itself when there
    are none. When the biased graph could exceed ``max_arcs`` (a long list of multi-word
    phrases: checked before building), the bonus goes on the lattices instead
    (:class:`k2dec.scorers.LatticeHotwords`: the same bonus per path, the search unbiased),
    through a copy of ``graph`` that carries it."""
    if not res.hotword_words:
        return graph
    check_hotword_score(score, "word_hotwords.word_score")
    key = ("word_hotword_graph", id(res.hotword_words), id(graph), float(score), max_arcs)
    if key not in res.cache:
        try:
            res.cache[key] = bias_word_graph(graph, res.hotword_words, score, max_arcs)
        except HotwordGraphTooLarge as e:
            logger.info("%s: biasing the lattices instead of the graph", e)
            res.cache[key] = lattice_biased_graph(graph, LatticeHotwords(res.hotword_words,
                                                                         score))
    return res.cache[key]


def hotword_scorers(res: Resources, vocab_size: int, cfg: HotwordConfig, device: torch.device,
                    strict: bool = False) -> list[WeightedScorer]:
    """A hotword scorer (weight 1) over ``res.hotwords`` with the hotword settings of ``cfg``,
    built once per setting (kept in ``res.cache``); none without hotwords."""
    if not res.hotwords:
        return []
    key = ("hotwords", id(res.hotwords), _setting(cfg, res), vocab_size, str(device), strict)
    if key not in res.cache:
        graph = ContextGraph(res.hotwords, context_score=cfg.token_score)
        res.cache[key] = HotwordScorer(graph, vocab_size, strict=strict, device=device,
                                       word_start=_hotword_word_start(res, cfg),
                                       partial=cfg.partial_share)
    return [WeightedScorer(res.cache[key], 1.0)]
