"""What a decoding method is given besides its config: :class:`Resources` (graphs, the sources
of its scorers, the attention decoder) and the batch, one ``Inputs`` class per model family
(:class:`TransducerInputs`, :class:`CtcInputs`, :class:`AedInputs`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import k2
import torch

from ..lattice import get_lattice
from ..lm.base import NeuralLM

__all__ = [
    "NEURAL_LMS",
    "NON_GRAPH_NEEDS",
    "AedInputs",
    "CtcInputs",
    "Resources",
    "TransducerInputs",
]


#: What :attr:`Method.requires` may name besides graph names (``"H"``, ``"HLG"``, ``"LG"``,
#: ``"G"``): the attention decoder, a neural LM, LODR's token n-gram and the token -> word
#: map of a BPE lang dir.
NON_GRAPH_NEEDS = ("attention_decoder", "lm", "lodr", "token_words")


#: The names of the neural LMs among :attr:`Resources.sources`, in the order every method
#: prefers them (:meth:`Resources.neural_lm`): the RNN LM first, as icefall's recipes ship it.
NEURAL_LMS = ("rnn_lm", "transformer_lm")

#: The scorer sources :class:`Resources` names besides neural LMs (each with its former field).
_NAMED_SOURCES = {"lodr": None, "hotwords": (), "hotword_words": ()}


def _source_view(name: str, doc: str) -> property:
    """A read-only attribute of :class:`Resources` for ``sources[name]`` (its former field)."""
    def get(self: Resources) -> Any:
        return self.sources.get(name, _NAMED_SOURCES[name])

    def refuse(self: Resources, value: Any) -> None:
        raise AttributeError(f"Resources.{name} is read-only: set "
                             f"Resources.sources[{name!r}]")

    return property(get, refuse, doc=doc)


@dataclass(init=False)
class Resources:
    """What methods may need besides the batch: graphs, the sources of their scorers,
    decoders. The constructor takes the attributes as keywords (``graphs``, ``sources`` and
    ``attention_decoder`` also by position), and the former fields ``lms``, ``lodr``,
    ``hotwords``, ``hotword_words`` as shorthands, not deprecated: ``lms={"rnn_lm": lm}`` adds
    its entries to ``sources``, each of the others the entry of its name (a source given both
    ways is a ``ValueError``). Read back, those four are read-only views of ``sources`` (set
    entries through ``sources``).

    Attributes:
      graphs: by name: ``"H"``, ``"HLG"``, ``"LG"``, ``"G"`` (rescoring G with
        ``lm_scores``), ``"trivial"``; on the device of the inputs.
      sources: what the methods' scorers and biased graphs are built from, by name
        (:func:`k2dec.methods.build_scorers`; a new scorer reads its own name):
        ``"rnn_lm"``, ``"transformer_lm"`` (:data:`NEURAL_LMS`), neural LMs
        (:class:`k2dec.lm.NeuralLM`) for shallow fusion and rescoring; ``"lodr"``, LODR's
        token n-gram (a :class:`k2dec.scorers.TokenNgramScorer`, e.g. a bigram from
        :func:`k2dec.scorers.train_token_arpa`) on the device of the inputs; ``"hotwords"``,
        biasing phrases as token ids with an optional per-phrase score
        (:func:`k2dec.scorers.encode_hotwords` of a ``--hotwords`` file), which the methods
        that support biasing use when given (each with its ``hotwords.token_score``);
        ``"hotword_words"``, the same phrases as word ids of the lang dir's words.txt
        (:func:`k2dec.scorers.encode_hotword_words`; phrases with words outside words.txt
        are left out), for the methods that bias a graph with word outputs (the HLG methods;
        each with its ``word_hotwords.word_score``, per word).
      attention_decoder: the AED decoder for attention rescoring / beam search.
      cache: scratch space methods use to keep derived objects (e.g. a scaled LG) across
        batches.
      word_start: bool ``(V,)``: which token ids begin a word (BPE pieces starting with
        ``▁``, :func:`k2dec.lang.bpe_word_start_mask`), so that methods can give words the
        frames of their tokens; ``None`` when unknown (phone lexicons): word frames then
        come from the arcs carrying the word labels.
      token_words: word ids of token sequences (a :class:`k2dec.lang.TokenWords` of the
        lang dir), for methods that score token hypotheses with a word n-gram; ``None``
        when the lang dir is not a BPE one.
    """

    graphs: dict[str, k2.Fsa]
    sources: dict[str, Any]
    attention_decoder: Any
    cache: dict[Any, Any]
    word_start: torch.Tensor | None
    token_words: Any

    def __init__(self, graphs: dict[str, k2.Fsa] | None = None,
                 sources: dict[str, Any] | None = None, attention_decoder: Any = None, *,
                 cache: dict[Any, Any] | None = None, word_start: torch.Tensor | None = None,
                 token_words: Any = None, lms: dict[str, Any] | None = None, lodr: Any = None,
                 hotwords: tuple | None = None, hotword_words: tuple | None = None) -> None:
        self.graphs = {} if graphs is None else graphs
        self.sources = {} if sources is None else sources
        self.attention_decoder = attention_decoder
        self.cache = {} if cache is None else cache
        self.word_start, self.token_words = word_start, token_words
        given = dict(lms or {})
        given.update({k: v for k, v in (("lodr", lodr), ("hotwords", hotwords),
                                        ("hotword_words", hotword_words)) if v is not None})
        for name, value in given.items():
            if name in self.sources:
                raise ValueError(f"Resources: {name!r} is given twice (in sources and as a "
                                 "keyword)")
            self.sources[name] = value

    @property
    def lms(self) -> Mapping[str, Any]:
        """The neural LMs among :attr:`sources` (those named in :data:`NEURAL_LMS` and any
        :class:`k2dec.lm.NeuralLM`), by name: a read-only view."""
        return MappingProxyType({k: v for k, v in self.sources.items()
                                 if k in NEURAL_LMS or isinstance(v, NeuralLM)})

    lodr = _source_view("lodr", "``sources['lodr']`` (None without it).")
    hotwords = _source_view("hotwords", "``sources['hotwords']`` (``()`` without them).")
    hotword_words = _source_view("hotword_words",
                                 "``sources['hotword_words']`` (``()`` without them).")

    def graph(self, name: str, method: str) -> k2.Fsa:
        if name not in self.graphs:
            raise ValueError(f"method {method!r} needs the {name} graph; give it in "
                             f"Resources.graphs[{name!r}]")
        return self.graphs[name]

    def neural_lm(self, method: str) -> tuple[str, Any]:
        """The neural LM every method uses, as ``(name, lm)``: the first of :data:`NEURAL_LMS`
        in :attr:`sources` (``rnn_lm``, else ``transformer_lm``); ``ValueError`` naming
        ``method`` when there is none."""
        for name in NEURAL_LMS:
            if name in self.sources:
                return name, self.sources[name]
        raise ValueError(f"{method} needs a neural LM in Resources.sources['rnn_lm'] or "
                         "['transformer_lm']")

    def missing(self, requires: Sequence[str]) -> tuple[str, ...]:
        """The entries of ``requires`` (a :attr:`Method.requires`) these resources lack: graph
        names not in :attr:`graphs`, ``"attention_decoder"`` when there is none, ``"lm"``
        without a neural LM in :attr:`sources` (:data:`NEURAL_LMS`), ``"lodr"`` without
        ``sources["lodr"]``, ``"token_words"`` without :attr:`token_words`."""
        have = {"attention_decoder": self.attention_decoder is not None,
                "lm": any(n in self.sources for n in NEURAL_LMS),
                "lodr": self.lodr is not None, "token_words": self.token_words is not None}
        return tuple(r for r in requires if not have.get(r, r in self.graphs))

    def scaled_graph(self, name: str, scale: float, method: str,
                     lm_scores: bool = False) -> k2.Fsa:
        """``graphs[name]`` with ``scores`` (and ``lm_scores``, if it has them) times ``scale``.
        With ``lm_scores`` the scaled scores are also copied to ``lm_scores`` where the graph
        has none (icefall's convention for splitting AM and LM scores in lattices:
        ``am = tot - lm`` stays acoustic at any scale). Built once per graph and setting and
        kept in :attr:`cache`; the graph itself is never modified (returned as is when there
        is nothing to change)."""
        graph = self.graph(name, method)
        scale = float(scale)
        if scale == 1.0 and (not lm_scores or hasattr(graph, "lm_scores")):
            return graph
        key = ("scaled", name, id(graph), scale, lm_scores)
        if key not in self.cache:
            g = graph.clone()
            if scale != 1.0:
                g.scores = graph.scores * scale
                if hasattr(graph, "lm_scores"):
                    g.lm_scores = graph.lm_scores * scale
            if lm_scores and not hasattr(graph, "lm_scores"):
                g.lm_scores = g.scores.clone()
            self.cache[key] = g
        return self.cache[key]


@dataclass
class TransducerInputs:
    """A batch for transducer methods.

    Attributes:
      model: a stateless transducer (``.decoder``, ``.joiner``).
      encoder_out: float ``[N, T, C]``; encoder_out_lens: int ``[N]``.
      ref_tokens: reference token ids per utterance (oracle methods only).
    """

    model: torch.nn.Module
    encoder_out: torch.Tensor
    encoder_out_lens: torch.Tensor
    ref_tokens: list[list[int]] | None = None


@dataclass
class CtcInputs:
    """A batch for CTC/HMM methods.

    Attributes:
      log_probs: float32 ``[N, T, V]``.
      log_probs_lens: int ``[N]`` valid frames of ``log_probs`` (after subsampling: the
        model's ``encoder_out_lens``).
      ref_words: reference word ids per utterance (oracle methods only).
      memory, memory_lens: encoder output for attention-decoder rescoring.
      lattices: a :class:`k2dec.lattice.LatticeCache` the lattice methods search through
        (a decode job shares one between its methods: each batch is searched once per graph
        and setting); ``None``: every method searches.
    """

    log_probs: torch.Tensor
    log_probs_lens: torch.Tensor
    ref_words: list[list[int]] | None = None
    memory: torch.Tensor | None = None
    memory_lens: torch.Tensor | None = None
    lattices: Any = None

    def get_lattice(self, graph: k2.Fsa, config: Any, subsampling_factor: int | None = None
                    ) -> Any:
        """:func:`k2dec.lattice.get_lattice` of these log-probs (through :attr:`lattices`
        when there is a cache): a :class:`k2dec.lattice.LatticeResult`."""
        if self.lattices is None:
            return get_lattice(self.log_probs, self.log_probs_lens, graph, config,
                               subsampling_factor)
        return self.lattices.get_lattice(self.log_probs, self.log_probs_lens, graph, config,
                                         subsampling_factor)



@dataclass
class AedInputs:
    """A batch for attention encoder-decoder methods.

    Attributes:
      memory: float ``[N, T, C]`` encoder output; memory_lens: int ``[N]``.
      ctc_log_probs: float ``[N, T, V]`` CTC log-probs for joint CTC/attention decoding.
    """

    memory: torch.Tensor
    memory_lens: torch.Tensor
    ctc_log_probs: torch.Tensor | None = None
