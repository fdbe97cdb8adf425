"""Old home of helpers now in their own modules; these names stay importable from here so that
code written against it keeps working. New code imports from the modules themselves:
:mod:`k2dec.best_paths` (best paths -> tokens, words, frames), :mod:`k2dec.ragged`,
:mod:`k2dec.batch_search`, :mod:`k2dec.positional` and :mod:`k2dec.hypothesis`
(:class:`HypothesisRecord`)."""

from k2dec.batch_search import HASH_MULT, extend_hash, grow_columns, num_active_per_frame
from k2dec.best_paths import (
    FRAME_ATTR,
    arc_frames,
    ctc_collapse,
    ctc_token_spans,
    path_aux_ids,
    path_frames,
    path_token_ids,
    word_minimum,
    word_spans,
)
from k2dec.hypothesis import HypothesisRecord
from k2dec.positional import sinusoidal_positions
from k2dec.ragged import exclusive_cumsum, ragged_from_row_ids, ragged_select

__all__ = [
    "FRAME_ATTR",
    "HASH_MULT",
    "HypothesisRecord",
    "arc_frames",
    "ctc_collapse",
    "ctc_token_spans",
    "exclusive_cumsum",
    "extend_hash",
    "grow_columns",
    "num_active_per_frame",
    "path_aux_ids",
    "path_frames",
    "path_token_ids",
    "ragged_from_row_ids",
    "ragged_select",
    "sinusoidal_positions",
    "word_minimum",
    "word_spans",
]
