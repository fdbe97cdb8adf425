"""Named decoding methods (icefall's names) composing search, n-best and rescoring.

Use::

    from k2dec.methods import get_method, Resources, TransducerInputs
    method = get_method("fast_beam_search_nbest_LG")
    results = method(TransducerInputs(model, encoder_out, encoder_out_lens),
                     Resources(graphs={"LG": LG}), method.default_config())
"""

from ..hypothesis import HypothesisRecord
from .compat import ICEFALL_NBEST_ILME_SCALE, icefall_compatible, icefall_compatible_part
from .registry import (
    NON_GRAPH_NEEDS,
    AedInputs,
    CtcInputs,
    Family,
    Method,
    MethodResult,
    Resources,
    Setting,
    TransducerInputs,
    config_field_path,
    get_method,
    list_methods,
    override_config,
    register,
)
from .streaming import StreamingSearch

__all__ = [
    "ICEFALL_NBEST_ILME_SCALE",
    "NON_GRAPH_NEEDS",
    "AedInputs",
    "CtcInputs",
    "Family",
    "HypothesisRecord",
    "Method",
    "MethodResult",
    "Resources",
    "Setting",
    "StreamingSearch",
    "TransducerInputs",
    "config_field_path",
    "get_method",
    "icefall_compatible",
    "icefall_compatible_part",
    "list_methods",
    "override_config",
    "register",
]
