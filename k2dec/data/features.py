"""80-bin log-mel filterbank features with lhotse, stored lilcom-compressed.

Output layout (icefall's names)::

    <output_dir>/librispeech_cuts_<part>.jsonl.gz     the CutSet, features attached
    <output_dir>/librispeech_feats_<part>/            lilcom-chunky feature archives

:class:`FeatureConfig` holds the filterbank settings a model was trained with. Its defaults
are icefall's: every icefall recipe trains on lhotse's ``Fbank`` with 80 bins, and its
``jit_pretrained.py`` / ``onnx_pretrained.py`` (and sherpa-onnx) compute the same features with
kaldifeat / kaldi-native-fbank options ``dither=0``, ``snip_edges=False``,
``high_freq=-400``, ``num_bins=80`` at the model's sample rate.

Equivalence of the two implementations (``tests/data/test_feature_config.py`` checks it on
random signals at 8 and 16 kHz): lhotse's ``Fbank(FeatureConfig().lhotse_config())`` and
kaldi-native-fbank with ``FeatureConfig().apply_to(FbankOptions())`` give the same number of
frames (``(num_samples + shift / 2) // shift``) and values within 1e-3 absolute (float32 FFT
rounding; typically 1e-4). Both floor mel energies at float32 epsilon before the log (digital
silence reads -15.94 in both), both reflect the signal at the edges for ``snip_edges=False``.
What differs: lhotse raises on a signal shorter than half a window (< 200 samples at 16 kHz)
where Kaldi returns zero or one frame (no model decodes such a signal), and lhotse defaults
``dither`` to 0 where Kaldi/kaldifeat/kaldi-native-fbank default to 1 / 0.00003 (the
FeatureConfig sets it explicitly for both).
"""

from __future__ import annotations

import functools
import logging
import math
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from lhotse import CutSet, Fbank, FbankConfig, LilcomChunkyWriter, RecordingSet, SupervisionSet

from .manifests import MANIFEST_PREFIX, manifest_path

__all__ = ["NUM_MEL_BINS", "FeatureConfig", "compute_fbank", "frame_energies", "manifest_parts",
           "silence_energy"]

logger = logging.getLogger(__name__)

NUM_MEL_BINS = 80
"""Filterbank size of the features k2dec computes (icefall's LibriSpeech recipes use 80)."""

_WINDOWS = ("povey", "hamming", "hanning", "rectangular", "blackman")


def make_fbank(config: FbankConfig) -> Fbank:
    """lhotse's ``Fbank`` with ``config``. Under numpy 2 building its mel banks warns
    (``np.log`` of a torch tensor: torch's ``__array_wrap__`` lacks numpy 2's arguments), a
    DeprecationWarning inside lhotse that users cannot act on: it is not shown."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="__array_wrap__ must accept context",
                                category=DeprecationWarning)
        return Fbank(config)


@dataclass(frozen=True)
class FeatureConfig:
    """Kaldi-compatible log-mel filterbank settings (defaults: icefall's).

    Attributes:
      num_mel_bins: filterbank channels ``F`` (80 in every icefall LibriSpeech recipe).
      sampling_rate: the model's sample rate in Hz; audio at another rate is resampled.
      frame_length, frame_shift: window and hop in seconds (25 ms, 10 ms: 100 frames/s).
      dither: Gaussian noise added to the samples (0: deterministic, as icefall decodes).
      snip_edges: False: frames centred on multiples of the shift, edges reflected.
      low_freq, high_freq: mel range in Hz; ``high_freq <= 0`` is an offset from Nyquist
        (icefall: -400, i.e. 7600 Hz at 16 kHz).
      preemph_coeff, remove_dc_offset, window_type, round_to_power_of_two: Kaldi's frame
        options (its defaults).
    """

    num_mel_bins: int = NUM_MEL_BINS
    sampling_rate: int = 16000
    frame_length: float = 0.025
    frame_shift: float = 0.01
    dither: float = 0.0
    snip_edges: bool = False
    low_freq: float = 20.0
    high_freq: float = -400.0
    preemph_coeff: float = 0.97
    remove_dc_offset: bool = True
    window_type: str = "povey"
    round_to_power_of_two: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.num_mel_bins, int) or self.num_mel_bins < 1:
            raise ValueError(f"num_mel_bins must be an int >= 1, got {self.num_mel_bins!r}")
        if not isinstance(self.sampling_rate, int) or self.sampling_rate < 1:
            raise ValueError(f"sampling_rate must be an int >= 1, got {self.sampling_rate!r}")
        if not 0 < self.frame_shift <= self.frame_length:
            raise ValueError(f"need 0 < frame_shift <= frame_length, got frame_shift="
                             f"{self.frame_shift}, frame_length={self.frame_length}")
        if self.dither < 0:
            raise ValueError(f"dither must be >= 0, got {self.dither}")
        nyquist = self.sampling_rate / 2
        high = self.high_freq if self.high_freq > 0 else nyquist + self.high_freq
        if not 0 <= self.low_freq < high <= nyquist:
            raise ValueError(f"need 0 <= low_freq < high_freq <= {nyquist} Hz (Nyquist), got "
                             f"low_freq={self.low_freq}, high_freq={self.high_freq}")
        if self.window_type not in _WINDOWS:
            raise ValueError(f"window_type must be one of {_WINDOWS}, got {self.window_type!r}")

    @property
    def frames_per_second(self) -> float:
        return 1.0 / self.frame_shift

    def num_frames(self, num_samples: int) -> int:
        """Feature frames of ``num_samples`` samples at :attr:`sampling_rate` (what lhotse's
        and Kaldi's fbank give): ``(num_samples + shift // 2) // shift`` with ``snip_edges``
        False, ``1 + (num_samples - window) // shift`` (at least 0) with it True, where
        ``shift`` and ``window`` are :attr:`frame_shift` and :attr:`frame_length` in samples."""
        if isinstance(num_samples, bool) or not isinstance(num_samples, int) or num_samples < 0:
            raise ValueError(f"num_samples must be an int >= 0, got {num_samples!r}")
        shift = int(self.frame_shift * self.sampling_rate)
        window = int(self.frame_length * self.sampling_rate)
        if self.snip_edges:
            return 0 if num_samples < window else 1 + (num_samples - window) // shift
        return (num_samples + shift // 2) // shift

    def lhotse_config(self) -> FbankConfig:
        """The same settings as lhotse's :class:`lhotse.FbankConfig` (what k2dec extracts with)."""
        return FbankConfig(
            sampling_rate=self.sampling_rate, frame_length=self.frame_length,
            frame_shift=self.frame_shift, round_to_power_of_two=self.round_to_power_of_two,
            remove_dc_offset=self.remove_dc_offset, preemph_coeff=self.preemph_coeff,
            window_type=self.window_type, dither=self.dither, snip_edges=self.snip_edges,
            low_freq=self.low_freq, high_freq=self.high_freq, num_filters=self.num_mel_bins,
        )

    def extractor(self) -> Fbank:
        """A lhotse ``Fbank`` extractor with these settings."""
        return make_fbank(self.lhotse_config())

    def kaldi_options(self) -> dict[str, Any]:
        """The same settings under kaldifeat's / kaldi-native-fbank's ``FbankOptions`` names
        (``"frame_opts.dither"``, ``"mel_opts.num_bins"``, ...)."""
        return {
            "frame_opts.samp_freq": float(self.sampling_rate),
            "frame_opts.frame_length_ms": self.frame_length * 1000.0,
            "frame_opts.frame_shift_ms": self.frame_shift * 1000.0,
            "frame_opts.dither": self.dither,
            "frame_opts.snip_edges": self.snip_edges,
            "frame_opts.preemph_coeff": self.preemph_coeff,
            "frame_opts.remove_dc_offset": self.remove_dc_offset,
            "frame_opts.window_type": self.window_type,
            "frame_opts.round_to_power_of_two": self.round_to_power_of_two,
            "mel_opts.num_bins": self.num_mel_bins,
            "mel_opts.low_freq": self.low_freq,
            "mel_opts.high_freq": self.high_freq,
            "use_energy": False,
            "use_log_fbank": True,
            "use_power": True,
        }

    def apply_to(self, opts: Any) -> Any:
        """Set :meth:`kaldi_options` on a ``kaldifeat.FbankOptions`` or
        ``kaldi_native_fbank.FbankOptions`` object (in place) and return it."""
        for key, value in self.kaldi_options().items():
            target = opts
            *path, name = key.split(".")
            for part in path:
                target = getattr(target, part)
            setattr(target, name, value)
        return opts

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def override(self, **changes: Any) -> FeatureConfig:
        """A copy with ``changes`` (field names; ``None`` values are ignored)."""
        names = {f.name for f in fields(self)}
        unknown = sorted(set(changes) - names)
        if unknown:
            raise ValueError(f"FeatureConfig has no field(s) {unknown} (fields: "
                             f"{', '.join(sorted(names))})")
        return replace(self, **{k: v for k, v in changes.items() if v is not None})


def frame_energies(features: torch.Tensor) -> torch.Tensor:
    """Each frame's energy as a log-mel filterbank sees it: the log of the summed mel
    energies (``logsumexp`` over the last axis of log-mel features ``[..., F]``), float32
    ``[...]``. It grows by ``ln 10`` per 10 dB of signal level."""
    return torch.logsumexp(features.float(), dim=-1)


@functools.lru_cache(maxsize=16)
def silence_energy(config: FeatureConfig, level_db: float) -> float:
    """The frame energy (:func:`frame_energies`) of white noise at ``level_db`` dBFS RMS
    (samples in ``[-1, 1]``, as lhotse reads audio) in features computed with ``config``:
    the threshold below which a decode job takes an utterance as silent
    (:attr:`k2dec.job.DecodeConfig.silence_db`). Speech, whose energy is mostly below 1 kHz,
    reaches it with its loudest frame at a higher RMS than white noise: about 7 dB higher for
    a shipped test utterance with the default 80-bin 16 kHz features (silent below -53 dBFS
    RMS at a -60 dBFS threshold). Deterministic (a fixed seed)."""
    if not math.isfinite(level_db):
        raise ValueError(f"level_db must be finite, got {level_db!r}")
    rate = config.sampling_rate
    noise = np.random.default_rng(0).standard_normal(rate).astype(np.float32)
    feats = config.extractor().extract(noise * np.float32(10 ** (level_db / 20)), rate)
    return float(frame_energies(torch.from_numpy(feats)).mean())


def manifest_parts(manifest_dir: str | Path) -> list[str]:
    """The parts that have both recording and supervision manifests in ``manifest_dir``."""
    manifest_dir = Path(manifest_dir)
    head = f"{MANIFEST_PREFIX}_recordings_"
    parts = []
    for p in sorted(manifest_dir.glob(f"{head}*.jsonl.gz")):
        part = p.name[len(head):-len(".jsonl.gz")]
        if manifest_path(manifest_dir, "supervisions", part).is_file():
            parts.append(part)
    return parts


def compute_fbank(
    manifest_dir: str | Path,
    output_dir: str | Path | None = None,
    dataset_parts: Sequence[str] | None = None,
    num_mel_bins: int = NUM_MEL_BINS,
    num_jobs: int = 1,
    progress: bool = True,
) -> dict[str, CutSet]:
    """Compute fbank features for each part and write a CutSet manifest per part.

    Idempotent: a part whose cuts manifest exists is loaded, not recomputed. One cut per
    recording (a LibriSpeech recording is one utterance), as in icefall.

    Args:
      manifest_dir: where :func:`k2dec.data.prepare_manifests` wrote the recordings and
        supervisions.
      output_dir: where cuts and features go; defaults to ``manifest_dir``.
      dataset_parts: parts to process; ``None`` means every part with manifests.
      num_mel_bins: filterbank size (80, as in icefall's LibriSpeech recipes); the other
        settings are :class:`FeatureConfig`'s defaults.
      num_jobs: extraction processes (1 runs in this process).
      progress: show lhotse's progress bar.

    Returns:
      ``{part: CutSet}``, features of shape ``[num_frames, num_mel_bins]`` (float32, 100 frames
      per second) attached to each cut.

    Raises:
      ValueError: no such directory, no parts, a requested part without manifests, or
        ``num_mel_bins`` / ``num_jobs`` < 1.
    """
    manifest_dir = Path(manifest_dir)
    if not manifest_dir.is_dir():
        raise ValueError(f"manifest_dir: no such directory: {manifest_dir}")
    if num_mel_bins < 1:
        raise ValueError(f"num_mel_bins must be >= 1, got {num_mel_bins}")
    if num_jobs < 1:
        raise ValueError(f"num_jobs must be >= 1, got {num_jobs}")
    output_dir = manifest_dir if output_dir is None else Path(output_dir)
    parts = _requested_parts(manifest_dir, dataset_parts)
    output_dir.mkdir(parents=True, exist_ok=True)
    extractor = FeatureConfig(num_mel_bins=num_mel_bins).extractor()
    out = {}
    for part in parts:
        cuts_path = manifest_path(output_dir, "cuts", part)
        if cuts_path.is_file():
            logger.info("%s: %s exists, skipping", part, cuts_path)
            out[part] = CutSet.from_file(cuts_path)
            continue
        out[part] = _compute_part(part, manifest_dir, output_dir, extractor, num_jobs,
                                  progress)
    return out


def _requested_parts(manifest_dir: Path, dataset_parts: Sequence[str] | None) -> list[str]:
    """The parts to process (all with manifests by default), each checked to have them."""
    available = manifest_parts(manifest_dir)
    parts = available if dataset_parts is None else list(dataset_parts)
    missing = [p for p in parts if p not in available]
    if missing or not parts:
        raise ValueError(
            f"dataset_parts {missing or parts} have no manifests in {manifest_dir} "
            f"(found: {available})")
    return parts


def _compute_part(part: str, manifest_dir: Path, output_dir: Path, extractor: Fbank,
                  num_jobs: int, progress: bool) -> CutSet:
    """The cuts of one part with their features, written to its cuts manifest."""
    cuts_path = manifest_path(output_dir, "cuts", part)
    logger.info("%s: computing fbank", part)
    recordings = RecordingSet.from_file(manifest_path(manifest_dir, "recordings", part))
    supervisions = SupervisionSet.from_file(manifest_path(manifest_dir, "supervisions", part))
    cuts = CutSet.from_manifests(recordings=recordings, supervisions=supervisions)
    cuts = cuts.compute_and_store_features(
        extractor=extractor,
        storage_path=output_dir / f"{MANIFEST_PREFIX}_feats_{part}",
        num_jobs=num_jobs,
        storage_type=LilcomChunkyWriter,
        progress_bar=progress,
    )
    # Write to a temporary name first: an interrupted run must not look finished.
    partial = cuts_path.with_name("partial-" + cuts_path.name)
    cuts.to_file(partial)
    partial.replace(cuts_path)
    return cuts
