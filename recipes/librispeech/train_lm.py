#!/usr/bin/env python3
"""Train the neural LM of the recipe (for ``rnn-lm`` and ``multi-pass`` decoding) on the LM
text that ``prepare.py`` wrote, then export the average of the last checkpoints.

    python recipes/librispeech/train_lm.py --data-dir data --lang-dir data/lang_bpe_256 \\
        --exp-dir exp/rnn_lm --num-steps 2500 --embedding-dim 256 --hidden-dim 256 \\
        --num-layers 2 --tie-weights --dropout 0.1
    python recipes/librispeech/decode.py ... --rnn-lm exp/rnn_lm/rnn_lm.pt \\
        --method rnn-lm --method multi-pass

The first ``--num-valid`` sentences of a seeded shuffle of ``data/lm/text.txt`` are held out
for perplexity. Training resumes from the newest checkpoint in ``--exp-dir``. The shipped
RNN LM (``assets/librispeech-synth/lm/rnn_lm.pt``, 1.1M parameters) was trained with the
settings above through ``k2dec train-lm`` (16615 training sentences and 500 held out by
another shuffle; 2500 steps of 128 sentences, ~45 min on a loaded 2-core machine; average of
steps 2000 and 2500 by ``k2dec export-lm``: validation perplexity 16.4 per BPE token).
"""

from __future__ import annotations

import logging
import random
from pathlib import Path

import click

from k2dec.lm import RnnLmConfig, TransformerLmConfig, export_lm


@click.command()
@click.option("--data-dir", default=Path("data"), type=click.Path(path_type=Path),
              show_default=True)
@click.option("--lang-dir", required=True, type=click.Path(exists=True, path_type=Path),
              help="The BPE lang dir (its bpe.model tokenizes the text).")
@click.option("--exp-dir", required=True, type=click.Path(path_type=Path))
@click.option("--model-type", type=click.Choice(["rnn", "transformer"]), default="rnn",
              show_default=True)
@click.option("--num-steps", default=2500, show_default=True)
@click.option("--batch-size", default=128, show_default=True, help="Sentences per step.")
@click.option("--embedding-dim", default=256, show_default=True, help="rnn only.")
@click.option("--hidden-dim", default=256, show_default=True, help="rnn only.")
@click.option("--d-model", default=256, show_default=True, help="transformer only.")
@click.option("--num-layers", default=2, show_default=True)
@click.option("--tie-weights/--no-tie-weights", default=True, show_default=True)
@click.option("--dropout", default=0.1, show_default=True)
@click.option("--num-valid", default=500, show_default=True)
@click.option("--save-every-n", default=500, show_default=True)
@click.option("--avg", default=2, show_default=True, help="Checkpoints averaged on export.")
@click.option("--seed", default=42, show_default=True)
def main(data_dir, lang_dir, exp_dir, model_type, num_steps, batch_size, embedding_dim,
         hidden_dim, d_model, num_layers, tie_weights, dropout, num_valid, save_every_n, avg,
         seed):
    """Train an RNN / Transformer LM on data/lm/text.txt and export <exp-dir>/<type>_lm.pt."""
    from k2dec.train import TrainLmConfig, train_lm

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    lines = [ln for ln in (data_dir / "lm" / "text.txt").read_text().splitlines() if ln.strip()]
    if len(lines) <= num_valid:
        raise click.BadParameter(f"{len(lines)} LM sentences leave none for training after "
                                 f"{num_valid} held out", param_hint="--num-valid")
    random.Random(seed).shuffle(lines)
    exp_dir.mkdir(parents=True, exist_ok=True)
    train, valid = exp_dir / "train.txt", exp_dir / "valid.txt"
    train.write_text("\n".join(lines[num_valid:]) + "\n")
    if num_valid:
        valid.write_text("\n".join(lines[:num_valid]) + "\n")
    if model_type == "rnn":
        model = RnnLmConfig(embedding_dim=embedding_dim, hidden_dim=hidden_dim,
                            num_layers=num_layers, tie_weights=tie_weights, dropout=dropout)
    else:
        model = TransformerLmConfig(d_model=d_model, num_layers=num_layers,
                                    tie_weights=tie_weights, dropout=dropout)
    result = train_lm(TrainLmConfig(
        text=train, valid_text=valid if num_valid else None, bpe_model=lang_dir / "bpe.model",
        exp_dir=exp_dir, model=model, num_steps=num_steps, batch_size=batch_size,
        save_every_n=save_every_n, keep_last_k=max(avg, 1), seed=seed))
    steps = sorted(int(p.stem.split("-")[1]) for p in exp_dir.glob("checkpoint-*.pt"))
    chosen = [exp_dir / f"checkpoint-{s}.pt" for s in steps[-avg:]]
    out = export_lm(chosen, exp_dir / f"{model_type}_lm.pt")
    ppl = f"; validation perplexity {result.valid.perplexity:.2f}" if result.valid else ""
    click.echo(f"wrote {out} (average of {', '.join(p.name for p in chosen)}){ppl}")


if __name__ == "__main__":
    main()
