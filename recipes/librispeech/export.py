#!/usr/bin/env python3
"""Average the last checkpoints of a training run and export a small float16 model file.

    python recipes/librispeech/export.py --exp-dir exp/joint --epoch 30 --avg 5 \\
        --out exp/joint/model.pt
"""

from __future__ import annotations

import logging
from pathlib import Path

import click
import torch

from k2dec.model import UTTERANCE_SECONDS, JointConfig, JointModel, export_model


@click.command()
@click.option("--exp-dir", required=True, type=click.Path(exists=True, path_type=Path))
@click.option("--epoch", required=True, type=int, help="Last epoch to average.")
@click.option("--avg", default=5, show_default=True, help="Number of epochs to average.")
@click.option("--out", required=True, type=click.Path(path_type=Path))
@click.option("--float32", is_flag=True, help="Keep float32 weights (default float16).")
def main(exp_dir: Path, epoch: int, avg: int, out: Path, float32: bool) -> None:
    """Average epoch-(epoch-avg+1) .. epoch-(epoch) and export."""
    from k2dec.train import average_checkpoints

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    paths = [exp_dir / f"epoch-{e}.pt" for e in range(max(1, epoch - avg + 1), epoch + 1)]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise click.ClickException(f"missing checkpoints: {', '.join(missing)}")
    last = torch.load(paths[-1], map_location="cpu")
    cfg = JointConfig(**last["model_config"])
    model = JointModel(cfg)
    model.load_state_dict(average_checkpoints(paths))
    seconds = {UTTERANCE_SECONDS: last[UTTERANCE_SECONDS]} if UTTERANCE_SECONDS in last else {}
    path = export_model(model.eval(), out, half=not float32,
                        extra={"averaged": [p.name for p in paths], **seconds})
    logging.info("wrote %s (%.1f MB)", path, path.stat().st_size / 1e6)


if __name__ == "__main__":
    main()
