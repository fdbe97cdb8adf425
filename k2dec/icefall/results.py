"""What icefall's decoding functions return, and the helpers its decode scripts call on it:
:class:`DecodingResults` (``icefall/utils.py``), :func:`get_texts` and
:func:`get_texts_with_timestamp` (ids along best paths, with the frame of each)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import k2
import torch

from ..primitives.best_paths import path_aux_ids

__all__ = ["DecodingResults", "get_texts", "get_texts_with_timestamp"]


@dataclass
class DecodingResults:
    """Hypotheses with the frame of each symbol (icefall's ``DecodingResults``, same fields in
    the same order).

    Attributes:
      timestamps: ``timestamps[i][k]``: the encoder frame (after subsampling) on which symbol
        ``k`` of hypothesis ``i`` was decoded.
      hyps: ``hyps[i]``: the token ids (word ids for the LG searches) of utterance ``i``;
        a list of lists, or an int32 ``k2.RaggedTensor`` ``[utt][symbol]`` where icefall
        returns one (``get_texts_with_timestamp(..., return_ragged=True)``).
      scores: ``scores[i][k]``: what the search scored symbol ``k`` with (``greedy_search_batch``:
        its joiner logit); ``None`` where icefall gives none.
    """

    timestamps: list[list[int]]
    hyps: list[list[int]] | k2.RaggedTensor
    scores: list[list[float]] | None = None


def _check_paths(best_paths: k2.Fsa) -> None:
    if not isinstance(best_paths, k2.Fsa):
        raise TypeError(f"best_paths must be a k2.Fsa, got {type(best_paths).__name__}")
    if best_paths.arcs.num_axes() != 3:
        raise ValueError("best_paths must be an FsaVec [utt][state][arc] (e.g. the result of "
                         "k2.shortest_path); use k2.create_fsa_vec([fsa]) for one FSA")
    if not hasattr(best_paths, "aux_labels"):
        raise ValueError("best_paths has no aux_labels (the word or token ids to read)")


def get_texts(best_paths: k2.Fsa, return_ragged: bool = False
              ) -> list[list[int]] | k2.RaggedTensor:
    """The positive ``aux_labels`` (word ids of HLG/LG paths, token ids of H or trivial-graph
    paths) along each path of an FsaVec of linear paths, as icefall's ``get_texts``.

    Args:
      best_paths: FsaVec ``[utt][state][arc]`` of linear paths with ``aux_labels`` (a tensor
        or a ragged ``[arc][label]``).
      return_ragged: return an int32 ``k2.RaggedTensor`` ``[utt][id]`` instead of lists.
    """
    _check_paths(best_paths)
    ids, _ = path_aux_ids(best_paths, "aux_labels")
    return ids if return_ragged else ids.tolist()


def get_texts_with_timestamp(best_paths: k2.Fsa, return_ragged: bool = False
                             ) -> DecodingResults:
    """:func:`get_texts` and, per id, the index of the arc carrying it on its path (for paths
    of ``fast_beam_search`` lattices, which take one arc per frame: its frame), as icefall's
    ``get_texts_with_timestamp``."""
    _check_paths(best_paths)
    paths = best_paths
    if hasattr(paths, "frame"):  # k2dec lattices carry frames; icefall counts arcs
        paths = best_paths.clone()
        del paths.frame
    ids, frames = path_aux_ids(paths, "aux_labels")
    return DecodingResults(timestamps=frames.tolist(),
                           hyps=ids if return_ragged else ids.tolist())


def as_lists(rows: Sequence[Sequence[int]]) -> list[list[int]]:
    """Plain int lists (for ids held in tuples or tensors)."""
    return [[int(x) for x in r] for r in rows]


def results_or_hyps(hyps: list[list[int]], timestamps: list[list[int]],
                    return_timestamps: bool, scores: list[list[float]] | None = None
                    ) -> list[list[int]] | DecodingResults:
    """icefall's return convention: the hypotheses, or with ``return_timestamps`` a
    :class:`DecodingResults`."""
    if not return_timestamps:
        return hyps
    return DecodingResults(timestamps=timestamps, hyps=hyps, scores=scores)


def paths_result(best_paths: k2.Fsa, return_timestamps: bool
                 ) -> list[list[int]] | DecodingResults:
    """:func:`get_texts` or, with ``return_timestamps``, :func:`get_texts_with_timestamp`."""
    if return_timestamps:
        return get_texts_with_timestamp(best_paths)
    return get_texts(best_paths)


def index_paths(fsa: k2.Fsa, best: torch.Tensor) -> k2.Fsa:
    """Paths ``best`` (int ``[num_utts]``, ``-1``: none) of an FsaVec of paths, an empty FSA
    where the index is ``-1`` (as ``k2.index_fsa`` with icefall's argmax gives)."""
    return k2.index_fsa(fsa, best.to(device=fsa.device, dtype=torch.int32))
