"""icefall's own transducer searches (``beam_search.py``: ``greedy_search_batch``,
``greedy_search``, ``modified_beam_search``, ``fast_beam_search_one_best``, ``_nbest``,
``_nbest_LG`` and ``_nbest_oracle``), read from a local icefall checkout (``--icefall-dir`` /
``ICEFALL_DIR``), run on the same model and encoder outputs as k2dec's at icefall's default
settings; k2dec's side runs with :func:`k2dec.methods.icefall_compatible` configs (the
settings under which the outputs should be identical); :func:`load_decode` gives
``icefall/decode.py`` and the LM / n-gram / hotword classes of the same checkout (for
``scripts/bench/icefall_dropin.py``).
"""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

__all__ = ["BEAM_SEARCH", "PEER", "ZIPFORMER", "SearchInputs", "default_differs",
           "icefall_model", "load", "load_decode", "model_classes", "search_pairs"]

PEER = "icefall"
#: icefall's beam_search.py inside a checkout (the stateless7 and later recipes link to it)
BEAM_SEARCH = Path("egs/librispeech/ASR/pruned_transducer_stateless2")
#: modules icefall imports at the top of icefall/utils.py that its searches never call
_OPTIONAL = {"pypinyin": ("lazy_pinyin", "pinyin"), "pypinyin.contrib": (),
             "pypinyin.contrib.tone_convert": ("to_finals", "to_finals_tone", "to_initials"),
             "torch.utils.tensorboard": ("SummaryWriter",)}
#: icefall's fast_beam_search settings (its decode.py defaults) and n-best sampling
FBS = dict(beam=20.0, max_states=64, max_contexts=8)
NBEST = dict(num_paths=200, nbest_scale=0.5)
#: icefall's ``--ngram-lm-scale`` for the LG methods (its decode.py scales LG's scores)
NGRAM_LM_SCALE = 0.01


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


#: icefall's zipformer recipe: its Decoder (decoder.py) and Joiner (joiner.py) classes
ZIPFORMER = Path("egs/librispeech/ASR/zipformer")


def model_classes(icefall_dir: Path) -> tuple[type, type]:
    """icefall's own zipformer ``Decoder`` and ``Joiner`` classes from the checkout (their
    ``scaling`` module is the zipformer recipe's; the modules are imported under their
    recipe's names with that directory first on ``sys.path``, and those names are restored
    afterwards so that ``beam_search``'s own imports are untouched)."""
    load(icefall_dir)  # icefall on sys.path, optional modules stood in
    names = ("scaling", "decoder", "joiner")
    saved = {n: sys.modules.pop(n) for n in names if n in sys.modules}
    sys.path.insert(0, str(icefall_dir / ZIPFORMER))
    try:
        decoder = importlib.import_module("decoder")
        joiner = importlib.import_module("joiner")
    finally:
        sys.path.remove(str(icefall_dir / ZIPFORMER))
        for n in names:
            sys.modules.pop(n, None)
        sys.modules.update(saved)
    return decoder.Decoder, joiner.Joiner


def icefall_model(classes: tuple[type, type], vocab: int, dim: int, encoder_dim: int,
                  seed: int, weight_scale: float, blank_bias: float) -> torch.nn.Module:
    """A seeded transducer made of icefall's own ``Decoder`` / ``Joiner`` objects (context 2,
    decoder and joiner dimension ``dim``), its output layer's weights scaled and the blank
    logit raised (peaked distributions, as a trained model's)."""
    decoder_cls, joiner_cls = classes
    torch.manual_seed(seed)
    model = torch.nn.Module()
    model.decoder = decoder_cls(vocab, dim, 0, 2)
    model.joiner = joiner_cls(encoder_dim, dim, dim, vocab)
    with torch.no_grad():
        model.joiner.output_linear.weight.mul_(weight_scale)
        model.joiner.output_linear.bias[0] += blank_bias
    return model.eval()


@dataclass
class SearchInputs:
    """What both sides decode: the model, its encoder outputs ``[N, T, C]`` and lengths
    ``[N]``, an LG (labels tokens, aux_labels words; ``None``: no LG search) and reference
    token ids per utterance for the oracle (``None``: no oracle)."""

    model: torch.nn.Module
    encoder_out: torch.Tensor
    encoder_lens: torch.Tensor
    LG: object = None
    ref_tokens: list[list[int]] | None = None


def _k2dec_method(name: str, x: SearchInputs, graphs: dict, **config_changes) -> Callable:
    """k2dec's registered method ``name`` with its icefall-compatible config (and
    ``config_changes``), returning token (or, for word methods, word) lists."""
    from dataclasses import replace

    from k2dec.methods import get_method, icefall_compatible
    from k2dec.methods.resources import Resources, TransducerInputs

    method = get_method(name)
    config = icefall_compatible(method)
    if config_changes:
        config = replace(config, **config_changes)
    resources = Resources(graphs=graphs)
    inputs = TransducerInputs(x.model, x.encoder_out, x.encoder_lens, x.ref_tokens)

    def run() -> list:
        [result] = method(inputs, resources, config)
        return result.words if result.words is not None else result.tokens

    return run


def _greedy_pairs(ice, x: SearchInputs) -> dict:
    from k2dec.transducer import GreedySearchConfig, greedy_search

    model, enc, lens = x.model, x.encoder_out, x.encoder_lens

    def ours(max_sym: int) -> Callable:
        config = GreedySearchConfig(max_sym_per_frame=max_sym)
        return lambda: [h.tokens for h in greedy_search(model, enc, lens, config)]

    def per_utterance(max_sym: int) -> Callable:  # icefall's greedy_search takes N == 1
        return lambda: [ice.greedy_search(model, enc[i : i + 1, : int(n)], max_sym)
                        for i, n in enumerate(lens.tolist())]

    return {"greedy_search": (ours(1), lambda: ice.greedy_search_batch(model, enc, lens)),
            "greedy_search max_sym_per_frame=1": (ours(1), per_utterance(1)),
            "greedy_search max_sym_per_frame=2": (ours(2), per_utterance(2))}


def search_pairs(ice, x: SearchInputs) -> dict[str, tuple[Callable, Callable]]:
    """search name -> (k2dec's call, icefall's), each returning token (word) lists; ``ice``
    is :func:`load`'s module. k2dec runs with its icefall-compatible configs
    (``termination_frame=False``, icefall's ILME scale and n-best sampler and tie-break,
    float32 beam scores); without them fast_beam_search's last frame counts, so the tokens
    differ by design (see :func:`default_differs`)."""
    import k2

    from k2dec.methods import icefall_compatible
    from k2dec.methods.parts import GraphConfig
    from k2dec.transducer import fast_beam_search, modified_beam_search

    model, enc, lens = x.model, x.encoder_out, x.encoder_lens
    graph = k2.trivial_graph(int(model.decoder.vocab_size) - 1, enc.device)
    fbs_compat = icefall_compatible("fast_beam_search").search
    mbs_compat = icefall_compatible("modified_beam_search").search
    pairs = _greedy_pairs(ice, x)
    pairs["modified_beam_search"] = (
        lambda: [h.tokens for h in modified_beam_search(model, enc, lens, mbs_compat)],
        lambda: ice.modified_beam_search(model, enc, lens, beam=4))
    pairs["fast_beam_search"] = (
        lambda: [h.tokens for h in fast_beam_search(model, enc, lens, None, fbs_compat).hyps],
        lambda: ice.fast_beam_search_one_best(model, graph, enc, lens, **FBS))
    pairs["fast_beam_search_nbest"] = (
        _k2dec_method("fast_beam_search_nbest", x, {}),
        lambda: ice.fast_beam_search_nbest(model, graph, enc, lens, **FBS, **NBEST))
    if x.LG is not None:
        scaled = x.LG.clone()
        scaled.scores = x.LG.scores * NGRAM_LM_SCALE
        pairs["fast_beam_search_nbest_LG"] = (
            _k2dec_method("fast_beam_search_nbest_LG", x, {"LG": x.LG},
                          graph=GraphConfig(NGRAM_LM_SCALE)),
            lambda: ice.fast_beam_search_nbest_LG(model, scaled, enc, lens, **FBS, **NBEST))
    if x.ref_tokens is not None:
        pairs["fast_beam_search_nbest_oracle"] = (
            _k2dec_method("fast_beam_search_nbest_oracle", x, {}),
            lambda: ice.fast_beam_search_nbest_oracle(model, graph, enc, lens, **FBS, **NBEST,
                                                      ref_texts=x.ref_tokens))
    return pairs


def default_differs(ice, model: torch.nn.Module, enc: torch.Tensor, lens: torch.Tensor) -> str:
    """How k2dec's default fast_beam_search (``termination_frame=True``) differs from
    icefall's: utterances with other tokens, and those icefall decodes to nothing (no final
    state survives its last frame)."""
    import k2

    from k2dec.transducer import fast_beam_search

    graph = k2.trivial_graph(int(model.decoder.vocab_size) - 1, enc.device)
    with torch.no_grad():
        ours = [h.tokens for h in fast_beam_search(model, enc, lens, None).hyps]
        lattice = ice.fast_beam_search(model, graph, enc, lens, **FBS,
                                       ilme_scale=0.0)  # as its one_best
    theirs = ice.get_texts(ice.one_best_decoding(lattice))
    scores = lattice.get_tot_scores(use_double_scores=True, log_semiring=False)
    differ = sum(a != list(b) for a, b in zip(ours, theirs))
    empty = int(torch.isinf(scores).sum())
    return f"{differ}/{len(ours)} utterances differ, {empty} empty in icefall"
