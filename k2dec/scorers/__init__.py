"""Scorers: what a beam search adds to its own score, behind one protocol (:class:`Scorer`).

Every search of k2dec that builds hypotheses token by token (transducer ``beam_search`` and
``modified_beam_search``, ``ctc_prefix_beam_search``, the attention ``beam_search``) takes a
list of :class:`WeightedScorer`. Implementations:

- :class:`NeuralLmScorer`: shallow fusion with an RNN or Transformer LM (:mod:`k2dec.lm`);
- :class:`TokenNgramScorer`: a token n-gram from an ARPA file (LODR subtracts a bigram built by
  :func:`train_token_arpa` from the LM text);
- :class:`HotwordScorer`: hotword biasing with an Aho-Corasick :class:`ContextGraph`
  (graph searches: :func:`hotword_graph` over tokens, :func:`bias_word_graph` over the words
  of HLG / LG);
- :class:`CtcScorer`: CTC prefix scores (a partial scorer: scores pre-selected candidates).

Example (an LM and a hotword list in modified beam search)::

    from k2dec.scorers import (ContextGraph, HotwordScorer, NeuralLmScorer, WeightedScorer,
                               encode_hotwords, read_hotwords)
    graph = ContextGraph(encode_hotwords(read_hotwords("hotwords.txt"), sp), context_score=2.0)
    scorers = [WeightedScorer(NeuralLmScorer(rnn_lm, score_eos=False), 0.3),
               WeightedScorer(HotwordScorer(graph, vocab_size), 1.0)]
    hyps = modified_beam_search(model, encoder_out, encoder_out_lens, scorers=scorers)
"""

from k2dec.scorers.base import Scorer, ScorerSet, TableScorer, WeightedScorer
from k2dec.scorers.context_graph import (
    HOTWORD_GRAPH_MAX_ARCS,
    HOTWORD_MAX_SCORE,
    HOTWORD_MAX_STATES,
    ContextGraph,
    Hotword,
    HotwordScorer,
    LatticeHotwords,
    bias_word_graph,
    check_hotword_score,
    check_hotword_size,
    encode_hotword_words,
    encode_hotwords,
    hotword_graph,
    lattice_biased_graph,
    read_hotwords,
)
from k2dec.scorers.ctc_prefix import CtcPrefixScorer, CtcPrefixState, CtcScorer, CtcScorerState
from k2dec.scorers.neural_lm import NeuralLmScorer, NeuralLmScorerState
from k2dec.scorers.ngram import ArpaModel, TokenNgramScorer, read_arpa, train_token_arpa

__all__ = [
    "HOTWORD_GRAPH_MAX_ARCS",
    "HOTWORD_MAX_SCORE",
    "HOTWORD_MAX_STATES",
    "ArpaModel",
    "ContextGraph",
    "CtcPrefixScorer",
    "CtcPrefixState",
    "CtcScorer",
    "CtcScorerState",
    "Hotword",
    "HotwordScorer",
    "LatticeHotwords",
    "NeuralLmScorer",
    "NeuralLmScorerState",
    "Scorer",
    "ScorerSet",
    "TableScorer",
    "TokenNgramScorer",
    "WeightedScorer",
    "bias_word_graph",
    "check_hotword_score",
    "check_hotword_size",
    "encode_hotword_words",
    "encode_hotwords",
    "hotword_graph",
    "lattice_biased_graph",
    "read_arpa",
    "read_hotwords",
    "train_token_arpa",
]
