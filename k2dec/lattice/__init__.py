"""Lattice decoding of CTC/HMM posteriors with k2: dense inputs, ``get_lattice``
(``k2.intersect_dense_pruned``), one-best, rescoring, streaming and multi-process decoding;
posteriors, MBR decoding (sausages, consensus) and word confidences of any k2dec lattice
(transducer lattices too); CTC forced alignment.

Example (HLG 1best, then whole-lattice rescoring with a 4-gram)::

    from k2dec.lattice import LatticeConfig, get_lattice, hypotheses_from_lattice
    from k2dec.lattice import RescoreConfig, rescore_with_whole_lattice

    HLG.lm_scores = HLG.scores.clone()
    result = get_lattice(log_probs, lengths, HLG, LatticeConfig())  # log_probs (N, T, V)
    hyps = hypotheses_from_lattice(result)          # N Hypothesis: words, tokens, frames
    rescored = rescore_with_whole_lattice(result, G_4gram, RescoreConfig(lm_scales=(0.5,)))
"""

from k2dec.lattice.align import CtcAlignment, ctc_forced_alignment
from k2dec.lattice.cache import LatticeCache
from k2dec.lattice.dense import DenseInput, check_vocab, make_dense_fsa_vec
from k2dec.lattice.forced_align import WordAlignment, align_words
from k2dec.lattice.groups import lattice_groups
from k2dec.lattice.mbr import MbrConfig, MbrResult, Sausages, mbr_decode
from k2dec.lattice.one_best import (
    AuxLabels,
    Hypothesis,
    best_paths,
    ctc_decoding,
    ctc_greedy_search,
    ctc_greedy_token_confidences,
    hypotheses_from_lattice,
    one_best_decoding,
)
from k2dec.lattice.parallel import ParallelOneBestDecoder, WorkerStats
from k2dec.lattice.posteriors import (
    PosteriorConfig,
    arc_posteriors,
    lattice_arc_frames,
    word_posteriors,
)
from k2dec.lattice.prune import PruneReport, prune_lattice
from k2dec.lattice.rescore import (
    RescoreConfig,
    RescoreResult,
    RescoreStatus,
    ScaleResult,
    SweepPoint,
    SweepResult,
    UtteranceRescore,
    rescore_with_whole_lattice,
    search_and_rescore_whole_lattices,
    split_scores,
    sweep_lattice_weights,
)
from k2dec.lattice.search import (
    LatticeConfig,
    LatticeResult,
    LatticeStatus,
    UtteranceReport,
    arcs_per_fsa,
    get_lattice,
    partial_graph,
)
from k2dec.lattice.streaming import Stream, StreamingDecoder
from k2dec.lattice.timed_units import TimedUnits, Topology, lattice_timed_units, path_units
from k2dec.lattice.viterbi import viterbi_one_best

__all__ = [
    "AuxLabels",
    "CtcAlignment",
    "WordAlignment",
    "align_words",
    "ParallelOneBestDecoder",
    "DenseInput",
    "Hypothesis",
    "LatticeCache",
    "LatticeConfig",
    "LatticeResult",
    "LatticeStatus",
    "MbrConfig",
    "MbrResult",
    "PosteriorConfig",
    "PruneReport",
    "RescoreConfig",
    "RescoreResult",
    "RescoreStatus",
    "WorkerStats",
    "Sausages",
    "ScaleResult",
    "Stream",
    "StreamingDecoder",
    "SweepPoint",
    "SweepResult",
    "TimedUnits",
    "Topology",
    "UtteranceReport",
    "UtteranceRescore",
    "arc_posteriors",
    "arcs_per_fsa",
    "best_paths",
    "check_vocab",
    "ctc_decoding",
    "ctc_forced_alignment",
    "ctc_greedy_search",
    "ctc_greedy_token_confidences",
    "get_lattice",
    "partial_graph",
    "hypotheses_from_lattice",
    "lattice_groups",
    "lattice_arc_frames",
    "lattice_timed_units",
    "path_units",
    "make_dense_fsa_vec",
    "mbr_decode",
    "one_best_decoding",
    "prune_lattice",
    "rescore_with_whole_lattice",
    "search_and_rescore_whole_lattices",
    "split_scores",
    "sweep_lattice_weights",
    "viterbi_one_best",
    "word_posteriors",
]

