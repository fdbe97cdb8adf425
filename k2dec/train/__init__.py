"""Training, kept out of the decoding library: nothing in :mod:`k2dec` outside this package
imports it (the CLI's ``train-lm`` command imports it inside the command).

* :mod:`k2dec.train.joint_trainer`: the joint model's resumable training loop
  (:func:`train_joint_model`) and checkpoint averaging;
* :mod:`k2dec.train.losses`: its losses (CTC, pruned RNN-T, attention decoder);
* :mod:`k2dec.train.lm_trainer`: the RNN / Transformer LM trainer (:func:`train_lm`, the
  ``k2dec train-lm`` command);
* :mod:`k2dec.train.synth`: the offline LibriSpeech-shaped corpus the shipped model was trained
  on (imported on demand: it needs Debian's speech synthesizers only when it runs).

The trained networks themselves (:class:`k2dec.model.JointModel`, :mod:`k2dec.lm`) and their
file formats (:func:`k2dec.model.export_model` / :func:`k2dec.model.load_joint_model`,
:func:`k2dec.lm.export_lm` / :func:`k2dec.lm.load_lm`) belong to decoding and stay there.
"""

from .checkpoints import latest_checkpoint
from .joint_trainer import TrainConfig, average_checkpoints, batch_to_inputs, train_joint_model
from .lm_trainer import TrainLmConfig, TrainLmResult, train_lm
from .losses import LossConfig, Losses, joint_losses

__all__ = [
    "LossConfig",
    "Losses",
    "TrainConfig",
    "TrainLmConfig",
    "TrainLmResult",
    "average_checkpoints",
    "batch_to_inputs",
    "joint_losses",
    "latest_checkpoint",
    "train_joint_model",
    "train_lm",
]
