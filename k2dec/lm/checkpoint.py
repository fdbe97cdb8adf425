"""LM checkpoints: which model classes exist, building a model from its config, loading a
:func:`~k2dec.lm.train_lm` checkpoint or an :func:`export_lm` file back, and averaging
checkpoints into an export file."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch

from ..primitives.files import checked_config, load_checked_state, load_torch_file
from .base import NeuralLM
from .rnn import RnnLM, RnnLmConfig
from .transformer import TransformerLM, TransformerLmConfig

__all__ = ["MODEL_TYPES", "LmConfig", "build_lm", "export_lm", "load_lm"]

LmConfig = RnnLmConfig | TransformerLmConfig

# model_type (stored in checkpoints) -> (config class, model class)
MODEL_TYPES: dict[str, tuple[type, type[NeuralLM]]] = {
    RnnLM.model_type: (RnnLmConfig, RnnLM),
    TransformerLM.model_type: (TransformerLmConfig, TransformerLM),
}


def build_lm(config: LmConfig) -> NeuralLM:
    """The model a config describes: :class:`RnnLM` or :class:`TransformerLM`."""
    for config_cls, model_cls in MODEL_TYPES.values():
        if type(config) is config_cls:
            return model_cls(config)
    raise TypeError(
        f"config must be an RnnLmConfig or TransformerLmConfig, got {type(config).__name__}"
    )


def load_lm(checkpoint: str | Path, device: str | torch.device = "cpu") -> NeuralLM:
    """Rebuild the LM saved in a :func:`train_lm` checkpoint, in eval mode on ``device``."""
    path = Path(checkpoint)
    if not path.is_file():
        raise ValueError(f"checkpoint {str(path)!r} does not exist")
    ckpt = load_torch_file(path, "LM checkpoint")
    model_type = ckpt.get("model_type") if isinstance(ckpt, dict) else None
    if model_type not in MODEL_TYPES or "model_config" not in ckpt or "model" not in ckpt:
        raise ValueError(
            f"{str(path)!r} is not a k2dec LM checkpoint (needs model_type in "
            f"{sorted(MODEL_TYPES)}, model_config and model)"
        )
    config_cls, _ = MODEL_TYPES[model_type]
    try:  # a config of the wrong shape or with impossible values, naming the file
        model = build_lm(checked_config(config_cls, ckpt["model_config"], path))
    except (TypeError, ValueError) as e:
        raise ValueError(str(e) if str(path) in str(e) else f"{path}: {e}") from None
    load_checked_state(model, ckpt["model"], path)
    # what its ids mean (k2dec.lang.token_inventory_digest), None in older checkpoints
    model.tokens_sha256 = ckpt.get("tokens_sha256")
    return model.to(device).eval()


def export_lm(
    checkpoints: Sequence[str | Path], output: str | Path, dtype: torch.dtype = torch.float16
) -> Path:
    """Average the model weights of :func:`train_lm` checkpoints (icefall's checkpoint
    averaging) and save them, without optimizer state, in ``dtype``: a file
    :func:`load_lm` reads (weights come back as float32).

    Args:
      checkpoints: one or more checkpoints of the same model (type and config).
      output: the file to write.
      dtype: floating dtype of the saved weights (``torch.float16`` halves the size).

    Returns:
      ``output`` as a Path.
    """
    if not checkpoints:
        raise ValueError("export_lm needs at least one checkpoint")
    if not dtype.is_floating_point:
        raise ValueError(f"dtype must be a floating dtype, got {dtype}")
    _check_export_paths(checkpoints, output)
    first = None
    total: dict[str, torch.Tensor] = {}
    for c in checkpoints:
        path = Path(c)
        load_lm(path)  # a whole, finite LM of a valid config, or a ValueError naming the file
        ckpt = load_torch_file(path, "LM checkpoint")
        head = (ckpt["model_type"], ckpt["model_config"], ckpt.get("tokens_sha256"))
        if first is None:
            first = head
        elif head != first:
            raise ValueError(f"{str(path)!r} holds another model ({head[0]}, {head[1]}, tokens "
                             f"{head[2]}) than the first checkpoint ({first[0]}, {first[1]}, "
                             f"tokens {first[2]})")
        for name, value in ckpt["model"].items():
            v = value.to(torch.float64) if value.is_floating_point() else value
            total[name] = total[name] + v if name in total and v.is_floating_point() else v
    n = len(checkpoints)
    state = {k: (v / n).to(dtype) if v.is_floating_point() else v for k, v in total.items()}
    out = Path(output)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ValueError(f"cannot create the folder of output {out}: {e.strerror or e}") from None
    torch.save({"model_type": first[0], "model_config": first[1], "tokens_sha256": first[2],
                "model": state,
                "averaged_from": [Path(c).name for c in checkpoints]}, out)
    return out


def _check_export_paths(checkpoints: Sequence[str | Path], output: str | Path) -> None:
    """Refuse a checkpoint given twice (its weights would count double in the average) and
    an output that is one of the checkpoints (the training checkpoint would be replaced by
    the export) or a folder."""
    seen: dict[Path, str] = {}
    for c in checkpoints:
        real = Path(c).resolve()
        if real in seen:
            raise ValueError(f"checkpoint {str(c)!r} is given twice (as {seen[real]!r}): each "
                             "counts once in the average")
        seen[real] = str(c)
    out = Path(output)
    if out.resolve() in seen:
        raise ValueError(f"output {str(out)!r} is one of the checkpoints: the export would "
                         "replace it; write it to another file")
    if out.is_dir():
        raise ValueError(f"output {str(out)!r} is a folder; give a file name")
