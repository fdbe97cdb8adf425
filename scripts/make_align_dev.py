#!/usr/bin/env python3
"""Synthesize the shipped corpus' **dev-clean** split: the material `k2dec align`'s flag
thresholds are chosen on (never test-clean / test-other). Example::

    python scripts/make_align_dev.py --output-dir data/align-dev [--num 100]

The shipped model's corpus (``assets/librispeech-synth/corpus/corpus.json``) was planned by
``k2dec.train.synth.plan_corpus`` from Debian's ``fortunes`` text; its dev-clean sentences
were held out of training and of the shipped test sets, but their audio was not shipped.
This script plans the same corpus with the same settings (the sentences and voices must
come out as recorded in ``corpus.json``, else it stops) and synthesizes the first ``--num``
dev-clean utterances with the same voices (flite, espeak-ng, festival; Debian packages; a
voice not installed here is replaced by another seen voice that is), in
the LibriSpeech layout (``dev-clean/<spk>/<chapter>/<utt>.flac`` + ``*.trans.txt``). The
same arguments make the same files; existing audio is kept.
"""

from __future__ import annotations

import json
from pathlib import Path

import click
from tqdm import tqdm

from k2dec.train.synth import (
    FORTUNES_DIR,
    VOICE_CATALOG,
    CorpusConfig,
    available_voices,
    load_sentences,
    plan_corpus,
    synthesize,
)

CORPUS_JSON = (Path(__file__).resolve().parents[1] / "assets" / "librispeech-synth" / "corpus"
               / "corpus.json")


def dev_utterances(num: int) -> list:
    """The first ``num`` dev-clean utterances of the shipped corpus' plan, and the voices."""
    settings = json.loads(CORPUS_JSON.read_text())
    cfg = settings["config"]
    config = CorpusConfig(**{**cfg, "held_out": tuple(cfg["held_out"]),
                             "voices": None if cfg["voices"] is None else tuple(cfg["voices"])})
    by_name = {v.name: v for v in VOICE_CATALOG}
    voices = [by_name[name] for name in settings["voices"]]
    sentences = load_sentences([FORTUNES_DIR], config.min_words, config.max_words)
    if len(sentences) != settings["num_sentences"]:
        raise ValueError(f"fortunes gives {len(sentences)} sentences here, the corpus had "
                         f"{settings['num_sentences']}: the plan would differ")
    utts, _ = plan_corpus(sentences, voices, config)
    here = {v.name for v in available_voices()}
    usable = [v for v in voices if v.name in here and v.name not in config.held_out]
    by_id = {}
    for k, v in enumerate(voices):  # a voice missing here: a seen one that is (by index)
        by_id[v.speaker_id] = v if v.name in here else usable[k % len(usable)]
    return [u for u in utts if u.split == "dev-clean"][:num], by_id


@click.command()
@click.option("--output-dir", required=True, type=click.Path(file_okay=False, path_type=Path))
@click.option("--num", default=100, show_default=True, type=int,
              help="Dev utterances to synthesize.")
def main(output_dir: Path, num: int) -> None:
    utts, voices = dev_utterances(num)
    chapters: dict[Path, list[str]] = {}
    for u in tqdm(utts, desc="synthesize dev-clean"):
        path = u.path(output_dir)
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.is_file():
            synthesize(voices[u.speaker_id], u.text.lower(), path)
        chapters.setdefault(path.parent / f"{u.speaker_id}-{u.chapter_id}.trans.txt",
                            []).append(f"{u.utt_id} {u.text}\n")
    for trans, lines in chapters.items():
        trans.write_text("".join(lines))
    click.echo(f"{len(utts)} dev-clean utterances in {output_dir / 'dev-clean'}")


if __name__ == "__main__":
    main()
