"""icefall's decoding functions under icefall's names: a drop-in for the functions of
``egs/librispeech/ASR/zipformer/beam_search.py`` and ``icefall/decode.py``, with icefall's
parameters in icefall's order and defaults and icefall's return types, run by k2dec's
searches with k2dec's icefall-compatibility choices (:func:`k2dec.methods.icefall_compatible`:
fast_beam_search without a termination frame, float32 beam scores, ``k2.random_paths``
sampling, the last of equal scores). An icefall decode script switches by changing its
imports::

    # from beam_search import greedy_search_batch, modified_beam_search, ...
    # from icefall.decode import get_lattice, one_best_decoding, rescore_with_n_best_list
    # from icefall.utils import get_texts
    from k2dec.icefall import (fast_beam_search_one_best, get_lattice, get_texts,
                               greedy_search_batch, modified_beam_search, one_best_decoding,
                               rescore_with_n_best_list)

Models are taken as icefall's scripts hold them: a transducer with ``.decoder`` /
``.joiner`` (icefall's ``AsrModel``, its TorchScript export, or k2dec's
:class:`~k2dec.transducer.Transducer`), attention decoders with ``decoder_nll`` (conformer_ctc)
or ``nll`` (zipformer), or k2dec's (``score_sequences``). LMs: icefall's ``LmScorer`` or
:class:`LmScorer` around a k2dec LM (``lm_scale`` as icefall reads it); ``NgramLm`` or k2dec's
:class:`~k2dec.scorers.TokenNgramScorer`; icefall's ``ContextGraph`` or k2dec's
:class:`~k2dec.scorers.ContextGraph`; ``RnnLmModel`` or a k2dec LM.

Where the result can differ from icefall's (each documented at the function):

- ties: the hypothesis-list rescorings take the first of equal totals
  (``fast_beam_search_nbest_oracle`` / ``nbest_oracle`` choose among paths of equal edit
  distance as icefall, by the float32 scores of ``k2.levenshtein_alignment``);
- ``get_lattice`` searches an utterance whose lattice has no complete path again with wider
  beams (icefall returns it without one); lattices carry a ``frame`` attribute;
- n-best sampling prunes a lattice over ``NbestConfig.max_lattice_arcs`` (50k) arcs first and
  whole-lattice rescoring bounds its memory (icefall retries on CUDA out-of-memory errors
  and may return ``None``);
- ``beam_search`` expands a frame at most ``max_expansions_per_frame`` times (default 1000,
  the most k2dec allows; icefall's loop has no bound and can run for minutes on one frame;
  k2dec's own method stops at 32);
- an utterance without frames gets an empty hypothesis (icefall asserts, or aborts in k2);
- a model whose ``unk_id`` differs from its blank is refused (icefall skips ``unk``);
- no function modifies its arguments (icefall's rescorings rescale the caller's lattice).

Where icefall's choice is arguably a slip, it is kept and a keyword offers the alternative:
``fast_beam_search_with_nbest_rnn_rescoring`` scores with icefall's ``sp.piece_to_id("sos_id")``
/ ``("eos_id")`` (``<unk>`` for a BPE model without such pieces) unless ``sos_id=`` /
``eos_id=`` give the LM's own.
"""

from .ctc import (
    CtcHypothesis,
    HypothesisList,
    ctc_greedy_search,
    ctc_prefix_beam_search,
    ctc_prefix_beam_search_attention_decoder_rescoring,
    ctc_prefix_beam_search_shallow_fussion,
)
from .decode import (
    DEFAULT_LM_SCALE,
    get_lattice,
    nbest_decoding,
    nbest_oracle,
    one_best_decoding,
    rescore_with_attention_decoder,
    rescore_with_attention_decoder_no_ngram,
    rescore_with_attention_decoder_with_ngram,
    rescore_with_n_best_list,
    rescore_with_rnn_lm,
    rescore_with_whole_lattice,
)
from .lm import IcefallLm, LmScorer
from .results import DecodingResults, get_texts, get_texts_with_timestamp
from .transducer import (
    beam_search,
    fast_beam_search,
    fast_beam_search_nbest,
    fast_beam_search_nbest_LG,
    fast_beam_search_nbest_oracle,
    fast_beam_search_one_best,
    greedy_search,
    greedy_search_batch,
    modified_beam_search,
)
from .transducer_lm import (
    fast_beam_search_with_nbest_rescoring,
    fast_beam_search_with_nbest_rnn_rescoring,
    modified_beam_search_lm_rescore,
    modified_beam_search_lm_rescore_LODR,
    modified_beam_search_lm_shallow_fusion,
    modified_beam_search_LODR,
)

#: icefall's beam_search.py functions offered here
BEAM_SEARCH_FUNCTIONS = (
    "greedy_search", "greedy_search_batch", "modified_beam_search", "beam_search",
    "fast_beam_search", "fast_beam_search_one_best", "fast_beam_search_nbest",
    "fast_beam_search_nbest_LG", "fast_beam_search_nbest_oracle",
    "fast_beam_search_with_nbest_rescoring", "fast_beam_search_with_nbest_rnn_rescoring",
    "modified_beam_search_lm_shallow_fusion", "modified_beam_search_LODR",
    "modified_beam_search_lm_rescore", "modified_beam_search_lm_rescore_LODR",
)
#: icefall/decode.py functions offered here
DECODE_FUNCTIONS = (
    "get_lattice", "one_best_decoding", "nbest_decoding", "nbest_oracle",
    "rescore_with_n_best_list", "rescore_with_whole_lattice", "rescore_with_attention_decoder",
    "rescore_with_attention_decoder_with_ngram", "rescore_with_attention_decoder_no_ngram",
    "rescore_with_rnn_lm", "ctc_greedy_search", "ctc_prefix_beam_search",
    "ctc_prefix_beam_search_attention_decoder_rescoring",
    "ctc_prefix_beam_search_shallow_fussion",
)

__all__ = [
    "BEAM_SEARCH_FUNCTIONS",
    "CtcHypothesis",
    "DECODE_FUNCTIONS",
    "DEFAULT_LM_SCALE",
    "DecodingResults",
    "HypothesisList",
    "IcefallLm",
    "LmScorer",
    "beam_search",
    "ctc_greedy_search",
    "ctc_prefix_beam_search",
    "ctc_prefix_beam_search_attention_decoder_rescoring",
    "ctc_prefix_beam_search_shallow_fussion",
    "fast_beam_search",
    "fast_beam_search_nbest",
    "fast_beam_search_nbest_LG",
    "fast_beam_search_nbest_oracle",
    "fast_beam_search_one_best",
    "fast_beam_search_with_nbest_rescoring",
    "fast_beam_search_with_nbest_rnn_rescoring",
    "get_lattice",
    "get_texts",
    "get_texts_with_timestamp",
    "greedy_search",
    "greedy_search_batch",
    "modified_beam_search",
    "modified_beam_search_LODR",
    "modified_beam_search_lm_rescore",
    "modified_beam_search_lm_rescore_LODR",
    "modified_beam_search_lm_shallow_fusion",
    "nbest_decoding",
    "nbest_oracle",
    "one_best_decoding",
    "rescore_with_attention_decoder",
    "rescore_with_attention_decoder_no_ngram",
    "rescore_with_attention_decoder_with_ngram",
    "rescore_with_n_best_list",
    "rescore_with_rnn_lm",
    "rescore_with_whole_lattice",
]
