"""The recipes' acoustic models: a small Conformer encoder and a joint CTC / transducer /
attention model with its losses."""

from .conformer import ConformerConfig, ConformerEncoder, Conv2dSubsampling, subsampled_lengths
from .joint import JointConfig, JointModel, LossConfig, Losses

__all__ = [
    "ConformerConfig",
    "ConformerEncoder",
    "Conv2dSubsampling",
    "JointConfig",
    "JointModel",
    "LossConfig",
    "Losses",
    "subsampled_lengths",
]
