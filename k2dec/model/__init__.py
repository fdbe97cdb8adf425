"""The recipes' acoustic models: a small Conformer encoder and a joint CTC / transducer /
attention model with its losses."""

from .conformer import ConformerConfig, ConformerEncoder, Conv2dSubsampling, subsampled_lengths
from .joint import JointConfig, JointModel, LossConfig, Losses
from .train import (
    TrainConfig,
    average_checkpoints,
    batch_to_inputs,
    export_model,
    latest_checkpoint,
    load_model,
    train_joint_model,
)

__all__ = [
    "ConformerConfig",
    "ConformerEncoder",
    "Conv2dSubsampling",
    "JointConfig",
    "JointModel",
    "LossConfig",
    "Losses",
    "TrainConfig",
    "average_checkpoints",
    "batch_to_inputs",
    "export_model",
    "latest_checkpoint",
    "load_model",
    "subsampled_lengths",
    "train_joint_model",
]
