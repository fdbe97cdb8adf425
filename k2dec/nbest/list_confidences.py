"""Confidences of hypotheses chosen from n-best lists (sampled n-bests, the final beams of
beam searches): the n-best posterior of each word.

Every hypothesis ``m`` of an utterance gets the posterior ``P(m) = exp(s * score_m) / sum_k
exp(s * score_k)`` from the scores the method ranked the list by (``s``: a posterior scale,
like a lattice's acoustic scale). Each hypothesis is aligned to the chosen one by the
Levenshtein alignment (:func:`aligned_matches`), and a word (or token) of the chosen
hypothesis gets the total posterior of the hypotheses that have the same word aligned to it:
the probability, under the list, that the word is there. It is the list counterpart of the
sausage posterior of lattice methods (Kaldi's ``lattice-to-ctm-conf``). The chosen hypothesis
always supports all its own words, so a word's confidence is at least the hypothesis'
posterior; a list of one hypothesis gives 1 everywhere.

A sweep over score scales chooses other hypotheses at other scales; the alignments of the
whole list against every hypothesis chosen at some scale are computed once
(:func:`nbest_confidences` takes all settings together).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import k2
import torch

from ..primitives.ragged import add_at, exclusive_cumsum, ragged_from_row_ids
from .config import NbestConfig, check_posterior_scale

__all__ = ["aligned_matches", "list_posteriors", "nbest_confidences"]

MAX_ALIGN_CELLS = 1 << 20
"""Alignment tables are filled for groups of pairs with at most this many cells (int32 each).
The groups' alignments do not depend on it; a long recording's longest segments fill whole
groups, and at ``1 << 22`` their tables and temporaries (30-100 MB) set the 60-minute peak of
the fast_beam_search n-best methods above their 1-minute one."""


def _padded(ragged: k2.RaggedTensor, fill: int) -> tuple[torch.Tensor, torch.Tensor]:
    """int64 ``[rows, max_len + 1]`` with the symbols from column 1 (column 0 and the padding
    hold ``fill``) and int64 row lengths."""
    device = ragged.device
    splits = ragged.shape.row_splits(1).to(torch.int64)
    lengths = splits[1:] - splits[:-1]
    width = (int(lengths.max()) if lengths.numel() else 0) + 1
    out = torch.full((ragged.dim0, width), fill, dtype=torch.int64, device=device)
    rows = torch.repeat_interleave(torch.arange(ragged.dim0, device=device), lengths)
    pos = torch.arange(ragged.numel(), device=device) - splits[:-1][rows]
    out[rows, pos + 1] = ragged.values.to(torch.int64)
    return out, lengths


def _aligned_chunk(hyps: k2.RaggedTensor, refs: k2.RaggedTensor) -> torch.Tensor:
    a, a_len = _padded(hyps, -1)
    b, b_len = _padded(refs, -2)
    num, rows, cols = a.shape[0], a.shape[1], b.shape[1]
    device = a.device
    # lexicographic cost (errors, then most matches): an error costs w, a match -1
    w = rows + cols + 1
    col = torch.arange(cols, device=device)
    table = torch.empty((num, rows, cols), dtype=torch.int32, device=device)
    d = (col * w).unsqueeze(0).expand(num, cols).clone()
    table[:, 0] = d.to(torch.int32)
    for i in range(1, rows):
        diag = torch.where(a[:, i:i + 1] == b, -1, w)
        e = d + w  # hypothesis symbol i left unaligned
        e[:, 1:] = torch.minimum(e[:, 1:], d[:, :-1] + diag[:, 1:])
        d = torch.cummin(e - col * w, dim=1).values + col * w  # reference symbols skipped
        table[:, i] = d.to(torch.int32)
    # back from (len(hyp), len(ref)) of every pair; ties: diagonal, then up, then left
    match = torch.zeros((num, cols), dtype=torch.bool, device=device)
    i, j = a_len.clone(), b_len.clone()
    flat = table.view(num, -1).to(torch.int64)
    pair = torch.arange(num, device=device)
    active = (i > 0) | (j > 0)
    while bool(active.any()):
        p, ii, jj = pair[active], i[active], j[active]
        here = flat[p, ii * cols + jj]
        ip, jp = (ii - 1).clamp(min=0), (jj - 1).clamp(min=0)
        same = a[p, ii] == b[p, jj]
        diag_ok = (ii > 0) & (jj > 0) & (flat[p, ip * cols + jp] + torch.where(same, -1, w)
                                          == here)
        up_ok = ~diag_ok & (ii > 0) & (flat[p, ip * cols + jj] + w == here)
        left = ~diag_ok & ~up_ok
        hit = diag_ok & same
        match[p[hit], jj[hit]] = True
        i[p] = torch.where(diag_ok | up_ok, ip, ii)
        j[p] = torch.where(diag_ok | left, jp, jj)
        active = (i > 0) | (j > 0)
    splits = refs.shape.row_splits(1).to(torch.int64)
    r_rows = torch.repeat_interleave(torch.arange(num, device=device), b_len)
    r_pos = torch.arange(refs.numel(), device=device) - splits[:-1][r_rows]
    return match[r_rows, r_pos + 1]


def aligned_matches(hyps: k2.RaggedTensor, refs: k2.RaggedTensor,
                    max_cells: int = MAX_ALIGN_CELLS) -> torch.Tensor:
    """Which reference symbols the Levenshtein alignment of each pair matches.

    Pair ``p`` aligns ``hyps[p]`` to ``refs[p]`` with the fewest errors (substitutions,
    insertions, deletions) and, among those, the most matches; remaining ties are broken by
    tracing back from the ends preferring the diagonal move, then skipping a hypothesis
    symbol, then a reference symbol.

    Args:
      hyps, refs: int ragged ``[pair][symbol]`` with the same number of rows, on one device.
      max_cells: pairs are aligned in groups whose tables have at most this many cells (a
        larger pair is aligned alone).

    Returns:
      bool ``[refs.numel()]``: per reference symbol (in ``refs.values`` order), whether an
      equal hypothesis symbol is aligned to it.
    """
    if hyps.dim0 != refs.dim0:
        raise ValueError(f"hyps and refs must have the same number of rows, got {hyps.dim0} "
                         f"and {refs.dim0}")
    out = torch.zeros(refs.numel(), dtype=torch.bool, device=refs.device)
    if refs.dim0 == 0:
        return out
    h_len = hyps.shape.row_splits(1).to(torch.int64).diff()
    r_len = refs.shape.row_splits(1).to(torch.int64).diff()
    # pairs of similar sizes aligned together (a group's table is [pairs, its longest hyp + 1,
    # its longest ref + 1]); each pair's alignment does not depend on its group
    order = torch.sort(torch.maximum(h_len, r_len), stable=True).indices
    start = 0
    while start < refs.dim0:
        end = start + _group_size(h_len[order[start:]], r_len[order[start:]], max_cells)
        idx = order[start:end].to(torch.int32)
        h, _ = hyps.index(idx, axis=0)
        r, value_indexes = refs.index(idx, axis=0, need_value_indexes=True)
        if r.numel():
            out[value_indexes.to(torch.int64)] = _aligned_chunk(h, r)
        start = end
    return out


def _group_size(h_len: torch.Tensor, r_len: torch.Tensor, max_cells: int) -> int:
    """How many of the pairs (in order) make a group whose table has at most ``max_cells``
    cells (at least one)."""
    size = torch.arange(1, h_len.numel() + 1, device=h_len.device) * \
        (torch.cummax(h_len, 0).values + 1) * (torch.cummax(r_len, 0).values + 1)
    return max(1, int((size <= max_cells).sum()))


def list_posteriors(scores: torch.Tensor, utt: torch.Tensor, num_utts: int,
                    scale: float = NbestConfig.posterior_scale) -> torch.Tensor:
    """float64 ``[H]``: ``softmax(scale * scores)`` within each utterance's hypotheses
    (``utt``: int ``[H]``, the utterance of each); ``-inf`` scores get 0."""
    s = scores.to(torch.float64) * scale
    utt = utt.to(s.device, torch.int64)
    total = ragged_from_row_ids(utt, s, num_utts).logsumexp(initial_value=float("-inf"))
    post = torch.exp(s - total[utt])
    return torch.nan_to_num(post, nan=0.0)

def nbest_confidences(
    seqs: k2.RaggedTensor,
    utt: torch.Tensor,
    num_utts: int,
    scores: Sequence[torch.Tensor],
    chosen: Sequence[torch.Tensor],
    scale: float = NbestConfig.posterior_scale,
    max_cells: int = MAX_ALIGN_CELLS,
) -> list[k2.RaggedTensor]:
    """The n-best posterior of every symbol of the chosen hypotheses, for several settings.

    Args:
      seqs: int32 ragged ``[hyp][symbol]`` (word or token ids), hypotheses grouped by
        utterance.
      utt: int ``[H]``: the utterance of each hypothesis (non-decreasing).
      num_utts: ``N``.
      scores: per setting, float ``[H]``: the scores the setting ranks the hypotheses by.
      chosen: per setting, int ``[N]``: the index (into ``seqs``) of each utterance's chosen
        hypothesis, ``-1`` where it has none.
      scale: posterior scale of the scores.
      max_cells: memory bound of the alignments (see :func:`aligned_matches`).

    Returns:
      per setting, float64 ``k2.RaggedTensor`` ``[utt][symbol]``: the confidence of each
      symbol of the chosen hypothesis (an empty row where none was chosen), on ``seqs``'
      device.
    """
    if len(scores) != len(chosen):
        raise ValueError(f"scores and chosen need one entry per setting, got {len(scores)} "
                         f"and {len(chosen)}")
    check_posterior_scale(scale, "scale")
    device = seqs.device
    utt = utt.to(device, torch.int64)
    if utt.numel() != seqs.dim0:
        raise ValueError(f"utt must have one entry per hypothesis ({seqs.dim0}), got "
                         f"{utt.numel()}")
    lengths = seqs.shape.row_splits(1).to(torch.int64).diff()
    # every hypothesis chosen by some setting is a reference for its utterance's list
    chosen = [c.to(device, torch.int64) for c in chosen]
    all_refs = torch.cat([c[c >= 0] for c in chosen]) if chosen else \
        torch.zeros(0, dtype=torch.int64, device=device)
    pairs = _pair_matches(seqs, utt, num_utts, torch.unique(all_refs), max_cells)
    out = []
    for sc, ch in zip(scores, chosen, strict=True):
        if ch.numel() != num_utts:
            raise ValueError(f"chosen must have {num_utts} entries, got {ch.numel()}")
        post = list_posteriors(sc.to(device), utt, num_utts, scale)
        out.append(_chosen_confidences(pairs, ch, post, utt, lengths))
    return out


class _PairMatches(NamedTuple):
    """Each reference paired with every hypothesis of its utterance's list (int64 ``[P]``
    each), and per reference symbol of each pair: its pair and position (int64) and whether
    an equal hypothesis symbol is aligned to it (bool)."""

    ref: torch.Tensor
    hyp: torch.Tensor
    sym_pair: torch.Tensor
    sym_pos: torch.Tensor
    match: torch.Tensor


def _pair_matches(seqs: k2.RaggedTensor, utt: torch.Tensor, num_utts: int, refs: torch.Tensor,
                  max_cells: int) -> _PairMatches:
    """Align every reference ``refs`` (indexes into ``seqs``) with its list's hypotheses."""
    device = seqs.device
    lengths = seqs.shape.row_splits(1).to(torch.int64).diff()
    counts = torch.bincount(utt, minlength=num_utts)
    starts = exclusive_cumsum(counts)[:-1]
    per_ref = counts[utt[refs]]
    pair_ref = torch.repeat_interleave(refs, per_ref)
    pair_hyp = starts[utt[pair_ref]] + torch.arange(pair_ref.numel(), device=device) - \
        torch.repeat_interleave(exclusive_cumsum(per_ref)[:-1], per_ref)
    h, _ = seqs.index(pair_hyp.to(torch.int32), axis=0)
    r, _ = seqs.index(pair_ref.to(torch.int32), axis=0)
    match = aligned_matches(h, r, max_cells)
    sym_pair = torch.repeat_interleave(torch.arange(pair_ref.numel(), device=device),
                                       lengths[pair_ref])
    sym_pos = torch.arange(match.numel(), device=device) - \
        exclusive_cumsum(lengths[pair_ref])[:-1][sym_pair]
    return _PairMatches(pair_ref, pair_hyp, sym_pair, sym_pos, match)


def _chosen_confidences(pairs: _PairMatches, ch: torch.Tensor, post: torch.Tensor,
                        utt: torch.Tensor, lengths: torch.Tensor) -> k2.RaggedTensor:
    """float64 ``[utt][symbol]``: the posterior-weighted support of each symbol of the
    hypotheses ``ch`` (int64 ``[N]``, ``-1``: none) given the posteriors ``post``."""
    device = post.device
    pair_ref, sym_pair, sym_pos, match = pairs.ref, pairs.sym_pair, pairs.sym_pos, pairs.match
    with_none = torch.cat([lengths, lengths.new_zeros(1)])  # -1: no hypothesis
    row_len = with_none[torch.where(ch >= 0, ch, torch.full_like(ch, lengths.numel()))]
    splits = exclusive_cumsum(row_len)
    conf = torch.zeros(int(splits[-1]), dtype=torch.float64, device=device)
    owner = utt[pair_ref[sym_pair]]
    mine = ch[owner] == pair_ref[sym_pair]
    weight = post[pairs.hyp[sym_pair]]
    use = match & mine
    add_at(conf, splits[owner[use]] + sym_pos[use], weight[use])
    # a symbol every hypothesis of non-zero posterior supports is exactly 1 (not a sum
    # rounded differently in another batch: ties must stay ties)
    miss = torch.zeros_like(conf)
    other = ~match & mine
    add_at(miss, splits[owner[other]] + sym_pos[other], weight[other])
    conf = torch.where(miss > 0, conf.clamp(max=1.0), torch.ones_like(conf))
    shape = k2.ragged.create_ragged_shape2(splits.to(torch.int32), None, conf.numel())
    return k2.RaggedTensor(shape, conf)
