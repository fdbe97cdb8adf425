#!/usr/bin/env python3
"""Build a long DEV recording for the shipped model: the ``dev-clean`` split its recipe planned
(never shipped, never a test set) synthesized again, then joined into one recording as
``scripts/make_long_recording.py`` joins a test set. Settings for the long-form segmenters are
chosen on this recording, never on test-clean / test-other. Example::

    python scripts/make_dev_long_recording.py \\
        --corpus-json assets/librispeech-synth/corpus/corpus.json --output-dir data/dev-long \\
        --num-utterances 40

``corpus.json`` holds the settings the shipped corpus was made with; the sentences, voices and
split follow from them deterministically (:func:`k2dec.train.synth.plan_corpus`), so this makes
the same ``dev-clean`` sentences with the same voices (the number of usable sentences is checked
against the one recorded). The first ``--num-utterances`` dev utterances (sorted by id, taken
round-robin over the speakers so that every voice is heard) are synthesized into
``<output-dir>/corpus/dev-clean`` (LibriSpeech layout), then joined into
``<output-dir>/long.wav`` with ``supervisions.jsonl`` and ``text`` (pauses of 0.3-1.5 s, seed 0).
Needs the Debian synthesizers of ``scripts/make_synthetic_corpus.py``; the same arguments make
the same files.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

sys.path.insert(0, str(Path(__file__).resolve().parent))

from make_long_recording import make_long_recording  # noqa: E402

from k2dec.train.synth import (  # noqa: E402
    FORTUNES_DIR,
    VOICE_CATALOG,
    CorpusConfig,
    Utterance,
    load_sentences,
    plan_corpus,
    synthesize,
)


def dev_utterances(corpus_json: str | Path, num: int | None) -> list[Utterance]:
    """The recipe's ``dev-clean`` utterances (as planned from ``corpus_json``), the first
    ``num`` of them taken in turn from each speaker (all if ``None``)."""
    settings = json.loads(Path(corpus_json).read_text())
    config = CorpusConfig(**{k: tuple(v) if isinstance(v, list) else v
                             for k, v in settings["config"].items()})
    sentences = load_sentences((FORTUNES_DIR,), config.min_words, config.max_words)
    if len(sentences) != settings["num_sentences"]:
        raise ValueError(f"{corpus_json} was made from {settings['num_sentences']} sentences, "
                         f"this machine's fortunes give {len(sentences)}: not the same split")
    by_name = {v.name: v for v in VOICE_CATALOG}
    voices = [by_name[n] for n in settings["voices"]]
    utts = sorted((u for u in plan_corpus(sentences, voices, config)[0]
                   if u.split == "dev-clean"), key=lambda u: u.utt_id)
    per_speaker: dict[int, list[Utterance]] = {}
    for u in utts:
        per_speaker.setdefault(u.speaker_id, []).append(u)
    order = [u for k in range(max(map(len, per_speaker.values()), default=0))
             for spk in sorted(per_speaker) for u in per_speaker[spk][k:k + 1]]
    return sorted(order[:num] if num else order, key=lambda u: u.utt_id)


def synthesize_dev(utts: list[Utterance], root: Path) -> list[str]:
    """The utterances' FLACs and ``.trans.txt`` files under ``root`` (existing FLACs kept);
    returns the ids of those this machine's synthesizers could not make (a voice not
    installed here), which are left out."""
    by_id = {v.speaker_id: v for v in VOICE_CATALOG}
    chapters: dict[Path, list[str]] = {}
    failed = []
    for u in utts:
        path = u.path(root)
        if not path.is_file():
            try:
                synthesize(by_id[u.speaker_id], u.text.lower(), path)
            except RuntimeError as e:
                click.echo(f"{u.utt_id}: left out: {e}", err=True)
                failed.append(u.utt_id)
                continue
        chapters.setdefault(path.parent, []).append(f"{u.utt_id} {u.text}\n")
    for folder, lines in chapters.items():
        name = folder.parent.name + "-" + folder.name
        (folder / f"{name}.trans.txt").write_text("".join(lines), encoding="utf-8")
    return failed


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--corpus-json", required=True, type=click.Path(exists=True, dir_okay=False),
              help="The shipped corpus' settings, assets/librispeech-synth/corpus/corpus.json.")
@click.option("--output-dir", required=True, type=click.Path(file_okay=False))
@click.option("--num-utterances", default=40, show_default=True, type=int)
@click.option("--seed", default=0, show_default=True, type=int, help="Of the pauses.")
def main(corpus_json: str, output_dir: str, num_utterances: int, seed: int) -> None:
    out = Path(output_dir)
    utts = dev_utterances(corpus_json, num_utterances)
    failed = synthesize_dev(utts, out / "corpus")
    if len(failed) == len(utts):
        raise click.ClickException("no dev utterance could be synthesized here")
    sups = make_long_recording(out / "corpus" / "dev-clean", out, num_utterances=None,
                               seed=seed)
    end = max(s.end for s in sups)
    click.echo(f"{len(sups)} dev-clean utterances ({len(failed)} left out), {end:.1f} s, "
               f"written to {out}")


if __name__ == "__main__":
    main()
