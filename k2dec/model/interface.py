"""One interface for every acoustic model k2dec decodes with.

An :class:`AcousticModel` turns a padded batch of features into an :class:`EncoderOutput`
(encoder frames, CTC log-probs, attention memory: whichever the model has) and hands out the
networks the searches drive: ``transducer`` (an object with icefall's ``.decoder`` /
``.joiner``) and ``attention_decoder`` (:class:`k2dec.aed.AttentionDecoder`). What a model
can decode follows from what it has: ``capabilities`` is the set of method families
(:class:`k2dec.primitives.family.Family`) it supports, and :func:`k2dec.methods.supported_methods`
lists the named methods. Decode code asks only these questions, never which kind of model it holds.

Implementations: k2dec's own :class:`k2dec.model.JointModel`, icefall TorchScript exports
(:class:`k2dec.model.IcefallTorchScriptModel`) and sherpa-onnx style ONNX exports
(:class:`k2dec.model.OnnxTransducerModel`, :class:`k2dec.model.OnnxCtcModel`);
:func:`k2dec.model.load_model` picks one from a path.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from ..data.features import FeatureConfig
from ..lang.symbols import disambig_ids
from ..primitives.family import Family

if TYPE_CHECKING:
    import k2

__all__ = [
    "AcousticModel",
    "EncoderOutput",
    "check_features",
    "normalized_log_probs",
    "token_vocab_size",
]


@dataclass
class EncoderOutput:
    """What one forward pass of an acoustic model gives, on the features' device.

    Attributes:
      encoder_out: float ``[N, T', C]``: the transducer encoder output (what the joiner's
        ``encoder_proj`` takes; for an ONNX export, already projected) or, for a CTC-only
        model, the encoder's last hidden layer (the log-probs for an ONNX CTC export,
        which has no other output).
      encoder_out_lens: int64 ``[N]`` valid frames of ``encoder_out`` and ``ctc_log_probs``.
      ctc_log_probs: float32 ``[N, T', V]`` log-softmax of the CTC head, ``None`` without one.
      memory: float ``[N, T'', C']`` what the attention decoder attends to, ``None``
        without an attention decoder.
      memory_lens: int64 ``[N]`` valid frames of ``memory``.
    """

    encoder_out: torch.Tensor
    encoder_out_lens: torch.Tensor
    ctc_log_probs: torch.Tensor | None = None
    memory: torch.Tensor | None = None
    memory_lens: torch.Tensor | None = None


def check_features(features: Any, feature_lens: Any, num_mel_bins: int | None
                   ) -> torch.Tensor:
    """Validate a padded feature batch; return the lengths as int64 on the features' device.

    Raises:
      TypeError: not tensors, or of the wrong dtypes.
      ValueError: wrong shapes, lengths out of ``[1, T]``, non-finite values, or a feature
        dimension other than ``num_mel_bins`` (when given).
    """
    if not isinstance(features, torch.Tensor):
        raise TypeError(f"features must be a torch.Tensor, got {type(features).__name__}")
    if not features.is_floating_point():
        raise TypeError(f"features must be a float tensor, got dtype {features.dtype}")
    if features.dim() != 3:
        raise ValueError(f"features must have shape [N, T, F], got {tuple(features.shape)}")
    if num_mel_bins is not None and features.size(2) != num_mel_bins:
        raise ValueError(f"features have {features.size(2)} bins per frame but the model takes "
                         f"{num_mel_bins} (see FeatureConfig.num_mel_bins / --feature-*)")
    if not isinstance(feature_lens, torch.Tensor):
        raise TypeError(f"feature_lens must be a torch.Tensor, got "
                        f"{type(feature_lens).__name__}")
    if feature_lens.is_floating_point() or feature_lens.dtype == torch.bool:
        raise TypeError(f"feature_lens must be an integer tensor, got {feature_lens.dtype}")
    if feature_lens.shape != (features.size(0),):
        raise ValueError(f"feature_lens must have shape [N] = [{features.size(0)}], got "
                         f"{tuple(feature_lens.shape)}")
    lens = feature_lens.to(device=features.device, dtype=torch.int64)
    if lens.numel() and (int(lens.min()) < 1 or int(lens.max()) > features.size(1)):
        raise ValueError(f"feature_lens must be in [1, T={features.size(1)}], got values in "
                         f"[{int(lens.min())}, {int(lens.max())}]")
    if features.numel() and not bool(torch.isfinite(features).all()):
        raise ValueError("features contain NaN or inf")
    return lens


def normalized_log_probs(x: torch.Tensor) -> torch.Tensor:
    """float32 log-probs: ``x`` as it is when its rows already sum to 1 in probability
    (icefall's CTC heads end in a log-softmax; re-normalizing would change the last bits),
    else ``log_softmax(x)``."""
    x = x.float()
    if x.numel() == 0 or float(x.logsumexp(dim=-1).abs().max()) < 1e-3:
        return x
    return x.log_softmax(dim=-1)


class AcousticModel:
    """The interface (a mixin: :class:`k2dec.model.JointModel` is also an ``nn.Module``).

    Subclasses implement :meth:`_encode` and set or override the attributes below.

    From samples to output frames: audio at ``feature_config.sampling_rate`` Hz gives
    ``feature_config.num_frames(num_samples)`` feature frames (``feature_lens``, one every
    ``feature_config.frame_shift`` seconds); :meth:`encode` turns them into about
    ``feature_lens // subsampling_factor`` network output frames (``encoder_out_lens``, exact
    counts in :class:`EncoderOutput`), one every :attr:`output_frame_shift` seconds. Every
    frame index in a :class:`k2dec.primitives.hypothesis.HypothesisRecord` counts output frames.

    Attributes:
      kind: a short name of the implementation for messages (``"k2dec"``,
        ``"icefall-torchscript"``, ``"onnx"``); decode code must not branch on it.
      feature_config: the features the model was trained on (:class:`FeatureConfig`).
      vocab_size: the number of network outputs ``V`` (token ids ``0 .. V - 1``, blank 0):
        the last dimension of ``ctc_log_probs`` and of the joiner's logits. Not
        ``len(tokens)``: a lang dir's ``tokens.txt`` also lists the disambiguation symbols
        ``#0``, ``#1``, ... of its graphs. ``None`` only for an export that does not say
        and came without a ``tokens.txt``.
      subsampling_factor: feature frames per network output frame (icefall: 4).
      min_input_frames: the fewest feature frames that give at least one output frame.
      tokens: the token table found with the model (``tokens.txt`` beside it), else ``None``.
      streaming_encoder: for a model that encodes audio as it arrives (icefall's causal
        zipformer TorchScript exports), what drives its encoder chunk by chunk
        (:class:`k2dec.model.streaming.TorchScriptStreamingEncoder`); ``None`` for models
        that need the whole utterance.
      utterance_seconds: what the model file records of its training utterances' durations
        (``{"count", "median", "p99", "max"}``, seconds but count; written by k2dec's
        trainer, :func:`k2dec.model.utterance_seconds`), else ``None``. The windows
        segmenter cuts long recordings into windows of about ``p99`` seconds.
    """

    kind: str = "unknown"
    utterance_seconds: dict[str, float] | None = None
    streaming_encoder: Any = None
    vocab_size: int | None = None
    subsampling_factor: int = 4
    min_input_frames: int = 1
    tokens: k2.SymbolTable | None = None

    @property
    def output_frame_shift(self) -> float:
        """Seconds between two network output frames: ``subsampling_factor *
        feature_config.frame_shift`` (0.04 for icefall's models); a hypothesis' frame ``f``
        starts at ``f * output_frame_shift`` seconds."""
        return self.subsampling_factor * self.feature_config.frame_shift

    @property
    def feature_config(self) -> FeatureConfig:
        return getattr(self, "_feature_config", None) or FeatureConfig()

    def set_feature_config(self, config: FeatureConfig) -> None:
        """Replace the feature settings (for a model trained with other features)."""
        if not isinstance(config, FeatureConfig):
            raise TypeError(f"config must be a FeatureConfig, got {type(config).__name__}")
        self._feature_config = config

    @property
    def capabilities(self) -> frozenset[Family]:
        """The method families this model can decode with."""
        fams = set()
        if self.transducer is not None:
            fams.add(Family.TRANSDUCER)
        if self.has_ctc:
            fams.add(Family.CTC)
        if self.attention_decoder is not None:
            fams.add(Family.AED)
        return frozenset(fams)

    @property
    def has_ctc(self) -> bool:
        """True if :meth:`encode` returns CTC log-probs."""
        return False

    @property
    def transducer(self) -> Any:
        """An object with icefall's stateless ``.decoder`` / ``.joiner`` (what
        :func:`k2dec.transducer.greedy_search` and friends take), or ``None``."""
        return None

    @property
    def attention_decoder(self) -> Any:
        """A :class:`k2dec.aed.AttentionDecoder` over :attr:`EncoderOutput.memory`, or None."""
        return None

    @property
    def device(self) -> torch.device:
        return torch.device("cpu")

    def encode(self, features: torch.Tensor, feature_lens: torch.Tensor) -> EncoderOutput:
        """Run the network on a padded batch.

        Args:
          features: float ``[N, T, F]`` log-mel filterbanks (``F`` =
            ``feature_config.num_mel_bins``), padded with anything (icefall pads with
            ``log(1e-10)``).
          feature_lens: int ``[N]`` valid frames per utterance, in ``[1, T]``.

        Returns:
          :class:`EncoderOutput` on the model's :attr:`device`.
        """
        lens = check_features(features, feature_lens, self.feature_config.num_mel_bins)
        with torch.no_grad():
            return self._encode(features.to(self.device, torch.float32), lens.to(self.device))

    def _encode(self, features: torch.Tensor, feature_lens: torch.Tensor) -> EncoderOutput:
        raise NotImplementedError

    def supports(self, method: Any) -> bool:
        """True if ``method`` (a :class:`k2dec.methods.Method`: its ``family`` and
        ``requires``) can run on this model's outputs."""
        if method.family not in self.capabilities:
            return False
        return "attention_decoder" not in method.requires or self.attention_decoder is not None

    def describe(self) -> str:
        """One line for logs and ``--list-methods``."""
        caps = ", ".join(sorted(f.value for f in self.capabilities)) or "nothing"
        vocab = f"{self.vocab_size} outputs" if self.vocab_size else "outputs unknown"
        return (f"{self.kind} model: {caps}; {vocab}; {self.feature_config.num_mel_bins}-bin "
                f"fbank at {self.feature_config.sampling_rate} Hz, subsampling "
                f"{self.subsampling_factor}")


def token_vocab_size(tokens: k2.SymbolTable | None) -> int | None:
    """The number of network outputs a token table describes: its largest id that is not a
    disambiguation symbol (``#0``, ``#1``, ...) plus one; ``None`` without a table."""
    if tokens is None:
        return None

    dis = set(disambig_ids(tokens))
    return max((i for i in tokens.ids if i not in dis), default=-1) + 1
