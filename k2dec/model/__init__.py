"""Acoustic models behind one interface (:class:`AcousticModel`): the recipes' joint
Conformer CTC / transducer / attention model, icefall TorchScript exports and sherpa-onnx
ONNX exports; :func:`load_model` recognises each from its path."""

from .conformer import ConformerConfig, ConformerEncoder, Conv2dSubsampling, subsampled_lengths
from .interface import AcousticModel, EncoderOutput, check_features
from .joint import (
    UTTERANCE_SECONDS,
    JointConfig,
    JointModel,
    export_model,
    load_joint_model,
    utterance_seconds,
)
from .loader import find_tokens, load_model
from .onnx_models import OnnxCtcModel, OnnxSession, OnnxTransducerModel, load_onnx_model
from .torchscript import IcefallAttentionDecoder, IcefallTorchScriptModel

__all__ = [
    "AcousticModel",
    "ConformerConfig",
    "ConformerEncoder",
    "Conv2dSubsampling",
    "EncoderOutput",
    "IcefallAttentionDecoder",
    "IcefallTorchScriptModel",
    "JointConfig",
    "JointModel",
    "OnnxCtcModel",
    "OnnxSession",
    "OnnxTransducerModel",
    "check_features",
    "export_model",
    "find_tokens",
    "load_joint_model",
    "utterance_seconds",
    "UTTERANCE_SECONDS",
    "load_model",
    "load_onnx_model",
    "subsampled_lengths",
]
