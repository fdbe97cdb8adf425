"""Benchmark area "memory": peak memory and time of every decoding method on one long
utterance, each in its own process under a hard memory limit.

Inputs: the shipped model (``assets/librispeech-synth``) with its lang dir, the graphs the
demo compiles (HLG, LG, G_4_gram), the shipped RNN LM, and "real-speech-like" long
utterances: the shipped test-clean recordings (sorted by id) concatenated, 0.3 s of silence
between them, until the utterance is at least 30 s / 60 s long. Each (method, duration) runs
in a fresh process that loads everything as ``k2dec decode`` does (``load_assets``), runs the
encoder, then the method at its DEFAULT settings (icefall's), and reports its peak resident
set size (Linux ``VmHWM``: every allocation of torch, k2 and Python), the method's time, its
WER against the concatenated transcripts and the per-utterance notes it recorded (e.g. "lattice
pruned from N to M arcs").

The limit: the parent polls the worker's ``VmRSS`` every 20 ms and kills it above
``--limit-mb`` (default 3 GB); the worker also sets ``RLIMIT_AS`` to its address-space size
after start-up plus the limit plus a slack (torch's CUDA build maps ~2.3 GB of address space
at import, before any work, so an absolute ``RLIMIT_AS`` of 3 GB cannot even start torch; the
relative one stops a runaway allocation at once, the RSS watchdog enforces the RSS limit).
A case over the limit is reported as killed, never dropped.

Usage (from the repository root)::

    python -m scripts.bench.memory [--quick | --smoke] [--report DIR] [--methods a,b]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
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
    one_thread,
    peak_rss_mb,
    proc_status_mb,
)
from .shipped import token_bigram_arpa

AREA = "memory"
LIMIT_MB = 3072
#: address space a worker may add after start-up beyond the RSS limit (allocator reserves,
#: thread stacks) before RLIMIT_AS refuses allocations
AS_SLACK_MB = 2048
POLL_S = 0.02
TARGET = "peak RSS <= 3 GB per process for every method at default settings on 30 s and 60 s"
SILENCE_S = 0.3


def long_utterance(seconds: float, work: Path) -> Path:
    """Fbank features ``[T, 80]`` and transcript of the test-clean recordings concatenated
    (0.3 s silence between) up to at least ``seconds``; cached as a ``.pt`` file."""
    import numpy as np
    import torch
    from lhotse import CutSet, Fbank, FbankConfig

    from k2dec.demo import prepare_demo

    path = work / "memory" / f"utt_{seconds:g}s.pt"
    if path.is_file():
        return path
    _, _, cut_paths = prepare_demo(SHIPPED, work)
    cuts = sorted(CutSet.from_file(cut_paths["test-clean"]), key=lambda c: c.id)
    audio, words, total = [], [], 0.0
    rate = cuts[0].sampling_rate
    for c in cuts:
        if total >= seconds:
            break
        samples = c.load_audio()[0]
        audio += [samples, np.zeros(int(SILENCE_S * rate), dtype=samples.dtype)]
        words += c.supervisions[0].text.split()
        total += c.duration + SILENCE_S
    signal_ = np.concatenate(audio[:-1])
    feats = Fbank(FbankConfig(num_mel_bins=80)).extract(signal_, rate)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"feats": torch.from_numpy(feats), "words": words,
                "seconds": len(signal_) / rate}, path)
    return path


def run_limited(cmd: list[str], limit_mb: float, timeout: float) -> dict:
    """Run ``cmd`` (a worker printing one JSON line last) and kill it above ``limit_mb`` of
    RSS or after ``timeout`` seconds; returns the JSON plus ``outcome`` and the largest RSS
    seen by polling."""
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, cwd=REPO, start_new_session=True)
    seen = 0.0
    outcome = "ok"
    start = time.monotonic()
    while proc.poll() is None:
        rss = proc_status_mb("VmRSS", proc.pid) or 0.0
        seen = max(seen, rss)
        if rss > limit_mb:
            outcome = f"killed at {rss:.0f} MB RSS (limit {limit_mb:.0f})"
        elif time.monotonic() - start > timeout:
            outcome = f"killed after {timeout:.0f} s"
        if outcome != "ok":
            os.killpg(proc.pid, signal.SIGKILL)
            break
        time.sleep(POLL_S)
    out, err = proc.communicate()
    lines = [ln for ln in out.splitlines() if ln.startswith("{")]
    result = json.loads(lines[-1]) if lines else {}
    if outcome == "ok" and proc.returncode != 0:
        tail = err.strip().splitlines()[-1:] or [f"exit status {proc.returncode}"]
        outcome = f"failed: {tail[0][:200]}"
    result.update(outcome=outcome, polled_peak_mb=seen)
    return result


def _limit_address_space(limit_mb: float) -> None:
    vsz = proc_status_mb("VmSize") or 0.0
    cap = int((vsz + limit_mb + AS_SLACK_MB) * 2**20)
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))


def _load_assets(method):
    """The decode assets as ``k2dec decode`` loads them (the RNN LM; LODR's token bigram,
    trained on the corpus' LM text as the scorers area does, where the method needs it)."""
    from k2dec.demo import prepare_demo
    from k2dec.job import load_assets

    lang, graphs, _ = prepare_demo(SHIPPED, WORK)
    rnn_lm = SHIPPED / "lm" / "rnn_lm.pt"
    lodr_arpa = token_bigram_arpa(lang, WORK) if "lodr" in method.requires else None
    return load_assets(SHIPPED / "model.pt", lang, graph_dir=graphs,
                       lm_paths={"rnn_lm": rnn_lm} if rnn_lm.is_file() else None,
                       lodr_arpa=lodr_arpa)


def _method_inputs(method, assets, out, ref: list[str]):
    """The method's inputs from the model's outputs (with the reference for the oracles)."""
    from k2dec.methods import AedInputs, CtcInputs, Family, TransducerInputs

    enc, enc_lens = out.encoder_out, out.encoder_out_lens
    table = assets.lang.word_table
    if method.family is Family.TRANSDUCER:
        return TransducerInputs(assets.model.transducer, enc, enc_lens,
                                ref_tokens=[assets.sp.encode(" ".join(ref))])
    if method.family is Family.AED:
        return AedInputs(out.memory, out.memory_lens, ctc_log_probs=out.ctc_log_probs)
    unk = table.get("<UNK>")
    return CtcInputs(out.ctc_log_probs, enc_lens,
                     ref_words=[[table.get(w) if w in table else unk for w in ref]],
                     memory=out.memory, memory_lens=out.memory_lens)


def _scored(results, assets, ref: list[str]) -> tuple[dict[str, float], set[str]]:
    """Each result key's WER and the notes / errors the hypotheses recorded."""
    from k2dec.job import hypothesis_texts
    from k2dec.results import compute_wer

    wers, notes = {}, set()
    for r in results:
        hyp = hypothesis_texts(r, assets)[0]
        wers[r.key] = compute_wer([("u", ref, hyp)]).wer
        notes.update(x for x in (r.hyps[0].error, r.hyps[0].notes) if x)
    return wers, notes


def worker(method_name: str, utt_path: str, limit_mb: float,
           assignments: list[str] | None = None) -> dict:
    """Decode the long utterance with one method at its default settings, changed by the
    ``KEY=VALUE`` ``assignments`` where its config has the field (in this process)."""
    import torch

    from k2dec.job import plan_methods
    from k2dec.methods import get_method

    one_thread()
    method = get_method(method_name)
    assets = _load_assets(method)
    utt = torch.load(utt_path, weights_only=False)
    _limit_address_space(limit_mb)
    base_mb = current_rss_mb()
    feats = utt["feats"].unsqueeze(0)
    lens = torch.tensor([feats.shape[1]])
    t0 = time.perf_counter()
    with torch.no_grad():
        out = assets.model.encode(feats, lens)
    t_enc = time.perf_counter() - t0
    inputs = _method_inputs(method, assets, out, utt["words"])
    t0 = time.perf_counter()
    with torch.no_grad():
        (run,) = plan_methods([method], assignments or (), require_used=False)
        results = method(inputs, assets.resources, run.config)
    t_method = time.perf_counter() - t0
    wers, notes = _scored(results, assets, utt["words"])
    return {"method": method_name, "seconds": utt["seconds"], "encoder_s": t_enc,
            "method_s": t_method, "base_mb": base_mb, "peak_mb": peak_rss_mb(),
            "wer": min(wers.values()) if wers else None, "notes": sorted(notes),
            "frames": int(out.encoder_out_lens[0])}


def parse_args() -> argparse.Namespace:
    p = area_parser(__doc__, AREA)
    p.add_argument("--methods", default=None, help="comma-separated methods (default: all)")
    p.add_argument("--durations", default=None, help="comma-separated seconds (default 30,60)")
    p.add_argument("--limit-mb", type=float, default=LIMIT_MB)
    p.add_argument("--timeout", type=float, default=900.0, help="per case, seconds")
    p.add_argument("--set", dest="assignments", action="append", default=[],
                   help="KEY=VALUE (repeatable): change a config field of the methods that "
                        "have it (e.g. lattice.output_beam=8, icefall's)")
    p.add_argument("--worker", nargs=2, default=None, help=argparse.SUPPRESS)
    return p.parse_args()


def cases(args: argparse.Namespace) -> tuple[list[str], tuple[float, ...]]:
    """The methods and durations to run."""
    from k2dec.methods import list_methods

    names = args.methods.split(",") if args.methods else [m.name for m in list_methods()]
    if args.smoke:
        durations, names = (8.0,), names if args.methods else ["1best", "nbest-rescoring"]
    elif args.quick:
        durations = (30.0,)
    else:
        durations = (30.0, 60.0)
    if args.durations:
        durations = tuple(float(x) for x in args.durations.split(","))
    return names, durations


def settings(args: argparse.Namespace, durations: tuple[float, ...]) -> str:
    return (f"The shipped model on the shipped test-clean audio concatenated (0.3 s "
            f"silence between recordings) to {' and '.join(f'{d:g}' for d in durations)}"
            " s; every method at its default settings"
            + (f" changed by {' '.join(args.assignments)}" if args.assignments else "")
            + ", in a fresh process "
            "per case with the graphs, BPE model and RNN LM loaded as `k2dec decode` "
            f"does; one torch thread. Limit: RSS polled every {POLL_S * 1000:.0f} ms, "
            f"killed above {args.limit_mb:.0f} MB, and RLIMIT_AS = address space after "
            f"start-up + {args.limit_mb:.0f} + {AS_SLACK_MB} MB (an absolute RLIMIT_AS "
            "cannot work: torch's CUDA build maps ~2.3 GB at import). Peak = the "
            "worker's VmHWM (exact, includes start-up: 'base' is the RSS after loading "
            "model and graphs). The machine may be shared: times are indicative.")


def run_case(args: argparse.Namespace, name: str, utt: Path, d: float, over: list[str]
             ) -> list:
    """One (method, duration) in its own limited process: its four table cells."""
    sets = [x for a in args.assignments for x in ("--set", a)]
    r = run_limited([sys.executable, "-m", "scripts.bench.memory", "--worker", name, str(utt),
                     "--limit-mb", str(args.limit_mb), *sets], args.limit_mb, args.timeout)
    peak = r.get("peak_mb") or r["polled_peak_mb"]
    ok = r["outcome"] == "ok" and peak <= args.limit_mb
    if not ok:
        over.append(f"{name} {d:g} s")
    note = "; ".join(r.get("notes", [])) if r["outcome"] == "ok" else r["outcome"]
    print(f"{name} {d:g}s: {r['outcome']} peak {peak:.0f} MB "
          f"time {r.get('method_s') or float('nan'):.1f} s {note}", flush=True)
    return [peak, r.get("method_s"), r.get("wer"), note or "-"]


def main() -> None:
    args = parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker[0], args.worker[1], args.limit_mb,
                                args.assignments)))
        return
    names, durations = cases(args)
    rep = Report(area=AREA, title="Memory bounds: every method on one long utterance",
                 settings=settings(args, durations))
    utts = {d: long_utterance(d, WORK) for d in durations}
    rows, over = [], []
    for name in names:
        rows.append([name] + [cell for d in durations
                              for cell in run_case(args, name, utts[d], d, over)])
    headers = ["method"]
    for d in durations:
        headers += [f"{d:g} s: peak RSS MB", f"{d:g} s: time s", f"{d:g} s: WER %",
                    f"{d:g} s: notes (pruned / failed)"]
    rep.table("Peak RSS, method time and WER per method and duration", headers, rows)
    rep.target(TARGET if not args.smoke else TARGET + " (smoke: short audio, two methods)",
               "all within the limit" if not over else "over the limit: " + ", ".join(over),
               not over)
    rep.write(args.report)


if __name__ == "__main__":
    main()
