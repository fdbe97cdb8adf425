"""Words with their frames and confidences from lattices (what a CTM file holds): the words
of the best path with their sausage posteriors (Kaldi's ``lattice-to-ctm-conf
--decode-mbr=false``), or the MBR consensus with its posteriors.

Frames. A word covers the frames of its tokens on the best path: for CTC lattices a token
lasts its run of repeated frames (blanks after it are not part of it), for transducer
lattices a token is the one frame it is emitted on. Tokens are grouped into words by
word-start tokens (BPE pieces beginning with ``▁``, see
:func:`k2dec.lang.bpe_word_start_mask`) when given and when they agree with the number of
words on the path; otherwise by the arcs that carry the word labels (a word from its label's
arc to the next one), which is exact only for graphs that put a word's label on its first
token: k2's determinized HLG / LG graphs often emit it later, where the word becomes
unambiguous. Consensus words take the frames of the best-path word they are aligned to (edit
distance alignment); a consensus word with no such partner gets the gap between its
neighbours.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import k2
import kaldialign
import torch

from k2dec.lattice.mbr import MbrConfig, MbrResult, mbr_decode
from k2dec.lattice.one_best import AuxLabels
from k2dec.lattice.search import LatticeResult, lattice_fsa_vec
from k2dec.primitives.best_paths import (
    FRAME_ATTR,
    arc_frames,
    ctc_token_spans,
    path_aux_ids,
    path_frames,
    word_spans,
)
from k2dec.primitives.ragged import ragged_from_row_ids, ragged_select

__all__ = ["ONE_BEST_CONFIDENCES", "TimedUnits", "Topology", "lattice_timed_units", "path_units"]

ONE_BEST_CONFIDENCES = MbrConfig(decode_mbr=False)
"""The default of :func:`lattice_timed_units`: the best path's words and their posteriors."""


class Topology(enum.Enum):
    """How a lattice's token labels map to frames."""

    CTC = "ctc"
    """Lattices of dense intersection (``get_lattice``): one token label per frame, a token
    is a run of repeated labels (CTC collapse)."""
    TRANSDUCER = "transducer"
    """fast_beam_search lattices: every non-blank arc emits one token on its frame."""


@dataclass(frozen=True)
class TimedUnits:
    """Output units (words, or tokens for token-level lattices) of a batch with frames and
    confidences.

    Attributes:
      ids: int32 ``k2.RaggedTensor`` ``[utt][unit]``: word ids (token ids for
        :attr:`AuxLabels.TOKENS`).
      begin, end: int32 ``k2.RaggedTensor`` ``[utt][unit]``: the unit covers frames
        ``begin <= f < end`` (after subsampling).
      confidences: float64 ``k2.RaggedTensor`` ``[utt][unit]``: posterior of the unit in its
        sausage bin.
      has_path: bool ``(N,)``: whether the lattice had a complete path (others are empty).
    """

    ids: k2.RaggedTensor
    begin: k2.RaggedTensor
    end: k2.RaggedTensor
    confidences: k2.RaggedTensor
    has_path: torch.Tensor

    def tolist(self) -> list[list[tuple[int, int, int, float]]]:
        """``[utt]`` lists of ``(id, begin, end, confidence)`` (the edge of the library)."""
        rows = zip(self.ids.tolist(), self.begin.tolist(), self.end.tolist(),
                   self.confidences.tolist())
        return [list(zip(*row)) for row in rows]


def _path_token_spans(paths: k2.Fsa, topology: Topology, blank_id: int
                      ) -> tuple[k2.RaggedTensor, k2.RaggedTensor, k2.RaggedTensor]:
    """Tokens of best paths with the frames they cover."""
    shape = paths.arcs.shape().remove_axis(1)
    labels = paths.labels.new_empty(paths.labels.shape)
    labels.copy_(paths.labels)  # k2 wants a contiguous copy of the column view
    if topology is Topology.CTC:
        lab = k2.RaggedTensor(shape, labels)
        frames = k2.RaggedTensor(shape, path_frames(paths))
        if hasattr(paths, FRAME_ATTR):  # arcs that consume no frame
            keep = getattr(paths, FRAME_ATTR) >= 0
            lab, frames = ragged_select(lab, keep), ragged_select(frames, keep)
        return ctc_token_spans(lab, frames, blank_id=blank_id)
    frames = arc_frames(paths)
    keep = (labels != blank_id) & (labels >= 0)
    row_ids = shape.row_ids(1).to(torch.int64)[keep]
    n = paths.shape[0]
    return (ragged_from_row_ids(row_ids, labels[keep], n),
            ragged_from_row_ids(row_ids, frames[keep], n),
            ragged_from_row_ids(row_ids, frames[keep] + 1, n))


def _spans_by_label_arcs(tok_begin: k2.RaggedTensor, tok_end: k2.RaggedTensor,
                         unit_frames: k2.RaggedTensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Unit ``k`` of an utterance takes the tokens starting in ``[f_k, f_(k+1))`` (``f_0``
    extended to the utterance start); int64 begin and end per unit (a unit without tokens
    covers ``[f_k, f_k)``)."""
    big = int(max(int(tok_end.values.max()) if tok_end.values.numel() else 0,
                  int(unit_frames.values.max()) if unit_frames.values.numel() else 0)) + 2
    t_row = tok_begin.shape.row_ids(1).to(torch.int64)
    u_row = unit_frames.shape.row_ids(1).to(torch.int64)
    u_key = u_row * big + unit_frames.values.to(torch.int64)
    t_key = t_row * big + tok_begin.values.to(torch.int64)
    # index of the last unit of the same utterance with f_k <= token begin (or its first)
    idx = torch.searchsorted(u_key, t_key, right=True) - 1
    splits = unit_frames.shape.row_splits(1).to(torch.int64)
    has_units = splits[t_row + 1] > splits[t_row]
    idx = torch.maximum(idx, splits[t_row])
    own = has_units & (idx < splits[t_row + 1])
    begin = unit_frames.values.to(torch.int64).clone()
    end = begin.clone()
    tb, te = tok_begin.values.to(torch.int64)[own], tok_end.values.to(torch.int64)[own]
    ti = idx[own]
    if ti.numel():
        first = torch.ones_like(ti, dtype=torch.bool)
        first[1:] = ti[1:] != ti[:-1]
        last = torch.ones_like(first)
        last[:-1] = first[1:]
        begin[ti[first]] = tb[first]
        end[ti[last]] = te[last]
    return begin, end


def _align_spans(best_ids: list[list[int]], best_begin: list[list[int]],
                 best_end: list[list[int]], new_ids: list[list[int]]
                 ) -> tuple[list[list[int]], list[list[int]]]:
    """Frames of consensus units from the best-path units they align to (per utterance: the
    edge of the library)."""
    begins, ends = [], []
    for ids, b, e, new in zip(best_ids, best_begin, best_end, new_ids):
        if ids == new:
            begins.append(list(b))
            ends.append(list(e))
            continue
        eps = -1
        pairs = kaldialign.align(ids, new, eps) if ids or new else []
        i = 0
        nb: list[int | None] = []
        ne: list[int | None] = []
        for ref, hyp in pairs:
            if hyp == eps:  # a best-path unit the consensus dropped
                i += 1
                continue
            if ref == eps:
                nb.append(None)
                ne.append(None)
            else:
                nb.append(b[i])
                ne.append(e[i])
                i += 1
        # inserted units: the gap between their neighbours
        for j in range(len(nb)):
            if nb[j] is None:
                prev = next((ne[k] for k in range(j - 1, -1, -1) if ne[k] is not None), None)
                nxt = next((nb[k] for k in range(j + 1, len(nb)) if nb[k] is not None), None)
                lo = prev if prev is not None else (nxt if nxt is not None else 0)
                hi = nxt if nxt is not None else lo
                nb[j], ne[j] = lo, max(lo, hi)
        begins.append([int(x) for x in nb])
        ends.append([int(x) for x in ne])
    return begins, ends


def _unit_spans(paths: k2.Fsa, topology: Topology, word_start: torch.Tensor | None,
                aux_labels: AuxLabels, attribute: str, blank_id: int
                ) -> tuple[k2.RaggedTensor, torch.Tensor, torch.Tensor]:
    """Units of linear paths: int32 ids ``[utt][unit]`` and int64 begin and end frames
    (flat, one per unit)."""
    tokens, tok_begin, tok_end = _path_token_spans(paths, topology, blank_id)
    ids, unit_frames = path_aux_ids(paths, attribute)
    if aux_labels is AuxLabels.TOKENS:
        counts_ok = torch.equal(ids.shape.row_splits(1), tokens.shape.row_splits(1))
        if not counts_ok:
            raise ValueError("aux_labels=AuxLabels.TOKENS but the lattice's units do not match "
                             "its tokens one to one")
        begin, end = tok_begin.values.to(torch.int64), tok_end.values.to(torch.int64)
    else:
        begin, end = _spans_by_label_arcs(tok_begin, tok_end, unit_frames)
        if word_start is not None:
            wb, we, num = word_spans(tokens, tok_begin, tok_end, word_start)
            agree = num.to(ids.values.device) == (ids.shape.row_splits(1)[1:]
                                                  - ids.shape.row_splits(1)[:-1])
            use_rows = agree[ids.shape.row_ids(1).to(torch.int64)]
            wrow_ok = agree[wb.shape.row_ids(1).to(torch.int64)]
            begin[use_rows] = wb.values.to(torch.int64)[wrow_ok]
            end[use_rows] = we.values.to(torch.int64)[wrow_ok]
    return ids, begin, end


def path_units(
    paths: k2.Fsa,
    topology: Topology,
    word_start: torch.Tensor | None = None,
    aux_labels: AuxLabels = AuxLabels.WORDS,
    attribute: str = "aux_labels",
    blank_id: int = 0,
) -> tuple[k2.RaggedTensor, k2.RaggedTensor, k2.RaggedTensor]:
    """Words (or tokens) of linear paths taken from a lattice (its best paths, the
    alignments of n-best paths) with the frames they cover, as :func:`lattice_timed_units`
    finds them on the best path.

    Args:
      paths: FsaVec ``[path][state][arc]`` of linear FSAs with the lattice's arcs (token
        ``labels``, output units in ``attribute``).
      topology, word_start, aux_labels, attribute, blank_id: as in
        :func:`lattice_timed_units`.

    Returns:
      ``(ids, begin, end)``: int32 ``k2.RaggedTensor`` ``[path][unit]`` each; unit ``k``
      covers frames ``begin <= f < end``.
    """
    if not isinstance(topology, Topology):
        raise TypeError(f"topology must be a Topology, got {topology!r}")
    if not isinstance(aux_labels, AuxLabels):
        raise TypeError(f"aux_labels must be an AuxLabels, got {aux_labels!r}")
    if not hasattr(paths, attribute):
        raise ValueError(f"the paths have no {attribute!r} attribute holding output units")
    ids, begin, end = _unit_spans(paths, topology, word_start, aux_labels, attribute, blank_id)
    row_ids = ids.shape.row_ids(1).to(torch.int64)
    n = paths.shape[0]
    return (ids, ragged_from_row_ids(row_ids, begin.to(torch.int32), n),
            ragged_from_row_ids(row_ids, end.to(torch.int32), n))


def lattice_timed_units(
    lattice: LatticeResult | k2.Fsa,
    topology: Topology,
    config: MbrConfig = ONE_BEST_CONFIDENCES,
    word_start: torch.Tensor | None = None,
    aux_labels: AuxLabels = AuxLabels.WORDS,
    attribute: str = "aux_labels",
    blank_id: int = 0,
) -> tuple[TimedUnits, MbrResult]:
    """Words (or tokens) of a batch of lattices with frames and confidences.

    Args:
      lattice: FsaVec ``[utt][state][arc]`` whose ``labels`` are token ids: a CTC/HMM lattice
        (``get_lattice``, rescored lattices) or a transducer lattice (``fast_beam_search``).
        Not modified.
      topology: how its token labels map to frames.
      config: ``decode_mbr=False`` (default): the best path's units with their posteriors;
        True: the MBR consensus. Posteriors use ``config.posterior``; the best path is taken
        on the lattice's own scores (the ``1best`` hypothesis).
      word_start: bool ``(V,)`` word-start tokens (:func:`k2dec.lang.bpe_word_start_mask`) to
        find word boundaries; ``None``: use the arcs carrying word labels (see the module
        docstring).
      aux_labels: what ``attribute`` holds: :attr:`AuxLabels.WORDS` or
        :attr:`AuxLabels.TOKENS` (H lattices and the trivial transducer graph: units are
        the tokens themselves).
      attribute: the arc attribute with the output units.
      blank_id: the blank token.

    Returns:
      ``(units, mbr)``: :class:`TimedUnits` and the :class:`~k2dec.lattice.mbr.MbrResult`
      (sausages, expected errors).
    """
    if not isinstance(topology, Topology):
        raise TypeError(f"topology must be a Topology, got {topology!r}")
    if not isinstance(aux_labels, AuxLabels):
        raise TypeError(f"aux_labels must be an AuxLabels, got {aux_labels!r}")
    lat = lattice_fsa_vec(lattice)
    if not hasattr(lat, attribute):
        raise ValueError(f"the lattice has no {attribute!r} attribute holding output units")
    n = lat.shape[0]
    paths = k2.shortest_path(lat, use_double_scores=True)
    ids, begin, end = _unit_spans(paths, topology, word_start, aux_labels, attribute, blank_id)
    row_ids = ids.shape.row_ids(1).to(torch.int64)
    mbr = mbr_decode(lat, config, hyps=ids, attribute=attribute)
    begin_r = ragged_from_row_ids(row_ids, begin.to(torch.int32), n)
    end_r = ragged_from_row_ids(row_ids, end.to(torch.int32), n)
    if config.decode_mbr:
        out_ids = mbr.words
        out_begin, out_end = _consensus_spans(ids, begin_r, end_r, mbr.words)
    else:
        out_ids, out_begin, out_end = ids, begin_r, end_r
    # utterances without a complete path have no units at all
    keep_rows = mbr.has_path.to(out_ids.values.device)
    keep = keep_rows[out_ids.shape.row_ids(1).to(torch.int64)]
    units = TimedUnits(ids=ragged_select(out_ids, keep), begin=ragged_select(out_begin, keep),
                       end=ragged_select(out_end, keep), confidences=mbr.confidences,
                       has_path=mbr.has_path)
    return units, mbr


def _consensus_spans(ids: k2.RaggedTensor, begin: k2.RaggedTensor, end: k2.RaggedTensor,
                     words: k2.RaggedTensor) -> tuple[k2.RaggedTensor, k2.RaggedTensor]:
    """int32 ``[utt][unit]`` begin and end frames of the consensus ``words``, from the best
    path's units ``ids`` and their frames (see :func:`_align_spans`)."""
    nb, ne = _align_spans(ids.tolist(), begin.tolist(), end.tolist(), words.tolist())
    device = ids.values.device
    return (k2.RaggedTensor(nb, dtype=torch.int32, device=device),
            k2.RaggedTensor(ne, dtype=torch.int32, device=device))
