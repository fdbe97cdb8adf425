"""What :meth:`k2dec.Recognizer.decode` accepts, turned into cuts with features in memory.

- an audio file path (``str`` / ``os.PathLike``): read by lhotse as ``k2dec decode
  --audio-dir`` reads it (any format and sample rate it reads, channels averaged, resampled
  to the model's rate);
- a waveform: a 1-D float numpy array or torch tensor of samples in ``[-1, 1]`` (or one
  channel as ``[1, S]`` / ``[S, 1]``), with the ``sample_rate`` of the call; resampled with
  lhotse's resampler when the model has another rate;
- a lhotse ``Recording`` (decoded whole, as a cut of it);
- a lhotse ``Cut`` (or a ``CutSet`` as the whole input): its features when it has them
  (they must be the model's: same dimension and frame shift), else its audio, as above. A cut
  with several supervisions is one utterance per supervision (:func:`k2dec.data.utterance_cuts`).

Features are computed with the model's :class:`k2dec.data.FeatureConfig` and kept in memory,
uncompressed (as ``k2dec decode --audio-dir`` stores them).
Malformed inputs raise ``TypeError`` / ``ValueError`` naming the input before anything is
decoded; a recording longer than ``max_duration`` (checked before it is loaded) or shorter
than one feature frame becomes a failed result with the reason, as in a decode job.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from lhotse import CutSet, Recording
from lhotse.augmentation import Resample
from lhotse.cut import Cut, MonoCut
from lhotse.features.base import Features
from lhotse.features.io import MemoryRawWriter
from lhotse.utils import fastcopy

from ..data import FeatureConfig, split_bad_cuts, utterance_cuts, utterance_id
from ..data.audio import read_failure_reason
from ..data.audio_io import (
    AudioLimits,
    check_sample_values,
    id_clashes,
    mono_samples,
    probe_recording,
    too_long,
)

__all__ = ["AudioInput", "PreparedInput", "prepare_inputs", "waveform_samples"]

logger = logging.getLogger(__name__)

#: One input of :meth:`k2dec.Recognizer.decode`.
AudioInput = str | os.PathLike | np.ndarray | torch.Tensor | Recording | Cut


@dataclass(frozen=True)
class PreparedInput:
    """One utterance of the inputs: the cut to decode (``None`` if it failed before) or why
    it cannot be decoded, and the id its result carries."""

    result_id: str
    cut: Cut | None
    error: str = ""


def _items(inputs: Any) -> list[Any]:
    if isinstance(inputs, CutSet):
        return list(inputs)
    if isinstance(inputs, str | os.PathLike | np.ndarray | torch.Tensor | Recording | Cut):
        return [inputs]
    if isinstance(inputs, Sequence):
        return list(inputs)
    raise TypeError(f"inputs must be an audio file path, a waveform (numpy array or torch "
                    f"tensor), a lhotse Cut, a list of these or a CutSet; got "
                    f"{type(inputs).__name__}")


def check_sample_rate(sample_rate: Any) -> int:
    """``sample_rate`` as an int (Hz); ``TypeError`` / ``ValueError`` saying what is wrong
    (outside :class:`~k2dec.data.AudioLimits`' rates: the check ``k2dec decode`` makes of a
    file's header)."""
    if isinstance(sample_rate, bool) or not isinstance(sample_rate, int | np.integer):
        raise TypeError(f"sample_rate must be an int number of samples per second (e.g. "
                        f"16000), got {type(sample_rate).__name__} {sample_rate!r}")
    AudioLimits().check_rate(int(sample_rate), "given as sample_rate",
                             "give the waveforms' own rate in samples per second (e.g. 16000)")
    return int(sample_rate)


def waveform_samples(x: Any, where: str) -> np.ndarray:
    """A waveform as float32 mono samples ``[S]``, checked.

    Raises:
      TypeError: not a numpy array / torch tensor, or integer / complex samples.
      ValueError: more than one channel, no samples, NaN or inf.
    """
    if isinstance(x, torch.Tensor):
        x = x.detach().cpu().numpy()
    if not isinstance(x, np.ndarray):
        raise TypeError(f"{where}: a waveform must be a numpy array or torch tensor, got "
                        f"{type(x).__name__}")
    if not np.issubdtype(x.dtype, np.floating):
        hint = (" (int16 samples: divide by 32768)" if np.issubdtype(x.dtype, np.integer)
                else "")
        raise TypeError(f"{where}: samples must be floats in [-1, 1], got dtype {x.dtype}{hint}")
    if x.ndim == 2 and 1 in x.shape:
        x = x.reshape(-1)
    if x.ndim != 1:
        raise ValueError(f"{where}: a waveform must be one channel of samples, shape [S] (or "
                         f"[1, S]), got shape {tuple(x.shape)}; average the channels first "
                         "(x.mean(axis=0) for [channels, S]) or pass each channel as a waveform")
    if x.size == 0:
        raise ValueError(f"{where}: the waveform is empty (0 samples)")
    try:
        check_sample_values(x, where)
    except ValueError as e:
        raise ValueError(f"{where}: {e}") from None
    return x.astype(np.float32, copy=False)


@functools.lru_cache(maxsize=4)
def _extractor(config: FeatureConfig) -> Any:
    """The lhotse extractor of a feature config (built once: its filterbank is a module)."""
    return config.extractor()


def _too_long(cut_id: str, duration: float, max_duration: float) -> PreparedInput | None:
    """The failure of a recording longer than a batch (its memory grows with the square of
    its length), as a decode job records it; ``None`` if it is not."""
    if duration <= max_duration:
        return None
    return PreparedInput(cut_id, None, too_long(duration, max_duration))


def _features_cut(cut_id: str, samples: np.ndarray, rate: int, config: FeatureConfig,
                  max_duration: float) -> PreparedInput:
    """A cut with in-memory features of mono ``samples`` at ``rate`` (resampled to the
    config's rate), or a failure: longer than ``max_duration`` (before resampling) or
    shorter than one feature frame."""
    failed = _too_long(cut_id, samples.size / rate, max_duration)
    if failed is not None:
        return failed
    target = config.sampling_rate
    if rate != target:
        samples = Resample(rate, target)(samples[None])[0].astype(np.float32, copy=False)
    if samples.size < config.frame_length * target:
        return PreparedInput(cut_id, None, f"too short: {samples.size} samples at {target} "
                             f"Hz, less than one {config.frame_length:g} s feature frame")
    feats = _extractor(config).extract(samples, target)
    features = Features(
        type="kaldi-fbank", num_frames=feats.shape[0], num_features=feats.shape[1],
        frame_shift=config.frame_shift, sampling_rate=target, start=0.0,
        duration=samples.size / target, storage_type=MemoryRawWriter.name, storage_path="",
        storage_key=MemoryRawWriter().write("", feats))
    return PreparedInput(cut_id, MonoCut(id=cut_id, start=0.0, duration=samples.size / target,
                                         channel=0, features=features))


def _file_cut(cut_id: str, path: Path, config: FeatureConfig,
              max_duration: float) -> PreparedInput:
    """An audio file read as ``k2dec decode --audio-dir`` reads it."""
    if not path.is_file():
        raise ValueError(f"{path}: no such audio file" if not path.exists() else
                         f"{path}: not a file (decode a folder with k2dec decode --audio-dir "
                         "or pass its files)")
    try:  # the header's checks of a decode job (rate, truncation, memory) before reading
        rec = probed = probe_recording(path, cut_id, AudioLimits())
        failed = _too_long(cut_id, rec.duration, max_duration)
        if failed is not None:
            return failed
        if rec.sampling_rate != config.sampling_rate:
            rec = rec.resample(config.sampling_rate)
        samples = mono_samples(rec)
    except Exception as e:  # lhotse's backends raise many types; name the file
        raise ValueError(f"{path}: cannot read the audio: {read_failure_reason(e)}") from None
    done = _features_cut(cut_id, waveform_samples(samples, str(path)), config.sampling_rate,
                         config, max_duration)
    if done.cut is None or rec.num_channels != 1:
        return done
    # the file's recording stays with its features: the VAD of a long one reads the file
    return PreparedInput(done.result_id, fastcopy(done.cut, recording=probed))


def _cut_inputs(cut: Cut, config: FeatureConfig, max_duration: float) -> list[PreparedInput]:
    """The utterances of a cut: its features checked against the model's, or computed in
    memory from its audio."""
    if not cut.has_features:
        if not cut.has_recording:
            raise ValueError(f"cut {cut.id!r} has neither features nor a recording")
        try:
            samples = cut.resample(config.sampling_rate).load_audio()
        except Exception as e:  # lhotse's backends raise many types; name the cut
            raise ValueError(f"cut {cut.id!r}: cannot read the audio: "
                             f"{read_failure_reason(e)}") from None
        samples = samples.mean(axis=0) if samples.ndim == 2 else samples
        done = _features_cut(cut.id, waveform_samples(samples, f"cut {cut.id!r}"),
                             config.sampling_rate, config, max_duration)
        if done.cut is None:
            return [done]
        cut = fastcopy(done.cut, supervisions=cut.supervisions)
    elif cut.num_features != config.num_mel_bins or abs(cut.frame_shift
                                                         - config.frame_shift) > 1e-9:
        raise ValueError(f"cut {cut.id!r} has {cut.num_features}-dim features every "
                         f"{cut.frame_shift} s; the model takes {config.num_mel_bins}-dim "
                         f"features every {config.frame_shift} s (drop its features to have "
                         "them computed from its audio)")
    return [PreparedInput(u.id, u) for u in utterance_cuts(CutSet.from_cuts([cut]))]


def _check_file_ids(items: Sequence[Any]) -> None:
    """``ValueError`` naming the paths when two file inputs have one result id (stem)."""
    clashes = id_clashes([x for x in items if isinstance(x, str | os.PathLike)])
    if clashes:
        utt, (first, second, *_) = next(iter(clashes.items()))
        raise ValueError(f"{str(first)!r} and {str(second)!r} have one result id {utt!r} (a "
                         "file's id is its stem, as in k2dec decode --audio-dir): rename one, "
                         "or decode them in separate calls")


def prepare_inputs(inputs: Any, sample_rate: Any, config: FeatureConfig,
                   max_duration: float) -> list[PreparedInput]:
    """The utterances of ``inputs`` (see the module docstring), in order: a file's result id
    is its stem, as ``k2dec decode --audio-dir`` names it (:func:`k2dec.data.utterance_id`:
    ``spk1/utt7.FLAC`` -> ``utt7``), a waveform's its position in ``inputs``, a recording's
    its id, a cut's its utterance ids. ``sample_rate`` is that of the waveforms (files,
    recordings and cuts carry their own).

    Raises:
      TypeError, ValueError: naming the input: an unknown input type, a missing or unreadable
        file, two files with one stem, a malformed waveform, waveforms without a valid
        ``sample_rate``, a cut without usable features or audio.
    """
    items = _items(inputs)
    _check_file_ids(items)
    rate = None
    if any(isinstance(x, np.ndarray | torch.Tensor) for x in items):
        if sample_rate is None:
            raise ValueError("waveform inputs need their sample_rate (e.g. decode(x, "
                             "sample_rate=16000))")
        rate = check_sample_rate(sample_rate)
    out: list[PreparedInput] = []
    for i, x in enumerate(items):
        cut_id = f"k2dec-input-{i}"
        if isinstance(x, str | os.PathLike):
            out.append(_file_cut(cut_id, Path(x), config, max_duration))
            out[-1] = PreparedInput(utterance_id(Path(x)), out[-1].cut, out[-1].error)
        elif isinstance(x, np.ndarray | torch.Tensor):
            samples = waveform_samples(x, f"inputs[{i}]")
            done = _features_cut(cut_id, samples, rate, config, max_duration)
            out.append(PreparedInput(str(i), done.cut, done.error))
        elif isinstance(x, Recording | Cut):
            cut = x.to_cut() if isinstance(x, Recording) else x
            _, bad = split_bad_cuts(CutSet.from_cuts([cut]))  # a malformed cut fails alone
            out += [PreparedInput(cut.id, None, bad[cut.id])] if bad else \
                _cut_inputs(cut, config, max_duration)
        else:
            raise TypeError(f"inputs[{i}]: expected an audio file path, a waveform (numpy "
                            f"array or torch tensor), a lhotse Recording or Cut, got "
                            f"{type(x).__name__}")
    return out
