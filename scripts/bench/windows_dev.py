"""Where the fixed-window segmenter loses words, on the DEV recording
(``scripts/make_dev_long_recording.py``; never a test set): the recording decoded long-form
with ``--segmenter windows`` for several window lengths and contexts, against its utterances
decoded one by one.

Per setting: the WER; the errors within ``--near`` seconds of a seam (a window core's edge)
and elsewhere, each per reference word there (a reference word is placed at the time of the
hypothesis word aligned to it, a deleted one at the end of the hypothesis word before it);
how many seams fall inside an utterance (through speech) rather than in a pause. Errors away
from every seam measure what the window length does to the model; errors near the seams what
the cutting and stitching do. Usage (from the repository root)::

    python scripts/make_dev_long_recording.py \\
        --corpus-json assets/librispeech-synth/corpus/corpus.json --output-dir data/dev-long
    python -m scripts.bench.windows_dev --dev-dir data/dev-long --chunks 5,10,15,20,30 \\
        --contexts 2 --methods greedy_search
"""

from __future__ import annotations

import argparse
import itertools
import shutil
from pathlib import Path

import kaldialign

from .common import SHIPPED, WORK, markdown_table, one_thread


def _assets():
    from k2dec.demo import prepare_demo
    from k2dec.job import load_assets

    lang, graphs, _ = prepare_demo(SHIPPED, WORK)
    return load_assets(SHIPPED / "model.pt", lang, graph_dir=graphs)


def decode(assets, folder: Path, method: str, out: Path, refs: dict, **config):
    """``k2dec decode --audio-dir folder`` of one method, its summary."""
    from k2dec.data import cuts_from_audio_dir
    from k2dec.job import DecodeConfig, decode_cuts, plan_methods, read_settings

    run = plan_methods([method], settings=read_settings(SHIPPED / "decode.json"))[0]
    shutil.rmtree(out, ignore_errors=True)
    cuts = cuts_from_audio_dir(folder, out / "feats", refs, progress=False).cuts
    return decode_cuts(assets, cuts, run.method, out, "t", run.config, DecodeConfig(**config),
                       calibration=run.calibration)


def placed_errors(ref: list[str], words) -> list[tuple[float, bool, bool]]:
    """``(time, is_ref_word, is_error)`` per reference word and per inserted word, aligning
    ``ref`` with the CTM ``words`` (time-ordered)."""
    out, h, last = [], 0, 0.0
    for r, w in kaldialign.align(ref, [x.word for x in words], "*"):
        if w != "*":
            t = words[h].start + words[h].duration / 2
            last = words[h].start + words[h].duration
            h += 1
        else:
            t = last
        out.append((t, r != "*", r != w))
    return out


def seam_rows(placed, seams: list[float], near: float) -> tuple[int, int, int, int]:
    """``(ref words near, errors near, ref words away, errors away)``."""
    counts = [0, 0, 0, 0]
    for t, is_ref, err in placed:
        k = 0 if any(abs(t - s) <= near for s in seams) else 2
        counts[k] += is_ref
        counts[k + 1] += err
    return tuple(counts)


def seams_in_speech(seams: list[float], sups) -> int:
    return sum(any(s.start < x < s.end for s in sups) for x in seams)


def _value(text: str) -> float | str:
    try:
        return float(text)
    except ValueError:
        return text


def _pct(a: int, b: int) -> str:
    return f"{100 * a / b:.1f}" if b else "n/a"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dev-dir", required=True, type=Path)
    p.add_argument("--chunks", default="5,10,15,20,30")
    p.add_argument("--contexts", default="2")
    p.add_argument("--methods", default="greedy_search")
    p.add_argument("--search", default="0",
                   help="seam search, as fractions of the window length (comma-separated)")
    p.add_argument("--near", type=float, default=1.0)
    p.add_argument("--work", type=Path, default=WORK / "windows_dev")
    p.add_argument("--extra", default="", help="more DecodeConfig fields: key=value,...")
    p.add_argument("--skip-utts", action="store_true", help="no per-utterance decoding")
    args = p.parse_args()
    one_thread()
    from lhotse import SupervisionSet

    from k2dec.results import read_ctm, read_results

    sups = sorted(SupervisionSet.from_file(args.dev_dir / "supervisions.jsonl"),
                  key=lambda s: s.start)
    name, ref_text = (args.dev_dir / "text").read_text().split(maxsplit=1)
    ref = ref_text.split()
    long_dir = args.work / "recording"
    long_dir.mkdir(parents=True, exist_ok=True)
    if not (long_dir / f"{name}.wav").exists():
        shutil.copy(args.dev_dir / f"{name}.wav", long_dir / f"{name}.wav")
    utt_refs = {s.id: s.text for s in sups}
    extra = {k: _value(v) for k, v in (kv.split("=") for kv in args.extra.split(",") if kv)}
    assets = _assets()
    rows = []
    for method in args.methods.split(","):
        if not args.skip_utts:
            utts = decode(assets, args.dev_dir / "corpus", method,
                          args.work / method / "utts", utt_refs)
            rows.append([method, "per utterance", "", "", utts.headline[1], "", "", "", ""])
        for context, chunk, frac in itertools.product(
                map(float, args.contexts.split(",")), map(float, args.chunks.split(",")),
                map(float, args.search.split(","))):
                out = args.work / method / f"w{chunk:g}-c{context:g}-s{frac:g}"
                settings = {"segmenter": "windows", "segment_max": chunk,
                            "segment_context": context, "segment_search": frac * chunk,
                            **extra}
                s = decode(assets, long_dir, method, out, {name: ref_text}, **settings)
                rec = read_results(s.results_path)[name]
                cores = rec.get("segments", [])
                seams = [a + context for a, _ in cores[1:]]
                ctm = s.results_path.parent / f"ctm-t-{method}.ctm"
                words = read_ctm(ctm).get(name, []) if ctm.is_file() else []
                near = seam_rows(placed_errors(ref, words), seams, args.near)
                rows.append([method, f"{chunk:g}", f"{context:g}", f"{frac * chunk:g}",
                             s.headline[1],
                             f"{len(seams)} ({seams_in_speech(seams, sups)})",
                             f"{near[0]} / {_pct(near[1], near[0])}",
                             f"{near[2]} / {_pct(near[3], near[2])}", len(words)])
                print(rows[-1], flush=True)
    print(markdown_table(["method", "window s", "context s", "seam search s", "WER %",
                          "seams (in speech)", f"ref words within {args.near:g} s of a seam "
                          "/ errors per 100", "ref words elsewhere / errors per 100",
                          "hyp words"], rows))


if __name__ == "__main__":
    main()
