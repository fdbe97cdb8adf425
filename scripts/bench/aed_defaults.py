"""Attention beam search settings against degeneration, on the shipped model (RESULTS.md
"Attention beam search defaults").

Sets: the shipped test sets' first 30 utterances (what the demo reports) and the rest (the dev
utterances ``k2dec demo --tune`` uses), and ``--recordings``: 24 recordings of sentences that no
shipped split holds (the corpus' dev-clean sentences, from Debian's ``fortunes``, see
:mod:`k2dec.train.synth`) spoken by espeak-ng and flite voices at other speaking rates than the
corpus' (95-250 words a minute, duration stretch 0.7-1.6), every third band-limited to 8 kHz
(300-3400 Hz, a telephone channel) and every third with white noise at 15 dB SNR. They are made
once into ``--recordings`` (needs ``espeak-ng``, ``flite``, ``sox`` and ``fortunes``). And
``--real``: recordings of human speech this project did not make, the speech files Debian's
``codec2-examples`` and ``alsa-utils`` ship (:data:`REAL`; copied into ``--real`` once, raw
8 kHz files converted with ``sox``), with references from ``pocketsphinx`` (a peer recognizer
with its own English model, ``requirements/bench-peer.txt``) for codec2-examples' files when it
is installed (else none: the degenerate count needs no reference) and the words alsa-utils'
files say ("Front Left").

Each utterance is encoded once; every setting (``--set``-style ``KEY=VALUE`` lists of the
attention method's fields: ``ctc_weight`` is ``fusion.ctc_weight``, the others the search's)
then searches each utterance alone and is reported with its WER per set, its count of
degenerate hypotheses per set (a token, a word or an n-gram of up to 8 repeated 4 or more times
in a row, :func:`k2dec.results.is_degenerate` on the tokens or the words) and its process CPU
seconds (one torch thread). The encoder outputs are kept in ``--work-dir/encoded-SET.pt`` for
the next run (one run at a time per ``--work-dir``: the features are rewritten in it). Usage
(repository root):

    python -m scripts.bench.aed_defaults --recordings exp/aed-recordings --real exp/aed-real \\
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
from k2dec.methods import override_config
from k2dec.methods.aed import AttentionBeamSearchMethodConfig
from k2dec.methods.parts import FusionConfig
from k2dec.results import is_degenerate
from k2dec.testing.aed import joint_scorers

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


#: (Debian package, file): the human speech the packages ship (the recordings of 15 s or less;
#: the ``.raw`` files are 8 kHz 16-bit mono)
REAL = [("codec2-examples", f"/usr/share/codec2/wav/{name}.wav") for name in (
    "big_dog", "cross", "f2400", "forig", "hts1a", "hts2a", "m2400", "mmt1", "morig", "vk5qi",
    "wia_16kHz")] + [("codec2-examples", "/usr/share/codec2/raw/speech_orig_16k.wav")] + [
    ("codec2-examples", f"/usr/share/codec2/raw/{name}.raw") for name in (
        "hts1", "hts2", "kristoff", "g3plx", "cq_ref", "ve9qrp_10s")] + [
    ("alsa-utils", f"/usr/share/sounds/alsa/{name}.wav") for name in (
        "Front_Center", "Front_Left", "Front_Right", "Rear_Center", "Rear_Left", "Rear_Right",
        "Side_Left", "Side_Right")]


def real_recordings(out: Path, peer: bool = True) -> Path:
    """``out/audio/*.wav`` (the files of :data:`REAL`, 16-bit wav at their own rate) and
    ``out/text``: alsa-utils' files say their names, codec2-examples' get pocketsphinx's
    transcripts when it is installed and ``peer`` (none otherwise), made once."""
    audio = out / "audio"
    audio.mkdir(parents=True, exist_ok=True)
    for package, path in REAL:
        src = Path(path)
        if not src.is_file():
            raise SystemExit(f"{src} is missing (apt-get install {package})")
        wav = audio / f"{package.split('-')[0]}-{src.stem}.wav"
        if wav.is_file():
            continue
        fmt = ["-t", "raw", "-r", "8000", "-e", "signed", "-b", "16", "-c", "1"]
        subprocess.run(["sox", *(fmt if src.suffix == ".raw" else []), str(src), "-b", "16",
                        str(wav)], check=True)
    text = out / "text"
    if not text.is_file():  # alsa-utils' files say their names ("Front Left")
        refs = dict(peer_transcripts(sorted(audio.glob("codec2-*.wav"))) if peer else [])
        refs.update((wav.stem, wav.stem.split("-", 1)[1].replace("_", " ").upper())
                    for wav in sorted(audio.glob("alsa-*.wav")))
        text.write_text("".join(f"{utt} {words}\n" for utt, words in sorted(refs.items())))
    return out


def peer_transcripts(wavs: list[Path]) -> list[tuple[str, str]]:
    """``[(file stem, pocketsphinx's words upper-cased)]``, or ``[]`` without pocketsphinx."""
    try:
        from pocketsphinx import Decoder
    except ImportError:
        return []
    import soundfile as sf

    decoder = Decoder(samprate=16000)
    lines = []
    for wav in wavs:
        subprocess.run(["sox", str(wav), "-r", "16000", "-c", "1", "-b", "16",
                        str(wav.with_suffix(".tmp.wav"))], check=True)
        pcm, _ = sf.read(wav.with_suffix(".tmp.wav"), dtype="int16")
        wav.with_suffix(".tmp.wav").unlink()
        decoder.start_utt()
        decoder.process_raw(pcm.tobytes(), full_utt=True)
        decoder.end_utt()
        hyp = decoder.hyp()
        words = [w for w in (hyp.hypstr if hyp else "").upper().split() if "<" not in w]
        lines.append((wav.stem, " ".join(words)))
    return lines


def encoded_sets(work: Path, recordings: Path | None, real: Path | None = None):
    """``(assets, {set name: [(reference words or None, memory, memory_lens, ctc_log_probs)]})``,
    the encoder outputs of each set cached in ``work/encoded-SET.pt`` (remove it when the set
    changes)."""

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
    if real is not None:
        refs = load_references(real / "audio", real / "text") if (real / "text").is_file() else {}
        sets["real"] = list(cuts_from_audio_dir(
            real / "audio", work / "real-fbank", references=refs,
            extractor=assets.model.feature_config.extractor(), progress=False).cuts)
    out = {}
    for name, cuts in sets.items():
        cache = work / f"encoded-{name}.pt"
        if cache.is_file():
            out[name] = torch.load(cache)
            continue
        items = []
        for cut in cuts:
            feats = torch.from_numpy(cut.load_features()).unsqueeze(0)
            enc = assets.model.encode(feats, torch.tensor([feats.shape[1]]))
            sup = cut.supervisions[0] if cut.supervisions else None
            ref = sup.text.split() if sup is not None and sup.text is not None else None
            items.append((ref, enc.memory, enc.memory_lens, enc.ctc_log_probs))
        out[name] = items
        torch.save(items, cache)
    return assets, out


def measure(assets, sets, config: AttentionBeamSearchMethodConfig):
    """``({set: WER % or None}, {set: degenerate hypotheses}, process CPU seconds,
    {set: [(hypothesis words, degenerate)]})`` of one setting; WER over the utterances with a
    reference."""
    import kaldialign

    sp = assets.sp
    wers, degenerate, hyps_out = {}, {}, {}
    start = time.process_time()
    for name, items in sets.items():
        errors = words = bad = 0
        hyps_out[name] = []
        for ref, memory, lens, ctc in items:
            decoder = assets.model.attention_decoder
            hyps = beam_search(decoder, memory, lens, config.search, joint_scorers(
                decoder, lens, ctc, config.fusion.ctc_weight))[0]
            tokens = list(hyps[0].tokens) if hyps else []
            hyp = sp.decode(tokens).split()
            looped = is_degenerate(tokens) or is_degenerate(hyp)
            bad += looped
            hyps_out[name].append((hyp, looped))
            if ref is not None:
                errors += kaldialign.edit_distance(ref, hyp)["total"]
                words += len(ref)
        wers[name] = 100.0 * errors / words if words else None
        degenerate[name] = bad
    return wers, degenerate, time.process_time() - start, hyps_out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work-dir", type=Path, default=Path("exp/bench-aed-defaults"))
    parser.add_argument("--recordings", type=Path, default=None,
                        help="where the recordings are (made there once when missing)")
    parser.add_argument("--real", type=Path, default=None,
                        help="where the real (Debian-shipped) recordings go (made once)")
    parser.add_argument("--setting", action="append", default=None,
                        help="KEY=VALUE[,KEY=VALUE...] of BeamSearchConfig (repeatable)")
    parser.add_argument("--show", action="store_true",
                        help="print each degenerate hypothesis under its setting's row")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    settings = args.setting or ["ctc_weight=0", "ctc_weight=0.3",
                                "ctc_weight=0.3,end_detect=true", "ctc_weight=0.5"]
    recordings = make_recordings(args.recordings) if args.recordings is not None else None
    real = real_recordings(args.real) if args.real is not None else None
    assets, sets = encoded_sets(args.work_dir, recordings, real)
    refs = {s: sum(r is not None and is_degenerate(r) for r, *_ in items)
            for s, items in sets.items()}
    print("degenerate references: " + ", ".join(f"{s} {n}" for s, n in refs.items()))
    print("| setting | " + " | ".join(f"{s} WER (degenerate)" for s in sets)
          + " | degenerate | CPU s |")
    print("| --- | " + " | ".join("---:" for _ in sets) + " | ---: | ---: |")
    for setting in settings:
        config = override_config(AttentionBeamSearchMethodConfig(BeamSearchConfig(),
                                                                  FusionConfig()),
                                 setting.split(","))
        wers, degenerate, seconds, hyps = measure(assets, sets, config)
        cells = [f"{'-' if wers[s] is None else f'{wers[s]:.2f}'} ({degenerate[s]})"
                 for s in sets]
        print(f"| {setting} | " + " | ".join(cells)
              + f" | {sum(degenerate.values())} | {seconds:.1f} |", flush=True)
        if args.show:
            for s, pairs in hyps.items():
                for hyp, looped in pairs:
                    if looped:
                        print(f"    {s}: {' '.join(hyp)[:160]}")


if __name__ == "__main__":
    main()
