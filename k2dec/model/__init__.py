"""Acoustic models behind one interface (:class:`AcousticModel`): the recipes' joint
Conformer CTC / transducer / attention model, icefall TorchScript exports and sherpa-onnx
ONNX exports; :func:`load_model` recognises each from its path."""

from .conformer import ConformerConfig, ConformerEncoder, Conv2dSubsampling, subsampled_lengths
from .interface import AcousticModel, EncoderOutput, check_features
from .joint import JointConfig, JointModel, LossConfig, Losses
from .loader import find_tokens, load_model
from .onnx_models import OnnxCtcModel, OnnxSession, OnnxTransducerModel, load_onnx_model
from .torchscript import IcefallAttentionDecoder, IcefallTorchScriptModel
from .train import (
    TrainConfig,
    average_checkpoints,
    batch_to_inputs,
    export_model,
    latest_checkpoint,
    load_joint_model,
    train_joint_model,
)

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
    "LossConfig",
    "Losses",
    "OnnxCtcModel",
    "OnnxSession",
    "OnnxTransducerModel",
    "TrainConfig",
    "average_checkpoints",
    "batch_to_inputs",
    "check_features",
    "export_model",
    "find_tokens",
    "latest_checkpoint",
    "load_joint_model",
    "load_model",
    "load_onnx_model",
    "subsampled_lengths",
    "train_joint_model",
]
