"""The ground floor of k2dec: the small pieces every layer above shares, none of which
imports any other part of k2dec but this package.

- :mod:`~k2dec.primitives.hypothesis`: :class:`HypothesisRecord`, the one result record of
  every search;
- :mod:`~k2dec.primitives.best_paths`: best paths (``k2.Fsa``) -> tokens, words, frames;
- :mod:`~k2dec.primitives.ragged`: ``k2.RaggedTensor`` helpers;
- :mod:`~k2dec.primitives.batch_search`: the frame-synchronous searches' bookkeeping;
- :mod:`~k2dec.primitives.sizes`: the range checks of size settings and scales;
- :mod:`~k2dec.primitives.files`: input files read with errors that name them;
- :mod:`~k2dec.primitives.positional`: sinusoidal position encodings;
- :mod:`~k2dec.primitives.family`: :class:`Family`, which network output a method decodes.

Import from the modules (``from k2dec.primitives.sizes import check_int_range``): this
``__init__`` imports nothing, so that reading a file or checking a size loads neither torch
nor k2.
"""
