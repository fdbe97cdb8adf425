"""Dense inputs: validated ``k2.DenseFsaVec`` from network log-probs and lengths."""

from __future__ import annotations

import logging
import math
import weakref
from dataclasses import dataclass

import k2
import torch

logger = logging.getLogger(__name__)

__all__ = [
    "DenseInput",
    "PrunedFrames",
    "check_vocab",
    "dense_rows",
    "make_dense_fsa_vec",
    "original_frames",
    "prune_frames",
    "validate_log_probs",
]


@dataclass(frozen=True)
class DenseInput:
    """A ``k2.DenseFsaVec`` together with the order of its utterances.

    Attributes:
      dense_fsa_vec: the ``k2.DenseFsaVec``; its FSA ``i`` is utterance ``order[i]`` of the
        caller's batch. FSAs are sorted by decreasing number of frames, as
        ``k2.intersect_dense`` requires (``k2.intersect_dense_pruned`` accepts any order).
      order: int64 CPU tensor of shape ``(N,)``; ``order[i]`` is the caller's index of FSA ``i``.
      num_frames: int64 CPU tensor of shape ``(N,)``: frames used per utterance, in the
        caller's order (after subsampling and truncation).
      vocab_size: ``V``, the number of classes in ``log_probs``.
    """

    dense_fsa_vec: k2.DenseFsaVec
    order: torch.Tensor
    num_frames: torch.Tensor
    vocab_size: int

    @property
    def inverse_order(self) -> torch.Tensor:
        """int64 CPU tensor ``(N,)``: position in ``dense_fsa_vec`` of the caller's utterance."""
        inv = torch.empty_like(self.order)
        inv[self.order] = torch.arange(self.order.numel(), dtype=self.order.dtype)
        return inv


def validate_log_probs(
    log_probs: torch.Tensor,
    log_probs_lens: torch.Tensor,
    subsampling_factor: int = 1,
    allow_truncate: int = 0,
) -> torch.Tensor:
    """Validate network outputs and their lengths; return the number of frames per utterance.

    Args:
      log_probs: float32 tensor ``(N, T, V)`` (log-softmax outputs or log-likelihoods).
      log_probs_lens: integer tensor ``(N,)``: valid frames of ``log_probs`` per utterance:
        network output frames, after the model's subsampling (its ``encoder_out_lens``).
        With ``subsampling_factor > 1`` they count frames at that many times the rate of
        ``log_probs`` (icefall's supervision segments count feature frames), and
        ``num_frames = log_probs_lens // subsampling_factor``.
      subsampling_factor: ratio between the frame rate of ``log_probs_lens`` and that of
        ``log_probs`` (1: they count frames of ``log_probs``).
      allow_truncate: how many frames ``num_frames`` may exceed ``T`` by; the excess is
        dropped (for models whose subsampling gives slightly fewer frames than ``// factor``).

    Returns:
      int64 CPU tensor ``(N,)`` with the frames to use, each in ``[1, T]``.

    Raises:
      TypeError: wrong type or dtype. ValueError: bad shape, value, NaN or +inf in valid frames.
    """
    _check_log_probs(log_probs, log_probs_lens)
    _check_factors(subsampling_factor, allow_truncate)
    num_frames = _frames_to_use(log_probs_lens, subsampling_factor, log_probs.shape[1],
                                allow_truncate)
    _check_finite(log_probs, num_frames)
    return num_frames


def _check_log_probs(log_probs: torch.Tensor, log_probs_lens: torch.Tensor) -> None:
    """The types, dtypes and shapes of ``log_probs`` and ``log_probs_lens``."""
    if not isinstance(log_probs, torch.Tensor):
        raise TypeError(f"log_probs must be a torch.Tensor, got {type(log_probs).__name__}")
    if log_probs.dtype != torch.float32:
        raise TypeError(f"log_probs must have dtype torch.float32, got {log_probs.dtype}")
    if log_probs.ndim != 3:
        raise ValueError(
            f"log_probs must have shape (N, T, V), got {tuple(log_probs.shape)} "
            f"({log_probs.ndim} dims)"
        )
    n, t, v = log_probs.shape
    if n == 0 or t == 0 or v == 0:
        raise ValueError(f"log_probs must be non-empty, got shape {tuple(log_probs.shape)}")
    if not isinstance(log_probs_lens, torch.Tensor):
        raise TypeError(f"log_probs_lens must be a torch.Tensor, got "
                        f"{type(log_probs_lens).__name__}")
    dtype = log_probs_lens.dtype
    if dtype.is_floating_point or dtype.is_complex or dtype == torch.bool:
        raise TypeError(f"log_probs_lens must have an integer dtype, got {dtype}")
    if log_probs_lens.shape != (n,):
        raise ValueError(
            f"log_probs_lens must have shape (N,) = ({n},) to match log_probs, "
            f"got {tuple(log_probs_lens.shape)}"
        )


def _check_factors(subsampling_factor: int, allow_truncate: int) -> None:
    """The types and ranges of ``subsampling_factor`` and ``allow_truncate``."""
    if isinstance(subsampling_factor, bool) or not isinstance(subsampling_factor, int):
        raise TypeError(f"subsampling_factor must be an int, got {subsampling_factor!r}")
    if subsampling_factor < 1:
        raise ValueError(f"subsampling_factor must be >= 1, got {subsampling_factor}")
    if isinstance(allow_truncate, bool) or not isinstance(allow_truncate, int):
        raise TypeError(f"allow_truncate must be an int, got {allow_truncate!r}")
    if allow_truncate < 0:
        raise ValueError(f"allow_truncate must be >= 0, got {allow_truncate}")


def _frames_to_use(log_probs_lens: torch.Tensor, subsampling_factor: int, t: int,
                   allow_truncate: int) -> torch.Tensor:
    """int64 CPU ``(N,)``: frames per utterance, each at least 1 and clamped to ``T``."""
    lengths_cpu = log_probs_lens.detach().to("cpu", torch.int64)
    num_frames = torch.div(lengths_cpu, subsampling_factor, rounding_mode="floor")
    bad = (num_frames < 1).nonzero().flatten()
    if bad.numel() > 0:
        i = int(bad[0])
        raise ValueError(
            f"log_probs_lens[{i}]={int(lengths_cpu[i])} gives {int(num_frames[i])} frames with "
            f"subsampling_factor={subsampling_factor}; every utterance needs at least 1 frame "
            f"(drop empty utterances before decoding)"
        )
    too_long = (num_frames > t + allow_truncate).nonzero().flatten()
    if too_long.numel() > 0:
        i = int(too_long[0])
        raise ValueError(
            f"log_probs_lens[{i}]={int(lengths_cpu[i])} gives {int(num_frames[i])} frames but "
            f"log_probs has only T={t} frames (allow_truncate={allow_truncate})"
        )
    return num_frames.clamp(max=t)


def _check_finite(log_probs: torch.Tensor, num_frames: torch.Tensor) -> None:
    """No NaN or +inf within the valid frames of ``log_probs``."""
    t = log_probs.shape[1]
    valid = torch.arange(t).unsqueeze(0) < num_frames.unsqueeze(1)  # (N, T) on CPU
    valid = valid.to(log_probs.device)
    # one pass over the data: a frame's maximum is NaN if any entry is NaN, +inf if any is +inf
    frame_max = log_probs.detach().amax(dim=2)  # (N, T)
    bad_values = (torch.isnan(frame_max) | (frame_max == float("inf"))) & valid
    if bool(bad_values.any()):
        i, j = (int(x) for x in bad_values.nonzero()[0])
        raise ValueError(
            f"log_probs contains NaN or +inf at utterance {i}, frame {j} (within log_probs_lens); "
            "-inf is allowed, NaN/+inf are not"
        )


def check_vocab(graph: k2.Fsa, vocab_size: int) -> None:
    """Check that every label of ``graph`` indexes a class of a ``(N, T, V)`` posterior.

    Args:
      graph: decoding graph (Fsa or FsaVec) whose ``labels`` are token ids (``-1`` on final arcs).
      vocab_size: ``V``, the number of classes in ``log_probs``.

    Raises:
      ValueError: if a label is ``>= V`` (e.g. a Kaldi graph still labelled with
      transition ids, or token ids shifted by one).
    """
    if not isinstance(graph, k2.Fsa):
        raise TypeError(f"graph must be a k2.Fsa, got {type(graph).__name__}")
    if graph.num_arcs == 0:
        return
    max_label = _max_label(graph)
    if max_label >= vocab_size:
        raise ValueError(
            f"graph has token id {max_label} but log_probs has only V={vocab_size} classes "
            f"(ids 0..{vocab_size - 1}); the graph and the model's vocabulary do not match"
        )


_MAX_LABELS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _max_label(graph: k2.Fsa) -> int:
    """``int(graph.labels.max())``, computed once per graph and labels version.

    A pass over the labels of a shipped-size HLG (2.6M arcs, a strided view) takes ~5 ms,
    about a third of a one-utterance 1best decode, so it is remembered per graph object (held
    weakly). The entry is keyed on the labels' storage, length and torch version counter: an
    in-place edit (``fsa.labels[i] = x``) or new arcs are checked again. k2's own
    ``fsa.labels = t`` setter writes through another view without bumping that counter, so it
    also drops the entry here via the graph's properties object, which k2 recomputes then
    (the entry holds the old one, so the new one is another object).
    """
    labels = graph.labels
    key = (labels.data_ptr(), labels._version, graph.num_arcs)
    props = graph.__dict__.get("_properties")
    if not isinstance(props, int) or props <= 256:  # CPython shares small ints: no identity
        return int(labels.max())
    cached = _MAX_LABELS.get(graph)
    if cached is not None and cached[0] == key and cached[1] is props:
        return cached[2]
    max_label = int(labels.max())
    _MAX_LABELS[graph] = (key, props, max_label)
    return max_label


def make_dense_fsa_vec(
    log_probs: torch.Tensor,
    log_probs_lens: torch.Tensor,
    subsampling_factor: int = 1,
    allow_truncate: int = 0,
) -> DenseInput:
    """Build a validated ``k2.DenseFsaVec`` from network outputs.

    Args:
      log_probs: float32 tensor ``(N, T, V)``; frames at or beyond an utterance's length are
        ignored. Any device.
      log_probs_lens: integer tensor ``(N,)``: valid frames of ``log_probs`` per utterance
        (see :func:`validate_log_probs`).
      subsampling_factor: frames used are ``log_probs_lens // subsampling_factor``.
      allow_truncate: how many frames the subsampled length may exceed ``T`` by (then cut to T).

    Returns:
      :class:`DenseInput` with the ``k2.DenseFsaVec`` (utterances sorted by decreasing number of
      frames, stable) and the permutation ``order`` back to the caller's indexes.
    """
    num_frames = validate_log_probs(log_probs, log_probs_lens, subsampling_factor, allow_truncate)
    order = torch.sort(num_frames, descending=True, stable=True).indices
    return DenseInput(dense_fsa_vec=dense_rows(log_probs, order, num_frames), order=order,
                      num_frames=num_frames, vocab_size=log_probs.shape[2])


def dense_rows(log_probs: torch.Tensor, rows: torch.Tensor, num_frames: torch.Tensor
               ) -> k2.DenseFsaVec:
    """The ``k2.DenseFsaVec`` of some rows of validated network outputs (no checks: see
    :func:`validate_log_probs`).

    Args:
      log_probs: float32 ``(N, T, V)``.
      rows: int64 CPU ``(M,)``: the rows of ``log_probs`` to take, in the order of the FSAs.
      num_frames: int64 CPU ``(N,)``: frames per row of ``log_probs`` (each in ``[1, T]``).

    Returns:
      ``k2.DenseFsaVec`` whose FSA ``i`` is the first ``num_frames[rows[i]]`` frames of row
      ``rows[i]``.
    """
    segments = torch.stack([rows, torch.zeros_like(rows), num_frames[rows]], dim=1)
    return k2.DenseFsaVec(log_probs, segments.to(torch.int32))


@dataclass(frozen=True)
class PrunedFrames:
    """Network outputs after the opt-in approximations of :func:`prune_frames`.

    Attributes:
      log_probs: float32 ``(N, T', V)`` on the input's device, ``T' <= T``: utterance ``i``'s
        kept frames are ``log_probs[i, :num_frames[i]]``; frames past that are padding.
      num_frames: int64 CPU ``(N,)``: kept frames per utterance (each >= 1).
      kept: int32 ragged ``[utt][kept frame]`` on the input's device: the original index of
        every kept frame, or ``None`` when no frame was skipped (``T' == T``, same indexes).
    """

    log_probs: torch.Tensor
    num_frames: torch.Tensor
    kept: k2.RaggedTensor | None


def prune_frames(
    log_probs: torch.Tensor,
    num_frames: torch.Tensor,
    token_top_k: int | None = None,
    blank_skip_threshold: float | None = None,
    blank_id: int = 0,
) -> PrunedFrames:
    """Approximations that make the search cheaper (both off by default).

    * ``blank_skip_threshold``: a frame whose blank posterior ``exp(log_probs[..., blank_id])``
      exceeds the threshold is dropped when the frame before it is such a frame too, i.e. every
      run of confident blanks shrinks to its first frame. Keeping one frame per run keeps the
      blank that separates two equal tokens (``a _ a`` is not ``a a``); the search then sees
      fewer frames, and a token can no longer start inside a dropped run. Paths lose the
      scores of the dropped frames (at most ``-log(threshold)`` per frame for the paths
      through blank).
    * ``token_top_k``: in every frame, all but the ``token_top_k`` best tokens get ``-inf``,
      so the search never opens a state through an unlikely token (a per-frame token beam,
      like torchaudio's ``beam_size_token``).

    Args:
      log_probs: float32 ``(N, T, V)``; num_frames: int64 CPU ``(N,)`` valid frames (from
        :func:`validate_log_probs`).
      token_top_k: tokens kept per frame (``None``: all).
      blank_skip_threshold: in ``(0, 1]`` (``None``: keep every frame).
      blank_id: the blank token of the CTC outputs.

    Returns:
      :class:`PrunedFrames` (``log_probs`` itself, not a copy, when both are ``None``).
    """
    n, t, v = log_probs.shape
    device = log_probs.device
    if blank_skip_threshold is not None and not 0 <= blank_id < v:
        raise ValueError(f"blank_id must be in [0, {v}) for log_probs with V={v}, "
                         f"got {blank_id}")
    kept = None
    if blank_skip_threshold is not None:
        valid = (torch.arange(t).unsqueeze(0) < num_frames.unsqueeze(1)).to(device)
        confident = (log_probs[:, :, blank_id] > math.log(blank_skip_threshold)) & valid
        after_confident = torch.zeros_like(confident)
        after_confident[:, 1:] = confident[:, :-1]
        keep = valid & ~(confident & after_confident)
        counts = keep.sum(dim=1)
        utt, frame = keep.nonzero(as_tuple=True)
        position = torch.cumsum(keep, dim=1)[utt, frame] - 1
        compact = log_probs.new_zeros(n, int(counts.max()), v)
        compact[utt, position] = log_probs[utt, frame]
        splits = torch.zeros(n + 1, dtype=torch.int32, device=device)
        splits[1:] = torch.cumsum(counts, 0)
        kept = k2.RaggedTensor(k2.ragged.create_ragged_shape2(row_splits=splits),
                               frame.to(torch.int32))
        log_probs, num_frames = compact, counts.to("cpu", torch.int64)
    if token_top_k is not None and token_top_k < v:
        best, best_ids = log_probs.topk(token_top_k, dim=2)
        log_probs = torch.full_like(log_probs, float("-inf")).scatter_(2, best_ids, best)
    return PrunedFrames(log_probs=log_probs, num_frames=num_frames, kept=kept)


def original_frames(frames: torch.Tensor, fsa_of_arc: torch.Tensor, pruned: PrunedFrames,
                    original_num_frames: torch.Tensor) -> torch.Tensor:
    """Map frame indexes of a search on ``pruned`` inputs back to the original frames.

    Args:
      frames: int ``(num_arcs,)``: the frame each arc consumes in the pruned inputs (the
        number of kept frames on final arcs).
      fsa_of_arc: int ``(num_arcs,)``: the utterance (index into ``pruned``) of each arc.
      original_num_frames: int64 ``(N,)``: frames before pruning (for final arcs).

    Returns:
      int32 ``(num_arcs,)`` on ``frames``' device.
    """
    if pruned.kept is None:
        return frames.to(torch.int32)
    device = frames.device
    utt = fsa_of_arc.to(device, torch.int64)
    start = pruned.kept.shape.row_splits(1).to(device, torch.int64)[utt]
    count = pruned.num_frames.to(device)[utt]
    f = frames.to(torch.int64)
    inside = f < count
    index = start + torch.minimum(f, count - 1).clamp(min=0)
    mapped = pruned.kept.values.to(device, torch.int64)[index]
    end = original_num_frames.to(device, torch.int64)[utt]
    return torch.where(inside, mapped, end).to(torch.int32)
