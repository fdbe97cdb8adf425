"""Benchmark of the attention beam search (k2dec.aed.beam_search), against ESPnet.

Two parts, both at one torch thread with fixed seeds:

**Real inputs vs ESPnet** (``aed`` area of ``make bench``). The shipped model
(assets/librispeech-synth) is run on the shipped test sets; its attention decoder and CTC head
are searched by

* ``k2dec``: one :func:`k2dec.aed.beam_search` over all utterances x beams (default
  ``ctc_always_score_eos=True``: eos is CTC-scored on every hypothesis, as in ESPnet);
* ``espnet``: ESPnet's ``BatchBeamSearch`` run once per utterance (its usual way: the beams of
  one utterance are batched), with the *same* decoder wrapped as an ESPnet
  ``BatchScorerInterface`` and ESPnet's own ``CTCPrefixScorer`` reading the same CTC log-probs
  (``peers/espnet_search.py``);
* ``k2dec, eos pre-beamed`` and ``espnet, eos pre-beamed`` (full mode, with CTC, smallest
  beam): both searches with the other eos rule (eos competes only when pre-selected; k2dec's
  ``ctc_always_score_eos=False``), compared with each other, to show that the rule is the
  same on both sides.

Settings are matched: beam size, ``ctc_weight`` (decoder weight ``1 - ctc_weight``), pre-beam
``int(1.5 * beam)`` on the weighted decoder score, sos/eos/blank ids, maximum length ``T``
frames, no length penalty or normalization, and end detection with ``M = 3`` lengths and
``D = 10`` (ESPnet's ``maxlenratio=0``; k2dec's ``end_detect=True``). Reported per case: wall
and process CPU time (best of ``--repeats``), their ratios k2dec / peer, the identical 1-best
rate (token sequences), the mean |score difference| where the 1-best is identical, WER
(kaldialign on the BPE model's words) and the peak RSS increase. The target counts as met only
if both time ratios reach it. The remaining differences between the two searches are listed in
the report's notes.

**Random decoder, k2dec only** (kept from the first version of this script): on a small random
Transformer decoder, ``batched`` (one search over all utterances) and ``per-utt`` (one search per
utterance), each plain, with CTC prefix scoring, with LM fusion and with both: decoder calls,
decoder rows, wall time and whether the n-best lists agree. (The tests compare the search with
the per-hypothesis Python-loop reference of tests/reference; the bench does not import tests.)

ESPnet is optional: ``pip install --no-deps -r requirements/bench-espnet.txt``; without it the
peer is reported missing. Usage (from the repository root):

    python -m scripts.bench.aed                       # full: 80 utterances, beams 4 and 10
    python -m scripts.bench.aed --quick               # 16 utterances, with CTC only
    python -m scripts.bench.aed --smoke --report DIR  # tiny, writes DIR/aed.json + DIR/aed.png
    python -m scripts.bench.aed --skip-real --num-utts 32 --frames 100 --beam 10
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import torch

from k2dec.aed import BeamSearchConfig, TransformerDecoder, beam_search
from k2dec.testing.aed import CountingDecoder, TinyLM, joint_scorers

from . import plots
from .common import (
    Report,
    area_parser,
    best_wall_and_cpu,
    mode_of,
    one_thread,
    track_peak_rss,
    wer,
)
from .peers.espnet_search import PEER, Espnet, EspnetSearch, import_espnet
from .shipped import ShippedBatch, shipped_batch

TARGET = ("AED search with CTC prefix scoring >= 3x faster than ESPnet's per-utterance "
          "BatchBeamSearch with >= 99% identical 1-best")
#: ESPnet's end_detect(): M = 3 lengths, D_end = log(exp(-10))
END_WINDOW, END_MARGIN = 3, 10.0


# --------------------------------------------------------------------------------------------
# Real inputs: k2dec vs ESPnet
# --------------------------------------------------------------------------------------------


@dataclass
class Run:
    """One system on one case: 1-best tokens and scores per utterance, time, memory."""

    system: str
    seconds: float  # wall, best of the repeats
    cpu_seconds: float  # process CPU time, best of the repeats (stable on a loaded machine)
    tokens: list[list[int]]
    scores: list[float | None]
    mem_mb: float | None
    state_copy_share: float | None = None  # k2dec: share of CPU time in decoder.select_state


class StateCopyTimer:
    """Passes an AttentionDecoder through, adding up the CPU time of ``select_state`` (the
    reordering of cached keys/values after each step)."""

    def __init__(self, decoder: Any) -> None:
        self.decoder = decoder
        self.vocab_size, self.sos_id, self.eos_id = (decoder.vocab_size, decoder.sos_id,
                                                     decoder.eos_id)
        self.cpu_seconds = 0.0

    def step(self, *args: Any) -> Any:
        return self.decoder.step(*args)

    def select_state(self, state: Any, index: torch.Tensor) -> Any:
        start = time.process_time()
        out = self.decoder.select_state(state, index)
        self.cpu_seconds += time.process_time() - start
        return out


def k2dec_config(beam: int, end_detect: bool = True,
                 always_score_eos: bool = True) -> BeamSearchConfig:
    """k2dec's settings matching ESPnet's (maximum length T; ESPnet's end detection rule;
    ``always_score_eos=False`` matches :func:`peers.espnet_search.eos_prebeamed_ctc_scorer`);
    the CTC weight is the CTC scorer's (:func:`k2dec.testing.aed.joint_scorers`)."""
    return BeamSearchConfig(beam_size=beam, num_hyps=1, max_len_ratio=1.0,
                            ctc_always_score_eos=always_score_eos, end_detect=end_detect,
                            end_detect_window=END_WINDOW, end_detect_margin=END_MARGIN)


def run_k2dec(batch: Any, beam: int, ctc_weight: float, repeats: int,
              end_detect: bool = True, always_score_eos: bool = True) -> Run:
    """k2dec's batched search over all utterances of ``batch`` (a shipped.ShippedBatch or
    anything with the same attributes)."""
    decoder = StateCopyTimer(batch.assets.model.attention_decoder)
    cfg = k2dec_config(beam, end_detect, always_score_eos)
    scorers = joint_scorers(batch.assets.model.attention_decoder, batch.encoder_lens,
                            batch.ctc_log_probs, ctc_weight)

    def decode():
        decoder.cpu_seconds = 0.0
        with torch.no_grad():
            return beam_search(decoder, batch.encoder_out, batch.encoder_lens, cfg, scorers)

    with track_peak_rss() as mem:
        seconds, cpu, hyps = best_wall_and_cpu(repeats, decode)
    tokens = [list(h[0].tokens) if h else [] for h in hyps]
    scores = [h[0].score if h else None for h in hyps]
    name = "k2dec" if always_score_eos else "k2dec, eos pre-beamed"
    return Run(name, seconds, cpu, tokens, scores, mem.increase_mb,
               decoder.cpu_seconds / max(cpu, 1e-9))


def run_espnet(esp: Espnet, batch: Any, beam: int, ctc_weight: float, repeats: int,
               eos_prebeamed: bool = False, end_detect: bool = True) -> Run:
    """ESPnet's BatchBeamSearch once per utterance, with the same decoder and CTC log-probs."""
    search = EspnetSearch(esp, batch.assets.model.attention_decoder, beam, ctc_weight,
                          eos_prebeamed)
    with track_peak_rss() as mem:
        seconds, cpu, hyps = best_wall_and_cpu(repeats, lambda: search(
            batch.encoder_out, batch.encoder_lens, batch.ctc_log_probs, end_detect))
    best = [EspnetSearch.best(nbest) for nbest in hyps]
    name = "espnet, eos pre-beamed" if eos_prebeamed else "espnet"
    return Run(name, seconds, cpu, [t for t, _ in best], [s for _, s in best], mem.increase_mb)


@dataclass
class Comparison:
    identical: float  # share of utterances with the same 1-best tokens as k2dec
    identical_short: float | None  # the same, over utterances where neither hits max length
    score_diff: float | None  # mean |score difference| where identical and below max length
    mismatches: list[int]  # utterance indices


def compare(base: Run, other: Run, max_lens: list[int]) -> Comparison:
    same = [a == b for a, b in zip(base.tokens, other.tokens)]
    short = [len(a) < m and len(b) < m for a, b, m in zip(base.tokens, other.tokens, max_lens)]
    diffs = [abs(x - y) for s, ok, x, y in zip(same, short, base.scores, other.scores)
             if s and ok and x is not None and y is not None]
    n_short = sum(short)
    return Comparison(
        identical=sum(same) / max(1, len(same)),
        identical_short=(sum(s for s, ok in zip(same, short) if ok) / n_short) if n_short else None,
        score_diff=sum(diffs) / len(diffs) if diffs else None,
        mismatches=[i for i, s in enumerate(same) if not s],
    )


@dataclass
class Real:
    """The real-inputs part: its peer (None when missing), inputs and what it has measured."""

    esp: Espnet | None
    batch: ShippedBatch
    rows: list[list] = field(default_factory=list)
    plot_points: list[tuple] = field(default_factory=list)
    target_parts: list[str] = field(default_factory=list)
    target_ok: list[bool] = field(default_factory=list)
    copy_shares: list[str] = field(default_factory=list)


def real_settings(args: argparse.Namespace, real: Real, weights: list[float]) -> str:
    max_lens = real.batch.encoder_lens.tolist()
    vocab = real.batch.assets.model.attention_decoder.vocab_size
    esp = real.esp
    return (
        f"Shipped model (assets/librispeech-synth) on {len(max_lens)} utterances "
        f"({args.real_utts} per test set, test-clean + test-other, first by cut id); encoder "
        f"frames T = {min(max_lens)}..{max(max_lens)}, vocabulary {vocab} BPE tokens. Beams "
        f"{', '.join(map(str, args.beams))}; ctc_weight "
        f"{', '.join(f'{w:g}' for w in weights)} (decoder weight 1 - ctc_weight), pre-beam "
        f"int(1.5 x beam), no length normalization, maximum length T, "
        + ("no end detection" if args.no_end_detect
           else f"end detection M = {END_WINDOW}, D = {END_MARGIN:g}")
        + f". k2dec: one batched search over all utterances; "
        f"ESPnet{' ' + esp.version if esp else ''}: BatchBeamSearch per utterance with the same "
        f"decoder and CTC log-probs. 1 torch thread, wall time best of {args.repeats}."
    )


def run_case(args: argparse.Namespace, real: Real, w: float, beam: int
             ) -> tuple[Run, list[Run], dict[str, Run]]:
    """k2dec and ESPnet (and the eos pre-beamed pair where asked) at one ctc weight and beam:
    the base k2dec run, every run, and the k2dec run each other run is compared with where it
    is not the base."""
    end = not args.no_end_detect
    base = run_k2dec(real.batch, beam, w, args.repeats, end_detect=end)
    runs = [base]
    ref_of: dict[str, Run] = {}
    real.copy_shares.append(f"{100.0 * base.state_copy_share:.0f}% (ctc_weight {w:g}, beam "
                            f"{beam})")
    if real.esp is not None:
        runs.append(run_espnet(real.esp, real.batch, beam, w, args.repeats, end_detect=end))
        if w > 0 and args.eos_variant and beam == min(args.beams):
            k2_pre = run_k2dec(real.batch, beam, w, 1, end_detect=end, always_score_eos=False)
            esp_pre = run_espnet(real.esp, real.batch, beam, w, 1, eos_prebeamed=True,
                                 end_detect=end)
            runs += [k2_pre, esp_pre]
            ref_of[esp_pre.system] = k2_pre
    return base, runs, ref_of


def add_case(real: Real, report: Report, w: float, beam: int, base: Run, runs: list[Run],
             ref_of: dict[str, Run]) -> None:
    """Rows, plot points, mismatch notes and the target's parts of one case."""
    from k2dec.results.text import bpe_ids_to_words

    batch = real.batch
    n = batch.encoder_out.size(0)
    max_lens = batch.encoder_lens.tolist()
    for run in runs:
        run_wer = wer(batch.refs, bpe_ids_to_words(run.tokens, batch.assets.sp))
        ref = ref_of.get(run.system, base)
        cmp = compare(ref, run, max_lens) if run is not base else None
        real.rows.append([
            f"{w:g}", beam, run.system, run.seconds, 1000.0 * run.seconds / n,
            ref.seconds / run.seconds, run.cpu_seconds, ref.cpu_seconds / run.cpu_seconds,
            None if cmp is None else 100.0 * cmp.identical,
            None if cmp is None or cmp.identical_short is None else 100.0 * cmp.identical_short,
            None if cmp is None or cmp.score_diff is None else f"{cmp.score_diff:.1e}",
            run_wer, run.mem_mb,
        ])
        real.plot_points.append((w, beam, run.system, run.seconds / n, run_wer))
        if cmp is not None and cmp.mismatches:
            report.note(
                f"ctc_weight {w:g}, beam {beam}, {run.system}: 1-best differs from "
                f"{ref.system} on "
                f"utterances {', '.join(batch.cut_ids[i] for i in cmp.mismatches[:8])}"
                + (" ..." if len(cmp.mismatches) > 8 else "")
            )
        if run.system == "espnet" and w > 0:
            # met only if both the wall-time and the CPU-time ratio reach 3x: on a shared
            # machine wall time alone can flatter either side
            speedup = run.seconds / base.seconds
            cpu_speedup = run.cpu_seconds / base.cpu_seconds
            real.target_parts.append(f"beam {beam}: {speedup:.1f}x faster (CPU time "
                                     f"{cpu_speedup:.1f}x), {100.0 * cmp.identical:.0f}% "
                                     "identical")
            real.target_ok.append(min(speedup, cpu_speedup) >= 3.0 and cmp.identical >= 0.99)


def real_target(args: argparse.Namespace, real: Real, report: Report) -> None:
    if real.esp is None:
        report.target(TARGET, f"not evaluated: {PEER} missing", None)
    elif not real.target_ok:
        report.target(TARGET, "not evaluated: no case with ctc_weight > 0", None)
    elif args.mode == "smoke":
        report.target(TARGET, "not evaluated in --smoke mode (measured: "
                      + "; ".join(real.target_parts) + ")", None)
    else:
        report.target(TARGET, "; ".join(real.target_parts), all(real.target_ok))


def real_section(args: argparse.Namespace, report: Report, out_dir: str | None) -> None:
    esp, reason = (None, "skipped (--skip-peer)") if args.skip_peer else import_espnet()
    if esp is None:
        report.peer_missing(PEER, reason)
    real = Real(esp, shipped_batch(args.real_utts))
    real.batch.assets.model.eval()
    weights = sorted({0.0, args.ctc_weight}) if not args.ctc_only else [args.ctc_weight]
    report.settings = real_settings(args, real, weights)
    for w, beam in [(w, b) for w in weights for b in args.beams]:
        base, runs, ref_of = run_case(args, real, w, beam)
        add_case(real, report, w, beam, base, runs, ref_of)
        print(f"done: ctc_weight {w:g} beam {beam}", file=sys.stderr, flush=True)
    report.table(
        "Attention beam search on the shipped model: k2dec (batched) vs ESPnet (per utterance); "
        "'espnet, eos pre-beamed' is compared with 'k2dec, eos pre-beamed', every other row "
        "with 'k2dec'",
        ["ctc weight", "beam", "system", "wall s", "wall ms/utt", "wall k2dec/system",
         "CPU s", "CPU k2dec/system",
         "identical 1-best %", "identical, below max len %", "mean abs score diff", "WER %",
         "peak RSS increase MiB"],
        real.rows,
    )
    real_target(args, real, report)
    _notes(report, esp is not None)
    report.note(
        "Share of k2dec's CPU time spent in decoder.select_state (TransformerDecoder reorders "
        "every row's cached self-attention keys/values after each step; the projected memory "
        "is kept once per utterance): "
        + ", ".join(real.copy_shares) + "."
    )
    _plot(report, out_dir, real.plot_points)

def _notes(report: Report, have_peer: bool) -> None:
    report.note(
        "Differences between the two searches that remain with matched settings: (1) none in "
        "the eos rule: ESPnet's CTCPrefixScoreTH gives eos its CTC score on every hypothesis, "
        "also when eos is not among the pre-beam candidates, and so does k2dec by default "
        "(ctc_always_score_eos=True); the rows 'k2dec, eos pre-beamed' "
        "(ctc_always_score_eos=False) and 'espnet, eos pre-beamed' (full mode) show the other "
        "rule on both sides. (2) At the maximum length ESPnet "
        "appends eos without scoring it, k2dec forces eos and adds its score; the column "
        "'identical, below max len' leaves out utterances where either 1-best reaches T tokens "
        "(only looping attention-only hypotheses do). (3) ESPnet's end_detect looks at "
        "hypotheses that ended 2 to 4 steps ago, k2dec's at the current and 2 previous steps, "
        "so ESPnet may search 2 steps longer. (4) ESPnet lets the CTC blank take a pre-beam "
        "slot and then scores it -1e10; k2dec masks the blank before the pre-beam. ESPnet uses "
        "-1e10 for log(0), k2dec -inf."
    )
    report.note(
        "Timing: k2dec searches all utterances at once (scores precomputed CTC log-probs); "
        "ESPnet runs BatchBeamSearch once per utterance with the same decoder, wrapped so that "
        "the utterance's projected memory keys/values are computed once and shared by its "
        "hypotheses (as k2dec's TransformerDecoder state keeps them once per utterance). "
        "Peak RSS increase is of the whole process during the timed runs."
    )
    if not have_peer:
        report.note("Without ESPnet only k2dec's rows are reported; the random-decoder table "
                    "still compares k2dec batched vs per-utterance.")


def _plot_series(ax_t, ax_w, points: list[tuple]) -> None:
    """Time vs beam and WER vs time, one line per (system, ctc weight)."""
    series: dict[tuple[str, float], list[tuple[int, float, float]]] = {}
    for w, beam, system, sec, run_wer in points:
        series.setdefault((system, w), []).append((beam, 1000.0 * sec, run_wer))
    weights = sorted({w for _, w in series})
    colors = {w: f"C{i}" for i, w in enumerate(weights)}
    styles = {"k2dec": "-o", "espnet": "--s"}
    for (system, w), pts in sorted(series.items()):
        pts.sort()
        label = f"{system}, ctc_weight {w:g}"
        style = styles.get(system, ":^")
        ax_t.plot([p[0] for p in pts], [p[1] for p in pts], style, color=colors[w], label=label)
        ax_w.plot([p[1] for p in pts], [p[2] for p in pts], style, color=colors[w], label=label)
        for beam, ms, run_wer in pts:
            ax_w.annotate(f"b{beam}", (ms, run_wer), textcoords="offset points", xytext=(3, 3),
                          fontsize=7)


def _plot(report: Report, out_dir: str | None, points: list[tuple]) -> None:
    path = report.plot_path(out_dir, "aed.png")
    if path is None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fig, (ax_t, ax_w) = plots.pyplot().subplots(1, 2, figsize=(10, 4))
    _plot_series(ax_t, ax_w, points)
    ax_t.set_xlabel("beam size")
    ax_t.set_ylabel("wall time per utterance (ms)")
    ax_t.set_yscale("log")
    ax_t.set_title("AED search time vs beam")
    ax_w.set_xlabel("wall time per utterance (ms)")
    ax_w.set_xscale("log")
    ax_w.set_ylabel("WER (%)")
    ax_w.set_title("WER vs speed")
    from matplotlib.ticker import FormatStrFormatter, LogLocator

    for axis in (ax_t.yaxis, ax_w.xaxis):  # plain numbers at 1, 2, 5 x 10^k on the log axes
        axis.set_major_formatter(FormatStrFormatter("%g"))
        axis.set_minor_locator(LogLocator(base=10, subs=(2.0, 5.0)))
        axis.set_minor_formatter(FormatStrFormatter("%g"))
    ax_t.legend(fontsize=7)
    plots.save(fig, path, dpi=100)


# --------------------------------------------------------------------------------------------
# Random decoder: k2dec batched vs per-utterance
# --------------------------------------------------------------------------------------------


def _make_problem(args: argparse.Namespace):
    torch.manual_seed(args.seed)
    dec = TransformerDecoder(
        args.vocab, args.memory_dim, d_model=args.d_model, nhead=4, num_layers=args.layers,
        dim_feedforward=4 * args.d_model, dropout=0.0,
    ).eval()
    with torch.no_grad():
        dec.output.weight.mul_(3.0)  # peakier than a fresh init, closer to a trained model
        dec.output.bias[dec.eos_id] += args.eos_bias
    g = torch.Generator().manual_seed(args.seed)
    memory = torch.randn(args.num_utts, args.frames, args.memory_dim, generator=g)
    lens = torch.randint(args.frames // 2, args.frames + 1, (args.num_utts,), generator=g)
    lens[0] = args.frames
    ctc = torch.randn(args.num_utts, args.frames, args.vocab, generator=g).mul(3).log_softmax(-1)
    lm = TinyLM(args.vocab, hidden=args.d_model, seed=args.seed).eval()
    with torch.no_grad():
        for p in lm.parameters():
            p.mul_(0.3)
    return dec, memory, lens, ctc, lm


def _run(name, fn, dec, repeats):
    """Best wall time of ``repeats`` runs (after one untimed warm-up run when repeats > 1)."""
    if repeats > 1:
        fn(dec)
    best = float("inf")
    for _ in range(repeats):
        counting = CountingDecoder(dec)
        start = time.perf_counter()
        hyps = fn(counting)
        best = min(best, time.perf_counter() - start)
    tokens = [[h.tokens for h in hs] for hs in hyps]
    return name, counting.calls, counting.rows, best, tokens


def synthetic_section(args: argparse.Namespace, report: Report) -> None:
    dec, memory, lens, ctc, lm = _make_problem(args)
    modes = {
        "plain": {},
        "ctc": dict(ctc_weight=0.3),
        "lm": dict(lm_scale=0.3),
        "ctc+lm": dict(ctc_weight=0.3, lm_scale=0.3),
    }
    rows = []
    for mode, kwargs in modes.items():
        cfg = BeamSearchConfig(beam_size=args.beam, num_hyps=args.beam,
                               max_len_ratio=args.max_len_ratio)

        def batched(d, cfg=cfg, kwargs=kwargs):
            return beam_search(d, memory, lens, cfg,
                               joint_scorers(dec, lens, ctc, lm=lm, **kwargs))

        def per_utt(d, cfg=cfg, kwargs=kwargs):
            out = []
            for i in range(memory.size(0)):
                t, one = int(lens[i]), lens[i : i + 1]
                out += beam_search(d, memory[i : i + 1, :t], one, cfg,
                                   joint_scorers(dec, one, ctc[i : i + 1, :t], lm=lm, **kwargs))
            return out

        with torch.no_grad():
            runs = [_run("batched", batched, dec, args.synthetic_repeats),
                    _run("per-utt", per_utt, dec, args.synthetic_repeats)]
        base_time, base_tokens = runs[0][3], runs[0][4]
        for name, calls, rows_scored, elapsed, tokens in runs:
            rows.append([mode, name, calls, rows_scored, elapsed, elapsed / base_time,
                         "yes" if tokens == base_tokens else "NO"])
    report.table(
        f"k2dec on a random decoder: batched vs per-utterance "
        f"(N={args.num_utts}, T<={args.frames}, V={args.vocab}, beam {args.beam}, "
        f"d_model {args.d_model}, {args.layers} layers; wall best of {args.synthetic_repeats})",
        ["mode", "search", "decoder calls", "decoder rows", "wall s", "x batched",
         "same n-best"],
        rows,
    )


# --------------------------------------------------------------------------------------------


SIZES = {
    # mode: real utts per test set, beams, repeats, eos variant, synthetic (utts, frames, repeats)
    "smoke": dict(real_utts=1, beams=[2], repeats=1, eos_variant=False, ctc_only=True,
                  num_utts=2, frames=8, synthetic_repeats=1),
    "quick": dict(real_utts=8, beams=[4, 10], repeats=1, eos_variant=False, ctc_only=True,
                  num_utts=4, frames=16, synthetic_repeats=1),
    "full": dict(real_utts=40, beams=[4, 10], repeats=1, eos_variant=True, ctc_only=False,
                 num_utts=8, frames=24, synthetic_repeats=3),
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = area_parser(__doc__, "aed")
    real = parser.add_argument_group("real inputs vs ESPnet")
    real.add_argument("--real-utts", type=int, help="utterances per shipped test set")
    real.add_argument("--beams", type=lambda s: [int(x) for x in s.split(",")],
                      help="comma-separated beam sizes")
    real.add_argument("--ctc-weight", type=float, default=0.3)
    real.add_argument("--ctc-only", action="store_true", default=None,
                      help="skip the attention-only (ctc_weight 0) cases")
    real.add_argument("--repeats", type=int, help="timings are the best of this many runs")
    real.add_argument("--eos-variant", action="store_true", default=None,
                      help="also run ESPnet with eos pre-beamed like k2dec (smallest beam)")
    real.add_argument("--no-end-detect", action="store_true",
                      help="search to the maximum length T (ESPnet maxlenratio=1.0)")
    real.add_argument("--skip-peer", action="store_true", help="do not run ESPnet")
    real.add_argument("--skip-real", action="store_true")
    syn = parser.add_argument_group("random decoder, k2dec only")
    syn.add_argument("--num-utts", type=int)
    syn.add_argument("--frames", type=int)
    syn.add_argument("--vocab", type=int, default=32)
    syn.add_argument("--memory-dim", type=int, default=32)
    syn.add_argument("--d-model", type=int, default=32)
    syn.add_argument("--layers", type=int, default=2)
    syn.add_argument("--beam", type=int, default=4)
    syn.add_argument("--max-len-ratio", type=float, default=0.5)
    syn.add_argument("--eos-bias", type=float, default=1.0)
    syn.add_argument("--seed", type=int, default=0)
    syn.add_argument("--synthetic-repeats", type=int,
                     help="best of this many timed runs")
    syn.add_argument("--skip-synthetic", action="store_true")
    args = parser.parse_args(argv)
    args.mode = mode_of(args)
    for key, value in SIZES[args.mode].items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    for name in ("real_utts", "repeats", "num_utts", "frames", "synthetic_repeats"):
        if getattr(args, name) < 1:
            raise SystemExit(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if not args.beams or min(args.beams) < 1:
        raise SystemExit(f"--beams must be positive ints, got {args.beams}")
    if not 0.0 < args.ctc_weight < 1.0:
        raise SystemExit(f"--ctc-weight must be in (0, 1), got {args.ctc_weight}")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    one_thread()
    torch.manual_seed(args.seed)
    report = Report("aed", "Attention (AED) beam search: k2dec vs ESPnet")
    if not args.skip_real:
        real_section(args, report, args.report)
    if not args.skip_synthetic:
        synthetic_section(args, report)
    if args.skip_real:
        report.target(TARGET, "not evaluated (--skip-real)", None)
        report.settings = "Random decoder only (--skip-real)."
    report.write(args.report)


if __name__ == "__main__":
    main()
