"""Batches of precomputed features for training and decoding (lhotse sampler + dataset)."""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import torch
from lhotse import CutSet
from lhotse.dataset import (
    DynamicBucketingSampler,
    K2SpeechRecognitionDataset,
    SimpleCutSampler,
    SpecAugment,
)
from lhotse.dataset.input_strategies import PrecomputedFeatures

__all__ = ["SpecAugmentConfig", "make_dataloader", "make_sampler"]


@dataclass(frozen=True)
class SpecAugmentConfig:
    """SpecAugment settings (icefall's LibriSpeech defaults)."""

    time_warp_factor: int = 80
    num_feature_masks: int = 2
    features_mask_size: int = 27
    num_frame_masks: int = 10
    frames_mask_size: int = 100
    max_frames_mask_fraction: float = 0.15
    p: float = 0.9


def make_sampler(
    cuts: CutSet,
    max_duration: float,
    shuffle: bool,
    num_buckets: int = 30,
    drop_last: bool = False,
    seed: int = 0,
    world_size: int | None = None,
    rank: int | None = None,
) -> SimpleCutSampler | DynamicBucketingSampler:
    """The lhotse sampler of :func:`make_dataloader`: batches of at most ``max_duration``
    seconds of cuts of similar duration (``DynamicBucketingSampler``; a ``SimpleCutSampler`` in
    the given order when there are fewer cuts than buckets). Its batches depend only on the
    cuts, their order and the arguments.

    Raises:
      TypeError: if ``cuts`` is not a CutSet.
      ValueError: if ``max_duration`` <= 0 or ``num_buckets`` < 2.
    """
    if not isinstance(cuts, CutSet):
        raise TypeError(f"cuts must be a lhotse CutSet, got {type(cuts).__name__}")
    if not max_duration > 0:
        raise ValueError(f"max_duration must be > 0 seconds, got {max_duration}")
    if num_buckets < 2:
        raise ValueError(f"num_buckets must be >= 2 (lhotse's bucketing needs two), got "
                         f"{num_buckets}")
    if not cuts.is_lazy and len(cuts) < num_buckets:
        # too few cuts to bucket (lhotse asserts num_buckets <= len(cuts)): one plain batch
        # stream in the given order, or shuffled
        return SimpleCutSampler(cuts, max_duration=max_duration, shuffle=shuffle,
                                drop_last=drop_last, seed=seed, world_size=world_size, rank=rank)
    with warnings.catch_warnings():
        # lhotse warns that an eager CutSet brings no memory benefit; bucketing by duration
        # still cuts padding, which is what we use it for
        warnings.filterwarnings("ignore", message=".*eagerly read CutSet", category=UserWarning)
        return DynamicBucketingSampler(cuts, max_duration=max_duration, shuffle=shuffle,
                                       num_buckets=num_buckets, drop_last=drop_last, seed=seed,
                                       world_size=world_size, rank=rank)


def make_dataloader(
    cuts: CutSet,
    max_duration: float,
    shuffle: bool,
    num_buckets: int = 30,
    spec_augment: SpecAugmentConfig | None = None,
    drop_last: bool = False,
    num_workers: int = 0,
    seed: int = 0,
    world_size: int | None = None,
    rank: int | None = None,
) -> torch.utils.data.DataLoader:
    """A DataLoader over ``cuts`` that yields icefall-style batches.

    Sampling: lhotse ``DynamicBucketingSampler`` (cuts of similar duration batched together, at most
    ``max_duration`` seconds of audio per batch). Dataset: lhotse ``K2SpeechRecognitionDataset``
    with precomputed features, so the cuts must carry features (:func:`k2dec.data.compute_fbank`).

    Each batch is a dict:

    - ``"inputs"``: float32 ``[N, T, F]``, features padded to the longest cut (``F`` = 80 for
      :func:`compute_fbank`'s default);
    - ``"supervisions"``: a dict with ``"sequence_idx"`` (int ``[N]``, row in ``inputs``),
      ``"start_frame"`` and ``"num_frames"`` (int ``[N]``), ``"text"`` (list of ``N`` str) and
      ``"cut"`` (list of ``N`` lhotse cuts, for their ids). Rows are sorted by decreasing
      ``num_frames``.

    Args:
      cuts: cuts with features.
      max_duration: seconds of audio per batch (> 0).
      shuffle: shuffle cuts (training) or keep their order within buckets (decoding).
      num_buckets: duration buckets of the sampler (at least 2).
      spec_augment: apply SpecAugment with these settings (training only); ``None`` = off.
      drop_last: drop the last, partial batch.
      num_workers: DataLoader worker processes (0 = load in this process).
      seed: sampler seed (shuffling is deterministic given it).
      world_size: number of ranks sharing the data (``None``: from torch.distributed or 1).
      rank: this rank (``None``: from torch.distributed or 0).

    Raises:
      TypeError: if ``cuts`` is not a CutSet.
      ValueError: if ``max_duration`` <= 0, ``num_buckets`` < 2, ``num_workers`` < 0, or a cut
        has no features.
    """
    if num_workers < 0:
        raise ValueError(f"num_workers must be >= 0, got {num_workers}")
    sampler = make_sampler(cuts, max_duration, shuffle, num_buckets=num_buckets,
                           drop_last=drop_last, seed=seed, world_size=world_size, rank=rank)
    _check_features(cuts)
    input_transforms = [] if spec_augment is None else [_spec_augment(spec_augment)]
    dataset = K2SpeechRecognitionDataset(return_cuts=True, input_transforms=input_transforms,
                                         input_strategy=PrecomputedFeatures())
    return torch.utils.data.DataLoader(dataset, sampler=sampler, batch_size=None,
                                       num_workers=num_workers, persistent_workers=False)


def _check_features(cuts: CutSet) -> None:
    """The first cut has precomputed features."""
    first = next(iter(cuts), None)
    if first is not None and not first.has_features:
        raise ValueError(
            f"cuts must have precomputed features (cut {first.id} has none); "
            "run k2dec.data.compute_fbank first")


def _spec_augment(config: SpecAugmentConfig) -> SpecAugment:
    """lhotse's SpecAugment transform with ``config``'s settings."""
    return SpecAugment(
        time_warp_factor=config.time_warp_factor,
        num_feature_masks=config.num_feature_masks,
        features_mask_size=config.features_mask_size,
        num_frame_masks=config.num_frame_masks,
        frames_mask_size=config.frames_mask_size,
        max_frames_mask_fraction=config.max_frames_mask_fraction,
        p=config.p,
    )
