"""icefall's own transducer searches (``beam_search.py``: ``greedy_search_batch``,
``modified_beam_search``, ``fast_beam_search_one_best``), read from a local icefall checkout
(``--icefall-dir`` / ``ICEFALL_DIR``), run on the same model and encoder outputs as k2dec's
offline functions at icefall's default settings; :func:`load_decode` gives
``icefall/decode.py`` and the LM / n-gram / hotword classes of the same checkout (for
``scripts/bench/icefall_dropin.py``).
"""

from __future__ import annotations

import importlib
import sys
import types
from pathlib import Path

import torch

__all__ = ["BEAM_SEARCH", "PEER", "default_differs", "load", "load_decode", "search_pairs"]

PEER = "icefall"
#: icefall's beam_search.py inside a checkout (the stateless7 and later recipes link to it)
BEAM_SEARCH = Path("egs/librispeech/ASR/pruned_transducer_stateless2")
#: modules icefall imports at the top of icefall/utils.py that its searches never call
_OPTIONAL = {"pypinyin": ("lazy_pinyin", "pinyin"), "pypinyin.contrib": (),
             "pypinyin.contrib.tone_convert": ("to_finals", "to_finals_tone", "to_initials"),
             "torch.utils.tensorboard": ("SummaryWriter",)}


def load(icefall_dir: Path):
    """icefall's ``beam_search`` module from a checkout at ``icefall_dir``. Optional modules
    icefall imports but its searches do not use get empty stand-ins when not installed."""
    recipe = icefall_dir / BEAM_SEARCH
    if not (recipe / "beam_search.py").is_file() or not (icefall_dir / "icefall").is_dir():
        raise FileNotFoundError(f"no icefall checkout at {icefall_dir} "
                                f"({BEAM_SEARCH}/beam_search.py missing)")
    for name, attrs in _OPTIONAL.items():
        try:
            importlib.import_module(name)
        except ImportError:
            stand_in = types.ModuleType(name)
            for a in attrs:
                setattr(stand_in, a, None)
            sys.modules[name] = stand_in
    sys.path[:0] = [str(icefall_dir), str(recipe)]
    return importlib.import_module("beam_search")


def load_decode(icefall_dir: Path) -> types.SimpleNamespace:
    """icefall's ``beam_search`` (``.beam_search``) and ``icefall.decode`` (``.decode``)
    modules and the classes its functions take (``RnnLmModel``, ``LmScorer``, ``NgramLm``,
    ``ContextGraph``) from a checkout at ``icefall_dir``."""
    beam_search = load(icefall_dir)
    decode = importlib.import_module("icefall.decode")
    rnn = importlib.import_module("icefall.rnn_lm.model")
    wrapper = importlib.import_module("icefall.lm_wrapper")
    ngram = importlib.import_module("icefall.ngram_lm")
    context = importlib.import_module("icefall.context_graph")
    return types.SimpleNamespace(beam_search=beam_search, decode=decode,
                                 RnnLmModel=rnn.RnnLmModel, LmScorer=wrapper.LmScorer,
                                 NgramLm=ngram.NgramLm, ContextGraph=context.ContextGraph)


def search_pairs(ice, model: torch.nn.Module, enc: torch.Tensor, lens: torch.Tensor) -> dict:
    """search name -> (k2dec's offline call, icefall's), each returning token lists; ``ice``
    is :func:`load`'s module. k2dec's fast_beam_search runs with icefall's
    ``termination_frame=False`` (:func:`k2dec.methods.icefall_compatible`): with k2dec's
    default the last frame's emissions count, so the tokens differ by design (see
    :func:`default_differs`)."""
    import k2

    from k2dec.methods import icefall_compatible
    from k2dec.transducer import fast_beam_search, greedy_search, modified_beam_search

    graph = k2.trivial_graph(int(model.decoder.vocab_size) - 1, enc.device)
    fbs_compat = icefall_compatible("fast_beam_search").search
    return {
        "greedy_search": (lambda: [h.tokens for h in greedy_search(model, enc, lens)],
                          lambda: ice.greedy_search_batch(model, enc, lens)),
        "modified_beam_search": (
            lambda: [h.tokens for h in modified_beam_search(model, enc, lens)],
            lambda: ice.modified_beam_search(model, enc, lens, beam=4)),
        "fast_beam_search": (
            lambda: [h.tokens for h in fast_beam_search(model, enc, lens, None,
                                                         fbs_compat).hyps],
            lambda: ice.fast_beam_search_one_best(model, graph, enc, lens, beam=20,
                                                  max_states=64, max_contexts=8)),
    }


def default_differs(ice, model: torch.nn.Module, enc: torch.Tensor, lens: torch.Tensor) -> str:
    """How k2dec's default fast_beam_search (``termination_frame=True``) differs from
    icefall's: utterances with other tokens, and those icefall decodes to nothing (no final
    state survives its last frame)."""
    import k2

    from k2dec.transducer import fast_beam_search

    graph = k2.trivial_graph(int(model.decoder.vocab_size) - 1, enc.device)
    with torch.no_grad():
        ours = [h.tokens for h in fast_beam_search(model, enc, lens, None).hyps]
        lattice = ice.fast_beam_search(model, graph, enc, lens, beam=20, max_states=64,
                                       max_contexts=8, ilme_scale=0.0)  # as its one_best
    theirs = ice.get_texts(ice.one_best_decoding(lattice))
    scores = lattice.get_tot_scores(use_double_scores=True, log_semiring=False)
    differ = sum(a != list(b) for a, b in zip(ours, theirs))
    empty = int(torch.isinf(scores).sum())
    return f"{differ}/{len(ours)} utterances differ, {empty} empty in icefall"
