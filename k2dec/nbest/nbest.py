"""The :class:`Nbest` class: n-best lists sampled from lattices as k2 FsaVecs.

An :class:`Nbest` holds a vector of linear FSAs (axes ``[path][state][arc]``) and a
``k2.RaggedShape`` ``[utt][path]`` saying which utterance each path belongs to. Paths
are deduplicated by a *key*: the word sequence (``aux_labels``) or the token sequence
(the ``tokens`` attribute HLG lattices carry, else the non-blank ``labels``, as in
transducer lattices). Every operation works on the whole batch at once.

k2 1.23.4 ships a ``k2.Nbest`` whose ``intersect`` raises ``TypeError``; this class is
k2dec's own.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cached_property

import k2
import torch

from ..lattice.prune import PruneReport, prune_lattice
from .config import TIE_BREAKS, NbestConfig
from .sampling import k2_random_paths, sample_paths
from .trie import PATH_ATTR, build_tries, trie_best_arcs

__all__ = ["DedupKey", "Nbest", "NbestTopK", "IntersectStatus", "PathScorer", "chunks",
           "edit_distances"]

logger = logging.getLogger(__name__)

#: Scores whole token sequences: ``(tokens [path][tok] int32, path_to_utt int32 [path])`` ->
#: per-token scores ``[path][tok + 1]`` (float; the last one of each row is end-of-sentence).
PathScorer = Callable[[k2.RaggedTensor, torch.Tensor], k2.RaggedTensor]


class DedupKey(str, enum.Enum):
    """What makes two sampled paths "the same" hypothesis."""

    WORDS = "words"
    """Word ids from ``aux_labels`` (HLG/HCLG/LG lattices; for H lattices, tokens)."""
    TOKENS = "tokens"
    """Token ids: the ``tokens`` attribute if present (H o LG), else non-blank ``labels``."""


@dataclass(frozen=True)
class IntersectStatus:
    """How :meth:`Nbest.intersect` went: chunk size used and whether it had to back off."""

    chunk_size: int
    backoffs: int = 0
    message: str = ""


def _check_lattice(lattice: k2.Fsa, name: str = "lattice") -> None:
    if not isinstance(lattice, k2.Fsa):
        raise TypeError(f"{name} must be a k2.Fsa, got {type(lattice).__name__}")
    if len(lattice.shape) != 3:
        raise ValueError(f"{name} must be an FsaVec [utt][state][arc], got shape {lattice.shape}")


def _keyed(lattice: k2.Fsa, key: DedupKey) -> k2.Fsa:
    """A copy of ``lattice`` whose ``labels`` are the dedup key (0 where an arc has none);
    the original labels are kept in ``frame_labels``. Ragged word aux_labels are expanded
    (k2.invert), which may add epsilon arcs."""
    if key is DedupKey.WORDS:
        if not hasattr(lattice, "aux_labels"):
            raise ValueError(
                "dedup by words needs a lattice with aux_labels (word ids); this one has none "
                "(use DedupKey.TOKENS)"
            )
        out = lattice.clone()
        out.frame_labels = lattice.labels.clone()
        inv = k2.invert(out)  # labels = words, aux_labels = frame labels
        return inv
    out = lattice.clone()
    key_labels = lattice.tokens.clone() if hasattr(lattice, "tokens") else lattice.labels.clone()
    out.frame_labels = lattice.labels.clone()
    key_labels = torch.where(lattice.labels == -1, lattice.labels, key_labels)
    out.labels = key_labels.to(torch.int32)
    return out


def _restore_labels(fsa: k2.Fsa, key: DedupKey) -> k2.Fsa:
    """Undo :func:`_keyed` on paths taken from a keyed lattice."""
    if key is DedupKey.WORDS:
        out = k2.invert(fsa)  # labels = frame labels, aux_labels = words
        return out
    labels = fsa.frame_labels.clone()
    fsa.labels = labels
    return fsa


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
        """Sample up to ``num_paths`` paths per utterance and keep one per distinct key.

        :func:`~k2dec.nbest.sample_paths` runs on a copy of ``lattice`` whose scores are
        multiplied by ``nbest_scale`` (a flatter distribution gives more distinct paths);
        ``lattice`` is not modified. The samples of an utterance depend on its lattice and
        ``seed`` only, not on the other utterances of the batch or its position there, and a
        tiny score change (another batch composition upstream) rarely changes them (unlike
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
        _check_lattice(lattice)
        key = DedupKey(key)
        NbestConfig(num_paths, nbest_scale, max_lattice_arcs, sampler=sampler)  # validates
        lattice, reports = prune_lattice(lattice, max_lattice_arcs, connect=True)
        keyed = _keyed(lattice, key)
        sampling = keyed.clone()
        sampling.scores = keyed.scores * nbest_scale
        if sampler == "k2":
            path = k2_random_paths(sampling, num_paths, use_double_scores)
        else:
            path = sample_paths(sampling, num_paths, seed=seed,
                                use_double_scores=use_double_scores)
        # path: [utt][path][arc] of arc indexes into `keyed`
        key_seq = k2.ragged.index(keyed.labels.contiguous(), path)
        key_seq = key_seq.remove_values_leq(0)
        unique, _, new2old = key_seq.unique(need_num_repeats=False, need_new2old_indexes=True)
        kept, _ = path.index(new2old, axis=1, need_value_indexes=False)
        shape = unique.shape.get_layer(0)
        arcs = kept.remove_axis(0)  # [path][arc]
        fsa = _paths_to_fsa(keyed, arcs)
        fsa = _restore_labels(fsa, key)
        return Nbest(fsa=fsa, shape=shape, key=key, key_seqs=unique.remove_axis(0),
                     lattice=lattice, lattice_reports=reports)

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

    def _lattice_to_intersect(self, lattice: k2.Fsa | None) -> k2.Fsa:
        """``lattice``, or the one the paths were sampled from when ``None``; checked."""
        if lattice is None:
            if self.lattice is None:
                raise ValueError("no lattice to intersect with: this n-best does not keep the "
                                 "one it was sampled from; pass it")
            lattice = self.lattice
        _check_lattice(lattice)
        if lattice.shape[0] != self.num_utts:
            raise ValueError(
                f"lattice has {lattice.shape[0]} utterances, the n-best has {self.num_utts}"
            )
        return lattice

    def _intersect_chunks(self, lattice: k2.Fsa | None, chunk_size: int, reduce,
                          max_arcs: int) -> tuple[list, IntersectStatus]:
        """Intersect the key sequences with their utterances' keyed lattices chunk by chunk;
        ``reduce(inter)`` turns each chunk's path lattices into what the caller keeps."""
        lattice = self._lattice_to_intersect(lattice)
        if chunk_size < 1:
            raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
        if max_arcs < 1:
            raise ValueError(f"max_arcs must be >= 1, got {max_arcs}")
        if self.num_paths == 0:
            raise ValueError("the n-best has no paths to intersect")
        keyed = k2.arc_sort(_keyed(lattice, self.key))
        paths = k2.add_epsilon_self_loops(k2.linear_fsa(self.key_seqs.to(lattice.device)))
        path_to_utt = self.path_to_utt().to(lattice.device)
        # Each path's intersection is about as big as its utterance's lattice before
        # `connect`: bound the lattice arcs a chunk may touch so that memory stays flat
        # however many paths there are.
        utt_arcs = _arcs_per_fsa(keyed).to(torch.int64)
        cost = utt_arcs[path_to_utt.to(torch.int64)].cpu()
        results: list = []
        backoffs = 0
        start = 0
        size = chunk_size
        budget = max_arcs
        while start < self.num_paths:
            end = _chunk_end(cost, start, size, budget)
            idx = torch.arange(start, end, dtype=torch.int32, device=lattice.device)
            try:
                chunk = k2.index_fsa(paths, idx)
                inter = k2.intersect_device(
                    keyed, chunk, b_to_a_map=path_to_utt[start:end], sorted_match_a=True
                )
                results.append(reduce(_top_sorted(inter)))
            except torch.cuda.OutOfMemoryError as e:  # on CPU, max_arcs bounds the memory
                if end - start == 1:
                    raise
                size = max(1, (end - start) // 2)
                budget = max(1, budget // 2)
                backoffs += 1
                logger.warning("Nbest.intersect: out of memory (%s); chunk size -> %d paths, "
                               "%d lattice arcs", e, size, budget)
                continue
            start = end
        status = IntersectStatus(
            chunk_size=size, backoffs=backoffs,
            message=f"backed off {backoffs} times" if backoffs else "",
        )
        return results, status

    def intersect(
        self, lattice: k2.Fsa | None = None, chunk_size: int = 2000,
        use_double_scores: bool = True, max_arcs: int = NbestConfig.max_intersect_arcs,
        trie: bool = True,
    ) -> Nbest:
        """Replace each path by the best alignment of its key sequence in ``lattice``
        (default: :attr:`lattice`, the bounded lattice the paths were sampled from).

        The key sequences (as acceptors with epsilon self-loops) are intersected with the
        keyed lattice of their utterance by ``k2.intersect_device`` in chunks of at most
        ``chunk_size`` paths touching at most ``max_arcs`` lattice arcs in all (each path's
        intersection is about the size of its utterance's lattice, ~0.5 KB per arc), so
        memory stays flat for any number of paths. Time is proportional to the paths times
        their lattices' arcs. On a CUDA out-of-memory error both limits are halved (down to
        one path) and the back-off is logged and recorded in ``status``.

        With ``trie`` (the default) the paths of an utterance share that work: their key
        sequences form a prefix tree that is intersected with the utterance's lattice once,
        and every path's best alignment is read off the product (see
        :mod:`k2dec.nbest.trie`). Memory is bounded as path by path: an utterance's paths are
        split into tries of at most ``max_arcs // lattice arcs`` paths (one at least), and
        tries are intersected in chunks whose lattice arcs times paths stay within
        ``max_arcs`` (a bound on the product, which is never larger than the separate
        intersections). The alignments are the same as path by path; only
        among alignments of exactly equal score may another one be chosen. If a key sequence
        has no alignment in ``lattice`` (a lattice other than the one the paths came from),
        all paths are intersected one by one as with ``trie=False``.

        Returns:
          a new :class:`Nbest` (same shape, key and key_seqs) whose FSAs carry the lattice's
          attributes (``scores``, ``lm_scores``, ``aux_labels``, ...) along the best path.
        """
        fsa = None
        if trie:
            fsa, status = self._intersect_tries(lattice, use_double_scores, max_arcs)
        if fsa is None:
            results, status = self._intersect_chunks(
                lattice, chunk_size,
                lambda inter: k2.shortest_path(inter, use_double_scores=use_double_scores),
                max_arcs,
            )
            fsa = results[0] if len(results) == 1 else k2.cat(results)
        fsa = _restore_labels(fsa, self.key)
        return Nbest(fsa=fsa, shape=self.shape, key=self.key, key_seqs=self.key_seqs,
                     status=status, lattice=self.lattice if lattice is None else lattice,
                     lattice_reports=self.lattice_reports)

    def _intersect_tries(self, lattice: k2.Fsa | None, use_double_scores: bool, max_arcs: int
                         ) -> tuple[k2.Fsa | None, IntersectStatus | None]:
        """Best alignments through tries of each utterance's paths (see :meth:`intersect`);
        ``None`` when some key sequence has no alignment in ``lattice``."""
        lattice = self._lattice_to_intersect(lattice)
        if max_arcs < 1:
            raise ValueError(f"max_arcs must be >= 1, got {max_arcs}")
        if self.num_paths == 0:
            raise ValueError("the n-best has no paths to intersect")
        device = lattice.device
        keyed = k2.arc_sort(_keyed(lattice, self.key))
        # groups of an utterance's paths whose lattice arcs x paths stay within max_arcs (one
        # path at least): one trie per group, so that memory is bounded for any number of
        # paths, as with the path-by-path chunks
        utt_arcs = _arcs_per_fsa(keyed).to("cpu", torch.int64)
        path_utt = self.path_to_utt().to("cpu", torch.int64)
        per_group = torch.clamp(max_arcs // torch.clamp(utt_arcs, min=1), min=1)
        paths_per_utt = self.shape.row_splits(1).to("cpu", torch.int64)
        rank = torch.arange(self.num_paths, dtype=torch.int64) - paths_per_utt[path_utt]
        sub = torch.div(rank, per_group[path_utt], rounding_mode="floor")
        # group id: (utterance, sub-group), numbered in path order (non-decreasing)
        new_group = torch.ones(self.num_paths, dtype=torch.bool)
        new_group[1:] = (path_utt[1:] != path_utt[:-1]) | (sub[1:] != sub[:-1])
        path_group = torch.cumsum(new_group.to(torch.int64), 0) - 1
        num_groups = int(path_group[-1]) + 1
        group_utt = path_utt[new_group]
        group_starts = torch.cat([new_group.nonzero().squeeze(1),
                                  torch.tensor([self.num_paths])])
        group_paths = group_starts[1:] - group_starts[:-1]
        tries = build_tries(self.key_seqs.to(device), path_group.to(device), num_groups)
        cost = utt_arcs[group_utt] * group_paths
        group_utt_dev = group_utt.to(device, torch.int32)
        pieces = []
        start = 0
        while start < num_groups:
            end = _chunk_end(cost, start, num_groups, max_arcs)
            groups = torch.arange(start, end, dtype=torch.int32, device=device)
            product = k2.intersect_device(keyed, k2.index_fsa(tries, groups),
                                          b_to_a_map=group_utt_dev[start:end],
                                          sorted_match_a=True)
            product = _top_sorted(product)
            arcs, found = trie_best_arcs(product, self.num_paths, use_double_scores)
            first, last = int(group_starts[start]), int(group_starts[end])
            if not bool(found[first:last].all()):
                return None, None
            delattr(product, PATH_ATTR)
            chunk_arcs, _ = arcs.index(torch.arange(first, last, dtype=torch.int32,
                                                    device=device), axis=0)
            pieces.append(_paths_to_fsa(product, chunk_arcs))
            start = end
        fsa = pieces[0] if len(pieces) == 1 else k2.cat(pieces)
        return fsa, IntersectStatus(chunk_size=self.num_paths)

    def total_scores_in(
        self, lattice: k2.Fsa | None = None, log_semiring: bool = True,
        chunk_size: int = 2000, max_arcs: int = NbestConfig.max_intersect_arcs,
    ) -> k2.RaggedTensor:
        """float64 ragged ``[utt][path]``: the total score of *all* alignments of each key
        sequence in ``lattice`` (default: :attr:`lattice`; log-sum with ``log_semiring``, else
        the best one) - what icefall's ``fast_beam_search_nbest_LG`` ranks word sequences by.
        Chunked like :meth:`intersect`."""

        def totals(inter: k2.Fsa) -> torch.Tensor:
            inter = k2.top_sort(inter)
            return inter.get_tot_scores(use_double_scores=True, log_semiring=log_semiring)

        results, _ = self._intersect_chunks(lattice, chunk_size, totals, max_arcs)
        return k2.RaggedTensor(self.shape, torch.cat(results).to(torch.float64))

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

    def _sum_per_path(self, values: torch.Tensor) -> k2.RaggedTensor:
        arc_shape = self.fsa.arcs.shape().remove_axis(1)  # [path][arc]
        per_arc = k2.RaggedTensor(arc_shape, values.to(torch.float64))
        return k2.RaggedTensor(self.shape, per_arc.sum())

    def tot_scores(self) -> k2.RaggedTensor:
        """float64 ragged ``[utt][path]``: sum of arc scores of each path (``-inf`` for a path
        with no arcs, i.e. a key sequence missing from the lattice)."""
        sums = self._sum_per_path(self.fsa.scores)
        empty = self._arcs_per_path() == 0
        if empty.any():
            values = sums.values.clone()
            values[empty] = float("-inf")
            sums = k2.RaggedTensor(self.shape, values)
        return sums

    def lm_scores(self) -> k2.RaggedTensor:
        """float64 ragged ``[utt][path]``: sum of the ``lm_scores`` attribute per path."""
        if not hasattr(self.fsa, "lm_scores"):
            raise ValueError(
                "the n-best paths have no lm_scores: the lattice they came from had none "
                "(decode with a graph whose lm_scores are set, e.g. HLG.lm_scores = HLG.scores)"
            )
        return self._sum_per_path(self.fsa.lm_scores)

    def am_scores(self) -> k2.RaggedTensor:
        """float64 ragged ``[utt][path]``: ``tot_scores - lm_scores``."""
        tot, lm = self.tot_scores(), self.lm_scores()
        return k2.RaggedTensor(self.shape, tot.values - lm.values)

    def _arcs_per_path(self) -> torch.Tensor:
        splits = self.fsa.arcs.shape().remove_axis(1).row_splits(1)
        return (splits[1:] - splits[:-1]).to(torch.int64)

    def top_k(self, k: int, scores: k2.RaggedTensor | None = None) -> NbestTopK:
        """The ``k`` best paths of each utterance by ``scores`` (default :meth:`tot_scores`).

        Utterances with fewer than ``k`` paths are padded by repeating their last (worst
        kept) path; ``padded`` flags the repeats.

        Raises:
          ValueError: ``k < 1`` or an utterance with no paths at all.
        """
        if not isinstance(k, int) or k < 1:
            raise ValueError(f"k must be an int >= 1, got {k!r}")
        scores = self.tot_scores() if scores is None else scores
        counts = (self.shape.row_splits(1)[1:] - self.shape.row_splits(1)[:-1]).to(torch.int64)
        if (counts == 0).any():
            bad = torch.nonzero(counts == 0).flatten().tolist()
            raise ValueError(f"utterances {bad} have no paths (empty lattices); drop them first")
        device = scores.values.device
        new2old = ragged_sort_desc(scores)
        starts = self.shape.row_splits(1)[:-1].to(device=device, dtype=torch.int64)
        counts = counts.to(device)
        ranks = torch.arange(k, device=device).unsqueeze(0)  # [1, k]
        padded = ranks >= counts.unsqueeze(1)
        clipped = torch.minimum(ranks, counts.unsqueeze(1) - 1)
        index = new2old[starts.unsqueeze(1) + clipped]  # [num_utts, k] path indexes
        flat = index.flatten().to(torch.int32)
        fsa = k2.index_fsa(self.fsa, flat.to(self.fsa.device))
        key_seqs, _ = self.key_seqs.index(flat.to(self.key_seqs.device), axis=0)
        shape = k2.ragged.regular_ragged_shape(self.num_utts, k).to(self.fsa.device)
        nb = Nbest(fsa=fsa, shape=shape, key=self.key, key_seqs=key_seqs, status=self.status,
                   lattice=self.lattice, lattice_reports=self.lattice_reports)
        return NbestTopK(nbest=nb, padded=padded, index=index)

    def build_levenshtein_graphs(self) -> k2.Fsa:
        """``k2.levenshtein_graph`` of every path's key sequence: FsaVec ``[path][state][arc]``."""
        return k2.levenshtein_graph(self.key_seqs, device=self.device)

    def oracle(self, refs: list[list[int]], tie_break: str = NbestConfig.tie_break
               ) -> tuple[torch.Tensor, torch.Tensor]:
        """For each utterance, the path whose key sequence is closest to ``refs[utt]``.

        Edit distances of all paths are computed together by :func:`edit_distances` (a
        dynamic program over reference positions, vectorized over paths and hypothesis
        positions): time grows with the reference length, memory with paths x hypothesis
        length (``k2.levenshtein_alignment`` builds a graph of ``len(ref) x len(hyp)`` cells
        per path: 1.8 GB and 87 s for 200 paths of a 60 s utterance).

        Args:
          refs: reference key sequences (word ids for word keys), one per utterance.
          tie_break: among paths at the same distance, ``"first"`` takes the lowest path
            index; ``"last"`` chooses as icefall's oracles do (see ``NbestConfig.tie_break``):
            they take ``k2.RaggedTensor.argmax`` (the last of equal maxima) of the float32
            scores of ``k2.levenshtein_alignment``, whose rounding (about 1e-6) decides
            between paths at the same distance, so the paths at the best distance (only
            those) are scored that way here too (:func:`_icefall_oracle_choice`).

        Returns:
          ``(best_path, edit_distance)``: int64 ``[num_utts]`` index into the paths of the
          n-best (-1 for an utterance without paths) and int64 ``[num_utts]`` its edit
          distance (Levenshtein: substitutions, insertions and deletions cost 1; -1 without
          paths).

        Raises:
          ValueError: not one reference per utterance, an id that is not an int, or an
            unknown ``tie_break``.
        """
        if tie_break not in TIE_BREAKS:
            raise ValueError(f"tie_break must be one of {TIE_BREAKS}, got {tie_break!r}")
        if not isinstance(refs, list | tuple) or len(refs) != self.num_utts:
            raise ValueError(f"need {self.num_utts} references (one list of ids per "
                             f"utterance), got {type(refs).__name__} of "
                             f"{len(refs) if hasattr(refs, '__len__') else '?'}")
        for u, ref in enumerate(refs):
            bad = [x for x in ref if isinstance(x, bool) or not isinstance(x, int)]
            if bad:
                raise ValueError(f"refs[{u}] has ids {bad[:5]} that are not ints")
        dist_values = edit_distances(self.key_seqs, refs, self.path_to_utt())
        dist = k2.RaggedTensor(self.shape, dist_values.to(torch.float64))
        best = torch.full((self.num_utts,), -1, dtype=torch.int64, device=self.device)
        best_dist = torch.full((self.num_utts,), -1, dtype=torch.int64, device=self.device)
        if self.num_paths:
            # k2's argmax returns the last of equal maxima: make every value distinct so
            # that ties go to the lowest index (distances times num_paths plus the index)
            index = torch.arange(self.num_paths, dtype=torch.float64, device=dist.values.device)
            neg = k2.RaggedTensor(self.shape, -(dist.values * self.num_paths + index))
            argmax = neg.argmax()  # -1 for empty rows
            has = argmax >= 0
            best[has] = argmax[has].to(torch.int64)
            best_dist[has] = dist.values[argmax[has].to(torch.int64)].to(torch.int64)
            if tie_break == "last":
                best = _icefall_oracle_choice(self, refs, dist_values, best_dist)
        return best, best_dist

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


def edit_distances(hyps: k2.RaggedTensor, refs: list[list[int]], hyp_to_ref: torch.Tensor
                   ) -> torch.Tensor:
    """Levenshtein distance (substitution, insertion, deletion: 1 each) of every hypothesis
    to its reference.

    Row ``i`` of the dynamic program (``D[i][j]``: distance of the first ``i`` reference and
    ``j`` hypothesis symbols) follows from row ``i - 1`` for all hypotheses at once: the
    substitution/deletion candidates ``E[j]`` are elementwise, and the insertion chain
    ``D[i][j] = min_k (E[k] + j - k)`` is a cumulative minimum.

    Args:
      hyps: int ragged ``[hyp][symbol]``.
      refs: reference symbol lists.
      hyp_to_ref: int ``[num_hyps]``: the reference of each hypothesis.

    Returns:
      int64 ``[num_hyps]`` on ``hyps``' device.
    """
    device = hyps.device
    num = hyps.dim0
    if num == 0:
        return torch.zeros(0, dtype=torch.int64, device=device)
    splits = hyps.shape.row_splits(1).to(torch.int64)
    hyp_len = splits[1:] - splits[:-1]
    width = int(hyp_len.max()) + 1
    col = torch.arange(width, device=device)
    # hypotheses padded with -1 (the padding's columns are never read)
    padded = torch.full((num, width), -1, dtype=torch.int64, device=device)
    rows = torch.repeat_interleave(torch.arange(num, device=device), hyp_len)
    padded[rows, torch.arange(hyps.numel(), device=device) - splits[:-1][rows] + 1] = \
        hyps.values.to(torch.int64)
    ref_len = torch.tensor([len(r) for r in refs], dtype=torch.int64)
    longest = int(ref_len.max()) if len(refs) else 0
    ref_pad = torch.full((max(len(refs), 1), longest + 1), -2, dtype=torch.int64)
    for u, r in enumerate(refs):  # references as a padded table (Python lists at the edge)
        ref_pad[u, 1:len(r) + 1] = torch.tensor(r, dtype=torch.int64)
    which = hyp_to_ref.to("cpu", torch.int64)
    ref_sym = ref_pad[which].to(device)  # [num, longest + 1]
    stop = ref_len[which].to(device)
    d = col.unsqueeze(0).expand(num, width).clone()  # row 0: j insertions
    out = torch.where(stop == 0, d.gather(1, hyp_len.unsqueeze(1)).squeeze(1),
                      torch.zeros_like(stop))
    for i in range(1, longest + 1):
        sub = (padded != ref_sym[:, i:i + 1]).to(torch.int64)
        e = d + 1  # delete reference symbol i
        e[:, 1:] = torch.minimum(e[:, 1:], d[:, :-1] + sub[:, 1:])
        d = torch.cummin(e - col, dim=1).values + col
        done = stop == i
        out = torch.where(done, d.gather(1, hyp_len.unsqueeze(1)).squeeze(1), out)
    return out


def _top_sorted(fsas: k2.Fsa) -> k2.Fsa:
    """``fsas`` itself when k2 flags it top-sorted (intersections of top-sorted lattices with
    linear paths are), else ``k2.connect(fsas)``. Shortest paths and total scores need only
    top-sorted input; dead-end states do not change them, and skipping ``connect`` on a
    product that is mostly dead ends is several times faster."""
    if fsas.properties & k2.fsa_properties.TOPSORTED_AND_ACYCLIC == \
            k2.fsa_properties.TOPSORTED_AND_ACYCLIC:
        return fsas
    return k2.connect(fsas)


def _arcs_per_fsa(fsas: k2.Fsa) -> torch.Tensor:
    """Number of arcs of each FSA of an FsaVec (int32 ``[num_fsas]``)."""
    shape = fsas.arcs.shape()
    splits = shape.row_splits(2)[shape.row_splits(1).to(torch.int64)]
    return splits[1:] - splits[:-1]


def chunks(cost: torch.Tensor, max_count: int, max_cost: int | None = None
           ) -> Iterator[tuple[int, int]]:
    """``(start, end)`` ranges covering ``0 .. len(cost)`` in order, each of at most
    ``max_count`` items whose ``cost`` (int ``[n]``, e.g. the memory each item's processing
    takes) adds up to at most ``max_cost`` (``None``: no cost bound); every range has at least
    one item. How the n-best and list rescorers bound the memory of one call."""
    cost = cost.to("cpu", torch.int64)
    start = 0
    while start < cost.numel():
        end = _chunk_end(cost, start, max_count,
                         max_cost if max_cost is not None else int(cost[start:].sum()) + 1)
        yield start, end
        start = end


def _chunk_end(cost: torch.Tensor, start: int, max_paths: int, max_cost: int) -> int:
    """End of the chunk starting at ``start``: at most ``max_paths`` paths whose summed
    ``cost`` stays within ``max_cost`` (always at least one path)."""
    end = min(start + max_paths, cost.numel())
    within = torch.cumsum(cost[start:end], 0) <= max_cost
    return start + max(1, int(within.sum()))


def _split(rows: list, shape: k2.RaggedShape) -> list[list]:
    splits = shape.row_splits(1).tolist()
    return [rows[splits[i] : splits[i + 1]] for i in range(shape.dim0)]


def ragged_sort_desc(scores: k2.RaggedTensor) -> torch.Tensor:
    """Order of a 2-axis ragged float tensor's values with each row sorted best first (ties
    in path order); int64 indexes into ``scores.values``, rows kept in order."""
    values = scores.values
    row_ids = scores.shape.row_ids(1).to(torch.int64)
    by_score = torch.sort(-values, stable=True).indices
    by_row = torch.sort(row_ids[by_score], stable=True).indices
    return by_score[by_row]


def _paths_to_fsa(lattice: k2.Fsa, arcs: k2.RaggedTensor) -> k2.Fsa:
    """Linear FSAs following arc indexes ``arcs`` ``[path][arc]`` (each ending with the final
    arc) through ``lattice``, carrying every tensor attribute of the arcs taken."""
    labels = k2.ragged.index(lattice.labels.contiguous(), arcs)  # [path][arc]
    labels = labels.remove_values_eq(-1)
    fsa = k2.linear_fsa(labels)  # on labels.device
    flat = arcs.values.to(torch.int64)
    fsa.scores = lattice.scores[flat].clone()
    for name, value in lattice.named_tensor_attr(include_scores=False):
        if name == "labels":
            continue
        if isinstance(value, torch.Tensor):
            setattr(fsa, name, value[flat].clone())
        else:  # ragged attribute (e.g. aux_labels of HLG lattices)
            sub, _ = value.index(arcs.values, axis=0, need_value_indexes=False)
            setattr(fsa, name, sub)
    return fsa


def intersected(nbest: Nbest, config: NbestConfig) -> Nbest:
    """:meth:`Nbest.intersect` with ``config.max_intersect_arcs`` (what every n-best method
    does before scoring its paths); an n-best without paths (every lattice of the batch was
    empty) is returned as it is, so that its utterances fail with their lattices' reasons."""
    if nbest.num_paths == 0:
        return nbest
    return nbest.intersect(max_arcs=config.max_intersect_arcs)


def _icefall_oracle_choice(nbest: Nbest, refs: list[list[int]], dist: torch.Tensor,
                           best_dist: torch.Tensor) -> torch.Tensor:
    """Per utterance, the path icefall's oracle takes among those at the best edit distance
    ``best_dist`` (int64 ``[num_utts]``; ``dist``: every path's distance): their float32
    ``k2.levenshtein_alignment`` scores against the reference, as icefall computes them
    (ins/del score -0.501, shortest alignment, offsets removed), and the last of the
    highest. The scores equal minus the distance up to float32 rounding, which decides;
    a path's score does not depend on the other paths scored with it. Returns int64
    ``[num_utts]`` path indexes (-1 for an utterance without paths)."""
    path_utt = nbest.path_to_utt().to(torch.int64)
    tied = torch.nonzero(dist.to(path_utt.device) == best_dist[path_utt]).squeeze(1)
    keys, _ = nbest.key_seqs.index(tied.to(torch.int32), axis=0, need_value_indexes=False)
    hyps = k2.levenshtein_graph(keys.to(torch.device("cpu")))
    ref_graphs = k2.levenshtein_graph([list(r) for r in refs])
    alignment = k2.levenshtein_alignment(ref_graphs, hyps,
                                         hyp_to_ref_map=path_utt[tied].to(torch.int32).cpu(),
                                         sorted_match_ref=True)
    scores = alignment.get_tot_scores(use_double_scores=False, log_semiring=False)
    counts = torch.bincount(path_utt[tied].cpu(), minlength=nbest.num_utts)
    splits = torch.cat([counts.new_zeros(1), counts.cumsum(0)]).to(torch.int32)
    shape = k2.ragged.create_ragged_shape2(row_splits=splits, cached_tot_size=tied.numel())
    pick = k2.RaggedTensor(shape, scores).argmax().to(torch.int64)
    best = torch.full((nbest.num_utts,), -1, dtype=torch.int64, device=dist.device)
    has = pick >= 0
    best[has] = tied.cpu()[pick[has]].to(best.device)
    return best
