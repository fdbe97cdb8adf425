"""Best paths to token ids, word ids and frames: the per-arc frame attribute of lattices, CTC
collapse of per-frame labels, token and word spans (frames) and per-word minima of token values.

Everything here works on whole batches (``k2.Fsa`` FsaVecs and ``k2.RaggedTensor``) without
per-utterance Python loops.
"""

from __future__ import annotations

import k2
import torch

from k2dec.primitives.ragged import ragged_from_row_ids, ragged_select

__all__ = [
    "FRAME_ATTR",
    "arc_frames",
    "ctc_collapse",
    "ctc_run_max",
    "ctc_token_spans",
    "path_aux_ids",
    "path_frames",
    "path_token_ids",
    "word_minimum",
    "word_spans",
]


FRAME_ATTR = "frame"
"""Name of the int32 arc attribute holding each lattice arc's frame index (set by
``k2dec.lattice.get_lattice`` via ``k2.intersect_dense_pruned(frame_idx_name=...)``); ``-1`` marks
arcs that consume no frame (added when ragged labels are expanded, e.g. by ``k2.invert``)."""


def arc_frames(paths: k2.Fsa) -> torch.Tensor:
    """Index of each arc within its FSA of an FsaVec of linear paths.

    For best paths taken from a lattice produced by dense intersection
    (``k2.intersect_dense_pruned``, ``k2.OnlineDenseIntersecter``) every arc consumes one frame,
    so this is the frame index of the arc (the final ``-1`` arc sits on frame ``num_frames``).

    Args:
      paths: FsaVec (3 axes ``[fsa][state][arc]``) whose FSAs are linear paths, e.g. the output
        of ``k2.shortest_path``.

    Returns:
      int32 tensor of shape ``(paths.num_arcs,)`` on ``paths.device``.
    """
    if paths.arcs.num_axes() != 3:
        raise ValueError(
            f"paths must be an FsaVec (3 axes), got {paths.arcs.num_axes()} axes; "
            "use k2.create_fsa_vec([fsa])"
        )
    shape = paths.arcs.shape().remove_axis(1)  # [fsa][arc]
    row_ids = shape.row_ids(1).to(torch.int64)
    row_splits = shape.row_splits(1).to(torch.int64)
    idx = torch.arange(row_ids.numel(), device=row_ids.device, dtype=torch.int64)
    return (idx - row_splits[row_ids]).to(torch.int32)


def ctc_collapse(
    labels: k2.RaggedTensor, frames: k2.RaggedTensor | None = None, blank_id: int = 0
) -> tuple[k2.RaggedTensor, k2.RaggedTensor]:
    """CTC collapse of per-frame labels: merge consecutive repeats, then drop blanks and ``-1``.

    Args:
      labels: int32 ``k2.RaggedTensor`` ``[utt][frame]`` (the label on each frame).
      frames: optional int32 ``k2.RaggedTensor`` with the same shape giving the frame index of
        each element; defaults to the position within the row.
      blank_id: the blank token id.

    Returns:
      ``(tokens, token_frames)``: int32 ``k2.RaggedTensor`` ``[utt][token]``, and the frame where
      each token's run starts (same shape).

    This is exact for the standard CTC topology (a repeated token needs a blank in between); with
    the modified topology ``aa`` is ambiguous and is read as one token.
    """
    row_ids, frame_values, new_run, keep = _ctc_runs(labels, frames, blank_id)
    tokens = ragged_from_row_ids(row_ids[keep], labels.values[keep], labels.dim0)
    token_frames = ragged_from_row_ids(row_ids[keep], frame_values[keep], labels.dim0)
    return tokens, token_frames


def ctc_run_max(labels: k2.RaggedTensor, values: torch.Tensor, blank_id: int = 0
                ) -> k2.RaggedTensor:
    """The largest of ``values`` over each token's run of frames, for the tokens
    :func:`ctc_collapse` reads from ``labels``.

    Args:
      labels: int32 ``k2.RaggedTensor`` ``[utt][frame]``.
      values: float ``[labels.numel()]``, one per frame (e.g. the probability of its label).
      blank_id: the blank token id.

    Returns:
      ``k2.RaggedTensor`` ``[utt][token]`` of ``values``' dtype, aligned with the tokens of
      ``ctc_collapse(labels)``.
    """
    if values.numel() != labels.numel():
        raise ValueError(f"values needs one entry per frame ({labels.numel()}), got "
                         f"{values.numel()}")
    row_ids, _, new_run, keep = _ctc_runs(labels, None, blank_id)
    starts = torch.nonzero(new_run).flatten()
    splits = torch.cat([starts, starts.new_full((1,), new_run.numel())]).to(torch.int32)
    runs = k2.RaggedTensor(k2.ragged.create_ragged_shape2(splits, None, new_run.numel()),
                           values.contiguous())  # [run][frame]
    best = runs.max(initial_value=float("-inf"))
    return ragged_from_row_ids(row_ids[keep], best[keep[starts]], labels.dim0)


def _ctc_runs(labels: k2.RaggedTensor, frames: k2.RaggedTensor | None, blank_id: int
              ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per element of ``labels`` ``[utt][frame]``: its row (int64), its frame (int32), whether
    it starts a run of equal labels, and whether it starts a token (a run that is not blank or
    ``-1``)."""
    values = labels.values
    row_ids = labels.shape.row_ids(1).to(torch.int64)
    n = values.numel()
    if frames is None:
        row_splits = labels.shape.row_splits(1).to(torch.int64)
        frame_values = (torch.arange(n, device=values.device) - row_splits[row_ids]).to(torch.int32)
    else:
        frame_values = frames.values
    new_run = torch.ones(n, dtype=torch.bool, device=values.device)
    if n > 1:
        new_run[1:] = (row_ids[1:] != row_ids[:-1]) | (values[1:] != values[:-1])
    keep = new_run & (values != blank_id) & (values >= 0)
    return row_ids, frame_values, new_run, keep


def path_token_ids(
    paths: k2.Fsa, blank_id: int = 0
) -> tuple[k2.RaggedTensor, k2.RaggedTensor]:
    """Token ids and token start frames of best paths whose ``labels`` are CTC token ids (one
    label per frame, e.g. paths through H, HL or HLG built on ``k2.ctc_topo``).

    Args:
      paths: FsaVec of linear paths (``k2.shortest_path`` of a lattice). When they carry the
        per-arc frame attribute (see :func:`path_frames`), arcs with frame ``-1`` are skipped.
      blank_id: the blank token id.

    Returns:
      ``(tokens, frames)``: int32 ``k2.RaggedTensor`` ``[utt][token]`` each.
    """
    shape = paths.arcs.shape().remove_axis(1)
    labels = k2.RaggedTensor(shape, paths.labels.contiguous())
    frames = k2.RaggedTensor(shape, path_frames(paths))
    if hasattr(paths, FRAME_ATTR):
        # arcs added by k2.invert/expand_ragged_attributes consume no frame: skip them
        keep = getattr(paths, FRAME_ATTR) >= 0
        labels, frames = ragged_select(labels, keep), ragged_select(frames, keep)
    return ctc_collapse(labels, frames, blank_id=blank_id)


def path_aux_ids(
    paths: k2.Fsa, name: str = "aux_labels"
) -> tuple[k2.RaggedTensor, k2.RaggedTensor]:
    """The positive ids of an output-label attribute along best paths, with the frame of the arc
    that carries each id.

    Works for a plain per-arc int32 tensor attribute and for a ragged one
    (``k2.RaggedTensor`` ``[arc][label]``, as produced by ``k2.remove_epsilon`` or
    ``k2.determinize``). Ids ``<= 0`` (epsilon, ``-1`` on final arcs) are dropped.

    Args:
      paths: FsaVec of linear paths (``k2.shortest_path`` of a lattice).
      name: attribute name, ``"aux_labels"`` by default (word ids for HLG, token ids for H).

    Returns:
      ``(ids, frames)``: int32 ``k2.RaggedTensor`` ``[utt][id]`` each.
    """
    if not hasattr(paths, name):
        raise ValueError(f"paths has no attribute {name!r}")
    aux = getattr(paths, name)
    arc_shape = paths.arcs.shape().remove_axis(1)  # [utt][arc]
    frames_per_arc = path_frames(paths)
    if isinstance(aux, k2.RaggedTensor):
        utt_arc_label = arc_shape.compose(aux.shape)  # [utt][arc][label]
        utt_label = utt_arc_label.remove_axis(1)
        values = aux.values
        arc_of_label = aux.shape.row_ids(1).to(torch.int64)
        frame_values = frames_per_arc[arc_of_label]
    else:
        utt_label = arc_shape
        values = aux
        frame_values = frames_per_arc
    ids = k2.RaggedTensor(utt_label, values.contiguous())
    frames = k2.RaggedTensor(utt_label, frame_values.contiguous())
    keep = values > 0
    return ragged_select(ids, keep), ragged_select(frames, keep)


def path_frames(paths: k2.Fsa) -> torch.Tensor:
    """Frame index of each arc of an FsaVec of linear paths.

    Uses the :data:`FRAME_ATTR` attribute when present (arcs marked ``-1`` take the frame of the
    arc before them on the path), otherwise the arc's position in its path (exact for paths of
    dense-intersection lattices, where every arc consumes one frame).

    Returns:
      int32 tensor of shape ``(paths.num_arcs,)`` on ``paths.device``.
    """
    if not hasattr(paths, FRAME_ATTR):
        return arc_frames(paths)
    frames = getattr(paths, FRAME_ATTR).to(torch.int64)
    if frames.numel() == 0:
        return frames.to(torch.int32)
    row_ids = paths.arcs.shape().remove_axis(1).row_ids(1).to(torch.int64)
    # forward-fill -1 within each path: frames are non-decreasing along a path, so a running
    # maximum works once every path is offset above the previous one
    big = int(frames.max()) + 2
    filled = torch.cummax(frames + 1 + row_ids * big, dim=0).values - row_ids * big - 1
    return filled.clamp(min=0).to(torch.int32)


def ctc_token_spans(
    labels: k2.RaggedTensor, frames: k2.RaggedTensor | None = None, blank_id: int = 0
) -> tuple[k2.RaggedTensor, k2.RaggedTensor, k2.RaggedTensor]:
    """Like :func:`ctc_collapse`, and also where each token's run of frames ends.

    Returns:
      ``(tokens, begin, end)``: int32 ``k2.RaggedTensor`` ``[utt][token]`` each; a token
      covers the frames ``begin <= f < end`` (its run of repeated frames, without the blanks
      after it).
    """
    row_ids, frame_values, new_run, keep = _ctc_runs(labels, frames, blank_id)
    tokens = ragged_from_row_ids(row_ids[keep], labels.values[keep], labels.dim0)
    begin = ragged_from_row_ids(row_ids[keep], frame_values[keep], labels.dim0)
    run_id = torch.cumsum(new_run.to(torch.int64), 0) - 1
    last = torch.ones_like(new_run)  # the last element of its run
    if new_run.numel() > 1:
        last[:-1] = new_run[1:]
    run_end = torch.zeros(int(new_run.sum()), dtype=torch.int32, device=labels.values.device)
    run_end[run_id[last]] = frame_values[last] + 1
    end = ragged_from_row_ids(row_ids[keep], run_end[run_id[keep]], labels.dim0)
    return tokens, begin, end


def word_spans(
    tokens: k2.RaggedTensor,
    begin: k2.RaggedTensor,
    end: k2.RaggedTensor,
    word_start: torch.Tensor,
) -> tuple[k2.RaggedTensor, k2.RaggedTensor, torch.Tensor]:
    """Frames of the words spelled by token sequences, read from word-start tokens (BPE pieces
    beginning with ``▁``): a word runs from a word-start token to the token before the next
    one (tokens before an utterance's first word-start token form a word of their own).

    Args:
      tokens: int32 ``k2.RaggedTensor`` ``[utt][token]``.
      begin, end: int32 ``k2.RaggedTensor`` ``[utt][token]``: each token covers frames
        ``begin <= f < end``.
      word_start: bool ``(V,)``: which token ids begin a word.

    Returns:
      ``(word_begin, word_end, num_words)``: int32 ``k2.RaggedTensor`` ``[utt][word]`` (the
      first ``begin`` and last ``end`` of each word's tokens) and int64 ``(num_utts,)`` (the
      number of words found in each utterance).
    """
    device = tokens.values.device
    n = tokens.dim0
    row_ids = tokens.shape.row_ids(1).to(torch.int64)
    ids = tokens.values.to(torch.int64)
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= word_start.numel()):
        raise ValueError(f"token ids must be in [0, {word_start.numel()}), got "
                         f"[{int(ids.min())}, {int(ids.max())}]")
    starts = word_start.to(device)[ids]
    first = torch.ones_like(starts)
    if ids.numel() > 1:
        first[1:] = row_ids[1:] != row_ids[:-1]
    # a word begins at a word-start token, or at an utterance's first token
    opens = starts | first
    closes = torch.ones_like(opens)  # the last token of a word
    if ids.numel() > 1:
        closes[:-1] = opens[1:]
    word_row = row_ids[opens]
    wb, we = begin.values[opens], end.values[closes]
    num_words = torch.bincount(word_row, minlength=n)
    return (ragged_from_row_ids(word_row, wb.to(torch.int32), n),
            ragged_from_row_ids(word_row, we.to(torch.int32), n), num_words)


def word_minimum(
    tokens: k2.RaggedTensor, values: k2.RaggedTensor, word_start: torch.Tensor
) -> k2.RaggedTensor:
    """The smallest per-token value (e.g. a token confidence) of each word, with words found as
    in :func:`word_spans`.

    Args:
      tokens: int32 ``k2.RaggedTensor`` ``[utt][token]``.
      values: float ``k2.RaggedTensor`` with the same shape.
      word_start: bool ``(V,)``: which token ids begin a word.

    Returns:
      float ``k2.RaggedTensor`` ``[utt][word]``.
    """
    device = tokens.values.device
    row_ids = tokens.shape.row_ids(1).to(torch.int64)
    ids = tokens.values.to(torch.int64)
    starts = word_start.to(device)[ids] if ids.numel() else ids.bool()
    first = torch.ones_like(starts)
    if ids.numel() > 1:
        first[1:] = row_ids[1:] != row_ids[:-1]
    opens = starts | first
    word_id = torch.cumsum(opens.to(torch.int64), 0) - 1
    vals = values.values
    # the smallest value first within each word: sort by value, then stably by word
    order = torch.sort(vals, stable=True).indices
    order = order[torch.sort(word_id[order], stable=True).indices]
    lead = torch.ones_like(opens)
    if ids.numel() > 1:
        lead[1:] = word_id[order][1:] != word_id[order][:-1]
    return ragged_from_row_ids(row_ids[opens], vals[order][lead], tokens.dim0)
