#!/usr/bin/env python3
"""Benchmark of the attention beam search (k2dec.aed.beam_search), against ESPnet.

Two parts, both at one torch thread with fixed seeds:

**Real inputs vs ESPnet** (``aed`` area of ``make bench``). The shipped model
(assets/librispeech-synth) is run on the shipped test sets; its attention decoder and CTC head
are searched by

* ``k2dec``: one :func:`k2dec.aed.beam_search` over all utterances x beams (default
  ``ctc_always_score_eos=True``: eos is CTC-scored on every hypothesis, as in ESPnet);
* ``espnet``: ESPnet's ``BatchBeamSearch`` run once per utterance (its usual way: the beams of
  one utterance are batched), with the *same* decoder wrapped as an ESPnet
  ``BatchScorerInterface`` and ESPnet's own ``CTCPrefixScorer`` reading the same CTC log-probs;
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
Transformer decoder, ``batched`` (one search over all utterances), ``per-utt`` (one search per
utterance) and ``per-hyp`` (the per-hypothesis Python-loop reference of
tests/reference/aed_reference.py), each plain, with CTC prefix scoring, with LM fusion and with
both: decoder calls, decoder rows, wall time and whether the n-best lists agree.

ESPnet is optional: ``pip install --no-deps -r requirements/bench-espnet.txt``; without it the
peer is reported missing. Usage (from the repository root):

    python scripts/bench_aed.py                        # full: 80 utterances, beams 4 and 10
    python scripts/bench_aed.py --quick                # 16 utterances, with CTC only
    python scripts/bench_aed.py --smoke --report DIR   # tiny, writes DIR/aed.json + DIR/aed.png
    python scripts/bench_aed.py --skip-real --num-utts 32 --frames 100 --beam 10
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import benchlib  # noqa: E402

from k2dec.aed import BeamSearchConfig, TransformerDecoder, beam_search  # noqa: E402
from k2dec.testing.aed import CountingDecoder, TinyLM  # noqa: E402
from tests.reference.aed_reference import reference_beam_search  # noqa: E402

PEER = "ESPnet BatchBeamSearch"
INSTALL_HINT = "pip install --no-deps -r requirements/bench-espnet.txt"
TARGET = ("AED search with CTC prefix scoring >= 3x faster than ESPnet's per-utterance "
          "BatchBeamSearch with >= 99% identical 1-best")
#: ESPnet's end_detect(): M = 3 lengths, D_end = log(exp(-10))
END_WINDOW, END_MARGIN = 3, 10.0


# --------------------------------------------------------------------------------------------
# ESPnet adapters
# --------------------------------------------------------------------------------------------


@dataclass
class Espnet:
    """The ESPnet classes the benchmark uses (imported only when ESPnet is installed)."""

    version: str
    BatchBeamSearch: Any
    BatchScorerInterface: Any
    CTCPrefixScorer: Any


def import_espnet() -> tuple[Espnet | None, str]:
    """``(Espnet, "")`` when ESPnet's beam search imports, else ``(None, reason)``."""
    try:
        import espnet
        from espnet.nets.batch_beam_search import BatchBeamSearch
        from espnet.nets.scorer_interface import BatchScorerInterface
        from espnet.nets.scorers.ctc import CTCPrefixScorer
    except (ImportError, AttributeError) as e:  # not installed / incompatible numpy or torch
        return None, f"cannot import ESPnet's beam search ({type(e).__name__}: {e}); {INSTALL_HINT}"
    # its beam search logs a warning for every hypothesis that reaches the maximum length
    logging.getLogger("espnet").setLevel(logging.ERROR)
    return Espnet(getattr(espnet, "__version__", "?"), BatchBeamSearch, BatchScorerInterface,
                  CTCPrefixScorer), ""


def espnet_decoder_scorer(esp: Espnet, decoder: TransformerDecoder) -> Any:
    """Wrap a :class:`k2dec.aed.TransformerDecoder` as an ESPnet ``BatchScorerInterface``.

    ESPnet keeps one state per hypothesis (a list); here a hypothesis' state is its
    self-attention key/value cache, ``[heads, u, head_dim]`` per layer, plus a reference to the
    utterance's projected memory keys/values (computed once on the first step and shared by all
    hypotheses, passed to the decoder as one memory group for all rows, so the peer does not
    pay for copying them). ``batch_score`` stacks the caches,
    runs one incremental :meth:`TransformerDecoder.step` for the ``n_batch`` prefixes and splits
    the new caches again."""

    class DecoderScorer(esp.BatchScorerInterface):
        def init_state(self, x: torch.Tensor) -> None:
            return None

        def batch_score(self, ys: torch.Tensor, states: list, xs: torch.Tensor):
            n = ys.size(0)
            mask = torch.zeros(n, xs.size(1), dtype=torch.bool, device=xs.device)
            state = None
            if states[0] is not None:
                memory_kv = states[0][1]
                state = tuple(
                    (torch.stack([s[0][i][0] for s in states]),
                     torch.stack([s[0][i][1] for s in states]),
                     mk, mv)  # one memory row for all n rows (TransformerDecoder groups)
                    for i, (mk, mv) in enumerate(memory_kv)
                )
            log_probs, _, new = decoder.step(ys, xs, mask, state)
            memory_kv = tuple((layer[2][:1], layer[3][:1]) for layer in new)
            out = [(tuple((layer[0][j], layer[1][j]) for layer in new), memory_kv)
                   for j in range(n)]
            return log_probs, out

        def score(self, y: torch.Tensor, state: Any, x: torch.Tensor):
            log_probs, states = self.batch_score(y.unsqueeze(0), [state], x.unsqueeze(0))
            return log_probs[0], states[0]

    return DecoderScorer()


class PrecomputedCtc:
    """The ``ctc`` object of ESPnet's ``CTCPrefixScorer``: ``log_softmax(x)`` returns the CTC
    log-probs ``[1, T, V]`` of the utterance being decoded (set ``log_probs`` before each
    utterance), the same numbers k2dec's search reads."""

    def __init__(self) -> None:
        self.log_probs: torch.Tensor | None = None

    def log_softmax(self, x: torch.Tensor) -> torch.Tensor:
        if self.log_probs is None or self.log_probs.size(1) != x.size(1):
            got = None if self.log_probs is None else tuple(self.log_probs.shape)
            raise ValueError(f"PrecomputedCtc.log_probs must be [1, {x.size(1)}, V], got {got}")
        return self.log_probs


def eos_prebeamed_ctc_scorer(esp: Espnet, ctc: PrecomputedCtc, eos: int) -> Any:
    """ESPnet's ``CTCPrefixScorer`` with one change: ``eos`` gets ESPnet's ``logzero`` unless it
    is among the hypothesis' pre-beam candidates, as in k2dec (stock ESPnet always scores eos)."""

    class EosPrebeamed(esp.CTCPrefixScorer):
        def batch_score_partial(self, y, ids, state, x):
            scores, new_state = super().batch_score_partial(y, ids, state, x)
            if ids is not None:
                outside = ~(ids == self.eos).any(dim=1)
                scores[outside, self.eos] = -1e10
            return scores, new_state

    return EosPrebeamed(ctc, eos)


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


def timed(repeats: int, fn: Any) -> tuple[float, float, Any]:
    """Best wall time and best process CPU time of ``repeats`` calls, and the last result."""
    wall = cpu = float("inf")
    out = None
    for _ in range(max(1, repeats)):
        w0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        wall = min(wall, time.perf_counter() - w0)
        cpu = min(cpu, time.process_time() - c0)
    return wall, cpu, out


def k2dec_config(beam: int, ctc_weight: float, end_detect: bool = True,
                 always_score_eos: bool = True) -> BeamSearchConfig:
    """k2dec's settings matching ESPnet's (maximum length T; ESPnet's end detection rule;
    ``always_score_eos=False`` matches :func:`eos_prebeamed_ctc_scorer`)."""
    return BeamSearchConfig(beam_size=beam, nbest=1, max_len_ratio=1.0, ctc_weight=ctc_weight,
                            ctc_always_score_eos=always_score_eos, end_detect=end_detect,
                            end_detect_window=END_WINDOW, end_detect_margin=END_MARGIN)


def run_k2dec(batch: Any, beam: int, ctc_weight: float, repeats: int,
              end_detect: bool = True, always_score_eos: bool = True) -> Run:
    """k2dec's batched search over all utterances of ``batch`` (a benchlib.ShippedBatch or
    anything with the same attributes)."""
    decoder = StateCopyTimer(batch.assets.model.attention_decoder)
    cfg = k2dec_config(beam, ctc_weight, end_detect, always_score_eos)
    ctc = batch.ctc_log_probs if ctc_weight > 0 else None

    def decode():
        decoder.cpu_seconds = 0.0
        with torch.no_grad():
            return beam_search(decoder, batch.encoder_out, batch.encoder_lens, cfg,
                               ctc_log_probs=ctc)

    with benchlib.track_peak_rss() as mem:
        seconds, cpu, hyps = timed(repeats, decode)
    tokens = [list(h[0].tokens) if h else [] for h in hyps]
    scores = [h[0].score if h else None for h in hyps]
    name = "k2dec" if always_score_eos else "k2dec, eos pre-beamed"
    return Run(name, seconds, cpu, tokens, scores, mem.increase_mb,
               decoder.cpu_seconds / max(cpu, 1e-9))


def run_espnet(esp: Espnet, batch: Any, beam: int, ctc_weight: float, repeats: int,
               eos_prebeamed: bool = False, end_detect: bool = True) -> Run:
    """ESPnet's BatchBeamSearch once per utterance, with the same decoder and CTC log-probs."""
    decoder = batch.assets.model.attention_decoder
    ctc = PrecomputedCtc()
    scorers: dict[str, Any] = {"decoder": espnet_decoder_scorer(esp, decoder)}
    weights = {"decoder": 1.0 - ctc_weight}
    if ctc_weight > 0:
        scorers["ctc"] = (eos_prebeamed_ctc_scorer(esp, ctc, decoder.eos_id) if eos_prebeamed
                          else esp.CTCPrefixScorer(ctc, decoder.eos_id))
        weights["ctc"] = ctc_weight
    search = esp.BatchBeamSearch(
        scorers=scorers, weights=weights, beam_size=beam, vocab_size=decoder.vocab_size,
        sos=decoder.sos_id, eos=decoder.eos_id, pre_beam_ratio=1.5,
        pre_beam_score_key="full" if 0 < ctc_weight < 1 else None, normalize_length=False,
    ).eval()
    lens = batch.encoder_lens.tolist()
    max_len_ratio = 0.0 if end_detect else 1.0

    def decode():
        out = []
        with torch.no_grad():
            for i, t in enumerate(lens):
                ctc.log_probs = batch.ctc_log_probs[i : i + 1, :t]
                # maximum length T either way; maxlenratio=0 also switches on end detection
                # (ESPnet's ASR default)
                out.append(search(batch.encoder_out[i, :t], maxlenratio=max_len_ratio,
                                  minlenratio=0.0))
        return out

    with benchlib.track_peak_rss() as mem:
        seconds, cpu, hyps = timed(repeats, decode)
    tokens, scores = [], []
    for nbest in hyps:
        if nbest:
            tokens.append([int(i) for i in nbest[0].yseq[1:-1].tolist()])
            scores.append(float(nbest[0].score))
        else:
            tokens.append([])
            scores.append(None)
    name = "espnet, eos pre-beamed" if eos_prebeamed else "espnet"
    return Run(name, seconds, cpu, tokens, scores, mem.increase_mb)


def word_error_rate(refs: list[list[str]], hyps: list[list[str]]) -> float:
    """WER in percent (kaldialign edit distance summed over utterances)."""
    import kaldialign

    errors = sum(kaldialign.edit_distance(r, h)["total"] for r, h in zip(refs, hyps))
    return 100.0 * errors / max(1, sum(len(r) for r in refs))


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


def real_section(args: argparse.Namespace, report: benchlib.Report, out_dir: str | None) -> None:
    from k2dec.results.text import bpe_ids_to_words

    esp, reason = (None, "skipped (--skip-peer)") if args.skip_peer else import_espnet()
    if esp is None:
        report.peer_missing(PEER, reason)
    batch = benchlib.shipped_batch(args.real_utts)
    batch.assets.model.eval()
    n = batch.encoder_out.size(0)
    max_lens = batch.encoder_lens.tolist()
    sp = batch.assets.sp
    vocab = batch.assets.model.attention_decoder.vocab_size
    weights = sorted({0.0, args.ctc_weight}) if not args.ctc_only else [args.ctc_weight]
    cases = [(w, b) for w in weights for b in args.beams]
    report.settings = (
        f"Shipped model (assets/librispeech-synth) on {n} utterances ({args.real_utts} per test "
        f"set, test-clean + test-other, first by cut id); encoder frames T = "
        f"{min(max_lens)}..{max(max_lens)}, vocabulary {vocab} BPE tokens. Beams "
        f"{', '.join(map(str, args.beams))}; ctc_weight "
        f"{', '.join(f'{w:g}' for w in weights)} (decoder weight 1 - ctc_weight), pre-beam "
        f"int(1.5 x beam), no length normalization, maximum length T, "
        + ("no end detection" if args.no_end_detect
           else f"end detection M = {END_WINDOW}, D = {END_MARGIN:g}")
        + f". k2dec: one batched search over all utterances; "
        f"ESPnet{' ' + esp.version if esp else ''}: BatchBeamSearch per utterance with the same "
        f"decoder and CTC log-probs. 1 torch thread, wall time best of {args.repeats}."
    )
    rows, plot_points = [], []
    target_parts, target_ok = [], []
    copy_shares = []
    for w, beam in cases:
        end = not args.no_end_detect
        base = run_k2dec(batch, beam, w, args.repeats, end_detect=end)
        runs = [base]
        ref_of: dict[str, Run] = {}  # the k2dec run a row is compared with (default: base)
        copy_shares.append(f"{100.0 * base.state_copy_share:.0f}% (ctc_weight {w:g}, beam {beam})")
        if esp is not None:
            runs.append(run_espnet(esp, batch, beam, w, args.repeats, end_detect=end))
            if w > 0 and args.eos_variant and beam == min(args.beams):
                k2_pre = run_k2dec(batch, beam, w, 1, end_detect=end, always_score_eos=False)
                esp_pre = run_espnet(esp, batch, beam, w, 1, eos_prebeamed=True, end_detect=end)
                runs += [k2_pre, esp_pre]
                ref_of[esp_pre.system] = k2_pre
        for run in runs:
            wer = word_error_rate(batch.refs, bpe_ids_to_words(run.tokens, sp))
            ref = ref_of.get(run.system, base)
            cmp = compare(ref, run, max_lens) if run is not base else None
            rows.append([
                f"{w:g}", beam, run.system, run.seconds, 1000.0 * run.seconds / n,
                ref.seconds / run.seconds, run.cpu_seconds, ref.cpu_seconds / run.cpu_seconds,
                None if cmp is None else 100.0 * cmp.identical,
                None if cmp is None or cmp.identical_short is None
                else 100.0 * cmp.identical_short,
                None if cmp is None or cmp.score_diff is None else f"{cmp.score_diff:.1e}",
                wer, run.mem_mb,
            ])
            plot_points.append((w, beam, run.system, run.seconds / n, wer))
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
                target_parts.append(f"beam {beam}: {speedup:.1f}x faster (CPU time "
                                    f"{cpu_speedup:.1f}x), {100.0 * cmp.identical:.0f}% identical")
                target_ok.append(min(speedup, cpu_speedup) >= 3.0 and cmp.identical >= 0.99)
        print(f"done: ctc_weight {w:g} beam {beam}", file=sys.stderr, flush=True)
    report.table(
        "Attention beam search on the shipped model: k2dec (batched) vs ESPnet (per utterance); "
        "'espnet, eos pre-beamed' is compared with 'k2dec, eos pre-beamed', every other row "
        "with 'k2dec'",
        ["ctc weight", "beam", "system", "wall s", "wall ms/utt", "wall k2dec/system",
         "CPU s", "CPU k2dec/system",
         "identical 1-best %", "identical, below max len %", "mean abs score diff", "WER %",
         "peak RSS increase MiB"],
        rows,
    )
    if esp is None:
        report.target(TARGET, f"not evaluated: {PEER} missing", None)
    elif not target_ok:
        report.target(TARGET, "not evaluated: no case with ctc_weight > 0", None)
    elif args.mode == "smoke":
        report.target(TARGET, "not evaluated in --smoke mode (measured: "
                      + "; ".join(target_parts) + ")", None)
    else:
        report.target(TARGET, "; ".join(target_parts), all(target_ok))
    _notes(report, esp is not None)
    report.note(
        "Share of k2dec's CPU time spent in decoder.select_state (TransformerDecoder reorders "
        "every row's cached self-attention keys/values after each step; the projected memory "
        "is kept once per utterance): "
        + ", ".join(copy_shares) + "."
    )
    _plot(report, out_dir, plot_points)


def _notes(report: benchlib.Report, have_peer: bool) -> None:
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
                    "still compares k2dec batched vs per-utterance vs per-hypothesis.")


def _plot(report: benchlib.Report, out_dir: str | None, points: list[tuple]) -> None:
    path = report.plot_path(out_dir, "aed.png")
    if path is None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_t, ax_w) = plt.subplots(1, 2, figsize=(10, 4))
    series: dict[tuple[str, float], list[tuple[int, float, float]]] = {}
    for w, beam, system, sec, wer in points:
        series.setdefault((system, w), []).append((beam, 1000.0 * sec, wer))
    weights = sorted({w for _, w in series})
    colors = {w: f"C{i}" for i, w in enumerate(weights)}
    styles = {"k2dec": "-o", "espnet": "--s"}
    for (system, w), pts in sorted(series.items()):
        pts.sort()
        label = f"{system}, ctc_weight {w:g}"
        style = styles.get(system, ":^")
        ax_t.plot([p[0] for p in pts], [p[1] for p in pts], style, color=colors[w], label=label)
        ax_w.plot([p[1] for p in pts], [p[2] for p in pts], style, color=colors[w], label=label)
        for beam, ms, wer in pts:
            ax_w.annotate(f"b{beam}", (ms, wer), textcoords="offset points", xytext=(3, 3),
                          fontsize=7)
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
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


# --------------------------------------------------------------------------------------------
# Random decoder: k2dec batched vs per-utterance vs per-hypothesis
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


def synthetic_section(args: argparse.Namespace, report: benchlib.Report) -> None:
    dec, memory, lens, ctc, lm = _make_problem(args)
    modes = {
        "plain": {},
        "ctc": dict(ctc_weight=0.3),
        "lm": dict(lm_weight=0.3),
        "ctc+lm": dict(ctc_weight=0.3, lm_weight=0.3),
    }
    rows = []
    for mode, kwargs in modes.items():
        cfg = BeamSearchConfig(beam_size=args.beam, nbest=args.beam,
                               max_len_ratio=args.max_len_ratio, **kwargs)

        def batched(d, cfg=cfg):
            return beam_search(d, memory, lens, cfg, ctc_log_probs=ctc, lm=lm)

        def per_utt(d, cfg=cfg):
            out = []
            for i in range(memory.size(0)):
                t = int(lens[i])
                out += beam_search(d, memory[i : i + 1, :t], lens[i : i + 1], cfg,
                                   ctc_log_probs=ctc[i : i + 1, :t], lm=lm)
            return out

        def per_hyp(d, cfg=cfg):
            return reference_beam_search(d, memory, lens, cfg, ctc_log_probs=ctc, lm=lm)

        with torch.no_grad():
            runs = [_run("batched", batched, dec, args.synthetic_repeats),
                    _run("per-utt", per_utt, dec, args.synthetic_repeats)]
            if not args.skip_reference:
                runs.append(_run("per-hyp", per_hyp, dec, 1))
        base_time, base_tokens = runs[0][3], runs[0][4]
        for name, calls, rows_scored, elapsed, tokens in runs:
            rows.append([mode, name, calls, rows_scored, elapsed, elapsed / base_time,
                         "yes" if tokens == base_tokens else "NO"])
    report.table(
        f"k2dec on a random decoder: batched vs per-utterance vs per-hypothesis reference "
        f"(N={args.num_utts}, T<={args.frames}, V={args.vocab}, beam {args.beam}, "
        f"d_model {args.d_model}, {args.layers} layers; wall best of {args.synthetic_repeats}, "
        f"per-hyp 1 run)",
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
    parser = benchlib.area_parser(__doc__, "aed")
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
                     help="best of this many timed runs (the per-hyp reference runs once)")
    syn.add_argument("--skip-reference", action="store_true")
    syn.add_argument("--skip-synthetic", action="store_true")
    args = parser.parse_args(argv)
    args.mode = "smoke" if args.smoke else "quick" if args.quick else "full"
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
    benchlib.one_thread()
    torch.manual_seed(args.seed)
    report = benchlib.Report("aed", "Attention (AED) beam search: k2dec vs ESPnet")
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
