#!/usr/bin/env python3
"""Record in a k2dec model file the durations of the utterances it was trained on
(``utterance_seconds``: count, median, p99, max), for a model trained before k2dec's trainer
wrote them. The windows segmenter of long recordings cuts windows of about the p99 (see
``k2dec.job.DecodeConfig.segment_window``). Examples::

    # from the recipe's training manifest
    python scripts/record_utterance_seconds.py --model exp/joint/model.pt \\
        --cuts data/fbank/librispeech_cuts_train.jsonl.gz

    # from a LibriSpeech-layout training split (every .flac / .wav under it)
    python scripts/record_utterance_seconds.py --model exp/joint/model.pt \\
        --audio-dir data/synth/train

The file is rewritten in place (through a temporary file); everything else in it is kept.
"""

from __future__ import annotations

from pathlib import Path

import click
import soundfile as sf
import torch

from k2dec.model import UTTERANCE_SECONDS, load_joint_model, utterance_seconds


def durations(cuts: str | None, audio_dir: str | None) -> list[float]:
    """Seconds of each training utterance: the cuts' durations, or the audio files'."""
    if cuts:
        from lhotse import load_manifest_lazy

        return [c.duration for c in load_manifest_lazy(cuts)]
    files = sorted(p for p in Path(audio_dir).rglob("*") if p.suffix in (".flac", ".wav"))
    return [sf.info(str(p)).duration for p in files]


def record(model: str | Path, seconds: dict[str, float]) -> None:
    """Write ``seconds`` into the model file under :data:`k2dec.model.UTTERANCE_SECONDS`."""
    path = Path(model)
    data = torch.load(path, map_location="cpu", weights_only=False)
    data[UTTERANCE_SECONDS] = seconds
    tmp = path.with_name(path.name + ".tmp")
    torch.save(data, tmp)
    tmp.replace(path)
    load_joint_model(path)  # reads back


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--model", required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--cuts", type=click.Path(exists=True, dir_okay=False),
              help="The training cuts (a lhotse manifest).")
@click.option("--audio-dir", type=click.Path(exists=True, file_okay=False),
              help="A folder of the training audio files (.flac / .wav, searched below it).")
def main(model: str, cuts: str | None, audio_dir: str | None) -> None:
    if (cuts is None) == (audio_dir is None):
        raise click.UsageError("give exactly one of --cuts and --audio-dir")
    found = durations(cuts, audio_dir)
    if not found:
        raise click.ClickException(f"no utterances in {cuts or audio_dir}")
    seconds = utterance_seconds(found)
    record(model, seconds)
    click.echo(f"{model}: {UTTERANCE_SECONDS} = {seconds}")


if __name__ == "__main__":
    main()
