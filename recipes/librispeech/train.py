#!/usr/bin/env python3
"""Train the joint CTC / transducer / attention model on the prepared data.

    python recipes/librispeech/train.py --data-dir data --lang-dir data/lang_bpe_256 \\
        --exp-dir exp/joint --num-epochs 20 --max-duration 200 --rnnt-type modified

Resumes from the newest checkpoint in --exp-dir. ``--rnnt-type`` is k2's pruned RNN-T loss
type: ``regular``, ``modified`` (one symbol per frame) or ``constrained``.
"""

from __future__ import annotations

import logging
from pathlib import Path

import click
import torch
from lhotse import CutSet

from k2dec.data import SpecAugmentConfig, make_dataloader
from k2dec.lang import load_bpe_model
from k2dec.model import ConformerConfig, JointConfig, JointModel, utterance_seconds

SIZES = {
    "tiny": ConformerConfig(d_model=96, nhead=4, num_layers=4, dim_feedforward=256),
    "small": ConformerConfig(d_model=144, nhead=4, num_layers=6, dim_feedforward=384),
}


def _long_enough(cut) -> bool:
    """At least 0.2 s: shorter cuts give no encoder frame after 4x subsampling."""
    return cut.duration >= 0.2


@click.command()
@click.option("--data-dir", default=Path("data"), type=click.Path(path_type=Path),
              show_default=True)
@click.option("--lang-dir", required=True, type=click.Path(exists=True, path_type=Path))
@click.option("--exp-dir", required=True, type=click.Path(path_type=Path))
@click.option("--train-part", default="train", show_default=True)
@click.option("--model-size", default="tiny", type=click.Choice(sorted(SIZES)),
              show_default=True)
@click.option("--num-epochs", default=20, show_default=True)
@click.option("--max-steps", default=None, type=int)
@click.option("--max-duration", default=200.0, show_default=True)
@click.option("--lr", default=2e-3, show_default=True)
@click.option("--warmup-steps", default=300, show_default=True)
@click.option("--rnnt-type", default="modified", show_default=True,
              type=click.Choice(["regular", "modified", "constrained"]))
@click.option("--spec-augment/--no-spec-augment", default=True, show_default=True)
@click.option("--threads", default=2, show_default=True, help="torch threads")
def main(data_dir, lang_dir, exp_dir, train_part, model_size, num_epochs, max_steps,
         max_duration, lr, warmup_steps, rnnt_type, spec_augment, threads):
    """Train (or resume) the joint model."""
    from k2dec.train import LossConfig, TrainConfig, train_joint_model

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    torch.set_num_threads(threads)
    sp = load_bpe_model(lang_dir / "bpe.model")
    cuts = CutSet.from_file(data_dir / "fbank" / f"librispeech_cuts_{train_part}.jsonl.gz")
    cuts = cuts.filter(_long_enough).to_eager()
    model = JointModel(JointConfig(vocab_size=sp.get_piece_size(), encoder=SIZES[model_size]))
    model.utterance_seconds = utterance_seconds([c.duration for c in cuts])
    logging.info("training utterances: %s", model.utterance_seconds)
    logging.info("model: %.2fM parameters", sum(p.numel() for p in model.parameters()) / 1e6)
    augment = SpecAugmentConfig(time_warp_factor=0, num_frame_masks=2, frames_mask_size=30,
                                features_mask_size=10) if spec_augment else None

    def batches(epoch: int):
        return make_dataloader(cuts, max_duration, shuffle=True, num_buckets=10,
                               spec_augment=augment, seed=epoch)

    cfg = TrainConfig(num_epochs=num_epochs, max_steps=max_steps, lr=lr,
                      warmup_steps=warmup_steps, save_every_n=100, keep_last_k=5,
                      loss=LossConfig(rnnt_type=rnnt_type))
    out = train_joint_model(model, batches, lambda texts: sp.encode(texts), exp_dir, cfg)
    logging.info("finished: %s", out)


if __name__ == "__main__":
    main()
