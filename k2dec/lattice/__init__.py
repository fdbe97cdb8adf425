"""Lattice decoding of CTC/HMM posteriors with k2: dense inputs, ``get_lattice``
(``k2.intersect_dense_pruned``), one-best, rescoring, streaming and multi-process decoding."""

from k2dec.lattice.decode import (
    LatticeConfig,
    LatticeResult,
    LatticeStatus,
    UtteranceReport,
    get_lattice,
)
from k2dec.lattice.dense import DenseInput, check_vocab, make_dense_fsa_vec
from k2dec.lattice.one_best import (
    AuxLabels,
    Hypothesis,
    best_paths,
    ctc_decoding,
    ctc_greedy_search,
    hypotheses_from_lattice,
    one_best_decoding,
)
from k2dec.lattice.runner import DecodeRunner
from k2dec.lattice.streaming import Stream, StreamingDecoder

__all__ = [
    "AuxLabels",
    "DecodeRunner",
    "DenseInput",
    "Hypothesis",
    "LatticeConfig",
    "LatticeResult",
    "LatticeStatus",
    "Stream",
    "StreamingDecoder",
    "UtteranceReport",
    "best_paths",
    "check_vocab",
    "ctc_decoding",
    "ctc_greedy_search",
    "get_lattice",
    "hypotheses_from_lattice",
    "make_dense_fsa_vec",
    "one_best_decoding",
]
