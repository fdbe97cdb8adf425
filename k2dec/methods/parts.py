"""The parts every method config is made of: ``search`` (the search's own config) plus the
named parts below, each defined once here and reused by every method that has it, each
owning its own scales.

A settings key is ``part.field`` (``fusion.lm_scale``, ``graph.scale``,
``hotwords.token_score``, ``nbest.num_paths``); a method config has no other fields, and
no key is deeper (:mod:`k2dec.methods.settings`). :data:`PARTS` maps each part name to its
one class; tests/methods/test_parts.py checks that every registered method's config uses
exactly these classes, so a key means the same thing in every method that has it.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from ..lattice import LatticeConfig, MbrConfig
from ..lattice.mbr import MAX_LATTICE_ARCS
from ..lattice.posteriors import PosteriorConfig
from ..lattice.rescore import RescoreConfig
from ..nbest import ATTENTION_CHUNK_CELLS, MultiPassConfig, NbestConfig
from ..nbest.config import check_posterior_scale
from ..primitives.sizes import check_finite, check_int_range
from .checks import check_lodr_weight, check_scales, check_sweep
from .hotword_biasing import HotwordConfig, WordHotwordConfig

__all__ = ["PARTS", "ConfidencePart", "FusionConfig", "GraphConfig", "MbrPart", "RescorePart",
           "WholeLatticePart"]

#: The weights of :class:`RescorePart`, each with its grid (``<weight>s``).
RESCORE_WEIGHTS = ("ngram_lm_scale", "lm_scale", "lodr_scale", "attention_scale")

#: The memory bounds of :class:`RescorePart`: the sequences per neural LM call and the
#: cells per attention-decoder chunk (None: not a bound of the method; the method's
#: default then applies).
RESCORE_BOUNDS = ("lm_batch_size", "lm_batch_tokens", "attention_chunk_cells")

#: Sequences per neural LM call when the rescore part gives no ``lm_batch_size``.
LM_BATCH_SIZE = 256

#: Padded token positions per neural LM call (sequences times the longest one's tokens + 1)
#: when the rescore part gives no ``lm_batch_tokens``: the shipped RNN LM takes ~9 KB a
#: position (activations and log-probs), so ~37 MB a call (256 paths of 100 tokens in one
#: call: ~230 MB).
LM_BATCH_TOKENS = 1 << 12


@dataclass(frozen=True)
class FusionConfig:
    """The weights of the scorers a token-level search adds to its score (the ``fusion``
    part): each weight multiplies a log-score that is ADDED to the hypotheses' scores
    (a negative weight subtracts it); 0 leaves the scorer out. The searches take them as
    :class:`~k2dec.scorers.WeightedScorer` objects built by
    :func:`k2dec.methods.build_scorers`, one per registered scorer whose weight is not 0,
    in the order of these fields.

    Attributes:
      ctc_weight: the CTC prefix scores' weight, in ``[0, 1]`` (joint CTC/attention
        decoding, where the attention decoder's weight is ``1 - ctc_weight``; the attention
        beam search only; formerly its ``search.ctc_weight``).
      lm_scale: the neural LM's weight (shallow fusion; icefall's ``--lm-scale``; the
        attention beam search's former ``search.lm_scale``).
      lodr_scale: LODR's token n-gram weight, added, so ``<= 0`` (icefall's
        ``--ngram-lm-scale -0.24`` of its LODR decoding); a positive one is a ``ValueError``.
    """

    ctc_weight: float = 0.0
    lm_scale: float = 0.0
    lodr_scale: float = 0.0

    def __post_init__(self) -> None:
        for name in ("ctc_weight", "lm_scale"):
            check_finite(f"fusion.{name}", getattr(self, name))
        if not 0 <= self.ctc_weight <= 1:  # the attention decoder is weighted 1 - ctc_weight
            raise ValueError(f"fusion.ctc_weight must be in [0, 1], got {self.ctc_weight!r}")
        check_lodr_weight("fusion.lodr_scale", self.lodr_scale)


@dataclass(frozen=True)
class ConfidencePart:
    """The token confidences of the methods that decode hypothesis lists without an n-best
    part (the ``confidence`` part of the CTC prefix beam search methods and the transducer
    LM-rescoring methods; the n-best methods have the same field in their ``nbest`` part).

    Attributes:
      posterior_scale: confidences are list posteriors, ``softmax(posterior_scale * score)``
        over an utterance's hypotheses by the scores the method ranks them by
        (:mod:`k2dec.nbest.list_confidences`); ``> 0``; changes confidences only, never the
        chosen hypothesis (as :attr:`k2dec.nbest.NbestConfig.posterior_scale`). Formerly a
        top-level field.
    """

    posterior_scale: float = NbestConfig.posterior_scale

    def __post_init__(self) -> None:
        check_posterior_scale(self.posterior_scale, "confidence.posterior_scale")


@dataclass(frozen=True)
class GraphConfig:
    """The decoding graph inside a search (the ``graph`` part of the HLG and LG methods).

    Attributes:
      scale: multiplies the graph's scores (HLG's or LG's: the LM part of the first pass);
        the HLG methods' 0.6 is icefall's ``--hlg-scale``, the transducer LG methods' 0.01
        icefall's ``--ngram-lm-scale`` of ``fast_beam_search_*LG``. Formerly ``hlg_scale``
        and (LG) ``ngram_lm_scale``.
    """

    scale: float = 1.0

    def __post_init__(self) -> None:
        check_finite("graph.scale", self.scale)


@dataclass(frozen=True)
class RescorePart:
    """The weights of n-best, list and lattice rescoring (the ``rescore`` part) and their
    grids: a path's score is its first-pass (acoustic) score plus each weight times its
    component's log-score (a negative weight subtracts it). A method has the weights of the
    components it rescores with; the others are None and are not among its settings
    (:meth:`settings_fields`).

    Attributes:
      sweep: also report every point of the grids (the product of the grids of the method's
        weights) after the configured setting, as icefall's decode scripts do; ``k2dec tune``
        sweeps on a dev set.
      ngram_lm_scale: the word n-gram G's weight (icefall's ``--ngram-lm-scale`` of n-best
        rescoring; whole-lattice rescoring, where icefall calls it ``lm_scale``, applies it
        as ``am / s + lm``, which ranks paths as ``am + s * lm``).
      lm_scale: the neural LM's weight (``modified_beam_search_lm_rescore_LODR`` applies it as
        ``am / s + lm + lodr_scale * lodr``, icefall's formula, which ranks paths as
        ``s * (...)``: there ``lodr_scale`` weighs LODR relative to the LM).
      lodr_scale: LODR's token n-gram weight, added as in the searches, so ``<= 0`` (0.1's
        subtracted ``0.5`` is ``-0.5``); a positive one, or a positive point of
        ``lodr_scales``, is a ``ValueError``.
      attention_scale: the attention decoder's weight.
      ngram_lm_scales, lm_scales, lodr_scales, attention_scales: the grids ``sweep`` tries
        (icefall's).
      lm_batch_size: sequences per neural LM call (a method that rescores with a neural LM;
        None there: :data:`LM_BATCH_SIZE`); formerly a top-level field.
      lm_batch_tokens: padded token positions per neural LM call, the call's sequences
        times its longest one's tokens + 1 (``fast_beam_search_with_nbest_rnn_rescoring``;
        None there: :data:`LM_BATCH_TOKENS`); a call has at least one sequence. The scores
        do not depend on it beyond float32 rounding.
      attention_chunk_cells: the attention decoder scores paths in chunks of at most this many
        (token, encoder frame) cells, ~40 bytes each with k2dec's decoder
        (``attention-decoder``; None there:
        :data:`k2dec.nbest.ATTENTION_CHUNK_CELLS`); formerly a top-level field.
    """

    sweep: bool = False
    ngram_lm_scale: float | None = None
    ngram_lm_scales: tuple[float, ...] = ()
    lm_scale: float | None = None
    lm_scales: tuple[float, ...] = ()
    lodr_scale: float | None = None
    lodr_scales: tuple[float, ...] = ()
    attention_scale: float | None = None
    attention_scales: tuple[float, ...] = ()
    lm_batch_size: int | None = None
    lm_batch_tokens: int | None = None
    attention_chunk_cells: int | None = None

    def __post_init__(self) -> None:
        check_int_range(self, "lm_batch_size", 1, 4096, optional=True)
        check_int_range(self, "lm_batch_tokens", 1, 1 << 24, optional=True)
        check_int_range(self, "attention_chunk_cells", 1, 1 << 24, optional=True)
        for name in RESCORE_WEIGHTS:
            if getattr(self, name) is not None:
                check_finite(name, getattr(self, name))
        check_sweep(self.sweep)
        if self.lodr_scale is not None:
            check_lodr_weight("rescore.lodr_scale", self.lodr_scale)
            for point in self.lodr_scales:
                check_lodr_weight("rescore.lodr_scales", point)
        for name in RESCORE_WEIGHTS:
            if getattr(self, name) is not None:
                check_scales(f"{name}s", getattr(self, f"{name}s"))
            elif getattr(self, f"{name}s"):
                raise ValueError(f"{name}s is a grid of {name}, which this config has not")

    def settings_fields(self) -> tuple[str, ...]:
        """The fields a method reads: ``sweep``, each of its weights with its grid, its
        memory bounds."""
        used = [n for n in RESCORE_WEIGHTS if getattr(self, n) is not None]
        bounds = [n for n in RESCORE_BOUNDS if getattr(self, n) is not None]
        return ("sweep", *(f for n in used for f in (n, f"{n}s")), *bounds)

    def lm_batch(self) -> int:
        """Sequences per neural LM call: ``lm_batch_size``, else :data:`LM_BATCH_SIZE`."""
        return LM_BATCH_SIZE if self.lm_batch_size is None else self.lm_batch_size

    def lm_tokens(self) -> int:
        """Padded token positions per neural LM call: ``lm_batch_tokens``, else
        :data:`LM_BATCH_TOKENS`."""
        return LM_BATCH_TOKENS if self.lm_batch_tokens is None else self.lm_batch_tokens

    def attention_chunk(self) -> int:
        """Cells per attention-decoder chunk: ``attention_chunk_cells``, else
        :data:`k2dec.nbest.ATTENTION_CHUNK_CELLS`."""
        if self.attention_chunk_cells is None:
            return ATTENTION_CHUNK_CELLS
        return self.attention_chunk_cells


@dataclass(frozen=True)
class WholeLatticePart:
    """The memory bounds of whole-lattice rescoring (the ``whole_lattice`` part; see
    :class:`k2dec.lattice.rescore.RescoreConfig`, which it makes with the method's scales).
    ``max_group_arcs`` also bounds the groups ``mbr`` searches, rescores and MBR-decodes
    together (:func:`k2dec.methods.ctc.decode_lattice_groups`)."""

    max_input_arcs: int = RescoreConfig.max_input_arcs
    max_rescored_arcs: int = RescoreConfig.max_rescored_arcs
    first_arcs: int = RescoreConfig.first_arcs
    max_group_arcs: int = RescoreConfig.max_group_arcs

    def config(self, lm_scales: tuple[float, ...]) -> RescoreConfig:
        """The :class:`~k2dec.lattice.rescore.RescoreConfig` of these bounds and scales."""
        return RescoreConfig(lm_scales=lm_scales, max_input_arcs=self.max_input_arcs,
                             max_rescored_arcs=self.max_rescored_arcs,
                             first_arcs=self.first_arcs, max_group_arcs=self.max_group_arcs)


@dataclass(frozen=True)
class MbrPart:
    """Minimum Bayes risk decoding of a lattice (the ``mbr`` part; see
    :class:`k2dec.lattice.MbrConfig`, which :meth:`config` makes).

    Attributes:
      am_posterior_scale, lm_posterior_scale: multiply the acoustic part of the arc scores and
        their ``lm_scores`` before posteriors are computed (formerly ``posterior.acoustic_scale``
        and ``posterior.lm_scale``).
      max_iterations, max_cells, max_lattice_arcs: as in :class:`k2dec.lattice.MbrConfig`.
      rescore_with_g: the HLG lattice is rescored with G (``rescore.ngram_lm_scale``) before
        MBR decoding (the ``mbr`` method; None for the methods that have no G to rescore
        with: not among their settings); formerly a top-level field of ``mbr``.
    """

    am_posterior_scale: float = 1.0
    lm_posterior_scale: float = 1.0
    max_iterations: int = 100
    max_cells: int = 1 << 23
    max_lattice_arcs: int | None = MAX_LATTICE_ARCS
    rescore_with_g: bool | None = None

    def __post_init__(self) -> None:
        self.config()  # its checks
        if self.rescore_with_g is not None and not isinstance(self.rescore_with_g, bool):
            raise TypeError(f"mbr.rescore_with_g must be a bool, got {self.rescore_with_g!r}")

    def settings_fields(self) -> tuple[str, ...]:
        """The fields a method reads (``rescore_with_g`` only where it is not None)."""
        names = [f.name for f in fields(self)]
        return tuple(n for n in names if n != "rescore_with_g" or self.rescore_with_g is not None)

    def config(self, decode_mbr: bool = True) -> MbrConfig:
        """The :class:`~k2dec.lattice.MbrConfig` of these settings."""
        posterior = PosteriorConfig(self.am_posterior_scale, self.lm_posterior_scale)
        return MbrConfig(posterior, decode_mbr, self.max_iterations, self.max_cells,
                         self.max_lattice_arcs)


#: Part name -> its one class (every method config field but ``search`` is one of these).
PARTS: dict[str, type] = {
    "confidence": ConfidencePart,
    "fusion": FusionConfig,
    "graph": GraphConfig,
    "hotwords": HotwordConfig,
    "word_hotwords": WordHotwordConfig,
    "lattice": LatticeConfig,
    "nbest": NbestConfig,
    "mbr": MbrPart,
    "multi_pass": MultiPassConfig,
    "rescore": RescorePart,
    "whole_lattice": WholeLatticePart,
}
