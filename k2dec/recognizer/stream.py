""":class:`RecognizerStream`: decode one utterance while its audio arrives.

Protocol (as sherpa-onnx's online streams)::

    stream = recognizer.create_stream()
    for chunk in chunks:                       # float samples at the model's rate
        stream.accept_waveform(chunk, sample_rate=16000)
        print(stream.result.text)              # partial result
    final = stream.finish()                    # the last frames; the final result

Each piece of audio goes through three stages as soon as it can:

- features: the fbank frames whose windows lie inside the audio received so far, computed
  by the model's lhotse extractor on the samples they need (the last frames, whose windows
  reach past the end of the audio, are computed by :meth:`RecognizerStream.finish`); the
  frames are those of the offline extraction of the whole recording up to float rounding of
  the batched FFT (``~5e-7``);
- encoder: the streaming export's chunks as :mod:`k2dec.model.streaming` runs them offline
  (windows of ``2 * chunk_size + pad_length`` frames advancing by ``2 * chunk_size``; at the
  end 30 frames of ``log(1e-10)`` and a padded last window);
- search: the method's streaming search (:mod:`k2dec.methods.streaming`) over every output
  frame of every chunk.

So the final result is the offline result of the same model and method (same tokens and
frames; scores equal up to float rounding), without the token confidences the offline methods
compute from the whole encoder output. Memory per stream is bounded: a few hundred samples and
one window of frames are kept, plus the search's hypotheses.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ..data import FeatureConfig
from ..job.assets import hypothesis_texts
from ..methods import MethodResult
from ..model.streaming import LOG_EPS, TAIL_PAD_FRAMES
from .inputs import check_sample_rate, waveform_samples
from .result import RecognitionResult

__all__ = ["FeatureStream", "RecognizerStream"]


class FeatureStream:
    """Fbank frames of a waveform that arrives in pieces (``snip_edges=False``).

    Frame ``k`` covers samples ``[k * shift - p, k * shift - p + window)`` with ``p = (window
    - shift) // 2`` (reflected at the start); it is computed once those samples have arrived
    (:meth:`accept`), the last ones at :meth:`finish` with the reflection at the end, from
    the samples after frame ``k - 2`` (the first frame of such a slice, whose window is
    reflected at the slice start, is dropped).
    """

    def __init__(self, config: FeatureConfig) -> None:
        if config.snip_edges:
            raise ValueError("streams compute features with snip_edges=False (icefall's); "
                             "this model's FeatureConfig has snip_edges=True")
        self.config = config
        self.extractor = config.extractor()
        self.shift = int(config.frame_shift * config.sampling_rate)
        self.window = int(config.frame_length * config.sampling_rate)
        self.left = (self.window - self.shift) // 2
        self.samples = np.zeros(0, dtype=np.float32)  # the samples from `offset` on
        self.offset = 0
        self.num_samples = 0
        self.emitted = 0

    def _frames(self, final: bool) -> np.ndarray:
        start = max(0, (self.emitted - 1) * self.shift)
        x = self.samples[start - self.offset:]
        if final:
            count = self.config.num_frames(self.num_samples) - self.emitted
        else:
            reach = self.window - self.left  # samples a frame needs after k * shift
            ready = (self.num_samples - reach) // self.shift + 1 if self.num_samples >= reach \
                else 0
            count = ready - self.emitted
        if count <= 0:
            return np.zeros((0, self.config.num_mel_bins), dtype=np.float32)
        skip = 1 if self.emitted > 0 else 0
        feats = self.extractor.extract(x, self.config.sampling_rate)[skip: skip + count]
        self.emitted += count
        keep = max(0, (self.emitted - 1) * self.shift)
        self.samples = self.samples[keep - self.offset:]
        self.offset = keep
        return feats

    def accept(self, samples: np.ndarray) -> np.ndarray:
        """Append float32 ``samples`` ``[S]``; the frames now complete, float32 ``[K, F]``."""
        self.samples = np.concatenate([self.samples, samples])
        self.num_samples += samples.size
        return self._frames(final=False)

    def finish(self) -> np.ndarray:
        """The remaining frames ``[K, F]`` (the audio has ended)."""
        return self._frames(final=True)


class _EncoderStream:
    """Feature frames -> the streaming export's encoder output, chunk by chunk, as
    :meth:`k2dec.model.streaming.TorchScriptStreamingEncoder.chunks` runs them."""

    def __init__(self, encoder: Any, num_mel_bins: int, device: torch.device) -> None:
        self.encoder = encoder
        self.device = device
        self.states = encoder.init_states(1, device)
        self.buffer = torch.zeros(0, num_mel_bins, device=device)

    def _run(self, frames: int) -> torch.Tensor:
        x = self.buffer[: self.encoder.window]
        if x.size(0) < self.encoder.window:
            pad = x.new_full((self.encoder.window - x.size(0), x.size(1)), LOG_EPS)
            x = torch.cat([x, pad])
        lens = torch.tensor([frames], dtype=torch.int64, device=self.device)
        with torch.no_grad():
            enc, _, self.states = self.encoder.encode_chunk(x.unsqueeze(0), lens, self.states)
        self.buffer = self.buffer[self.encoder.chunk_length:]
        return enc

    def accept(self, feats: torch.Tensor) -> list[torch.Tensor]:
        """Encoder output ``[1, T', C]`` of every window the frames complete."""
        self.buffer = torch.cat([self.buffer, feats.to(self.device)])
        out = []
        while self.buffer.size(0) >= self.encoder.window:
            out.append(self._run(self.encoder.window))
        return out

    def finish(self) -> list[torch.Tensor]:
        """The tail padding and the remaining windows."""
        pad = self.buffer.new_full((TAIL_PAD_FRAMES, self.buffer.size(1)), LOG_EPS)
        self.buffer = torch.cat([self.buffer, pad])
        out = []
        while self.buffer.size(0) > 0:
            out.append(self._run(min(self.encoder.window, self.buffer.size(0))))
        return out


class RecognizerStream:
    """One utterance decoded while its audio arrives (see the module docstring); made by
    :meth:`k2dec.Recognizer.create_stream`.

    Raises:
      ValueError: the recognizer's model has no streaming encoder, or its method no
        streaming search.
    """

    def __init__(self, recognizer: Any, name: str = "stream") -> None:
        model, method = recognizer.model, recognizer.run.method
        if model.streaming_encoder is None:
            raise ValueError(f"streams need a streaming model (a causal zipformer TorchScript "
                             f"export, jit_script_chunk_*.pt); this one needs whole "
                             f"utterances ({model.describe()}): use decode()")
        if method.streaming is None:
            raise ValueError(f"method {method.name!r} has no streaming search; streams decode "
                             "with greedy_search, modified_beam_search or fast_beam_search")
        self.name = name
        self._recognizer = recognizer
        device = model.device
        self._features = FeatureStream(model.feature_config)
        self._encoder = _EncoderStream(model.streaming_encoder,
                                       model.feature_config.num_mel_bins, device)
        self._search = method.streaming(model.transducer, recognizer.assets.resources,
                                        recognizer.run.config, device)
        self._state = self._search.new_stream(device)
        self._final: RecognitionResult | None = None

    @property
    def finished(self) -> bool:
        """True after :meth:`finish`."""
        return self._final is not None

    def _decode(self, chunks: list[torch.Tensor]) -> None:
        for enc in chunks:
            lens = torch.tensor([enc.size(1)], dtype=torch.int64, device=enc.device)
            self._search.decode_chunk([self._state], enc, lens)

    def accept_waveform(self, samples: Any, sample_rate: int) -> None:
        """Decode the next piece of audio: float samples ``[S]`` (numpy or torch) in ``[-1,
        1]`` at the model's sample rate (``model.feature_config.sampling_rate``).

        Raises:
          TypeError, ValueError: a malformed piece, another sample rate, or a finished
            stream.
        """
        if self.finished:
            raise ValueError(f"stream {self.name!r} is finished; create a new stream")
        rate = check_sample_rate(sample_rate)
        expected = self._features.config.sampling_rate
        if rate != expected:
            raise ValueError(f"stream {self.name!r}: audio at {rate} Hz, the model takes "
                             f"{expected} Hz; resample it first (e.g. "
                             "torchaudio.functional.resample)")
        x = waveform_samples(samples, f"stream {self.name!r}")
        feats = torch.from_numpy(self._features.accept(x))
        self._decode(self._encoder.accept(feats))

    def _result(self, final: bool) -> RecognitionResult:
        (record,) = self._search.records([self._state], final=final)
        rec = self._recognizer
        key = rec.run.method.name
        (words,) = hypothesis_texts(MethodResult(key, (record,), rec.run.config), rec.assets)
        return rec._results(self.name, record, words, record.error)

    @property
    def result(self) -> RecognitionResult:
        """The hypothesis so far (partial until :meth:`finish`, then the final one)."""
        return self._final if self._final is not None else self._result(final=False)

    def finish(self) -> RecognitionResult:
        """End the audio: decode the last frames and return the final result (again on later
        calls). An utterance shorter than one feature frame has ``error`` set."""
        if self._final is not None:
            return self._final
        cfg = self._features.config
        if self._features.num_samples < cfg.frame_length * cfg.sampling_rate:
            error = (f"too short: {self._features.num_samples} samples at "
                     f"{cfg.sampling_rate} Hz, less than one {cfg.frame_length:g} s feature "
                     "frame")
            self._final = self._recognizer._results(self.name, None, [], error)
            return self._final
        self._decode(self._encoder.accept(torch.from_numpy(self._features.finish())))
        self._decode(self._encoder.finish())
        self._final = self._result(final=True)
        return self._final
