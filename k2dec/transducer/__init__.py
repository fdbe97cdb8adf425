"""Transducer decoding: icefall's stateless decoder/joiner interface, greedy search, modified
beam search and k2's fast_beam_search, all batched over utterances and streamable.

Offline (``encoder_out`` float ``[N, T, C]``, ``encoder_out_lens`` int ``[N]``)::

    hyps = greedy_search(model, encoder_out, encoder_out_lens)           # GreedySearchConfig
    hyps = modified_beam_search(model, encoder_out, encoder_out_lens)    # beam=4
    nbests = beam_search(model, encoder_out, encoder_out_lens)           # classic, [N][beam]
    result = fast_beam_search(model, encoder_out, encoder_out_lens, decoding_graph=None)
    result.lattice, result.hyps                                          # beam=20, 8, 64

Each ``hyps[i]`` is a :class:`TransducerHypothesis` (``tokens``, ``timestamps`` = encoder frame
of each token, ``score``). ``modified_beam_search`` and ``beam_search`` take
``scorers=[WeightedScorer(...)]`` (:mod:`k2dec.scorers`: LM fusion, LODR, hotwords).
Streaming: every offline function but ``beam_search`` is one ``decode_chunk`` of the
matching searcher (:class:`GreedySearch`, :class:`ModifiedBeamSearch`, :class:`FastBeamSearch`):
create one stream per utterance with ``new_stream()``, call ``decode_chunk(streams, chunk,
chunk_lens)`` as frames arrive, and ``results(streams)`` for partial or final hypotheses.
"""

from k2dec.transducer.beam_hyps import BeamHyps
from k2dec.transducer.beam_search import TransducerBeamSearchConfig, beam_search
from k2dec.transducer.common import TransducerHypothesis
from k2dec.transducer.fast_beam_search import (
    FastBeamSearch,
    FastBeamSearchConfig,
    FastBeamSearchResult,
    FastBeamSearchStream,
    check_decoding_graph,
    fast_beam_search,
    fast_beam_search_lattice,
    one_best,
)
from k2dec.transducer.greedy import (
    GreedySearch,
    GreedySearchConfig,
    GreedySearchStream,
    greedy_search,
    greedy_search_logits,
)
from k2dec.transducer.model import Joiner, LinearEncoder, Transducer
from k2dec.transducer.modified_beam_search import (
    ModifiedBeamSearch,
    ModifiedBeamSearchConfig,
    ModifiedBeamSearchStream,
    modified_beam_search,
)
from k2dec.transducer.network import DecoderCache, StatelessDecoder, TransducerNet

__all__ = [
    "BeamHyps",
    "DecoderCache",
    "FastBeamSearch",
    "FastBeamSearchConfig",
    "FastBeamSearchResult",
    "FastBeamSearchStream",
    "GreedySearch",
    "GreedySearchConfig",
    "GreedySearchStream",
    "Joiner",
    "LinearEncoder",
    "ModifiedBeamSearch",
    "ModifiedBeamSearchConfig",
    "ModifiedBeamSearchStream",
    "StatelessDecoder",
    "Transducer",
    "TransducerBeamSearchConfig",
    "TransducerHypothesis",
    "TransducerNet",
    "beam_search",
    "check_decoding_graph",
    "fast_beam_search",
    "fast_beam_search_lattice",
    "greedy_search",
    "greedy_search_logits",
    "modified_beam_search",
    "one_best",
]
