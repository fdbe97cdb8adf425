#!/usr/bin/env python3
"""Make the offline LibriSpeech-layout corpus (see ``k2dec.train.synth`` for layout and details).

Needs the Debian packages ``flite espeak-ng festival festvox-kdlpc16k festvox-us-slt-hts fortunes
fortunes-min`` (voices that are missing are skipped). Examples::

    # about 2 hours of training audio, 200 utterances in each evaluation split
    python scripts/make_synthetic_corpus.py --output-dir data/synth --hours 2

    # a tiny corpus for a smoke test, espeak-ng only
    python scripts/make_synthetic_corpus.py --output-dir /tmp/tiny --num-train 20 --num-dev 5 \\
        --num-test 5 --num-test-other 5 --voice espeak-ng:en-us@1 --voice espeak-ng:en-gb@0.9 \\
        --held-out espeak-ng:en-gb@0.9

    # which voices work on this machine
    python scripts/make_synthetic_corpus.py --list-voices

Rerunning the same command continues an interrupted run; the corpus is deterministic given --seed.
"""

from __future__ import annotations

import logging
from pathlib import Path

import click

from k2dec.train.synth import (
    DEFAULT_HELD_OUT,
    FORTUNES_DIR,
    VOICE_CATALOG,
    CorpusConfig,
    available_voices,
    make_corpus,
)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--output-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Corpus root to create (or continue).")
@click.option("--hours", default=1.0, show_default=True, type=float,
              help="Training audio budget in hours (estimated from word counts).")
@click.option("--num-train", default=None, type=int,
              help="Exact number of training utterances (overrides --hours).")
@click.option("--num-dev", default=200, show_default=True, type=int)
@click.option("--num-test", default=200, show_default=True, type=int)
@click.option("--num-test-other", default=200, show_default=True, type=int)
@click.option("--min-words", default=4, show_default=True, type=int)
@click.option("--max-words", default=20, show_default=True, type=int)
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("--voice", "voices", multiple=True,
              help="Use only these voices (repeatable; names from --list-voices).")
@click.option("--held-out", multiple=True,
              help="Voices reserved for test-other (repeatable). "
                   f"Default: {', '.join(DEFAULT_HELD_OUT)}.")
@click.option("--text-dir", "text_dirs", multiple=True, type=click.Path(path_type=Path),
              help=f"Folders of text (repeatable). Default: {FORTUNES_DIR}.")
@click.option("--num-workers", default=2, show_default=True, type=int,
              help="Synthesizer processes run at once.")
@click.option("--list-voices", is_flag=True, help="Print the voices that work here and exit.")
def main(output_dir, hours, num_train, num_dev, num_test, num_test_other, min_words, max_words,
         seed, voices, held_out, text_dirs, num_workers, list_voices):
    """Synthesize a LibriSpeech-layout corpus from Debian's fortunes text."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    if list_voices:
        working = {v.name for v in available_voices()}
        for v in VOICE_CATALOG:
            click.echo(f"{v.speaker_id}\t{v.name}\t{'ok' if v.name in working else 'MISSING'}")
        return
    if output_dir is None:
        raise click.UsageError("--output-dir is required")
    config = CorpusConfig(
        seed=seed, hours=hours, num_train=num_train, num_dev=num_dev, num_test=num_test,
        num_test_other=num_test_other, min_words=min_words, max_words=max_words,
        voices=tuple(voices) or None, held_out=tuple(held_out) or DEFAULT_HELD_OUT)
    summary = make_corpus(output_dir, config, text_dirs=tuple(text_dirs) or (FORTUNES_DIR,),
                          num_workers=num_workers)
    click.echo(f"seen voices: {', '.join(summary.voices['seen'])}")
    click.echo(f"held-out voices: {', '.join(summary.voices['held_out'])}")
    for split, n in summary.num_utts.items():
        click.echo(f"{split:12s} {n:6d} utterances {summary.seconds[split] / 3600:7.3f} hours")
    click.echo(f"LM text: {summary.num_lm_sentences} sentences; synthesized "
               f"{summary.synthesized}, already there {summary.skipped_existing}, "
               f"failed {len(summary.failed)}")


if __name__ == "__main__":
    main()
