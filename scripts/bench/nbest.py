#!/usr/bin/env python3
"""Benchmark of the n-best stage on real lattices: paths/s and peak memory of sampling,
intersecting and rescoring at 100 and 1000 paths, and multi-pass against full neural-LM
rescoring (WER vs number of neural evaluations).

Inputs: the shipped model's CTC log-probs on the shipped test sets, HLG lattices (the
demo's settings: HLG scores x 0.4, search beam 20, output beam 4), the shipped 4-gram G and
the shipped RNN LM (``assets/.../lm/rnn_lm.pt``, trained with ``k2dec train-lm`` on the
recipe's LM text). One torch thread.

Multi-pass: every utterance's n-best (``num_paths`` sampled, deduplicated by words, all kept
by ``top_k``) is rescored as ``base + s * rnn_lm`` with ``base`` the acoustic score (AM = lattice
total - n-gram: the neural LM replaces the n-gram, as in the ``rnn-lm`` and ``multi-pass``
methods) and ``s`` the scale that is best for full rescoring on the same data (said so in the
report). Full rescoring evaluates every path; multi-pass evaluates ``first_k`` paths, then
``batch_k`` more per pass chosen by the predicted chance of beating the current best, up to
a budget per utterance. "top-b" rescores just the ``b`` best paths by base score (no
prediction): the baseline a predictor must beat. The learned predictor (Gaussian NLL) is
fitted on the other test set's fully rescored n-bests (two-fold), never on the set it is
evaluated on.

Usage (from the repository root):
    python -m scripts.bench.nbest [--quick | --smoke] [--report DIR]
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from k2dec.lattice import LatticeConfig, get_lattice
from k2dec.nbest import (
    NNLM_SCALES,
    DedupKey,
    LinearGaussianPredictor,
    MultiPassConfig,
    Nbest,
    full_rescore,
    lm_path_scorer,
    matching_features,
    multi_pass_rescore,
    neural_scores,
    ngram_lm_scores,
)
from k2dec.results import word_ids_to_words

from . import plots
from .common import (
    REPO,
    SHIPPED,
    Report,
    area_parser,
    current_rss_mb,
    interleaved,
    mode_of,
    one_thread,
    track_peak_rss,
    wer,
)
from .shipped import ShippedBatch, scaled_graph, shipped_batch

RNN_LM = SHIPPED / "lm" / "rnn_lm.pt"
SCALES = (0.02, 0.05) + tuple(NNLM_SCALES)


OUTPUT_BEAM = 4.0  # the demo's; icefall's 8 gives this weak model 60-180k-arc lattices
HLG_SCALE = 0.4  # the demo's, tuned on dev-clean for 1best
FLAT_MAX_ARCS = 250_000  # small enough that 100 and 1000 paths both fill several chunks


def hlg_lattice(b: ShippedBatch, idx: list[int]):
    """The lattices of utterances ``idx`` through HLG (scores x HLG_SCALE, copied to
    ``lm_scores``) at the demo's output beam."""
    g = scaled_graph(b.assets.resources.graphs["HLG"], HLG_SCALE, lm_scores=True)
    sel = torch.tensor(idx)
    res = get_lattice(b.ctc_log_probs[sel], b.encoder_lens[sel], g,
                      LatticeConfig(output_beam=OUTPUT_BEAM))
    return res.lattice


def wer_of(hyps: list[list[int]], refs: list[list[str]], table) -> float:
    return wer(refs, word_ids_to_words(hyps, table))


# ------------------------------------------------------------------ throughput and memory


def memory_case(n_utts: int, num_paths: int, max_arcs: int) -> dict:
    """Run in a fresh process (``--memory-case``): RSS increase of one intersect, so that
    memory freed by earlier work and kept by the allocator cannot hide it."""
    b = shipped_batch(n_utts)
    utts = list(range(min(n_utts, len(b.refs))))
    lat = hlg_lattice(b, utts)
    nb = Nbest.from_lattice(lat, num_paths, 0.5, DedupKey.WORDS)
    with track_peak_rss() as mem:
        inter = nb.intersect(lat, max_arcs=max_arcs)
    after = current_rss_mb()
    del inter
    return {"increase_mb": mem.increase_mb, "paths": nb.num_paths,
            "working_mb": max(0.0, mem.peak_mb - after)}


def _memory_in_subprocess(n_utts: int, num_paths: int, max_arcs: int) -> dict | None:
    out = subprocess.run(
        [sys.executable, "-m", "scripts.bench.nbest", "--memory-case",
         f"{n_utts},{num_paths},{max_arcs}"],
        capture_output=True, text=True, check=False, cwd=REPO,
    )
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    if out.returncode != 0 or not lines:
        return None
    return json.loads(lines[-1])


def _seconds(fn, *args, **kwargs) -> tuple[float, object]:
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    return time.perf_counter() - t0, out


def throughput_row(lat, G, scorer, n_utts: int, num_paths: int, max_arcs: int,
                   fresh_process: bool) -> tuple[list, float | None]:
    """Sample, intersect (memory measured, in a fresh process unless told otherwise) and, at
    FLAT_MAX_ARCS, score with the 4-gram and the neural LM: the table row and the working
    memory of intersect."""
    t_sample, nb = _seconds(Nbest.from_lattice, lat, num_paths, 0.5, DedupKey.WORDS)
    with track_peak_rss() as mem:
        t_inter, inter = _seconds(nb.intersect, lat, max_arcs=max_arcs)
    sub = _memory_in_subprocess(n_utts, num_paths, max_arcs) if fresh_process else None
    peak = sub["increase_mb"] if sub else mem.increase_mb
    working = sub["working_mb"] if sub else None
    t_ng = t_nn = math.nan
    if max_arcs == FLAT_MAX_ARCS:
        t_ng, _ = _seconds(ngram_lm_scores, inter, G)
        if scorer is not None:
            t_nn, _ = _seconds(neural_scores, inter, scorer)
    n = nb.num_paths
    return [num_paths, f"{max_arcs / 1e3:.0f}k", n, round(n / n_utts, 1),
            n / t_sample, n / t_inter, peak, working,
            n / t_ng if t_ng == t_ng else None,
            n / t_nn if t_nn == t_nn else None], working


def flat_memory_target(report: Report, rows: list[list], mem_by_paths: dict,
                       paths: tuple[int, ...]) -> None:
    lo, hi = min(paths), max(paths)
    target = "Nbest intersect memory stays flat from 100 to 1000 paths"
    if mem_by_paths.get(lo) is None or mem_by_paths.get(hi) is None or lo == hi:
        report.target(target, "not measured (smoke mode measures in-process)", None)
        return
    a, z = mem_by_paths[lo], mem_by_paths[hi]
    n_lo = next(r[2] for r in rows if r[0] == lo)
    n_hi = next(r[2] for r in rows if r[0] == hi)
    # allocator granularity makes tiny amounts noisy: 16 MB of slack
    met = z <= 1.5 * a + 16.0
    report.target(
        target,
        f"max_arcs {FLAT_MAX_ARCS // 1000}k: working memory of intersect {a:.0f} MB at "
        f"{lo} paths ({n_lo} distinct) vs {z:.0f} MB at {hi} ({n_hi} distinct, "
        f"x{n_hi / max(1, n_lo):.1f}); flat = at most 1.5x + 16 MB",
        met,
    )


def throughput(b: ShippedBatch, lm, utts: list[int], paths: tuple[int, ...],
               report: Report, fresh_process: bool = True) -> None:
    lat = hlg_lattice(b, utts)
    G = b.assets.resources.graphs["G"]
    scorer = lm_path_scorer(lm) if lm is not None else None
    rows = []
    mem_by_paths = {}
    # (num_paths, max_arcs): every num_paths with a small chunk budget (so that both sizes
    # fill several chunks: the flatness check), plus the default budget at the smallest.
    cases = [(p_, FLAT_MAX_ARCS) for p_ in paths] + [(min(paths), 4_000_000)]
    for num_paths, max_arcs in cases:
        row, working = throughput_row(lat, G, scorer, len(utts), num_paths, max_arcs,
                                      fresh_process)
        if max_arcs == FLAT_MAX_ARCS:
            mem_by_paths[num_paths] = working
        rows.append(row)
    report.table(
        f"n-best throughput on {len(utts)} utterances' HLG lattices ({lat.num_arcs} arcs); "
        "paths/s counts distinct (deduplicated) paths; peak MB = RSS increase during "
        f"intersect{'' if fresh_process else ' (in-process: smoke mode)'}, which includes the "
        "returned n-best (it grows with the paths); working MB = peak minus the RSS right "
        "after, with the result still alive: the temporary memory chunking bounds (fresh "
        "process per case); max_arcs = lattice arcs one intersect chunk may touch",
        ["num_paths", "max_arcs", "distinct paths", "per utt", "sample paths/s",
         "intersect paths/s", "intersect peak +MB", "working MB", "4-gram paths/s",
         "RNN-LM paths/s"],
        rows,
    )
    flat_memory_target(report, rows, mem_by_paths, paths)


# ------------------------------------------------------------------ rescoring cost


TARGET_COST = "nbest-rescoring costs <= 1.5x 1best's time at num_paths 100"


def rescoring_cost(b: ShippedBatch, utts: list[int], report: Report,
                   repeat: int, smoke: bool) -> None:
    """Time of the ``nbest-rescoring`` method (num_paths 100, 4-gram) over the ``1best`` method
    on the same HLG and lattice settings, with the paths of an utterance intersected through one
    trie (the default) and path by path (``Nbest.intersect(trie=False)``), runs interleaved."""
    from functools import partialmethod

    from k2dec.methods import CtcInputs, Resources, get_method
    from k2dec.methods.ctc import HlgConfig, NbestRescoringConfig
    from k2dec.methods.parts import GraphConfig
    from k2dec.nbest import NbestConfig

    sel = torch.tensor(utts)
    lens = b.encoder_lens[sel]
    inputs = CtcInputs(b.ctc_log_probs[sel][:, : int(lens.max())].contiguous(), lens)
    res = Resources(graphs={"HLG": b.assets.resources.graphs["HLG"],
                            "G": b.assets.resources.graphs["G"]})
    lattice = LatticeConfig(output_beam=OUTPUT_BEAM)
    cfg = NbestRescoringConfig(lattice=lattice, graph=GraphConfig(HLG_SCALE),
                               nbest=NbestConfig(num_paths=100))
    first = HlgConfig(lattice=lattice, graph=GraphConfig(HLG_SCALE))
    one_best, rescoring = get_method("1best"), get_method("nbest-rescoring")
    original = Nbest.intersect

    def per_path():
        Nbest.intersect = partialmethod(original, trie=False)
        try:
            return rescoring(inputs, res, cfg)
        finally:
            Nbest.intersect = original

    fns = {"1best": lambda: one_best(inputs, res, first),
           "nbest-rescoring (trie)": lambda: rescoring(inputs, res, cfg),
           "nbest-rescoring (path by path)": per_path}
    fns["1best"]()  # warm-up (scaled graph cached)
    timed = dict(zip(fns, interleaved(repeat, list(fns.values()))))
    report_rescoring_cost(report, timed, len(utts), int(lens.sum()), repeat, smoke)


def report_rescoring_cost(report: Report, timed: dict, n_utts: int, frames: int, repeat: int,
                          smoke: bool) -> None:
    base = timed["1best"].best
    rows = [[name, frames / t.best, t.best / base, t.spread] for name, t in timed.items()]
    report.table(f"nbest-rescoring (num_paths 100, 4-gram scale 0.5) vs 1best, same HLG "
                 f"(scores x {HLG_SCALE:g}) and lattice settings, {n_utts} utterances "
                 f"({frames} frames), runs interleaved, best of {repeat}",
                 ["method", "frames/s", "time / 1best's", "spread (slowest/fastest)"], rows)
    trie, by_path = timed["nbest-rescoring (trie)"], timed["nbest-rescoring (path by path)"]
    same = ([h.words for h in trie.result[0].hyps]
            == [h.words for h in by_path.result[0].hyps])
    ratio = trie.best / base
    old = by_path.best / base
    report.target(TARGET_COST, f"{ratio:.2f}x 1best's time (path by path: {old:.2f}x); "
                               f"identical words trie vs path by path: {same}",
                  None if smoke else ratio <= 1.5)


# ------------------------------------------------------------------ multi-pass rescoring


def _fit_predictor(top, base_tot: torch.Tensor, nn_token: torch.Tensor, first_k: int,
                   max_order: int) -> LinearGaussianPredictor:
    """Fit on one fully rescored n-best: features as after a first pass of ``first_k``."""
    nbest = top.nbest
    num_utts, k = top.padded.shape
    ranks = torch.arange(k).unsqueeze(0).expand(num_utts, k)
    rescored = (ranks < first_k).flatten()
    feats = matching_features(nbest, nn_token, rescored, max_order)
    seqs_shape = nbest.token_seqs().shape
    lens = (seqs_shape.row_splits(1)[1:] - seqs_shape.row_splits(1)[:-1]).to(torch.int64) + 1
    pos_path = torch.repeat_interleave(torch.arange(nbest.num_paths), lens)
    mask = ~rescored[pos_path]
    pred = LinearGaussianPredictor()
    pred.fit(feats[mask], nn_token[mask], steps=300)
    return pred


def _token_scores(top, lm) -> torch.Tensor:
    seqs = top.nbest.token_seqs()
    with torch.no_grad():
        return lm.score_sequences(seqs, batch_size=256).token_log_probs.values.double()


@dataclass
class TestSet:
    """One test set's n-bests: utterance indices, references, the top-k n-best, its base
    (acoustic) scores and the neural LM's token scores."""

    idx: list[int]
    refs: list[list[str]]
    top: object
    base: torch.Tensor
    nn_token: torch.Tensor


class CountingScorer:
    """A path scorer that counts its calls and the paths it scored."""

    def __init__(self, scorer) -> None:
        self.scorer = scorer
        self.calls = self.paths = 0

    def reset(self) -> None:
        self.calls = self.paths = 0

    def __call__(self, tokens, seq_to_utt):
        self.calls += 1
        self.paths += tokens.dim0
        return self.scorer(tokens, seq_to_utt)


@dataclass
class MultiPass:
    """The multi-pass table's rows, each system's (% of evaluations, WER) curve per test set,
    and full rescoring's WER per test set."""

    rows: list[list] = field(default_factory=list)
    curves: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    full_wer: dict[str, float] = field(default_factory=dict)


def multipass_data(b: ShippedBatch, lm, per_set: int, num_paths: int) -> dict[str, TestSet]:
    """Each test set's first ``per_set`` utterances' n-bests (all ``num_paths`` kept)."""
    data = {}
    for ts in ("test-clean", "test-other"):
        idx = [i for i, s in enumerate(b.test_sets) if s == ts][:per_set]
        if not idx:
            continue
        lat = hlg_lattice(b, idx)
        nb = Nbest.from_lattice(lat, num_paths, 0.5, DedupKey.WORDS).intersect(lat)
        counts = nb.shape.row_splits(1)
        if bool(((counts[1:] - counts[:-1]) == 0).any()):
            raise RuntimeError(f"{ts}: an utterance has no paths (empty lattice)")
        top = nb.top_k(num_paths)
        base = top.nbest.am_scores().values.double()
        data[ts] = TestSet(idx, [b.refs[i] for i in idx], top, base, _token_scores(top, lm))
    return data


def pick_scale(data: dict[str, TestSet], scorer, table, report: Report) -> float:
    """The neural LM scale with the best full-rescoring WER over both sets (said in a note)."""
    per_scale = {}
    for s in SCALES:
        errs = 0.0
        words = 0
        for d in data.values():
            out = full_rescore(d.top, d.base, scorer, rnn_lm_scale=s)
            n = sum(len(r) for r in d.refs)
            errs += wer_of(out.hyps, d.refs, table) * n
            words += n
        per_scale[s] = errs / words
    scale = min(per_scale, key=per_scale.get)
    report.note(f"multi-pass: RNN-LM scale {scale} (best full-rescoring WER over "
                f"{', '.join(f'{s}: {w:.2f}' for s, w in per_scale.items())} on the same "
                "data: a tuned scale, as icefall tunes on its test sets)")
    return scale


def baseline_rows(ts: str, d: TestSet, scale: float, counting: CountingScorer, table,
                  mp: MultiPass) -> None:
    """The lattice best, the base score's best and full rescoring of one test set."""
    n = len(d.idx)
    k = d.top.padded.shape[1]
    first = d.top.nbest.keys_at(torch.arange(n) * k)  # top_k puts the best first
    wer_tot = wer_of(first, d.refs, table)
    am_best = torch.where(d.top.padded.flatten(), torch.full_like(d.base, -math.inf),
                          d.base).view(n, k).argmax(1) + torch.arange(n) * k
    wer0 = wer_of(d.top.nbest.keys_at(am_best), d.refs, table)
    counting.reset()
    t_full, full = _seconds(full_rescore, d.top, d.base, counting, rnn_lm_scale=scale)
    mp.full_wer[ts] = wer_of(full.hyps, d.refs, table)
    mp.rows.append([ts, "lattice best (AM + 0.4 x 3-gram, no neural LM)", 0, 0.0, wer_tot,
                    None, 0])
    mp.rows.append([ts, "base score only (AM, no LM)", 0, 0.0, wer0, None, 0])
    mp.rows.append([ts, "full rescoring", counting.paths, 100.0, mp.full_wer[ts], t_full,
                    counting.calls])


def budget_variants(budget: int, scale: float, learned) -> list[tuple]:
    """(name, config, predictor) of top-b and the multi-pass systems at one budget."""
    variants = [("top-b by base score", MultiPassConfig(
        first_k=budget, batch_k=1, max_evaluations=budget, lm_scale=scale), None),
        ("multi-pass, parameter-free", MultiPassConfig(
            first_k=min(2, budget), batch_k=2, max_evaluations=budget,
            lm_scale=scale), None)]
    if learned is not None:
        variants.append(("multi-pass, learned predictor", MultiPassConfig(
            first_k=min(2, budget), batch_k=2, max_evaluations=budget,
            lm_scale=scale), learned))
    return variants


def budget_rows(ts: str, d: TestSet, learned, scale: float, budgets: tuple[int, ...],
                counting: CountingScorer, table, mp: MultiPass) -> None:
    """top-b and multi-pass at every budget on one test set."""
    real_paths = int((~d.top.padded).sum())
    for budget in budgets:
        for name, cfg, pred in budget_variants(budget, scale, learned):
            counting.reset()
            with torch.no_grad():
                t, out = _seconds(multi_pass_rescore, d.top, d.base, counting, cfg,
                                  predictor=pred)
            frac = 100.0 * counting.paths / real_paths
            w = wer_of(out.hyps, d.refs, table)
            mp.rows.append([ts, f"{name}, budget {budget}/utt", counting.paths, frac, w, t,
                            counting.calls])
            mp.curves.setdefault(f"{ts}: {name}", []).append((frac, w))


def multipass_target(report: Report, mp: MultiPass) -> None:
    """The smallest evaluation share from which a predictor's WER stays at or below full
    rescoring's for every larger budget tried (a lucky dip at one budget is not enough)."""
    verdicts = []
    ok = True
    for ts in mp.full_wer:
        best = None
        for name in ("multi-pass, parameter-free", "multi-pass, learned predictor"):
            pts = sorted(mp.curves.get(f"{ts}: {name}", []))
            for i, (frac, _) in enumerate(pts):
                if all(w <= mp.full_wer[ts] + 1e-9 for _, w in pts[i:]):
                    if best is None or frac < best[0]:
                        best = (frac, name)
                    break
        if best is None:
            verdicts.append(f"{ts}: never within the budgets tried")
            ok = False
        else:
            verdicts.append(f"{ts}: from {best[0]:.0f}% on ({best[1]})")
            ok &= best[0] <= 25.0
    report.target("Multi-pass reaches the WER of full rescoring with <= 25% of the neural "
                  "evaluations (and stays there at larger budgets)", "; ".join(verdicts), ok)


def multipass_plot(path: Path, mp: MultiPass) -> None:
    sets = list(mp.full_wer)
    fig, axes = plots.pyplot().subplots(1, len(sets), figsize=(5.5 * len(sets), 4),
                                        squeeze=False)
    for ax, ts in zip(axes[0], sets):
        for label, pts in mp.curves.items():
            if label.startswith(ts + ":"):
                pts = sorted(pts)
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o",
                        label=label.split(": ", 1)[1])
        ax.axhline(mp.full_wer[ts], color="k", ls="--", label="full rescoring (100%)")
        ax.axvline(25, color="grey", ls=":", lw=1)
        ax.set_xlabel("neural LM evaluations, % of full rescoring")
        ax.set_ylabel("WER %")
        ax.set_title(ts)
        ax.legend(fontsize=7)
    plots.save(fig, path)


def multipass(b: ShippedBatch, lm, per_set: int, num_paths: int,
              budgets: tuple[int, ...], report: Report, out_dir) -> None:
    """Multi-pass and top-b rescoring against full rescoring with the neural LM."""
    table = b.assets.lang.word_table
    data = multipass_data(b, lm, per_set, num_paths)
    scorer = lm_path_scorer(lm)
    scale = pick_scale(data, scorer, table, report)
    counting = CountingScorer(scorer)
    mp = MultiPass()
    for ts, d in data.items():
        baseline_rows(ts, d, scale, counting, table, mp)
        other = [o for o in data if o != ts]
        learned = None
        if other:
            o = data[other[0]]
            learned = _fit_predictor(o.top, o.base, o.nn_token, 2, 10)
        budget_rows(ts, d, learned, scale, budgets, counting, table, mp)
    report.table(
        f"WER vs neural evaluations (RNN-LM rescoring of {num_paths}-path n-bests): evaluations = "
        "paths scored by the LM, % of full rescoring's; time includes matching statistics",
        ["test set", "system", "LM evaluations", "% of full", "WER %", "seconds", "LM calls"],
        mp.rows,
    )
    multipass_target(report, mp)
    path = report.plot_path(out_dir, "nbest_multipass.png")
    if path is not None:
        multipass_plot(path, mp)


# ------------------------------------------------------------------ main


#: mode -> (throughput utterances, num_paths, multi-pass utterances per test set, multi-pass
#: num_paths, multi-pass budgets)
MODES = {"smoke": (1, (10, 100), 3, 20, (2, 5)),
         "quick": (4, (100, 1000), 6, 30, (2, 5, 10)),
         "full": (20, (100, 1000), 50, 50, (2, 3, 5, 8, 12, 20))}


def main() -> None:
    p = area_parser(__doc__, "nbest")
    p.add_argument("--lm", default=str(RNN_LM), help="RNN/Transformer LM checkpoint")
    p.add_argument("--memory-case", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    one_thread()
    if args.memory_case:
        n_utts, num_paths, max_arcs = (int(v) for v in args.memory_case.split(","))
        print(json.dumps(memory_case(n_utts, num_paths, max_arcs)))
        return
    n_thr, paths, per_set, mp_paths, budgets = MODES[mode_of(args)]
    report = Report(
        area="nbest", title="Nbest: throughput, memory, multi-pass vs full rescoring",
        settings=(f"Shipped model CTC log-probs -> HLG lattices (search beam 20, output beam "
                  f"{OUTPUT_BEAM:g} as in the demo, max active 10000); n-best sampled with "
                  "nbest_scale 0.5, deduplicated by "
                  f"words; throughput on {n_thr} utterances, multi-pass on {per_set} per test "
                  "set; 1 torch thread. No peer ships multi-pass rescoring: the comparison is "
                  "k2dec's own full rescoring in the same run."),
    )
    b = shipped_batch(max(n_thr, per_set))
    lm = None
    if Path(args.lm).is_file():
        from k2dec.lm import load_lm

        lm = load_lm(args.lm).eval()
    else:
        report.peer_missing("trained RNN LM", f"{args.lm} not found: no neural rescoring rows")
    thr_utts = list(range(len(b.refs)))[: min(n_thr, len(b.refs))]
    rescoring_cost(b, thr_utts, report, 1 if args.smoke else 2, args.smoke)
    throughput(b, lm, thr_utts, paths, report, fresh_process=not args.smoke)
    if lm is not None:
        multipass(b, lm, per_set, mp_paths, budgets, report, args.report)
    report.write(args.report)


if __name__ == "__main__":
    main()
