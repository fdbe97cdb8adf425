#!/usr/bin/env python3
"""Decode the prepared test sets with every method and write a WER / RTF table.

    python recipes/librispeech/decode.py --data-dir data --lang-dir data/lang_bpe_256 \\
        --model exp/joint/model.pt --out-dir exp/joint/decode

    # one method, with a changed setting
    python recipes/librispeech/decode.py ... --method modified_beam_search --set beam_size=8

    # every method (icefall's names): its family, what it needs, its settings
    python recipes/librispeech/decode.py --list-methods

Without ``--method``, every registered method whose resources exist runs. Each writes
``<out-dir>/<method>/{recogs,errs,wer-summary}-<test-set>-*.txt`` and a resumable
``results-<test-set>.jsonl``; the table goes to ``<out-dir>/RESULTS.md``.
"""

from __future__ import annotations

import logging
from pathlib import Path

import click
import torch
from lhotse import CutSet

from k2dec.job import (
    DecodeConfig,
    check_assets,
    load_assets,
    method_table,
    plan_methods,
    results_table,
    run_decode,
    split_available,
)
from k2dec.methods import family_order, list_methods
from k2dec.primitives.sizes import MAX_DURATION


def _list_methods(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value:
        click.echo(method_table(family_order(list_methods())))
        ctx.exit()


@click.command()
@click.option("--list-methods", is_flag=True, is_eager=True, expose_value=False,
              callback=_list_methods, help="List every method (the registry's) and exit.")
@click.option("--data-dir", default=Path("data"), type=click.Path(path_type=Path),
              show_default=True)
@click.option("--lang-dir", required=True, type=click.Path(exists=True, path_type=Path))
@click.option("--model", "model_path", required=True, type=click.Path(exists=True,
                                                                      path_type=Path))
@click.option("--out-dir", required=True, type=click.Path(path_type=Path))
@click.option("--test-set", "test_sets", multiple=True,
              default=("test-clean", "test-other"), show_default=True)
@click.option("--method", "methods", multiple=True,
              help="Methods to run (default: every method whose resources exist).")
@click.option("--set", "assignments", multiple=True, help="KEY=VALUE config overrides.")
@click.option("--rnn-lm", type=click.Path(exists=True, path_type=Path), default=None)
@click.option("--max-duration", default=MAX_DURATION, show_default=True,
              help="Seconds of audio per batch; a longer recording is a failed cut.")
@click.option("--threads", default=2, show_default=True, type=click.IntRange(min=1))
def main(data_dir, lang_dir, model_path, out_dir, test_sets, methods, assignments, rnn_lm,
         max_duration, threads):
    """Decode test sets with each method; print and save a WER/RTF table."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    torch.set_num_threads(threads)
    assets = load_assets(model_path, lang_dir,
                         lm_paths={"rnn_lm": rnn_lm} if rnn_lm else None)
    chosen = list(methods) or split_available(list_methods(), assets.resources)[0]
    try:
        runs = plan_methods(chosen, assignments)
        check_assets(runs, assets)
        config = DecodeConfig(max_duration=max_duration)
    except ValueError as e:
        raise click.UsageError(str(e)) from None
    cuts = {t: CutSet.from_file(data_dir / "fbank" / f"librispeech_cuts_{t}.jsonl.gz")
            for t in test_sets}
    rows = run_decode(assets, cuts, runs, out_dir, config)
    table = results_table(rows)
    click.echo(table)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "RESULTS.md").write_text(table + "\n")


if __name__ == "__main__":
    main()
