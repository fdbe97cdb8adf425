#!/usr/bin/env python3
"""Build a long test recording from a shipped test set: its utterances concatenated with
pauses of ``--min-pause`` to ``--max-pause`` seconds (uniform, seeded), written as one WAV,
with the true start and end of every utterance and the joined reference. Examples::

    # the whole of test-clean (about 7 minutes)
    python scripts/make_long_recording.py \\
        --corpus-dir assets/librispeech-synth/corpus/test-clean --output-dir data/long

    # 10 hours of low noise with 10 utterances spread over it (what a VAD skips)
    python scripts/make_long_recording.py \\
        --corpus-dir assets/librispeech-synth/corpus/test-clean --output-dir data/sparse10h \\
        --sparse-duration 36000

    # 60 minutes, repeating test-other's utterances
    python scripts/make_long_recording.py \\
        --corpus-dir assets/librispeech-synth/corpus/test-other --output-dir data/long60 \\
        --min-duration 3600

Writes, under ``--output-dir``: ``<name>.wav`` (16-bit PCM at the corpus's rate, written
utterance by utterance: memory holds one utterance), ``supervisions.jsonl`` (a lhotse
SupervisionSet: one supervision per utterance, its true ``start`` / ``duration`` in the WAV
and its text) and ``text`` (Kaldi format: ``<name> WORD WORD ...``, the joined reference).
The same arguments make the same files.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import click
import numpy as np
import soundfile as sf
from lhotse import SupervisionSegment, SupervisionSet


def corpus_utterances(corpus_dir: str | Path) -> list[tuple[str, Path, str]]:
    """``(utt_id, flac, text)`` of a LibriSpeech-layout split (``*.trans.txt`` files next to
    ``<utt_id>.flac``), sorted by id."""
    root = Path(corpus_dir)
    out = []
    for trans in sorted(root.rglob("*.trans.txt")):
        for line in trans.read_text(encoding="utf-8").splitlines():
            if line.strip():
                utt, _, text = line.strip().partition(" ")
                out.append((utt, trans.parent / f"{utt}.flac", text.strip()))
    if not out:
        raise ValueError(f"corpus_dir {str(corpus_dir)!r} has no *.trans.txt utterances")
    return sorted(out)


def _repeated(utts: list[tuple[str, Path, str]], num: int | None, min_duration: float
              ) -> Iterator[tuple[str, Path, str]]:
    """The first ``num`` utterances (all if ``None``), repeated until ``min_duration``
    seconds of speech (a positive ``min_duration`` stops as soon as it is reached, within
    the first pass too: a 1-minute recording of a 7-minute test set is 1 minute; else one
    whole pass)."""
    utts = utts[:num] if num else utts
    total, rep = 0.0, 0
    while True:
        for utt, path, text in utts:
            if min_duration > 0 and total >= min_duration:
                return
            yield (utt if rep == 0 else f"{utt}_r{rep}"), path, text
            total += sf.info(str(path)).duration
        rep += 1
        if total >= min_duration:
            return


def make_long_recording(corpus_dir: str | Path, output_dir: str | Path, name: str = "long",
                        num_utterances: int | None = None, min_duration: float = 0.0,
                        min_pause: float = 0.3, max_pause: float = 1.5, seed: int = 0
                        ) -> SupervisionSet:
    """Write the long recording and its supervisions and reference (the module docstring);
    return the supervisions. Each utterance is preceded by a pause (the first too), and the
    recording ends with one. ``num_utterances`` takes the first ones (sorted by id);
    ``min_duration`` (seconds of speech) repeats them (ids suffixed ``_r1``, ``_r2``, ...)."""
    if not 0 <= min_pause <= max_pause:
        raise ValueError(f"need 0 <= min_pause <= max_pause, got {min_pause!r}, {max_pause!r}")
    rng = random.Random(seed)
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    utts = corpus_utterances(corpus_dir)
    rate = sf.info(str(utts[0][1])).samplerate
    sups, words, pos = [], [], 0
    with sf.SoundFile(str(out / f"{name}.wav"), "w", samplerate=rate, channels=1,
                      subtype="PCM_16") as wav:
        for utt, path, text in _repeated(utts, num_utterances, min_duration):
            pause = round(rng.uniform(min_pause, max_pause) * rate)
            wav.write(np.zeros(pause, dtype=np.float32))
            samples, utt_rate = sf.read(str(path), dtype="float32", always_2d=True)
            if utt_rate != rate:
                raise ValueError(f"{path} is at {utt_rate} Hz, the first utterance at {rate} Hz")
            wav.write(samples.mean(axis=1))
            sups.append(SupervisionSegment(id=utt, recording_id=name, start=(pos + pause) / rate,
                                           duration=len(samples) / rate, text=text))
            pos += pause + len(samples)
            words.append(text)
        wav.write(np.zeros(round(rng.uniform(min_pause, max_pause) * rate), dtype=np.float32))
    supervisions = SupervisionSet.from_segments(sups)
    supervisions.to_file(out / "supervisions.jsonl")
    (out / "text").write_text(f"{name} {' '.join(words)}\n", encoding="utf-8")
    return supervisions


def make_sparse_recording(corpus_dir: str | Path, output_dir: str | Path, duration: float,
                          num_utterances: int = 10, noise_db: float = -60.0,
                          name: str = "long", seed: int = 0) -> SupervisionSet:
    """A recording of ``duration`` seconds that is mostly low white noise (``noise_db`` dBFS
    RMS) with the first ``num_utterances`` utterances spread evenly over it: hours of audio
    a VAD skips, so that decoding it costs little (the "10-hour file" of the benchmarks).
    Written 60 s at a time (memory: one block); the same files as
    :func:`make_long_recording` (supervisions, reference). The same arguments make the same
    files."""
    utts = corpus_utterances(corpus_dir)[:num_utterances]
    rate = sf.info(str(utts[0][1])).samplerate
    total = round(duration * rate)
    step = total // (len(utts) + 1)
    starts = [step * (k + 1) for k in range(len(utts))]
    rng = np.random.default_rng(seed)
    scale = np.float32(10 ** (noise_db / 20))
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    sups, pos = [], 0
    with sf.SoundFile(str(out / f"{name}.wav"), "w", samplerate=rate, channels=1,
                      subtype="PCM_16") as wav:
        for (utt, path, text), start in zip(utts, starts):
            while pos < start:
                n = min(start - pos, 60 * rate)
                wav.write(rng.standard_normal(n).astype(np.float32) * scale)
                pos += n
            samples = sf.read(str(path), dtype="float32", always_2d=True)[0].mean(axis=1)
            wav.write(samples)
            sups.append(SupervisionSegment(id=utt, recording_id=name, start=pos / rate,
                                           duration=len(samples) / rate, text=text))
            pos += len(samples)
        while pos < total:
            n = min(total - pos, 60 * rate)
            wav.write(rng.standard_normal(n).astype(np.float32) * scale)
            pos += n
    supervisions = SupervisionSet.from_segments(sups)
    supervisions.to_file(out / "supervisions.jsonl")
    (out / "text").write_text(f"{name} {' '.join(t for _, _, t in utts)}\n", encoding="utf-8")
    return supervisions


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--corpus-dir", required=True, type=click.Path(exists=True, file_okay=False),
              help="A LibriSpeech-layout split, e.g. assets/librispeech-synth/corpus/test-clean.")
@click.option("--output-dir", required=True, type=click.Path(file_okay=False))
@click.option("--name", default="long", show_default=True, help="The recording's id.")
@click.option("--num-utterances", default=None, type=int, help="Only the first N utterances.")
@click.option("--min-duration", default=0.0, show_default=True, type=float,
              help="Repeat the utterances until this many seconds of speech.")
@click.option("--min-pause", default=0.3, show_default=True, type=float)
@click.option("--max-pause", default=1.5, show_default=True, type=float)
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("--sparse-duration", default=None, type=float,
              help="Instead: a recording this many seconds long, low noise with the first "
                   "--num-utterances (default 10) utterances spread over it.")
def main(corpus_dir: str, output_dir: str, name: str, num_utterances: int | None,
         min_duration: float, min_pause: float, max_pause: float, seed: int,
         sparse_duration: float | None) -> None:
    if sparse_duration is not None:
        sups = make_sparse_recording(corpus_dir, output_dir, sparse_duration,
                                     num_utterances or 10, name=name, seed=seed)
    else:
        sups = make_long_recording(corpus_dir, output_dir, name, num_utterances, min_duration,
                                   min_pause, max_pause, seed)
    end = max(s.end for s in sups)
    click.echo(f"{len(sups)} utterances, {end:.1f} s, written to {output_dir}")


if __name__ == "__main__":
    main()
