"""Attention beam search settings against degeneration, on the shipped model (RESULTS.md
"Attention beam search defaults").

Sets: the shipped test sets' first 30 utterances (what the demo reports) and the rest (the dev
utterances ``k2dec demo --tune`` uses), and ``--recordings``: 24 recordings of sentences that no
shipped split holds (the corpus' dev-clean sentences, from Debian's ``fortunes``, see
:mod:`k2dec.train.synth`) spoken by espeak-ng and flite voices at other speaking rates than the
corpus' (95-250 words a minute, duration stretch 0.7-1.6), every third band-limited to 8 kHz
(300-3400 Hz, a telephone channel) and every third with white noise at 15 dB SNR. They are made
once into ``--recordings`` (needs ``espeak-ng``, ``flite``, ``sox`` and ``fortunes``).

Each utterance is encoded once; every setting (``--set``-style ``KEY=VALUE`` lists of
:class:`k2dec.aed.BeamSearchConfig` fields) then searches each utterance alone and is reported
with its WER per set and its process CPU seconds (one torch thread). Usage (repository root):

    python -m scripts.bench.aed_defaults --recordings exp/aed-recordings \\
        --setting ctc_weight=0 --setting ctc_weight=0.3,end_detect=true
"""

from __future__ import annotations

import argparse
import random
import shutil
import subprocess
import time
from pathlib import Path

import numpy as np
import torch

from k2dec.aed import BeamSearchConfig, beam_search
from k2dec.demo import ASSETS, DEMO_CUTS
from k2dec.job import load_assets
from k2dec.methods.registry import override_config

#: (engine, voice, words a minute for espeak-ng / duration stretch for flite)
VOICES = [("espeak", "en-us+m3", 110), ("espeak", "en-us+f2", 230), ("espeak", "en-gb+m7", 140),
          ("espeak", "en-gb-x-rp+f4", 250), ("espeak", "en-us-nyc", 95),
          ("espeak", "en-029+f3", 200), ("flite", "kal16", 1.45), ("flite", "slt", 0.7),
          ("flite", "awb", 1.3), ("flite", "rms", 0.75), ("flite", "kal", 1.6),
          ("flite", "slt", 1.35)]


def make_recordings(out: Path, count: int = 24) -> Path:
    """``out/audio/*.wav`` and ``out/text`` (Kaldi text), made once."""
    import soundfile as sf

    from k2dec.train import synth

    text_file = out / "text"
    if text_file.is_file():
        return out
    for tool in ("espeak-ng", "flite", "sox"):
        if shutil.which(tool) is None:
            raise SystemExit(f"making the recordings needs {tool} (apt-get install {tool})")
    order = sorted(set(synth.load_sentences(min_words=4, max_words=20)))
    random.Random(0).shuffle(order)  # the corpus' order (seed 0): dev-clean is [100:200]
    audio = out / "audio"
    audio.mkdir(parents=True, exist_ok=True)
    lines = []
    for i, sentence in enumerate(order[100:100 + count]):
        engine, voice, rate = VOICES[i % len(VOICES)]
        raw, wav = audio / f"raw{i:02d}.wav", audio / f"real{i:02d}.wav"
        if engine == "espeak":
            cmd = ["espeak-ng", "-v", voice, "-s", str(rate), "-w", str(raw), sentence.lower()]
        else:
            cmd = ["flite", "-voice", voice, "--setf", f"duration_stretch={rate}", "-t",
                   sentence.lower(), "-o", str(raw)]
        subprocess.run(cmd, check=True, capture_output=True)
        if i % 3 == 1:  # a telephone channel
            subprocess.run(["sox", str(raw), "-r", "8000", str(wav), "sinc", "300-3400"],
                           check=True)
        else:
            x, sr = sf.read(raw, dtype="float32")
            if i % 3 == 2:  # white noise at 15 dB SNR
                power = float(np.mean(x ** 2)) + 1e-12
                noise = np.random.default_rng(i).standard_normal(len(x)).astype("float32")
                x = x + noise * np.sqrt(power / 10 ** 1.5)
            sf.write(wav, x, sr)
        raw.unlink()
        lines.append(f"real{i:02d} {sentence}")
    text_file.write_text("\n".join(lines) + "\n")
    return out


def encoded_sets(work: Path, recordings: Path | None):
    """``(assets, {set name: [(reference words, memory, memory_lens, ctc_log_probs)]})``."""

    from k2dec.data import compute_fbank, cuts_from_audio_dir, load_references, prepare_manifests

    prepare_manifests(ASSETS / "corpus", work / "manifests")  # as the demo does (no graphs)
    cut_sets = compute_fbank(work / "manifests", work / "fbank", progress=False)
    assets = load_assets(ASSETS / "model.pt", ASSETS / "lang")
    sets: dict[str, list] = {}
    for part in ("test-clean", "test-other"):
        cuts = sorted(cut_sets[part], key=lambda c: c.id)
        sets[f"{part}[:{DEMO_CUTS}]"], sets[f"{part}[{DEMO_CUTS}:]"] = (
            cuts[:DEMO_CUTS], cuts[DEMO_CUTS:])
    if recordings is not None:
        refs = load_references(recordings / "audio", recordings / "text")
        sets["recordings"] = list(cuts_from_audio_dir(
            recordings / "audio", work / "recordings-fbank", references=refs,
            extractor=assets.model.feature_config.extractor(), progress=False).cuts)
    out = {}
    for name, cuts in sets.items():
        items = []
        for cut in cuts:
            feats = torch.from_numpy(cut.load_features()).unsqueeze(0)
            enc = assets.model.encode(feats, torch.tensor([feats.shape[1]]))
            items.append((cut.supervisions[0].text.split(), enc.memory, enc.memory_lens,
                          enc.ctc_log_probs))
        out[name] = items
    return assets, out


def measure(assets, sets, config: BeamSearchConfig) -> tuple[dict[str, float], float]:
    """``({set: WER %}, process CPU seconds)`` of one setting."""
    import kaldialign

    sp = assets.sp
    wers = {}
    start = time.process_time()
    for name, items in sets.items():
        errors = words = 0
        for ref, memory, lens, ctc in items:
            hyps = beam_search(assets.model.attention_decoder, memory, lens, config,
                               ctc_log_probs=ctc if config.ctc_weight > 0 else None)[0]
            hyp = sp.decode(hyps[0].tokens).split() if hyps else []
            errors += kaldialign.edit_distance(ref, hyp)["total"]
            words += len(ref)
        wers[name] = 100.0 * errors / max(1, words)
    return wers, time.process_time() - start


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work-dir", type=Path, default=Path("exp/bench-aed-defaults"))
    parser.add_argument("--recordings", type=Path, default=None,
                        help="where the recordings are (made there once when missing)")
    parser.add_argument("--setting", action="append", default=None,
                        help="KEY=VALUE[,KEY=VALUE...] of BeamSearchConfig (repeatable)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    settings = args.setting or ["ctc_weight=0", "ctc_weight=0.3",
                                "ctc_weight=0.3,end_detect=true", "ctc_weight=0.5"]
    recordings = make_recordings(args.recordings) if args.recordings is not None else None
    assets, sets = encoded_sets(args.work_dir, recordings)
    print("| setting | " + " | ".join(sets) + " | CPU s |")
    print("| --- | " + " | ".join("---:" for _ in sets) + " | ---: |")
    for setting in settings:
        config = override_config(BeamSearchConfig(), setting.split(","))
        wers, seconds = measure(assets, sets, config)
        print(f"| {setting} | " + " | ".join(f"{wers[s]:.2f}" for s in sets)
              + f" | {seconds:.1f} |", flush=True)


if __name__ == "__main__":
    main()
