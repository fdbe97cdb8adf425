"""FeatureConfig: lhotse's Fbank and kaldi-native-fbank (the implementation sherpa-onnx and
icefall's onnx/jit_pretrained scripts use, through kaldifeat's identical options) agree."""

from __future__ import annotations

import numpy as np
import pytest

from k2dec.data import FeatureConfig

knf = pytest.importorskip("kaldi_native_fbank")


def _knf_features(samples: np.ndarray, cfg: FeatureConfig) -> np.ndarray:
    opts = cfg.apply_to(knf.FbankOptions())
    fbank = knf.OnlineFbank(opts)
    fbank.accept_waveform(cfg.sampling_rate, samples.tolist())
    fbank.input_finished()
    frames = [fbank.get_frame(i) for i in range(fbank.num_frames_ready)]
    return np.stack(frames) if frames else np.zeros((0, cfg.num_mel_bins), np.float32)


@pytest.mark.parametrize("sampling_rate", [16000, 8000])
def test_lhotse_and_kaldi_native_fbank_agree(sampling_rate):
    rng = np.random.default_rng(sampling_rate)
    cfg = FeatureConfig(sampling_rate=sampling_rate)
    shift = sampling_rate // 100
    extractor = cfg.extractor()
    # lengths around half-shift boundaries (where frame counts change), and a long one
    for n in (shift * 3 + shift // 2 - 1, shift * 3 + shift // 2, shift * 10 + 1,
              sampling_rate + 37):
        x = (rng.standard_normal(n) * 0.1).astype(np.float32)
        x[: n // 5] = 0.0  # digital silence: both floor at float32 epsilon
        x[n // 5: n // 4] *= 1e-5  # near-silence
        ours = extractor.extract(x, sampling_rate)
        theirs = _knf_features(x, cfg)
        assert ours.shape == theirs.shape == ((n + shift // 2) // shift, 80)
        np.testing.assert_allclose(ours, theirs, atol=1e-3, rtol=0)


def test_options_differ_where_they_should():
    """The test above can fail: another high_freq changes kaldi-native-fbank's output."""
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(16000) * 0.1).astype(np.float32)
    ours = FeatureConfig().extractor().extract(x, 16000)
    theirs = _knf_features(x, FeatureConfig(high_freq=-200.0))
    assert np.abs(ours - theirs).max() > 0.01


def test_defaults_are_icefalls():
    opts = FeatureConfig().kaldi_options()
    assert opts["frame_opts.dither"] == 0.0
    assert opts["frame_opts.snip_edges"] is False
    assert opts["mel_opts.high_freq"] == -400.0
    assert opts["mel_opts.num_bins"] == 80
    assert opts["frame_opts.samp_freq"] == 16000.0
    applied = FeatureConfig().apply_to(knf.FbankOptions())
    assert applied.frame_opts.dither == 0.0 and applied.mel_opts.num_bins == 80


@pytest.mark.parametrize("bad", [
    {"num_mel_bins": 0}, {"sampling_rate": 0}, {"frame_shift": 0.0},
    {"frame_shift": 0.05, "frame_length": 0.025}, {"dither": -1.0},
    {"high_freq": 9000.0}, {"low_freq": 8000.0}, {"window_type": "kaiser"},
])
def test_bad_values_raise(bad):
    with pytest.raises(ValueError, match=next(iter(bad)).split("_")[0]):
        FeatureConfig(**bad)


def test_override():
    cfg = FeatureConfig().override(num_mel_bins=40, sampling_rate=None)
    assert cfg.num_mel_bins == 40 and cfg.sampling_rate == 16000
    with pytest.raises(ValueError, match="no field"):
        FeatureConfig().override(bins=3)
