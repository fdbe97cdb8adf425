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

**Endpointing** (a stream of hours: one result per utterance instead of one ever-growing
hypothesis): give :meth:`k2dec.Recognizer.create_stream` an :class:`EndpointConfig`
(Kaldi's / sherpa-onnx's three rules). After each encoder chunk the rules are checked on the
current utterance (its length, and its trailing silence: the frames since the search last
emitted a token); when one fires, the utterance's final result is kept (if it has words)
and the search starts a new utterance, while features and encoder state run on::

    stream = RecognizerStream(recognizer, "mic", endpoint=EndpointConfig())
    for chunk in chunks:
        stream.accept_waveform(chunk, sample_rate=16000)
        for utterance in stream.pop_utterances():   # finished utterances, stream clock
            print(utterance.timestamps[0], utterance.text)
    last = stream.finish()

Memory stays bounded however long the stream runs if finished utterances are popped.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import torch

from ..data import FeatureConfig
from ..job.assets import hypothesis_texts
from ..methods import MethodResult
from ..model.streaming import LOG_EPS, TAIL_PAD_FRAMES
from ..primitives.hypothesis import HypothesisRecord
from ..primitives.sizes import check_float_range
from .inputs import check_sample_rate, waveform_samples
from .result import RecognitionResult

__all__ = ["EndpointConfig", "EndpointRule", "FeatureStream", "RecognizerStream"]


@dataclass(frozen=True)
class EndpointRule:
    """One endpoint rule (Kaldi's ``OnlineEndpointRule``, sherpa-onnx's ``EndpointRule``):
    it fires when the utterance so far has speech (or ``must_contain_nonsilence`` is
    False), at least ``min_trailing_silence`` seconds of trailing silence and is at least
    ``min_utterance_length`` seconds long.

    Attributes:
      must_contain_nonsilence: fire only after the search has emitted a token.
      min_trailing_silence: seconds since the last emitted token (since the utterance's
        start when none), in ``[0, 3600]``.
      min_utterance_length: seconds of the utterance, in ``[0, 86400]``.
    """

    must_contain_nonsilence: bool
    min_trailing_silence: float
    min_utterance_length: float

    def __post_init__(self) -> None:
        if not isinstance(self.must_contain_nonsilence, bool):
            raise TypeError(f"EndpointRule.must_contain_nonsilence must be a bool, got "
                            f"{self.must_contain_nonsilence!r}")
        check_float_range(self, "min_trailing_silence", 0.0, 3600.0, low_open=False)
        check_float_range(self, "min_utterance_length", 0.0, 86400.0, low_open=False)

    def activated(self, contains_nonsilence: bool, trailing_silence: float,
                  utterance_length: float) -> bool:
        """Whether the rule fires (seconds)."""
        return ((contains_nonsilence or not self.must_contain_nonsilence)
                and trailing_silence >= self.min_trailing_silence
                and utterance_length >= self.min_utterance_length)


@dataclass(frozen=True)
class EndpointConfig:
    """The endpoint rules of a stream, with sherpa-onnx's defaults (``EndpointConfig``).

    Attributes:
      rule1: silence without speech (2.4 s of it ends an utterance that has no words, so a
        silent stream does not grow one utterance for ever).
      rule2: silence after speech (1.2 s ends an utterance).
      rule3: the longest utterance (20 s), silence or not.
    """

    rule1: EndpointRule = field(default_factory=lambda: EndpointRule(False, 2.4, 0.0))
    rule2: EndpointRule = field(default_factory=lambda: EndpointRule(True, 1.2, 0.0))
    rule3: EndpointRule = field(default_factory=lambda: EndpointRule(False, 0.0, 20.0))

    def __post_init__(self) -> None:
        for name in ("rule1", "rule2", "rule3"):
            if not isinstance(getattr(self, name), EndpointRule):
                raise TypeError(f"EndpointConfig.{name} must be an EndpointRule, got "
                                f"{type(getattr(self, name)).__name__}")

    def detect(self, num_frames: int, trailing_frames: int, contains_nonsilence: bool,
               frame_shift: float) -> int:
        """The first rule that fires (1, 2 or 3), 0 when none: ``num_frames`` output frames
        in the utterance, the last ``trailing_frames`` of them after its last token, one every
        ``frame_shift`` seconds."""
        length, silence = num_frames * frame_shift, trailing_frames * frame_shift
        for k, rule in enumerate((self.rule1, self.rule2, self.rule3), start=1):
            if rule.activated(contains_nonsilence, silence, length):
                return k
        return 0


def _shifted(record: HypothesisRecord, offset: int) -> HypothesisRecord:
    """``record`` with its frames counted ``offset`` frames later (the stream's clock)."""
    if offset == 0:
        return record
    def move(frames: tuple[int, ...] | None) -> tuple[int, ...] | None:
        return None if frames is None else tuple(x + offset for x in frames)

    return replace(record, token_frames=move(record.token_frames),
                   word_frames=move(record.word_frames))


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
    """Audio decoded while it arrives (see the module docstring): one utterance, or with
    ``endpoint`` one result per utterance; made by :meth:`k2dec.Recognizer.create_stream`
    or directly.

    Args:
      recognizer: a :class:`k2dec.Recognizer` with a streaming model and method.
      name: the result's id (with ``endpoint``: utterance ``k`` is ``"<name>-<k>"``).
      endpoint: the endpoint rules; ``None``: the whole stream is one utterance.

    Raises:
      ValueError: the recognizer's model has no streaming encoder, or its method no
        streaming search.
      TypeError: ``endpoint`` is not an :class:`EndpointConfig`.
    """

    def __init__(self, recognizer: Any, name: str = "stream",
                 endpoint: EndpointConfig | None = None) -> None:
        if endpoint is not None and not isinstance(endpoint, EndpointConfig):
            raise TypeError(f"endpoint must be an EndpointConfig or None, got "
                            f"{type(endpoint).__name__}")
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
        self.endpoint = endpoint
        self._frames = 0  # output frames of the current utterance
        self._offset = 0  # output frames before it
        self._done: list[RecognitionResult] = []
        self._count = 0  # utterances finished

    @property
    def finished(self) -> bool:
        """True after :meth:`finish`."""
        return self._final is not None

    def _decode(self, chunks: list[torch.Tensor]) -> None:
        for enc in chunks:
            lens = torch.tensor([enc.size(1)], dtype=torch.int64, device=enc.device)
            self._search.decode_chunk([self._state], enc, lens)
            self._frames += enc.size(1)
            if self.endpoint is not None:
                self._check_endpoint()

    def _check_endpoint(self) -> None:
        """End the utterance when an endpoint rule fires (module docstring)."""
        (record,) = self._search.records([self._state], final=False)
        frames = record.token_frames or ()
        trailing = self._frames - (frames[-1] + 1) if frames else self._frames
        shift = self._recognizer.model.output_frame_shift
        if not self.endpoint.detect(self._frames, trailing, bool(frames), shift):
            return
        result = self._result(final=True)
        if result.words:
            self._done.append(result)
            self._count += 1
        self._state = self._search.new_stream(self._recognizer.model.device)
        self._offset += self._frames
        self._frames = 0

    @property
    def utterances(self) -> tuple[RecognitionResult, ...]:
        """With ``endpoint``: the finished utterances not yet popped (those with words), in
        order, times in the stream's clock; after :meth:`finish` the last one too."""
        return tuple(self._done)

    def pop_utterances(self) -> list[RecognitionResult]:
        """:attr:`utterances`, forgotten by the stream (what keeps a stream of hours
        bounded)."""
        out, self._done = self._done, []
        return out

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
        name = self.name if self.endpoint is None else f"{self.name}-{self._count}"
        return rec._results(name, _shifted(record, self._offset), words, record.error)

    @property
    def result(self) -> RecognitionResult:
        """The hypothesis so far (partial until :meth:`finish`, then the final one)."""
        return self._final if self._final is not None else self._result(final=False)

    def finish(self) -> RecognitionResult:
        """End the audio: decode the last frames and return the final result (again on later
        calls); with ``endpoint``, the last utterance's. An utterance shorter than one feature
        frame has ``error`` set."""
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
        if self.endpoint is not None and self._final.words:
            self._done.append(self._final)
        return self._final
