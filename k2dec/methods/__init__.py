"""Named decoding methods (icefall's names) composing search, n-best and rescoring.

Use::

    from k2dec.methods import get_method, Resources, TransducerInputs
    method = get_method("fast_beam_search_nbest_LG")
    results = method(TransducerInputs(model, encoder_out, encoder_out_lens),
                     Resources(graphs={"LG": LG}), method.default_config())

Registration is explicit: each method module registers its methods with
:func:`register` when this package imports it (once, below); the registry itself imports
no method module. A new method module is added to the import list here.
"""

from ..primitives.hypothesis import HypothesisRecord

# the method modules, each registering its methods (the registry never imports them)
from . import aed, ctc, ctc_prefix, mbr, transducer, transducer_beam_search  # noqa: F401
from .compat import ICEFALL_NBEST_ILME_SCALE, icefall_compatible, icefall_compatible_part
from .fusion import ScorerRequest, build_scorers, register_scorer, scorer_names
from .parts import PARTS
from .registry import (
    Family,
    Method,
    MethodResult,
    Setting,
    family_order,
    get_method,
    list_methods,
    register,
    supported_methods,
)
from .resources import (
    NEURAL_LMS,
    NON_GRAPH_NEEDS,
    AedInputs,
    CtcInputs,
    Resources,
    TransducerInputs,
)
from .settings import (
    OLD_KEYS,
    config_field_path,
    config_keys,
    config_parts,
    describe_settings,
    override_config,
)
from .streaming import StreamingSearch

__all__ = [
    "ICEFALL_NBEST_ILME_SCALE",
    "OLD_KEYS",
    "PARTS",
    "NEURAL_LMS",
    "NON_GRAPH_NEEDS",
    "AedInputs",
    "CtcInputs",
    "Family",
    "HypothesisRecord",
    "Method",
    "MethodResult",
    "Resources",
    "ScorerRequest",
    "Setting",
    "StreamingSearch",
    "TransducerInputs",
    "build_scorers",
    "config_field_path",
    "config_keys",
    "config_parts",
    "describe_settings",
    "family_order",
    "get_method",
    "icefall_compatible",
    "icefall_compatible_part",
    "list_methods",
    "override_config",
    "register",
    "register_scorer",
    "scorer_names",
    "supported_methods",
]
