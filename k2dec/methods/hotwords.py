"""Hotword biasing of the graph-based methods: their decoding graph with the hotword automaton
inside, built once per graph, list, bonus and device (kept in ``Resources.cache``).

- over tokens (:func:`token_biased_graph`): ``fast_beam_search`` (the automaton is the
  graph) and the ``fast_beam_search_*_LG`` methods (LG intersected with it);
- over words (:func:`word_biased_graph`): the HLG methods (``1best``, the n-best family,
  ``whole-lattice-rescoring``, ``mbr``), whose graph is intersected on its word side with the
  word-level automaton of ``Resources.hotword_words`` (:func:`k2dec.scorers.bias_word_graph`:
  the bonus is per word, and the final arcs refund an unfinished phrase).

The bonus is not scaled by the graph's scale (``hlg_scale``, ``ngram_lm_scale``) and is not
part of ``lm_scores``: n-best rescoring keeps it in the acoustic part ``am = scores -
lm_scores``.

Per-utterance lists: the methods take one list for the whole job. The graph functions
underneath take one graph per utterance: build each utterance's graph with
:func:`k2dec.scorers.bias_word_graph` and pass an FsaVec of them to
:func:`k2dec.lattice.get_lattice`, or give each stream its graph with
``FastBeamSearch.new_stream(decoding_graph=...)`` (memory grows with the number of graphs).
"""

from __future__ import annotations

import k2
import torch

from ..scorers import HOTWORD_GRAPH_MAX_ARCS, ContextGraph, bias_word_graph, hotword_graph
from ..scorers.hotwords import rebuilt_fsa
from .registry import Resources

__all__ = ["HOTWORDS_SCORE", "HOTWORD_GRAPH_MAX_ARCS", "token_biased_graph", "word_biased_graph"]

#: icefall's ``--context-score``: the bonus of a hotword per token (per word in the HLG
#: methods) for a phrase without its own score in the hotwords file.
HOTWORDS_SCORE = 2.0


def token_biased_graph(res: Resources, graph: k2.Fsa | None, score: float, vocab_size: int,
                       blank_id: int, device: torch.device) -> k2.Fsa | None:
    """``graph`` (``None``: the trivial graph) biased by ``Resources.hotwords`` (token ids):
    the token hotword automaton (:func:`k2dec.scorers.hotword_graph`), intersected with
    ``graph`` when there is one (on CPU, then moved; every path keeps its graph score plus
    the bonuses of its tokens). ``graph`` itself when there are no hotwords."""
    if not res.hotwords:
        return graph
    key = ("hotword_graph", id(res.hotwords), float(score), vocab_size, str(device),
           None if graph is None else id(graph))
    if key not in res.cache:
        hot = hotword_graph(ContextGraph(res.hotwords, score), vocab_size, blank_id, "cpu")
        if graph is not None:
            base = k2.arc_sort(graph.to("cpu"))
            hot = rebuilt_fsa(k2.arc_sort(k2.connect(k2.intersect(
                base, hot, treat_epsilons_specially=True))))
        res.cache[key] = hot.to(device)
    return res.cache[key]


def word_biased_graph(res: Resources, graph: k2.Fsa, score: float,
                      max_arcs: int = HOTWORD_GRAPH_MAX_ARCS) -> k2.Fsa:
    """``graph`` (word ids in ``aux_labels``) biased by ``Resources.hotword_words``
    (:func:`k2dec.scorers.bias_word_graph`, ``score`` per word); ``graph`` itself when there
    are none."""
    if not res.hotword_words:
        return graph
    key = ("word_hotword_graph", id(res.hotword_words), id(graph), float(score), max_arcs)
    if key not in res.cache:
        res.cache[key] = bias_word_graph(graph, res.hotword_words, score, max_arcs)
    return res.cache[key]
