"""Word-boundary accuracy of forced alignment (``k2dec align``) against known boundaries::

    python -m scripts.bench.align_boundaries --out-dir exp/align-bench [--num-sentences 60] \\
        [--long-minutes 60]

Two references:

- **TTS word timings**: festival synthesizes the shipped test-other transcripts with its
  installed voices and reports each word's start and end (``word_start`` / ``word_end`` of
  its Word relation); the audio is aligned to the transcript and every word's start and end
  compared with festival's (sentences where festival's words differ from the transcript's,
  e.g. a number it expands, are left out and counted).
- **Utterance edges of a long recording**: ``scripts/make_long_recording.py`` joins a test
  set's utterances with 0.3-1.5 s pauses; the recording is aligned to the joined transcript
  segment by segment, and each utterance's first word start / last word end is compared
  with where its audio starts / ends, both raw and from its speech onset / offset (the first
  / last 10 ms frame within 40 dB of the utterance's loudest; the synthesized files carry
  their own leading and trailing silence).

Prints a table (median / 95th percentile absolute error in ms, share within 20 / 50 / 100
ms), the machine and its load, the alignment's wall time per audio second and peak RSS.
1 torch thread.
"""

from __future__ import annotations

import argparse
import re
import resource
import subprocess
import time
from pathlib import Path

import numpy as np
import soundfile as sf
import torch

from k2dec.job import load_assets
from k2dec.recognizer.align import AlignConfig, align_recording

from ..make_long_recording import make_long_recording
from .common import REPO
from .machine import cpu_model, git_commit, load_average

ASSETS = REPO / "assets" / "librispeech-synth"
VOICES = ("ked_diphone", "cmu_us_slt_arctic_hts")


def _transcripts(corpus: Path) -> list[tuple[str, str]]:
    out = []
    for trans in sorted(corpus.rglob("*.trans.txt")):
        for line in trans.read_text().splitlines():
            if line.strip():
                utt, text = line.split(maxsplit=1)
                out.append((utt, text.strip()))
    return out


def _festival(voice: str, items: list[tuple[str, str]], out: Path) -> dict[str, list]:
    """Synthesize each ``(id, text)`` with festival's ``voice`` into ``out/<id>.wav``; each
    id's festival words with their start and end (seconds)."""
    lines = [f"(voice_{voice})"]
    for utt, text in items:
        clean = re.sub(r'["\\]', "", text.lower())
        lines += [f'(set! utt (utt.synth (Utterance Text "{clean}")))',
                  f'(utt.save.wave utt "{out / (utt + ".wav")}" \'riff)',
                  f'(format t "UTT {utt}\\n")',
                  '(mapcar (lambda (w) (format t "%s %f %f\\n" (item.name w) '
                  '(item.feat w "word_start") (item.feat w "word_end"))) '
                  "(utt.relation.items utt 'Word))"]
    script = out / f"{voice}.scm"
    script.write_text("\n".join(lines) + "\n")
    text = subprocess.run(["festival", "-b", str(script)], capture_output=True, text=True,
                          check=True, timeout=3600).stdout
    words: dict[str, list] = {}
    current = None
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "UTT":
            current = parts[1]
            words[current] = []
        elif len(parts) == 3 and current is not None:
            words[current].append((parts[0].upper(), float(parts[1]), float(parts[2])))
    return words


def _stats(errors: list[float]) -> str:
    e = np.abs(np.asarray(errors)) * 1000
    if e.size == 0:
        return "| - | - | - | - | - |"
    return (f"| {e.size} | {np.median(e):.0f} | {np.percentile(e, 95):.0f} | "
            f"{(e <= 20).mean():.0%} | {(e <= 50).mean():.0%} | {(e <= 100).mean():.0%} |")


def _tts_rows(assets, num: int, work: Path, config: AlignConfig) -> list[str]:
    items = _transcripts(ASSETS / "corpus" / "test-other")[:num]
    rows = []
    for voice in VOICES:
        out = work / voice
        out.mkdir(parents=True, exist_ok=True)
        truth = _festival(voice, items, out)
        starts, ends, skipped = [], [], 0
        for utt, text in items:
            ref = truth.get(utt, [])
            if [w for w, _, _ in ref] != [w.upper() for w in text.split()]:
                skipped += 1
                continue
            result = align_recording(assets.model, assets.sp, out / f"{utt}.wav", text,
                                     config=config)
            for (_, s, e), w in zip(ref, result.words):
                if w.start is not None:
                    starts.append(w.start - s)
                    ends.append(w.end - e)
        rows.append(f"| festival {voice}, word start ({skipped} sentences left out) "
                    + _stats(starts))
        rows.append(f"| festival {voice}, word end " + _stats(ends))
    return rows


def _edges(path: Path) -> tuple[float, float]:
    """Seconds from the start of the file to its speech onset, and from its speech offset
    to its end (10 ms frames within 40 dB of the loudest)."""
    x, rate = sf.read(str(path), dtype="float32")
    hop = rate // 100
    frames = x[: x.size // hop * hop].reshape(-1, hop)
    db = 10 * np.log10(np.maximum((frames ** 2).mean(axis=1), 1e-12))
    loud = np.nonzero(db > db.max() - 40)[0]
    return loud[0] * hop / rate, x.size / rate - (loud[-1] + 1) * hop / rate


def _long_rows(assets, work: Path, config: AlignConfig, minutes: float
               ) -> tuple[list[str], str]:
    corpus = ASSETS / "corpus" / "test-clean"
    sups = make_long_recording(corpus, work / "long", min_duration=minutes * 60)
    text = (work / "long" / "text").read_text().split(maxsplit=1)[1]
    t0 = time.perf_counter()
    result = align_recording(assets.model, assets.sp, work / "long" / "long.wav", text,
                             config=config)
    wall = time.perf_counter() - t0
    flacs = {p.stem: p for p in corpus.rglob("*.flac")}
    first = np.cumsum([0] + [len(s.text.split()) for s in sups])
    raw_s, raw_e, on_s, off_e = [], [], [], []
    for k, s in enumerate(sups):
        a, b = result.words[first[k]], result.words[first[k + 1] - 1]
        lead, trail = _edges(flacs[s.id.split("_r")[0]])
        if a.start is not None:
            raw_s.append(a.start - s.start)
            on_s.append(a.start - (s.start + lead))
        if b.end is not None:
            raw_e.append(b.end - s.end)
            off_e.append(b.end - (s.end - trail))
    rows = [f"| long recording ({result.duration / 60:.1f} min, {len(sups)} utterances, "
            f"{len(result.segments)} segments): utterance start, raw " + _stats(raw_s),
            "| ... utterance start, from speech onset " + _stats(on_s),
            "| ... utterance end, raw " + _stats(raw_e),
            "| ... utterance end, from speech offset " + _stats(off_e)]
    missing = len(result.missing)
    speed = (f"long recording: {wall:.1f} s wall for {result.duration:.0f} s of audio "
             f"(RTF {wall / result.duration:.3f}), {missing} of {len(result.words)} words "
             f"missing, {len(result.untranscribed)} stretches of speech not in the "
             "transcript (flags: scripts/bench/align_flags.py)")
    return rows, speed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out-dir", type=Path, default=Path("exp/align-bench"))
    parser.add_argument("--num-sentences", type=int, default=60)
    parser.add_argument("--long-minutes", type=float, default=0.0,
                        help="Minutes of speech in the long recording (test-clean repeated; "
                             "0: test-clean once, about 7 minutes).")
    args = parser.parse_args()
    torch.set_num_threads(1)
    load = load_average()
    assets = load_assets(ASSETS / "model.pt", ASSETS / "lang")
    config = AlignConfig()
    long_rows, speed = _long_rows(assets, args.out_dir, config, args.long_minutes)
    rows = _tts_rows(assets, args.num_sentences, args.out_dir, config) + long_rows
    print(f"# align boundaries: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
          f"commit {git_commit()}, {cpu_model()}, load before: {load}, after: "
          f"{load_average()}")
    print("| reference | words | median ms | p95 ms | <= 20 ms | <= 50 ms | <= 100 ms |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for row in rows:
        print(row)
    print(speed + f"; peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f}"
          " MB")


if __name__ == "__main__":
    main()
