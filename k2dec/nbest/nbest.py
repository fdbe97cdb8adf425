"""The :class:`Nbest` class: n-best lists sampled from lattices as k2 FsaVecs.

An :class:`Nbest` holds a vector of linear FSAs (axes ``[path][state][arc]``) and a
``k2.RaggedShape`` ``[utt][path]`` saying which utterance each path belongs to. Paths
are deduplicated by a *key*: the word sequence (``aux_labels``) or the token sequence
(the ``tokens`` attribute HLG lattices carry, else the non-blank ``labels``, as in
transducer lattices). Every operation works on the whole batch at once.

The class holds the data and names the operations; the work is done by free functions in
focused modules, each usable on its own: sampling and dedup (:mod:`k2dec.nbest.sampling`),
keys and keyed lattices (:mod:`k2dec.nbest.keys`), intersection with lattices
(:mod:`k2dec.nbest.intersect`), per-path scores and orders (:mod:`k2dec.nbest.scores`) and
oracles (:mod:`k2dec.nbest.oracle`).

k2 1.23.4 ships a ``k2.Nbest`` whose ``intersect`` raises ``TypeError``; this class is
k2dec's own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property

import k2
import torch

from ..lattice.prune import PruneReport, prune_lattice
from .config import NbestConfig
from .intersect import IntersectStatus, best_alignments, intersect_lattice, key_total_scores
from .keys import DedupKey, check_lattice
from .oracle import oracle_paths
from .sampling import distinct_paths
from .scores import path_sums, path_tot_scores, top_k_index

__all__ = ["Nbest", "NbestTopK", "PathScorer", "intersected"]

#: Scores whole token sequences: ``(tokens [path][tok] int32, path_to_utt int32 [path])`` ->
#: per-token scores ``[path][tok + 1]`` (float; the last one of each row is end-of-sentence).
PathScorer = Callable[[k2.RaggedTensor, torch.Tensor], k2.RaggedTensor]


@dataclass
class NbestTopK:
    """A regular n-best: exactly ``k`` paths per utterance.

    Attributes:
      nbest: the :class:`Nbest` with shape ``[utt][k]`` (regular).
      padded: bool ``[num_utts, k]``: True where a path repeats the utterance's last real
        path because the utterance had fewer than ``k`` distinct paths.
      index: int64 ``[num_utts, k]``: index of each selected path in the source Nbest.
    """

    nbest: Nbest
    padded: torch.Tensor
    index: torch.Tensor


@dataclass
class Nbest:
    """N-best paths of a batch of utterances.

    Attributes:
      fsa: FsaVec ``[path][state][arc]`` of linear FSAs. Before :meth:`intersect` they are the
        sampled alignments (scores and attributes of the lattice arcs they took); after it,
        the best alignment of each key sequence in the lattice.
      shape: ``k2.RaggedShape`` ``[utt][path]``.
      key: what the paths were deduplicated by.
      key_seqs: ``k2.RaggedTensor`` ``[path][symbol]`` (int32), the key sequence of each path
        (word ids or token ids, no zeros).
      status: how :meth:`intersect` went (``None`` before it).
      lattice: the lattice the paths were sampled from (``[utt][state][arc]``; pruned when
        ``lattice_reports`` says so), what :meth:`intersect` intersects with by default.
      lattice_reports: per utterance, how that lattice was bounded (see
        :func:`~k2dec.lattice.prune_lattice`); ``()`` when not recorded.
    """

    fsa: k2.Fsa
    shape: k2.RaggedShape
    key: DedupKey
    key_seqs: k2.RaggedTensor
    status: IntersectStatus | None = field(default=None)
    lattice: k2.Fsa | None = field(default=None, repr=False)
    lattice_reports: tuple[PruneReport, ...] = ()

    def __post_init__(self) -> None:
        if self.fsa.shape[0] != self.shape.tot_size(1):
            raise ValueError(
                f"fsa has {self.fsa.shape[0]} paths but shape has {self.shape.tot_size(1)}"
            )
        if self.key_seqs.dim0 != self.shape.tot_size(1):
            raise ValueError("key_seqs must have one row per path")

    @property
    def num_utts(self) -> int:
        return self.shape.dim0

    @property
    def num_paths(self) -> int:
        return self.shape.tot_size(1)

    @property
    def device(self) -> torch.device:
        return self.fsa.device

    def path_to_utt(self) -> torch.Tensor:
        """int32 ``[num_paths]``: the utterance of each path."""
        return self.shape.row_ids(1)

    def _with(self, fsa: k2.Fsa, **changes) -> Nbest:
        """This n-best with other paths ``fsa`` (and the fields ``changes``)."""
        fields = dict(shape=self.shape, key=self.key, key_seqs=self.key_seqs,
                      status=self.status, lattice=self.lattice,
                      lattice_reports=self.lattice_reports)
        return Nbest(fsa=fsa, **{**fields, **changes})

    @staticmethod
    def from_lattice(
        lattice: k2.Fsa,
        num_paths: int = NbestConfig.num_paths,
        nbest_scale: float = NbestConfig.nbest_scale,
        key: DedupKey | str = DedupKey.WORDS,
        use_double_scores: bool = True,
        seed: int = 0,
        max_lattice_arcs: int | None = NbestConfig.max_lattice_arcs,
        sampler: str = NbestConfig.sampler,
    ) -> Nbest:
        """Sample up to ``num_paths`` paths per utterance and keep one per distinct key
        (:func:`~k2dec.nbest.sampling.distinct_paths`).

        Paths are sampled on a copy of ``lattice`` whose scores are multiplied by
        ``nbest_scale`` (a flatter distribution gives more distinct paths); ``lattice`` is not
        modified. The samples of an utterance depend on its lattice and ``seed`` only, not on
        the other utterances of the batch or its position there, and a tiny score change
        (another batch composition upstream) rarely changes them (unlike
        ``k2.random_paths``, see :mod:`k2dec.nbest.sampling`).

        Args:
          lattice: FsaVec ``[utt][state][arc]`` (from ``get_lattice`` or fast_beam_search).
          num_paths, nbest_scale: see :class:`~k2dec.nbest.NbestConfig` (defaults from it).
          key: dedup by word or token sequence.
          seed: of the sampler's pseudo-random numbers.
          max_lattice_arcs: an utterance's lattice with more arcs is pruned to this many
            first (see :class:`~k2dec.nbest.NbestConfig`); arcs on no complete path are
            always dropped.
          sampler: ``"hashed"`` (:func:`~k2dec.nbest.sample_paths`) or ``"k2"``
            (``k2.random_paths``, icefall's; ``seed`` does not apply), see
            :class:`~k2dec.nbest.NbestConfig`.

        Returns:
          an :class:`Nbest` whose paths are the kept sampled alignments (unscaled scores),
          with the (bounded) lattice they came from and how it was bounded. An utterance
          whose lattice is empty gets zero paths.
        """
        check_lattice(lattice)
        key = DedupKey(key)
        NbestConfig(num_paths, nbest_scale, max_lattice_arcs, sampler=sampler)  # validates
        lattice, reports = prune_lattice(lattice, max_lattice_arcs, connect=True)
        fsa, shape, key_seqs = distinct_paths(lattice, key, num_paths, nbest_scale, sampler,
                                              seed, use_double_scores)
        return Nbest(fsa=fsa, shape=shape, key=key, key_seqs=key_seqs, lattice=lattice,
                     lattice_reports=reports)

    @staticmethod
    def from_config(lattice: k2.Fsa, config: NbestConfig,
                    key: DedupKey | str = DedupKey.WORDS) -> Nbest:
        """:meth:`from_lattice` with the sampling settings of ``config`` (what every n-best
        method does with its ``nbest`` config)."""
        return Nbest.from_lattice(lattice, config.num_paths, config.nbest_scale, key,
                                  max_lattice_arcs=config.max_lattice_arcs,
                                  sampler=config.sampler)

    def notes(self) -> list[str]:
        """Per utterance, what its report should say about the lattice its paths came from
        (``"lattice pruned from N to M arcs (output beam B)"``, or ``""``)."""
        if not self.lattice_reports:
            return [""] * self.num_utts
        return [r.describe() for r in self.lattice_reports]

    def intersect(
        self, lattice: k2.Fsa | None = None, chunk_size: int = 2000,
        use_double_scores: bool = True, max_arcs: int = NbestConfig.max_intersect_arcs,
        trie: bool = True,
    ) -> Nbest:
        """Replace each path by the best alignment of its key sequence in ``lattice``
        (default: :attr:`lattice`, the bounded lattice the paths were sampled from).

        Intersected in chunks of at most ``chunk_size`` paths touching at most ``max_arcs``
        lattice arcs in all (~0.5 KB each), so memory stays flat for any number of paths; with
        ``trie`` (the default) an utterance's paths share the work through one prefix tree;
        on a CUDA out-of-memory error the chunks are halved and ``status`` says so. See
        :func:`~k2dec.nbest.intersect.best_alignments`.

        Returns:
          a new :class:`Nbest` (same shape, key and key_seqs) whose FSAs carry the lattice's
          attributes (``scores``, ``lm_scores``, ``aux_labels``, ...) along the best path.
        """
        lattice = intersect_lattice(lattice, self.lattice, self.num_utts)
        fsa, status = best_alignments(lattice, self.key, self.key_seqs, self.shape,
                                      chunk_size, use_double_scores, max_arcs, trie)
        return self._with(fsa, status=status, lattice=lattice)

    def total_scores_in(
        self, lattice: k2.Fsa | None = None, log_semiring: bool = True,
        chunk_size: int = 2000, max_arcs: int = NbestConfig.max_intersect_arcs,
    ) -> k2.RaggedTensor:
        """float64 ragged ``[utt][path]``: the total score of *all* alignments of each key
        sequence in ``lattice`` (default: :attr:`lattice`; log-sum with ``log_semiring``, else
        the best one) - what icefall's ``fast_beam_search_nbest_LG`` ranks word sequences by.
        Chunked like :meth:`intersect` path by path."""
        lattice = intersect_lattice(lattice, self.lattice, self.num_utts)
        totals = key_total_scores(lattice, self.key, self.key_seqs, self.shape, log_semiring,
                                  chunk_size, max_arcs)
        return k2.RaggedTensor(self.shape, totals)

    def token_seqs(self) -> k2.RaggedTensor:
        """int32 ragged ``[path][token]``: the token sequence of each path (for neural
        rescoring). Token-keyed n-bests return their keys; word-keyed ones read the
        ``tokens`` attribute HLG lattices carry (use an intersected n-best, whose paths are
        real alignments)."""
        if self.key is DedupKey.TOKENS:
            return self.key_seqs
        if not hasattr(self.fsa, "tokens"):
            raise ValueError(
                "this word n-best has no 'tokens' attribute to read token sequences from "
                "(HLG lattices have one; dedup by tokens for graphs without words)"
            )
        shape = self.fsa.arcs.shape().remove_axis(1)  # [path][arc]
        return k2.RaggedTensor(shape, self.fsa.tokens.to(torch.int32)).remove_values_leq(0)

    def tot_scores(self) -> k2.RaggedTensor:
        """float64 ragged ``[utt][path]``: sum of arc scores of each path (``-inf`` for a path
        with no arcs, i.e. a key sequence missing from the lattice)."""
        return path_tot_scores(self.fsa, self.shape)

    def lm_scores(self) -> k2.RaggedTensor:
        """float64 ragged ``[utt][path]``: sum of the ``lm_scores`` attribute per path."""
        if not hasattr(self.fsa, "lm_scores"):
            raise ValueError(
                "the n-best paths have no lm_scores: the lattice they came from had none "
                "(decode with a graph whose lm_scores are set, e.g. HLG.lm_scores = HLG.scores)"
            )
        return path_sums(self.fsa, self.shape, self.fsa.lm_scores)

    def am_scores(self) -> k2.RaggedTensor:
        """float64 ragged ``[utt][path]``: ``tot_scores - lm_scores``."""
        tot, lm = self.tot_scores(), self.lm_scores()
        return k2.RaggedTensor(self.shape, tot.values - lm.values)

    def top_k(self, k: int, scores: k2.RaggedTensor | None = None) -> NbestTopK:
        """The ``k`` best paths of each utterance by ``scores`` (default :meth:`tot_scores`).

        Utterances with fewer than ``k`` paths are padded by repeating their last (worst
        kept) path; ``padded`` flags the repeats (:func:`~k2dec.nbest.scores.top_k_index`).

        Raises:
          ValueError: ``k < 1`` or an utterance with no paths at all.
        """
        index, padded = top_k_index(self.tot_scores() if scores is None else scores, k)
        flat = index.flatten().to(torch.int32)
        fsa = k2.index_fsa(self.fsa, flat.to(self.fsa.device))
        key_seqs, _ = self.key_seqs.index(flat.to(self.key_seqs.device), axis=0)
        shape = k2.ragged.regular_ragged_shape(self.num_utts, k).to(self.fsa.device)
        return NbestTopK(nbest=self._with(fsa, shape=shape, key_seqs=key_seqs),
                         padded=padded, index=index)

    def build_levenshtein_graphs(self) -> k2.Fsa:
        """``k2.levenshtein_graph`` of every path's key sequence: FsaVec ``[path][state][arc]``."""
        return k2.levenshtein_graph(self.key_seqs, device=self.device)

    def oracle(self, refs: list[list[int]], tie_break: str = NbestConfig.tie_break
               ) -> tuple[torch.Tensor, torch.Tensor]:
        """For each utterance, the path whose key sequence is closest to ``refs[utt]``
        (:func:`~k2dec.nbest.oracle.oracle_paths`; edit distances of all paths together by
        :func:`edit_distances`).

        Args:
          refs: reference key sequences (word ids for word keys), one per utterance.
          tie_break: among paths at the same distance, ``"first"`` takes the lowest path
            index; ``"last"`` chooses as icefall's oracles do (see ``NbestConfig.tie_break``):
            by the float32 scores of ``k2.levenshtein_alignment``, whose rounding decides
            between paths at the same distance.

        Returns:
          ``(best_path, edit_distance)``: int64 ``[num_utts]`` index into the paths of the
          n-best (-1 for an utterance without paths) and int64 ``[num_utts]`` its edit
          distance (Levenshtein: substitutions, insertions and deletions cost 1; -1 without
          paths).

        Raises:
          ValueError: not one reference per utterance, an id that is not an int, or an
            unknown ``tie_break``.
        """
        return oracle_paths(self.key_seqs, self.shape, refs, tie_break)

    def key_lists(self) -> list[list[list[int]]]:
        """The key sequences as Python lists ``[utt][path][symbol]`` (for output only)."""
        return _split(self.key_seqs.tolist(), self.shape)

    def keys_at(self, best: torch.Tensor) -> list[list[int]]:
        """The key sequences of paths ``best`` (int ``[num_utts]``, e.g. from
        :func:`~k2dec.nbest.best_paths_by_score` or :meth:`oracle`); ``[]`` where the index is
        -1 (an utterance without paths)."""
        keys = self._flat_keys
        return [keys[b] if b >= 0 else [] for b in best.tolist()]

    @cached_property
    def _flat_keys(self) -> list[list[int]]:
        """``key_seqs`` as Python lists, converted once (sweeps call :meth:`keys_at` per
        setting)."""
        return self.key_seqs.tolist()

    def texts(self, symbol_table: k2.SymbolTable, separator: str = " ") -> list[list[str]]:
        """Each path's key sequence spelled with ``symbol_table`` (``[utt][path]``)."""
        return [
            [separator.join(symbol_table.get(i) for i in seq) for seq in utt]
            for utt in _split(self.key_seqs.tolist(), self.shape)
        ]


def _split(rows: list, shape: k2.RaggedShape) -> list[list]:
    splits = shape.row_splits(1).tolist()
    return [rows[splits[i] : splits[i + 1]] for i in range(shape.dim0)]


def intersected(nbest: Nbest, config: NbestConfig) -> Nbest:
    """:meth:`Nbest.intersect` with ``config.max_intersect_arcs`` (what every n-best method
    does before scoring its paths); an n-best without paths (every lattice of the batch was
    empty) is returned as it is, so that its utterances fail with their lattices' reasons."""
    if nbest.num_paths == 0:
        return nbest
    return nbest.intersect(max_arcs=config.max_intersect_arcs)
