"""Benchmark area "longform": long recordings decoded whole (``k2dec decode``'s long-form
path, :mod:`k2dec.job.longform`), per method: peak RSS and real-time factor against the
recording's length, and the accuracy of the stitching.

Inputs: the shipped model and lang dir, the graphs the demo compiles, and recordings built by
``scripts/make_long_recording.py`` from the shipped test-clean utterances (0.3-1.5 s pauses;
repeated to reach the length). Two parts:

* **scale**: each (method, length) in a fresh process that does what ``k2dec decode
  --audio-dir`` does (features of the file computed from its audio read 10 s at a time,
  VAD segments of at most 30 s, the method over the segments in batches of at most 60 s
  (30 s for a method that builds a lattice),
  each segment reading only its own feature frames, one stitched record), reporting its
  peak RSS (Linux ``VmHWM``; the model and all three graphs loaded, the RNN LM and LODR's
  token n-gram too for the methods that need them) and wall seconds per
  audio second; lengths 1, 10, 30 and 60 minutes of speech (``--quick``: 1 and 3;
  ``--smoke``: 0.5 and 1);
* **accuracy**: test-clean joined into one recording (``--quick``: its first 20 utterances)
  decoded long-form against its utterances decoded one by one: WER, and per utterance the
  error of its first decoded word's start against its true start (median, 95th
  percentile). The methods of :data:`METHODS` with both segmenters; ``--accuracy-methods
  all`` (or ``A,B,...``) adds every registered method (the oracles given the references)
  with the VAD segmenter; a row that cannot run says why.

Usage (from the repository root)::

    python -m scripts.bench.longform [--quick | --smoke] [--report DIR]
    python -m scripts.bench.longform --accuracy-only --accuracy-methods all \
        --accuracy-cases acc.jsonl  # resumable: rows already in acc.jsonl are kept
"""

from __future__ import annotations

import json
import logging
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from .common import (
    REPO,
    SHIPPED,
    WORK,
    Report,
    area_parser,
    current_rss_mb,
    mode_of,
    one_thread,
    peak_rss_mb,
)

AREA = "longform"
METHODS = ("greedy_search", "modified_beam_search", "1best", "fast_beam_search_nbest_LG")
LENGTHS = {"full": (1, 10, 30, 60), "quick": (1, 3), "smoke": (0.5, 1)}
ACCURACY_UTTS = {"full": None, "quick": 20, "smoke": 8}
CORPUS = SHIPPED / "corpus" / "test-clean"
TARGET_RSS = "peak RSS <= 1.5 GB at the longest length, within 10% of the shortest"
TARGET_RTF = "RTF at the longest length within 1.2x of the shortest"
TARGET_WER = "long-form WER within 0.5 absolute of per-utterance decoding"
TARGET_ANY = "a 10-hour file's peak RSS within 10% of a 1-hour one's"
#: minutes of the sparse recordings (low noise, a few utterances) of the any-length part
SPARSE_MINUTES = {"full": (60, 600), "quick": (10, 60), "smoke": (1, 5)}
SPARSE_UTTERANCES = 10


def _script():
    """scripts/make_long_recording.py as a module."""
    if str(REPO / "scripts") not in sys.path:
        sys.path.insert(0, str(REPO / "scripts"))
    import make_long_recording

    return make_long_recording


def recording(minutes: float | None, num: int | None = None, sparse: bool = False) -> Path:
    """A folder holding one long WAV (and its ``text``), cached under the work dir;
    ``sparse``: ``minutes`` of low noise with 10 utterances spread over it."""
    name = (f"sparse{minutes:g}min" if sparse else f"{minutes:g}min") if minutes else \
        f"utts{num or 'all'}"
    folder = WORK / AREA / name
    if not (folder / "long.wav").is_file():
        folder.mkdir(parents=True, exist_ok=True)
        if sparse:
            _script().make_sparse_recording(CORPUS, folder, (minutes or 0) * 60.0,
                                            SPARSE_UTTERANCES)
        else:
            _script().make_long_recording(CORPUS, folder, num_utterances=num,
                                          min_duration=(minutes or 0) * 60.0)
    return folder


def lm_inputs(methods: tuple[str, ...]) -> dict:
    """``load_assets``' ``lm_paths`` / ``lodr_arpa``: the shipped RNN LM when one of
    ``methods`` needs a neural LM, LODR's token n-gram when one needs it (what ``k2dec decode
    --rnn-lm`` / ``--lodr-arpa`` would be given for them), else None."""
    from k2dec.demo import SHIPPED_TOKEN_LM
    from k2dec.methods import get_method

    needs = {r for m in methods for r in get_method(m).requires}
    return {"lm_paths": {"rnn_lm": SHIPPED / "lm" / "rnn_lm.pt"} if "lm" in needs else None,
            "lodr_arpa": SHIPPED / "lm" / SHIPPED_TOKEN_LM if "lodr" in needs else None}


def _assets(methods: tuple[str, ...] = ()):
    """The shipped model and graphs as ``k2dec decode --graph-dir`` loads them, and the LMs
    ``methods`` need (:func:`lm_inputs`)."""
    from k2dec.demo import prepare_demo
    from k2dec.job import load_assets

    lang, graphs, _ = prepare_demo(SHIPPED, WORK)
    return load_assets(SHIPPED / "model.pt", lang, graph_dir=graphs, **lm_inputs(methods))


def worker_references(folder: Path, method: str) -> dict[str, str] | None:
    """The recording's reference (``{recording id: words}``, from its ``text``) when
    ``method`` is an oracle (``needs_references``), as ``k2dec decode --text`` would give
    it; else None (the other methods decode without one, scoring nothing)."""
    from k2dec.data import read_kaldi_text
    from k2dec.methods import get_method

    if not get_method(method).needs_references:
        return None
    return read_kaldi_text(folder / "text")


def _decode(assets, folder: Path, method: str, out: Path, refs=None, **config):
    from k2dec.data import cuts_from_audio_dir
    from k2dec.job import DecodeConfig, decode_cuts, plan_methods, read_settings

    run = plan_methods([method], settings=read_settings(SHIPPED / "decode.json"))[0]
    cuts = cuts_from_audio_dir(folder, out / "feats", refs, progress=False).cuts
    return decode_cuts(assets, cuts, run.method, out, "t", run.config, DecodeConfig(**config),
                       calibration=run.calibration)


def worker(method: str, minutes: float, sparse: bool = False) -> dict:
    """One scale case, in this process: peak RSS and RTF of decoding the recording."""
    one_thread()
    folder = recording(minutes, sparse=sparse)
    assets = _assets((method,))
    base = current_rss_mb()
    out = WORK / AREA / "out" / f"{method}-{'sparse' if sparse else ''}{minutes:g}"
    shutil.rmtree(out, ignore_errors=True)
    start, cpu = time.perf_counter(), time.process_time()
    summary = _decode(assets, folder, method, out, worker_references(folder, method))
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    from k2dec.results import read_results

    rec = read_results(summary.results_path)["long"]
    audio = sum(b - a for a, b in rec.get("segments", [])) if rec["status"] == "ok" else 0
    import soundfile as sf

    duration = sf.info(str(folder / "long.wav")).duration
    shutil.rmtree(out, ignore_errors=True)  # a 10-hour file's features are 1.1 GB
    return {"rss_mb": peak_rss_mb(), "base_mb": base, "rtf": seconds / duration,
            "seconds": seconds, "cpu_s": cpu, "duration": duration, "job_rtf": summary.rtf,
            "status": rec["status"], "error": rec.get("error", ""),
            "segments": len(rec.get("segments", [])), "speech_s": audio,
            "wer": summary.headline[1]}


def run_case(method: str, minutes: float, sparse: bool = False,
             cases: Path | None = None) -> dict:
    """One scale case in a fresh process (``cases``: a JSONL file of the cases already run,
    reused, and where this one is appended)."""
    key = {"method": method, "minutes": minutes, "sparse": sparse}
    if cases is not None and cases.is_file():
        for line in cases.read_text().splitlines():
            got = json.loads(line)
            if {k: got.get(k) for k in key} == key and got["status"] == "ok":
                return got
    cmd = [sys.executable, "-m", "scripts.bench.longform", "--worker", method, str(minutes)]
    proc = subprocess.run(cmd + (["--sparse"] if sparse else []), cwd=REPO,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        got = {"status": "failed", "error": (proc.stderr.strip().splitlines() or [""])[-1]}
    else:
        got = json.loads(proc.stdout.strip().splitlines()[-1])
    got = {**key, **got}
    if cases is not None:
        with cases.open("a") as f:
            f.write(json.dumps(got) + "\n")
    return got


def _starts(summary, sups) -> list[float]:
    """Per utterance, |first decoded word's start - its true start| (seconds)."""
    from k2dec.results import read_ctm

    ctm = summary.results_path.parent / f"ctm-t-{next(iter(summary.wers), '')}.ctm"
    if not ctm.is_file():
        return []
    words = read_ctm(ctm).get("long", [])
    out = []
    for sup in sups:
        inside = [w for w in words if sup.start - 0.5 <= w.start <= sup.end]
        if inside:
            out.append(abs(inside[0].start - sup.start))
    return out


def accuracy_methods(spec: str | None) -> tuple[str, ...]:
    """The methods of the accuracy part: ``None`` -> :data:`METHODS`, ``"all"`` -> every
    registered method (oracles included; :data:`METHODS` first, then the others in the
    registry's order), else a comma-separated list of registered names."""
    from k2dec.methods import list_methods

    names = [m.name for m in list_methods()]
    if spec is None:
        return METHODS
    if spec.strip() == "all":
        return METHODS + tuple(n for n in names if n not in METHODS)
    got = tuple(m.strip() for m in spec.split(",") if m.strip())
    unknown = [m for m in got if m not in names]
    if unknown or not got:
        raise ValueError(f"--accuracy-methods {spec!r}: unknown method(s) {unknown} "
                         "(give 'all' or registered names, comma-separated)")
    return got


def _failure(summary) -> str:
    """Why ``summary``'s decode has no WER ('' when it has one over every utterance)."""
    if summary.failed:
        return f"{len(summary.failed)} failed: {summary.first_failure}"
    return "" if summary.wers else "no WER"


def _long_cells(assets, folder: Path, method: str, out: Path, refs, sups, seg: str) -> dict:
    """One segmenter's long-form decode of the recording: its WER, start-time errors, or
    why it did not run."""
    try:
        long = _decode(assets, folder, method, out, refs, segmenter=seg)
    except (ValueError, RuntimeError) as e:  # a row says why it could not run
        return {"wer": None, "error": f"{type(e).__name__}: {e}".splitlines()[0]}
    errors = _starts(long, sups)
    return {"wer": None if long.failed else long.headline[1], "error": _failure(long),
            "start_median": statistics.median(errors) if errors else None,
            "start_p95": float(sorted(errors)[int(0.95 * (len(errors) - 1))]) if errors
            else None, "segments": _segments(long)}


def _segments(summary) -> int | None:
    from k2dec.results import read_results

    rec = read_results(summary.results_path).get("long", {})
    return len(rec["segments"]) if "segments" in rec else None


def accuracy_case(assets, method: str, utt_dir: Path, refs: dict, folder: Path, sups) -> dict:
    """One method's row: its per-utterance WER and, per segmenter (windows only for
    :data:`METHODS`), the long-form WER and start-time errors; failures say why."""
    from k2dec.data import read_kaldi_text

    base = WORK / AREA / "acc" / method
    shutil.rmtree(base, ignore_errors=True)
    row: dict = {"method": method}
    try:
        utts = _decode(assets, utt_dir, method, base / "utts", refs)
        row["utts"] = {"wer": None if utts.failed else utts.headline[1],
                       "error": _failure(utts)}
    except (ValueError, RuntimeError) as e:
        row["utts"] = {"wer": None, "error": f"{type(e).__name__}: {e}".splitlines()[0]}
    refs_long = read_kaldi_text(folder / "text")
    for seg in ("vad", "windows") if method in METHODS else ("vad",):
        row[seg] = _long_cells(assets, folder, method, base / seg, refs_long, sups, seg)
    for feats in base.glob("*/feats"):  # the results stay, to see which words differ
        shutil.rmtree(feats, ignore_errors=True)
    return row


def _met(row: dict, seg: str) -> bool | None:
    """Whether ``seg``'s WER is within 0.5 absolute of the per-utterance one (None: no
    WER)."""
    utts, long = row["utts"]["wer"], row.get(seg, {}).get("wer")
    if utts is None or long is None:
        return None
    return long <= utts + 0.5


def _accuracy_cells(row: dict) -> list:
    cells = [row["method"], row["utts"]["wer"]]
    notes = [f"per-utterance: {row['utts']['error']}"] if row["utts"]["error"] else []
    for seg in ("vad", "windows"):
        got = row.get(seg)
        if got is None:
            cells += ["-"] * 5
            continue
        delta = None if got["wer"] is None or row["utts"]["wer"] is None else \
            round(got["wer"] - row["utts"]["wer"], 2)
        met = _met(row, seg)
        cells += [got["wer"], delta, _round(got.get("start_median")),
                  _round(got.get("start_p95")), "n/a" if met is None else
                  ("yes" if met else "no")]
        if got["error"]:
            notes.append(f"{seg}: {got['error']}")
    return cells + ["; ".join(notes)]


def _round(x: float | None) -> float | str:
    return "n/a" if x is None else round(x, 2)


def _accuracy_inputs(num: int | None) -> tuple[Path, list, Path, dict]:
    """The joined recording, its supervisions by start, and the utterances as files with
    their references."""
    from lhotse import SupervisionSet

    folder = recording(None, num)
    sups = sorted(SupervisionSet.from_file(folder / "supervisions.jsonl"), key=lambda s: s.start)
    utt_dir = WORK / AREA / f"utt-files-{num or 'all'}"
    refs = {}
    utt_dir.mkdir(parents=True, exist_ok=True)
    for utt, path, words in _script().corpus_utterances(CORPUS)[:num]:
        shutil.copy(path, utt_dir / path.name)
        refs[utt] = words
    return folder, sups, utt_dir, refs


def accuracy_rows(mode: str, methods: tuple[str, ...] = METHODS,
                  cases: Path | None = None) -> tuple[list[dict], list]:
    """Each method's row (:func:`accuracy_case`), those already in ``cases`` (a JSONL file
    of this mode's rows) reused, new ones appended to it; and the supervisions."""
    num = ACCURACY_UTTS[mode]
    folder, sups, utt_dir, refs = _accuracy_inputs(num)
    done = {}
    if cases is not None and cases.is_file():
        for line in cases.read_text().splitlines():
            got = json.loads(line)
            if got.get("mode") == mode:
                done[got["method"]] = got
    todo = [m for m in methods if m not in done]
    assets = _assets(tuple(todo)) if todo else None
    for method in todo:
        logging.getLogger(__name__).info("accuracy: %s", method)
        done[method] = {"mode": mode, **accuracy_case(assets, method, utt_dir, refs, folder,
                                                      sups)}
        if cases is not None:
            cases.parent.mkdir(parents=True, exist_ok=True)
            with cases.open("a") as f:
                f.write(json.dumps(done[method]) + "\n")
    return [done[m] for m in methods], sups


def accuracy(mode: str, rep: Report, methods: tuple[str, ...] = METHODS,
             cases: Path | None = None) -> dict[str, list[str]]:
    """The accuracy table; returns ``{"vad" / "windows": [methods that met the target]}``
    and ``"vad-missed"`` / ``"windows-missed"`` (no WER or over 0.5)."""
    rows, sups = accuracy_rows(mode, methods, cases)
    rep.table(f"WER % of {len(sups)} test-clean utterances "
              f"({sum(len(s.text.split()) for s in sups)} words) joined into one recording "
              f"({sups[-1].end / 60:.1f} min), long-form (VAD / windows of 30 s + 2 s "
              "context; windows for the first 4 methods only) vs one by one; delta: long-form "
              "- per-utterance; met: delta <= 0.5; word start error: first word of each "
              "utterance vs its true start (s)",
              ["method", "per-utterance WER", "VAD WER", "VAD delta", "VAD start median",
               "VAD start p95", "VAD met", "windows WER", "windows delta",
               "windows start median", "windows start p95", "windows met", "notes"],
              [_accuracy_cells(r) for r in rows])
    out: dict[str, list[str]] = {}
    for seg in ("vad", "windows"):
        ran = [r for r in rows if seg in r]
        out[seg] = [r["method"] for r in ran if _met(r, seg)]
        out[f"{seg}-missed"] = [r["method"] for r in ran if not _met(r, seg)]
    return out


def _cells(g: dict) -> list:
    if g["status"] != "ok":
        return [f"failed: {g.get('error')}", None]
    return [round(g["rss_mb"]), round(g["rtf"], 3)]


def scale(lengths: tuple[float, ...], methods: tuple[str, ...], rep: Report,
          cases: Path) -> tuple[bool | None, bool | None]:
    """Each (method, length) in a fresh process; the RSS and RTF targets over
    ``lengths[0]`` and ``lengths[-1]`` of the methods run at both."""
    got = {(m, n): run_case(m, n, cases=cases) for n in sorted(lengths)
           for m in methods}
    rows, rss_ok, rtf_ok = [], True, True
    for method in methods:
        cells = [method, got[method, lengths[0]].get("base_mb")]
        for n in lengths:
            cells += _cells(got[method, n])
        first, last = got[method, lengths[0]], got[method, lengths[-1]]
        if first["status"] != "ok" or last["status"] != "ok":
            rss_ok = rtf_ok = False
        else:
            rss_ok &= last["rss_mb"] <= 1536 and last["rss_mb"] <= 1.1 * first["rss_mb"]
            rtf_ok &= last["rtf"] <= 1.2 * first["rtf"]
            cells += [round(last["rss_mb"] / first["rss_mb"], 3),
                      round(last["rtf"] / first["rtf"], 2)]
        rows.append(cells)
    headers = ["method", "loaded MB"] + [h for m in lengths for h in (
        f"{m:g} min: peak RSS MB", f"{m:g} min: RTF")] + [
        f"RSS {lengths[-1]:g} / {lengths[0]:g} min", f"RTF {lengths[-1]:g} / {lengths[0]:g} min"]
    rep.table("Peak RSS and RTF (wall seconds per audio second, 1 thread, features and VAD "
              "included) of k2dec decode's long-form path per recording length (minutes of "
              "speech)", headers, rows)
    return rss_ok, rtf_ok


def any_length(lengths: tuple[float, ...], rep: Report, cases: Path) -> bool:
    """greedy_search on recordings of low noise with a few utterances (what the VAD skips):
    peak RSS the same at every length (a 10-hour file needs no more than a 1-hour one)."""
    got = [run_case("greedy_search", n, sparse=True, cases=cases) for n in lengths]
    rows = [[f"{n / 60:g} h", round(g["duration"] / 3600, 2) if g["status"] == "ok" else None,
             *_cells(g), g.get("segments"), g.get("seconds") and round(g["seconds"])]
            for n, g in zip(lengths, got)]
    rep.table(f"Any length: greedy_search on low noise (-60 dBFS) with {SPARSE_UTTERANCES} "
              "test-clean utterances spread over it, a fresh process each",
              ["recording", "hours", "peak RSS MB", "RTF", "segments", "wall s"], rows)
    ok = all(g["status"] == "ok" for g in got)
    return ok and got[-1]["rss_mb"] <= 1.1 * got[0]["rss_mb"]


def _parser():
    p = area_parser(__doc__, AREA)
    p.add_argument("--worker", nargs=2, metavar=("METHOD", "MINUTES"), help=argparse_help())
    p.add_argument("--sparse", action="store_true", help="with --worker: the sparse recording")
    p.add_argument("--methods", default=None, help="comma-separated methods of the scale "
                   f"part (default: {','.join(METHODS)})")
    p.add_argument("--lengths", default=None, help="comma-separated minutes of the scale part")
    part = p.add_mutually_exclusive_group()
    part.add_argument("--scale-only", action="store_true", help="skip the accuracy part")
    part.add_argument("--accuracy-only", action="store_true", help="skip the scale parts")
    p.add_argument("--accuracy-methods", default=None, metavar="all|A,B,...",
                   help="methods of the accuracy part: 'all' (every registered method, "
                        "oracles included; VAD only for those beyond the default ones) or "
                        f"comma-separated names (default: {','.join(METHODS)})")
    p.add_argument("--accuracy-cases", default=None, metavar="JSONL",
                   help="append each accuracy row here and reuse this mode's rows in it")
    p.add_argument("--cases", default=None, metavar="JSONL",
                   help="append each scale case's result here and reuse those already in it")
    return p


def _accuracy_target(rep: Report, got: dict[str, list[str]]) -> None:
    parts = []
    for seg in ("vad", "windows"):
        met, missed = got[seg], got[f"{seg}-missed"]
        parts.append(f"{seg}: met for {len(met)} of {len(met) + len(missed)} methods" +
                     (f" (not: {', '.join(missed)})" if missed else ""))
    rep.target(TARGET_WER, "; ".join(parts),
               not got["vad-missed"] and not got["windows-missed"])


def _scale_parts(args, mode: str, rep: Report) -> None:
    lengths = tuple(float(x) for x in args.lengths.split(",")) if args.lengths else \
        LENGTHS[mode]
    methods = tuple(args.methods.split(",")) if args.methods else METHODS
    cases = Path(args.cases) if args.cases else WORK / AREA / f"cases-{time.time():.0f}.jsonl"
    cases.parent.mkdir(parents=True, exist_ok=True)
    rep.settings = (f"methods {', '.join(methods)}; lengths {lengths} minutes; "
                    f"segmenter VAD, segment_max 30 s (k2dec decode's defaults); {rep.settings}")
    # what the targets compare first (longest and shortest, then the any-length part), so a
    # run cut short still has them; the tables then read every case from ``cases``
    for n in (lengths[-1], lengths[0]):
        for method in methods:
            run_case(method, n, cases=cases)
    for n in SPARSE_MINUTES[mode]:
        run_case("greedy_search", n, sparse=True, cases=cases)
    rss_ok, rtf_ok = scale(lengths, methods, rep, cases)
    flat = any_length(SPARSE_MINUTES[mode], rep, cases)
    rep.target(TARGET_RSS, "see the table", rss_ok)
    rep.target(TARGET_RTF, "see the table", rtf_ok)
    rep.target(TARGET_ANY, "see the table", flat)


def main() -> None:
    args = _parser().parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker[0], float(args.worker[1]), args.sparse)))
        return
    one_thread()
    mode = mode_of(args)
    acc_methods = accuracy_methods(args.accuracy_methods)
    rep = Report(area=AREA, title="Long recordings: memory, speed and stitching accuracy",
                 settings=f"accuracy methods {', '.join(acc_methods)}")
    if not args.accuracy_only:
        _scale_parts(args, mode, rep)
    if not args.scale_only:
        got = accuracy(mode, rep, acc_methods,
                       Path(args.accuracy_cases) if args.accuracy_cases else None)
        _accuracy_target(rep, got)
    rep.write(args.report)


def argparse_help() -> str:
    return "internal: run one scale case in this process and print its JSON"


if __name__ == "__main__":
    main()
