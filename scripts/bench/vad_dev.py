"""The VAD segmenter's settings on the DEV recording (``scripts/make_dev_long_recording.py``;
never a test set): the recording decoded long-form as ``k2dec decode`` does (the VAD
segmenter, :mod:`k2dec.job.longform`) under several :class:`k2dec.longform.VadConfig`
settings, against its utterances decoded one by one.

Each setting changes one field of ``VadConfig`` from its default (``--speech-pads``,
``--pads-start``, ``--pads-end``, ``--thresholds``, ``--min-gaps``, ``--min-speeches``:
comma-separated values; the default is always run; ``--settings`` several fields at once).
Per method and setting: the long-form WER,
the per-utterance WER, their difference, and where the segments lie against the true
utterances (each utterance's segment: the one that overlaps it most): segment start - true
start and segment end - true end, in seconds, their medians and the 95th percentiles of their
magnitudes. The summary averages the long-form WER over the methods per setting: the
objective a default is chosen by. Usage (from the repository root)::

    python scripts/make_dev_long_recording.py \\
        --corpus-json assets/librispeech-synth/corpus/corpus.json --output-dir data/dev \\
        --num-utterances 100
    python -m scripts.bench.vad_dev --dev-dir data/dev --speech-pads 0,0.05,0.1,0.3 \\
        --methods greedy_search,1best --cases vad-dev.jsonl  # resumable
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import shutil
import statistics
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import fields
from pathlib import Path

from .common import SHIPPED, WORK, markdown_table, one_thread

#: the methods whose long-form WER the test-clean run found furthest from their
#: per-utterance WER, and two that met the target
METHODS = ("fast_beam_search", "fast_beam_search_LG", "ctc-prefix-beam-search",
           "modified_beam_search_lm_shallow_fusion", "fast_beam_search_with_nbest_rescoring",
           "greedy_search", "1best")
#: command-line option -> the VadConfig field it sweeps
OPTIONS = {"speech_pads": "speech_pad", "pads_start": "speech_pad_start",
           "pads_end": "speech_pad_end", "thresholds": "threshold", "min_gaps": "min_gap",
           "min_speeches": "min_speech"}
PER_UTTERANCE = "per utterance"
DEFAULT = "default"


def _number(field: str, item: str) -> float:
    try:
        return float(item)
    except ValueError:
        raise ValueError(f"{field}: {item!r} is not a number") from None


def sweep(values: dict[str, str], combined: str = "") -> list[dict[str, float]]:
    """The settings to run: ``{}`` (the default) first, then one per value of each field
    (``values``: field -> comma-separated numbers), the default's own value skipped, then
    the ``combined`` ones (``"field=value,field=value;..."``: several fields changed at
    once).

    Raises:
      ValueError: a value that is not a number, a field that is not ``VadConfig``'s, or a
        value that ``VadConfig`` refuses.
    """
    from k2dec.longform import VadConfig

    default = VadConfig()
    out: list[dict[str, float]] = [{}]
    for field, text in values.items():
        for item in (x.strip() for x in text.split(",") if x.strip()):
            value = _number(field, item)
            VadConfig(**{field: value})
            if getattr(default, field) != value and {field: value} not in out:
                out.append({field: value})
    for group in (g.strip() for g in combined.split(";") if g.strip()):
        pairs = [kv.split("=", 1) for kv in group.split(",") if kv.strip()]
        if any(len(kv) != 2 for kv in pairs):
            raise ValueError(f"--settings: {group!r} is not field=value,...")
        setting = {k.strip(): _number(k.strip(), v) for k, v in pairs}
        try:
            VadConfig(**setting)
        except TypeError:
            raise ValueError(f"--settings: {group!r} names a field VadConfig lacks") from None
        if setting not in out:
            out.append(setting)
    return out


def setting_name(setting: dict[str, float]) -> str:
    """``"default"`` or ``"field=value,..."``."""
    return ",".join(f"{k}={v:g}" for k, v in sorted(setting.items())) or DEFAULT


@contextmanager
def vad_settings(setting: dict[str, float]) -> Iterator[None]:
    """While inside: the long-form job builds its ``VadConfig`` with ``setting`` as the
    defaults (the fields the job sets itself still win), and the VAD's per-frame
    probabilities of a file are computed once and reused."""
    from k2dec.job import longform as job
    from k2dec.longform import VadConfig
    from k2dec.longform import vad as vad_module

    names = {f.name for f in fields(VadConfig)}
    unknown = set(setting) - names
    if unknown:
        raise ValueError(f"not VadConfig fields: {sorted(unknown)}")
    saved = job.VadConfig, vad_module.speech_frames
    job.VadConfig = functools.partial(VadConfig, **setting)
    vad_module.speech_frames = _cached_frames(saved[1])
    try:
        yield
    finally:
        job.VadConfig, vad_module.speech_frames = saved


@functools.cache
def _cached_frames(fn):
    return functools.lru_cache(maxsize=4)(fn)


def edge_offsets(segments: Sequence[Sequence[float]], sups) -> tuple[list[float], list[float],
                                                                      int]:
    """Per utterance (``sups``: objects with ``start`` / ``end`` seconds), the segment that
    overlaps it most: ``(segment start - utterance start, segment end - utterance end, number
    of utterances no segment overlaps)``."""
    starts, ends, missed = [], [], 0
    for sup in sups:
        best, overlap = None, 0.0
        for a, b in segments:
            o = min(b, sup.end) - max(a, sup.start)
            if o > overlap:
                best, overlap = (a, b), o
        if best is None:
            missed += 1
            continue
        starts.append(best[0] - sup.start)
        ends.append(best[1] - sup.end)
    return starts, ends, missed


def offset_stats(xs: Sequence[float]) -> tuple[float | None, float | None]:
    """``(median, 95th percentile of the magnitudes)`` (nearest rank), None when empty."""
    if not xs:
        return None, None
    mags = sorted(abs(x) for x in xs)
    return statistics.median(xs), mags[min(len(mags) - 1, round(0.95 * (len(mags) - 1)))]


def _assets(methods: Sequence[str]):
    from k2dec.demo import prepare_demo
    from k2dec.job import load_assets

    from .longform import lm_inputs

    lang, graphs, _ = prepare_demo(SHIPPED, WORK)
    return load_assets(SHIPPED / "model.pt", lang, graph_dir=graphs,
                       **lm_inputs(tuple(methods)))


def decode(assets, folder: Path, method: str, out: Path, refs: dict, **config):
    """``k2dec decode --audio-dir folder`` of one method (the shipped decode.json settings),
    its summary; ``out`` is emptied first."""
    from k2dec.data import cuts_from_audio_dir
    from k2dec.job import DecodeConfig, decode_cuts, plan_methods, read_settings

    run = plan_methods([method], settings=read_settings(SHIPPED / "decode.json"))[0]
    shutil.rmtree(out, ignore_errors=True)
    cuts = cuts_from_audio_dir(folder, out / "feats", refs, progress=False).cuts
    summary = decode_cuts(assets, cuts, run.method, out, "t", run.config,
                          DecodeConfig(**config), calibration=run.calibration)
    shutil.rmtree(out / "feats", ignore_errors=True)
    return summary


def _wer(summary) -> tuple[float | None, str]:
    if summary.failed:
        return None, f"{len(summary.failed)} failed: {summary.first_failure}"
    return (summary.headline[1], "") if summary.wers else (None, "no WER")


class DevRecording:
    """The DEV recording of ``dev_dir`` (``long.wav``, ``supervisions.jsonl``, ``text``,
    ``corpus/``) and where its decodes go."""

    def __init__(self, dev_dir: Path, work: Path, segment_max: float = 30.0):
        from lhotse import SupervisionSet

        self.dev_dir, self.work, self.segment_max = dev_dir, work, segment_max
        self.sups = sorted(SupervisionSet.from_file(dev_dir / "supervisions.jsonl"),
                           key=lambda s: s.start)
        self.name, self.text = (dev_dir / "text").read_text().split(maxsplit=1)
        self.long_dir = work / "recording"
        self.long_dir.mkdir(parents=True, exist_ok=True)
        wav = self.long_dir / f"{self.name}.wav"
        if not wav.exists():
            shutil.copy(dev_dir / f"{self.name}.wav", wav)

    @property
    def words(self) -> int:
        return len(self.text.split())

    def per_utterance(self, assets, method: str) -> dict:
        summary = decode(assets, self.dev_dir / "corpus", method,
                         self.work / method / "utts", {s.id: s.text for s in self.sups})
        wer, error = _wer(summary)
        return {"wer": wer, "error": error}

    def long_form(self, assets, method: str, setting: dict[str, float]) -> dict:
        from k2dec.results import read_results

        with vad_settings(setting):
            summary = decode(assets, self.long_dir, method,
                             self.work / method / setting_name(setting),
                             {self.name: self.text.strip()}, segment_max=self.segment_max)
        wer, error = _wer(summary)
        segments = read_results(summary.results_path).get(self.name, {}).get("segments", [])
        starts, ends, missed = edge_offsets(segments, self.sups)
        return {"wer": wer, "error": error, "segments": len(segments), "missed": missed,
                "start": offset_stats(starts), "end": offset_stats(ends)}


def run_cases(dev: DevRecording, methods: Sequence[str], settings: list[dict[str, float]],
              cases: Path | None) -> dict[tuple[str, str], dict]:
    """Every ``(method, setting name)`` row (``"per utterance"`` included), those already in
    ``cases`` (JSONL) reused, new ones appended to it."""
    done: dict[tuple[str, str], dict] = {}
    if cases is not None and cases.is_file():
        for line in cases.read_text().splitlines():
            row = json.loads(line)
            done[row["method"], row["setting"]] = row
    todo = [(m, s) for s in [None, *settings] for m in methods
            if (m, PER_UTTERANCE if s is None else setting_name(s)) not in done]
    assets = _assets(methods) if todo else None
    for method, setting in todo:
        name = PER_UTTERANCE if setting is None else setting_name(setting)
        logging.getLogger(__name__).info("%s: %s", method, name)
        try:
            got = dev.per_utterance(assets, method) if setting is None else \
                dev.long_form(assets, method, setting)
        except (ValueError, RuntimeError) as e:  # a row says why it could not run
            got = {"wer": None, "error": f"{type(e).__name__}: {e}".splitlines()[0]}
        done[method, name] = row = {"method": method, "setting": name, **got}
        print(json.dumps(row), flush=True)
        if cases is not None:
            with cases.open("a") as f:
                f.write(json.dumps(row) + "\n")
    return done


def _r(x: float | None, digits: int = 2) -> str:
    return "n/a" if x is None else f"{x:.{digits}f}"


def method_rows(done: dict, methods: Sequence[str], names: Sequence[str]) -> list[list]:
    """Per method and setting: per-utterance WER, long-form WER, delta, segments, edge
    offsets."""
    rows = []
    for method in methods:
        utt = done[method, PER_UTTERANCE]["wer"]
        for name in names:
            got = done[method, name]
            delta = None if got["wer"] is None or utt is None else got["wer"] - utt
            start, end = got.get("start") or (None, None), got.get("end") or (None, None)
            rows.append([method, name, _r(utt), _r(got["wer"]), _r(delta),
                         got.get("segments", "n/a"), _r(start[0]), _r(start[1]), _r(end[0]),
                         _r(end[1]), got.get("error", "")])
    return rows


def summary_rows(done: dict, methods: Sequence[str], names: Sequence[str]) -> list[list]:
    """Per setting: the long-form WER and delta averaged over the methods (None if a method
    has no WER), the change of the mean against the default, and how many methods are better
    / worse than under the default."""
    def mean_of(name: str, minus_utts: bool = False) -> float | None:
        vals = [done[m, name]["wer"] for m in methods]
        if minus_utts:
            vals = [None if v is None or done[m, PER_UTTERANCE]["wer"] is None else
                    v - done[m, PER_UTTERANCE]["wer"] for m, v in zip(methods, vals)]
        return None if None in vals else statistics.fmean(vals)

    base = mean_of(DEFAULT)
    rows = []
    for name in names:
        mean = mean_of(name)
        pairs = [(done[m, name]["wer"], done[m, DEFAULT]["wer"]) for m in methods]
        pairs = [(a, b) for a, b in pairs if a is not None and b is not None]
        rows.append([name, _r(mean), _r(mean_of(name, True)),
                     _r(None if mean is None or base is None else mean - base),
                     sum(a < b for a, b in pairs), sum(a > b for a, b in pairs)])
    return rows


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dev-dir", required=True, type=Path)
    p.add_argument("--methods", default=",".join(METHODS))
    for option, field in OPTIONS.items():
        p.add_argument(f"--{option.replace('_', '-')}", default="",
                       help=f"VadConfig.{field} values, comma-separated")
    p.add_argument("--settings", default="", metavar="F=V,F=V;...",
                   help="settings that change several VadConfig fields at once")
    p.add_argument("--segment-max", type=float, default=30.0,
                   help="DecodeConfig.segment_max (and the VAD's longest segment)")
    p.add_argument("--work", type=Path, default=WORK / "vad_dev")
    p.add_argument("--cases", type=Path, default=None, metavar="JSONL",
                   help="append each row here and reuse the rows already in it")
    return p


def main(argv: Sequence[str] | None = None) -> tuple[list[list], list[list]]:
    args = _parser().parse_args(argv)
    one_thread()
    settings = sweep({field: getattr(args, option) for option, field in OPTIONS.items()},
                     args.settings)
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    dev = DevRecording(args.dev_dir, args.work, args.segment_max)
    done = run_cases(dev, methods, settings, args.cases)
    names = [setting_name(s) for s in settings]
    per_method = method_rows(done, methods, names)
    summary = summary_rows(done, methods, names)
    print(f"\nDEV recording: {len(dev.sups)} utterances, {dev.words} words\n")
    print(markdown_table(["method", "VAD setting", "per-utterance WER", "long-form WER",
                          "delta", "segments", "start offset median s", "start |offset| p95 s",
                          "end offset median s", "end |offset| p95 s", "error"], per_method))
    print()
    print(markdown_table(["VAD setting", "mean long-form WER", "mean delta",
                          "mean WER - default's", "methods better", "methods worse"], summary))
    return per_method, summary


if __name__ == "__main__":
    main()
