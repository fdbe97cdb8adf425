"""``load_model(path)``: any model k2dec decodes with, recognised from the path.

=====================================================  =========================================
path                                                    loaded as
=====================================================  =========================================
a k2dec model file (``export_model``, checkpoints)      :class:`JointModel`
an icefall TorchScript archive (``jit_script.pt``,      :class:`IcefallTorchScriptModel`
``jit_script_chunk_16_left_128.pt``, ``cpu_jit.pt``)
a folder or file of a sherpa-onnx transducer            :class:`OnnxTransducerModel`
(``encoder*.onnx``, ``decoder*.onnx``, ``joiner*.onnx``)
a sherpa-onnx CTC model (``model.onnx``, or a folder    :class:`OnnxCtcModel`
holding one)
=====================================================  =========================================

Tokens come from ``tokens`` (a ``tokens.txt`` path, e.g. from ``--lang-dir``) or a
``tokens.txt`` beside the model; they are optional for transducers (the decoder knows its
vocabulary) and needed for ``conformer_ctc``'s ``<sos/eos>``.
"""

from __future__ import annotations

import logging
from pathlib import Path

import torch

from ..data.features import FeatureConfig
from ..lang.symbols import read_symbol_table
from .interface import AcousticModel

__all__ = ["find_tokens", "load_model"]

logger = logging.getLogger(__name__)


def find_tokens(model_path: str | Path) -> Path | None:
    """``tokens.txt`` in the model's folder (or in the folder itself), or its parent's
    ``data/lang_*/`` as icefall's pretrained-model repositories lay them out."""
    path = Path(model_path)
    folder = path if path.is_dir() else path.parent
    for candidate in (folder / "tokens.txt", folder.parent / "tokens.txt"):
        if candidate.is_file():
            return candidate
    found = sorted(folder.parent.glob("data/lang_*/tokens.txt"))
    return found[0] if len(found) == 1 else None


def load_model(
    path: str | Path,
    device: torch.device | str = "cpu",
    tokens: str | Path | None = None,
    feature_config: FeatureConfig | None = None,
) -> AcousticModel:
    """Load the model at ``path`` (see the module docstring for what is recognised).

    Args:
      path: a model file or a folder of ONNX files.
      device: where the network runs (ONNX models run on CPU through onnxruntime and return
        their outputs on this device).
      tokens: a ``tokens.txt``; default: :func:`find_tokens`.
      feature_config: override the features the model expects (default: icefall's, with
        the sample rate / feature dimension an ONNX export declares).

    Raises:
      ValueError: no such path, nothing k2dec recognises (the message says what it saw), or
        a malformed tokens file (naming its line: a duplicate id or symbol, not UTF-8, ...).
    """
    path = Path(path)
    if not path.exists():
        raise ValueError(f"model path {path} does not exist")
    tokens_path = Path(tokens) if tokens is not None else find_tokens(path)
    table = None
    if tokens_path is not None:
        if not tokens_path.is_file():
            raise ValueError(f"tokens file {tokens_path} does not exist")
        table = read_symbol_table(tokens_path)
    device = torch.device(device)
    model: AcousticModel
    if path.is_dir() or path.suffix == ".onnx":
        from .onnx_models import load_onnx_model

        model = load_onnx_model(path, tokens=table, feature_config=feature_config,
                                device=device)
    else:
        from .torchscript import IcefallTorchScriptModel, is_torchscript_archive

        if is_torchscript_archive(path):
            module = torch.jit.load(str(path), map_location=device)
            model = IcefallTorchScriptModel(module, tokens=table, feature_config=feature_config)
        else:
            from .joint import load_joint_model

            model = load_joint_model(path, device)
            model.tokens = table
            if feature_config is not None:
                model.set_feature_config(feature_config)
    logger.info("%s: %s", path, model.describe())
    return model
