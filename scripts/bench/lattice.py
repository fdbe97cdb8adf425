"""Benchmark area "lattice": HLG / HCLG 1best with k2dec against PyPI kaldi-decoder's
FasterDecoder on the same graphs and log-likelihoods, at several beams; multi-process scaling
of :class:`k2dec.lattice.ParallelOneBestDecoder`; where k2dec's time goes.

Inputs:

* the real shipped HLG (BPE 256, 3-gram) with the shipped model's CTC log-probs on the shipped
  test sets (``shipped.shipped_batch``), skipped in ``--smoke``;
* a synthetic HLG-like CTC lexicon graph and a synthetic HCLG-like HMM graph (random lexicons,
  unigram word scores) with peaked random log-softmax frames around random word strings.

Both systems get the same beam (k2's ``search_beam`` = kaldi's ``beam``) and the same
``max_active`` / ``min_active``; kaldi-decoder reads the graph as an OpenFst FST (input label =
token id + 1, cost = -score, k2's final arcs become final weights; ``peers/kaldi.py``), cached
under ``exp/bench/work/kaldi/``. Agreement is the fraction of utterances with the same word
sequence. Times exclude graph loading and process start-up, are the best of ``--repeat`` runs,
at one torch thread (the runner's workers run one thread each).

Usage (from the repository root)::

    python -m scripts.bench.lattice [--quick | --smoke] [--report DIR]
"""

from __future__ import annotations

import cProfile
import pstats
from dataclasses import dataclass, field
from pathlib import Path

from k2dec.graph import k2_to_kaldi_decoder_fst
from k2dec.lattice import (
    LatticeConfig,
    ParallelOneBestDecoder,
    one_best_decoding,
    viterbi_one_best,
)
from k2dec.lattice.parallel import WorkerStats, available_cores

from . import plots
from .common import (
    Progress,
    Report,
    area_parser,
    equal_wer_rows,
    interleaved,
    mode_of,
    one_thread,
)
from .machine import autogroup, cpu_scaling_ceiling, load1
from .peers import kaldi
from .shipped import ShippedBatch, scaled_graph, shipped_batch
from .synthetic import Problem, synthetic_problems

AREA = "lattice"
TARGET_TIME = ("HLG 1best at equal WER on the shipped test sets: k2dec's frames/s >= 1.5x "
               "kaldi-decoder's (FasterDecoder), single process")
HLG_SCALE = 0.3  # the LM weight the ctc_lm area's tuning picks for k2dec and both peers
CURVE_BEAMS = {"full": ((5.0, 100), (6.0, 100), (7.0, 150), (8.0, 200), (10.0, 200),
                        (10.0, 300), (12.0, 200), (12.0, 500)),
               "quick": ((6.0, 100), (8.0, 200))}
VARIANTS = (("exact", {}), ("token_top_k 8", {"token_top_k": 8}),
            ("token_top_k 8, blank_skip 0.95", {"token_top_k": 8,
                                                "blank_skip_threshold": 0.95}),
            ("token_top_k 16, blank_skip 0.99", {"token_top_k": 16,
                                                 "blank_skip_threshold": 0.99}),
            # between the two above, and the mildest (to see whether any switch keeps the
            # exact search's WER while skipping frames at the accurate end)
            ("token_top_k 8, blank_skip 0.99", {"token_top_k": 8,
                                                "blank_skip_threshold": 0.99}),
            ("token_top_k 32, blank_skip 0.999", {"token_top_k": 32,
                                                  "blank_skip_threshold": 0.999}))
#: the opt-in best partial path instead of retries (kaldi-decoder's FasterDecoder returns one
#: too when no final state is active), at the fast points only (beam <= PARTIAL_MAX_BEAM:
#: wider searches leave (almost) every utterance a complete path)
PARTIAL_VARIANTS = (("exact, allow_partial", {"allow_partial": True}),
                    ("token_top_k 8, blank_skip 0.95, allow_partial",
                     {"token_top_k": 8, "blank_skip_threshold": 0.95, "allow_partial": True}))
PARTIAL_MAX_BEAM = 7.0
#: the lattice-free Viterbi search (``1best``'s ``search.lattice_free``) at the same settings
LATTICE_FREE = (("lattice-free exact", {}),
                ("lattice-free token_top_k 8, blank_skip 0.95", {"token_top_k": 8,
                                                                "blank_skip_threshold": 0.95}))
PROFILE_MAX_ACTIVE = 500  # the lattice-free profile's cap (no cap keeps thousands of states)
TARGET_RUNNER = "multi-process runner faster than kaldi-decoder on 2 cores"
TARGET_SCALING = "ParallelOneBestDecoder scaling >= 1.7x from 1 to 2 workers"


@dataclass(frozen=True)
class Sizes:
    """What one mode measures."""

    real_cuts: int  # cuts per shipped test set (0: skip the real HLG)
    real_beams: tuple  # beams (max-active 10000) or (beam, max-active) pairs
    target_beam: float  # beam of the runner scaling and of the profile
    words: int
    tokens: int
    utts: int
    frames: int
    synth_beams: tuple[float, ...]
    repeat: int


MODES = {
    "full": Sizes(30, (8.0, 12.0, (16.0, 3000)), 12.0, 200, 40, 12,
                  250, (8.0, 12.0, 16.0), 2),
    "quick": Sizes(6, (10.0, 12.0), 12.0, 200, 40, 6, 150, (8.0, 20.0), 2),
    "smoke": Sizes(0, (), 12.0, 40, 12, 3, 40, (8.0, 12.0), 1),
}


# ------------------------------------------------------------------ k2dec vs kaldi at one beam


@dataclass
class Comparison:
    graph: str
    beam: float
    output_beam: float
    frames: int
    t_k2: float
    t_kd: float
    same: int
    total: int
    k2_empty: int
    kd_not_final: int
    k2_better: int
    kd_better: int
    mem_k2: float | None
    mem_kd: float | None
    wer_k2: float | None = None
    wer_kd: float | None = None
    max_active: int = 10000

    @property
    def ratio(self) -> float:
        return self.t_k2 / self.t_kd

    @property
    def agreement(self) -> float:
        return self.same / self.total

    def row(self) -> list:
        return [self.graph, f"{self.beam:g}/{self.output_beam:g}/{self.max_active}",
                self.frames / self.t_k2,
                self.frames / self.t_kd, self.ratio, f"{100 * self.agreement:.1f}% "
                f"({self.same}/{self.total})", f"{self.k2_empty}/{self.kd_not_final}",
                f"{self.k2_better}/{self.kd_better}", self.wer_k2, self.wer_kd, self.mem_k2,
                self.mem_kd]


HEADERS = ["graph", "beam (search/output/max-active)", "k2dec frames/s", "kaldi frames/s",
           "time k2dec/kaldi", "identical 1-best", "no final path k2dec/kaldi",
           "better score k2dec/kaldi", "WER % k2dec", "WER % kaldi", "k2dec peak +MiB",
           "kaldi peak +MiB"]


@dataclass(frozen=True)
class References:
    """Reference words of the real inputs, to give each system's WER."""

    cut_ids: list[str]
    refs: list[list[str]]
    word_table: object

    @staticmethod
    def of(b: ShippedBatch) -> References:
        return References(b.cut_ids, b.refs, b.assets.lang.word_table)

    def wer(self, word_ids: list) -> float:
        from k2dec.results import compute_wer, word_ids_to_words

        hyps = word_ids_to_words([list(w) for w in word_ids], self.word_table)
        return compute_wer(list(zip(self.cut_ids, self.refs, hyps))).wer


def compare(p: Problem, beam: float, repeat: int, refs: References | None = None,
            max_active: int = 10000) -> Comparison:
    """k2dec's one_best_decoding and kaldi-decoder on ``p`` at one beam, timed in turns."""
    config = LatticeConfig(search_beam=beam, output_beam=beam / 2, retry_scales=(),
                           max_active_states=max_active)
    lp, lens = p.log_probs, p.lengths
    one_best_decoding(lp[:1], lens[:1], p.graph, config)  # warm-up
    k2_run, kd_run = interleaved(repeat, [
        lambda: one_best_decoding(lp, lens, p.graph, config),
        lambda: kaldi.decode(p.fst, lp, lens, beam, config.max_active_states,
                             config.min_active_states),
    ], track_memory=True)
    hyps, ref = k2_run.result, kd_run.result
    finite = [(h.score, r.score) for h, r in zip(hyps, ref)]
    return Comparison(
        graph=p.name, beam=beam, output_beam=config.output_beam, frames=int(lens.sum()),
        max_active=max_active,
        t_k2=k2_run.best, t_kd=kd_run.best, same=sum(h.words == r.words for h, r in zip(hyps, ref)),
        total=len(hyps), k2_empty=sum(h.score == -float("inf") for h in hyps),
        kd_not_final=sum(not r.final for r in ref),
        k2_better=sum(a > b + 1e-3 for a, b in finite),
        kd_better=sum(b > a + 1e-3 for a, b in finite),
        mem_k2=k2_run.mem_mb, mem_kd=kd_run.mem_mb,
        wer_k2=refs.wer([h.words for h in hyps]) if refs is not None else None,
        wer_kd=refs.wer([r.words for r in ref]) if refs is not None else None,
    )


# ------------------------------------------------------------------ WER vs speed (real HLG)


@dataclass
class CurvePoint:
    """One system at one setting on the real test data."""

    system: str
    setting: str
    seconds: float
    spread: float  # slowest / fastest of the repeats
    frames: int
    wer: float

    @property
    def fps(self) -> float:
        return self.frames / self.seconds


def k2dec_batches(graph, log_probs, lengths, config, batch_size: int = 40,
                  lattice_free: bool = False) -> list:
    """one_best_decoding (``lattice_free``: viterbi_one_best) in batches of ``batch_size``
    utterances (as a decode job does)."""
    search = viterbi_one_best if lattice_free else one_best_decoding
    out = []
    for start in range(0, log_probs.shape[0], batch_size):
        lens = lengths[start:start + batch_size]
        out += search(log_probs[start:start + batch_size, : int(lens.max())], lens, graph,
                      config)
    return out


def wer_curves(p: Problem, refs: References, beams, repeat: int) -> list[CurvePoint]:
    """kaldi-decoder and k2dec (exact and with each approximation of ``VARIANTS``, at the fast
    points ``PARTIAL_VARIANTS`` too, then the lattice-free search of ``LATTICE_FREE``) at every
    (beam, max-active) of ``beams``; one setting's systems timed in turns, ``repeat``
    rounds."""
    frames = int(p.lengths.sum())
    points = []
    for beam, max_active in beams:
        base = LatticeConfig(search_beam=beam, output_beam=min(4.0, beam / 2),
                             max_active_states=max_active)
        setting = f"beam {beam:g}, max-active {max_active}"
        fns = [lambda b=beam, m=max_active, n=base.min_active_states: kaldi.decode(
            p.fst, p.log_probs, p.lengths, b, m, n)]
        variants = VARIANTS + (PARTIAL_VARIANTS if beam <= PARTIAL_MAX_BEAM else ())
        names = (["kaldi-decoder"] + [f"k2dec {name}" for name, _ in variants]
                 + [f"k2dec {name}" for name, _ in LATTICE_FREE])
        for _, kw in variants:
            cfg = LatticeConfig(**{**base.__dict__, **kw})
            fns.append(lambda cfg=cfg: k2dec_batches(p.graph, p.log_probs, p.lengths, cfg))
        for _, kw in LATTICE_FREE:
            cfg = LatticeConfig(**{**base.__dict__, **kw})
            fns.append(lambda cfg=cfg: k2dec_batches(p.graph, p.log_probs, p.lengths, cfg,
                                                     lattice_free=True))
        for name, run in zip(names, interleaved(repeat, fns)):
            points.append(CurvePoint(name, setting, run.best, run.spread, frames,
                                     refs.wer([h.words for h in run.result])))
    return points


def equal_wer(points: list[CurvePoint], peer: str = "kaldi-decoder"
              ) -> tuple[list[list], list[float | None]]:
    """For each peer setting: k2dec's fastest run whose WER is not worse, and the speed ratio
    (None where no k2dec run is that accurate)."""
    return equal_wer_rows([p for p in points if p.system == peer],
                          [p for p in points if p.system.startswith("k2dec")])


# ------------------------------------------------------------------ where k2dec's time goes


PROFILED = (
    ("k2.intersect_dense_pruned", "intersect_dense_pruned"),
    ("k2.shortest_path", "shortest_path"),
    ("k2.index_fsa (restore the caller's order)", "index_fsa"),
    ("get_tot_scores", "get_tot_scores"),
    ("input validation + DenseFsaVec", ("validate_log_probs", "check_vocab", "dense_rows")),
    ("best path -> token/word ids (k2dec.primitives.best_paths)",
     ("path_token_ids", "path_aux_ids")),
    ("Hypothesis records (tolist, assembly)", "assemble_hypotheses"),
)


def profile_split(graph, log_probs, lengths, beam: float) -> list[list]:
    """Where one_best_decoding's time goes (cProfile cumulative times; the profiler's own
    overhead lands in the Python parts)."""
    config = LatticeConfig(search_beam=beam, output_beam=beam / 2, retry_scales=())
    prof = cProfile.Profile()
    prof.enable()
    one_best_decoding(log_probs, lengths, graph, config)
    prof.disable()
    stats = pstats.Stats(prof).stats  # {(file, line, func): (cc, nc, tt, ct, callers)}
    cum: dict[str, float] = {}
    for (_, _, func), (_, _, _, ct, _) in stats.items():
        cum[func] = max(cum.get(func, 0.0), ct)
    total = cum.get("one_best_decoding", 0.0)
    rows, accounted = [], 0.0
    for label, funcs in PROFILED:
        funcs = (funcs,) if isinstance(funcs, str) else funcs
        t = sum(cum.get(f, 0.0) for f in funcs)
        accounted += t
        rows.append([label, 1000 * t, 100 * t / total if total else None])
    rest = max(0.0, total - accounted)
    rows.append(["other Python (retries, reports, glue)", 1000 * rest,
                 100 * rest / total if total else None])
    rows.append(["total one_best_decoding", 1000 * total, 100.0])
    return rows


PROFILED_VITERBI = (
    ("graph tables (once per graph object)", "graph_tables"),
    ("expand: arcs of the active states, scored (gathers)", "_expand"),
    ("prune: beam (segment max), best arc per state (one sort), max-active", "_prune"),
    ("final arcs", "close"),
    ("back-pointers -> arc paths", "_backtrack"),
    ("paths -> tokens, words, Hypothesis records", "_hypotheses"),
    ("input validation", ("validate_log_probs", "check_vocab")),
)
#: torch ops inside the search, by kind (their share of the total, across the parts above)
PROFILED_OPS = (("torch gather (index lookups)", "gather"), ("torch sort", "sort"),
                ("torch nonzero (compaction)", "nonzero"),
                ("torch repeat_interleave", "repeat_interleave"))


def _builtin_name(func: str) -> str | None:
    """``gather`` for cProfile's ``<method 'gather' of '...' objects>``, ``sort`` for
    ``<built-in method torch.sort>``; None for Python functions."""
    if func.startswith("<method '"):
        return func.split("'")[1]
    if func.startswith("<built-in method "):
        return func[len("<built-in method "):].rstrip(">").rsplit(".", 1)[-1]
    return None


def profile_viterbi(graph, log_probs, lengths, beam: float, max_active: int) -> list[list]:
    """Where viterbi_one_best's time goes (cProfile: the Python parts' cumulative times, then
    the torch ops by kind)."""
    config = LatticeConfig(search_beam=beam, max_active_states=max_active, retry_scales=())
    viterbi_one_best(log_probs[:1], lengths[:1], graph, config)  # graph tables built
    prof = cProfile.Profile()
    prof.enable()
    viterbi_one_best(log_probs, lengths, graph, config)
    prof.disable()
    stats = pstats.Stats(prof).stats
    cum: dict[str, float] = {}
    for (_, _, func), (_, _, tt, ct, _) in stats.items():
        cum[func] = max(cum.get(func, 0.0), ct)
        op = _builtin_name(func)
        if op is not None:
            cum[f"op:{op}"] = cum.get(f"op:{op}", 0.0) + tt
    total = cum.get("viterbi_one_best", 0.0)
    rows = []
    for label, funcs in PROFILED_VITERBI:
        funcs = (funcs,) if isinstance(funcs, str) else funcs
        t = sum(cum.get(f, 0.0) for f in funcs)
        rows.append([label, 1000 * t, 100 * t / total if total else None])
    for label, op in PROFILED_OPS:
        t = cum.get(f"op:{op}", 0.0)
        rows.append([f"of which {label}", 1000 * t, 100 * t / total if total else None])
    rows.append(["total viterbi_one_best", 1000 * total, 100.0])
    return rows


# ------------------------------------------------------------------ multi-process scaling


@dataclass
class Scaling:
    """ParallelOneBestDecoder with 1 and 2 workers (best seconds, words identical to
    one_best_decoding), kaldi-decoder in one process (None without it), and the machine's state."""

    t1: float
    t2: float
    t_kd: float | None
    same: list[bool]
    frames: int
    cores: int
    load: float
    ceiling: float = 0.0
    stats1: WorkerStats = field(default_factory=WorkerStats)
    stats2: WorkerStats = field(default_factory=WorkerStats)

    @property
    def contention(self) -> float:
        """How much slower the 2 workers decode their groups than 1 worker the whole batch
        (their summed busy seconds per call over 1 worker's): what parallel searches cost
        each other, not the runner."""
        per_call = [st.busy_seconds / max(1, st.calls) for st in (self.stats1, self.stats2)]
        return per_call[1] / per_call[0] if per_call[0] > 0 else float("nan")

    @property
    def loaded(self) -> bool:
        """Even a busy loop could not use 2 cores: the decoder's scaling is not measurable."""
        return self.ceiling < 1.7

    @property
    def why(self) -> str:
        return (f"the machine was shared: a pure-Python busy loop itself scaled only "
                f"{self.ceiling:.2f}x from 1 to 2 processes in this run (load average "
                f"{self.load:.1f})" if self.loaded else "")


def runner_scaling(p: Problem, beam: float, repeat: int) -> Scaling:
    """Best seconds of ParallelOneBestDecoder with 1 and 2 workers and of kaldi-decoder (one
    process, not run without ``p.fst``), timed in turns; and whether both give the words of
    one_best_decoding."""
    config = LatticeConfig(search_beam=beam, output_beam=beam / 2, retry_scales=())
    lp, lens = p.log_probs, p.lengths
    expected = [h.words for h in one_best_decoding(lp, lens, p.graph, config)]
    with ParallelOneBestDecoder(p.graph, config, num_workers=1) as r1, \
            ParallelOneBestDecoder(p.graph, config, num_workers=2) as r2:
        r2.decode(lp[:2], lens[:2])  # worker start-up and warm-up
        r2.stats = WorkerStats()
        fns = [lambda: r1.decode(lp, lens), lambda: r2.decode(lp, lens)]
        if p.fst is not None:
            fns.append(lambda: kaldi.decode(p.fst, lp, lens, beam, config.max_active_states,
                                            config.min_active_states))
        timed = interleaved(repeat, fns, track_memory=True)
    same = [[h.words for h in run.result] == expected for run in timed[:2]]
    t_kd = timed[2].best if p.fst is not None else None
    return Scaling(timed[0].best, timed[1].best, t_kd, same, int(lens.sum()),
                   available_cores(), 0.0, stats1=r1.stats, stats2=r2.stats)


# ------------------------------------------------------------------ plots


def _plot_throughput(axes, comparisons: list[Comparison]) -> None:
    """Per graph and max-active: frames/s and agreement vs beam, WER vs frames/s."""
    ax1, ax2, ax3 = axes
    groups = list(dict.fromkeys((c.graph, c.max_active) for c in comparisons))
    for i, (graph, max_active) in enumerate(groups):
        g = graph if max_active == 10000 else f"{graph}, max-active {max_active}"
        cs = sorted((c for c in comparisons if (c.graph, c.max_active) == (graph, max_active)),
                    key=lambda c: c.beam)
        color = f"C{i}"
        beams = [c.beam for c in cs]
        ax1.plot(beams, [c.frames / c.t_k2 for c in cs], "o-", color=color,
                 label=f"k2dec, {g}")
        ax1.plot(beams, [c.frames / c.t_kd for c in cs], "s--", color=color,
                 label=f"kaldi-decoder, {g}")
        ax2.plot(beams, [100 * c.agreement for c in cs], "o-", color=color, label=g)
        if cs[0].wer_k2 is not None:
            ax3.plot([c.frames / c.t_k2 for c in cs], [c.wer_k2 for c in cs], "o-",
                     color=color, label=f"k2dec, {g}")
            ax3.plot([c.frames / c.t_kd for c in cs], [c.wer_kd for c in cs], "s--",
                     color=color, label=f"kaldi-decoder, {g}")
            for c in cs:
                ax3.annotate(f"beam {c.beam:g}", (c.frames / c.t_k2, c.wer_k2), fontsize=7,
                             xytext=(3, 3), textcoords="offset points")


def _label_throughput(axes) -> None:
    ax1, ax2, ax3 = axes
    ax1.set_yscale("log")
    ax1.set_xlabel("beam (k2 search_beam = kaldi beam)")
    ax1.set_ylabel("frames / s (1 thread, log scale)")
    ax1.set_title("1best throughput")
    ax1.grid(True, alpha=0.3)
    ax1.legend(fontsize=7)
    ax2.set_xlabel("beam")
    ax2.set_ylabel("identical 1-best word sequences (%)")
    ax2.set_title("agreement k2dec vs kaldi-decoder")
    ax2.set_ylim(0, 102)
    ax2.grid(True, alpha=0.3)
    ax2.legend(fontsize=7)
    ax3.set_xscale("log")
    ax3.set_xlabel("frames / s (log scale)")
    ax3.set_ylabel("WER %")
    ax3.set_title("WER vs speed (real shipped HLG)")
    ax3.grid(True, alpha=0.3)
    if ax3.lines:
        ax3.legend(fontsize=7)
    else:
        ax3.text(0.5, 0.5, "real HLG not run in this mode", ha="center",
                 transform=ax3.transAxes)


def plot(comparisons: list[Comparison], path: Path) -> None:
    fig, axes = plots.pyplot().subplots(1, 3, figsize=(16, 4.8))
    _plot_throughput(axes, comparisons)
    _label_throughput(axes)
    plots.save(fig, path)


# ------------------------------------------------------------------ the area's sections


@dataclass
class Bench:
    """One run of the area: its mode, sizes, report, and what it has measured so far."""

    mode: str
    sizes: Sizes
    repeat: int
    seed: int
    report_dir: str | None
    rep: Report
    have_kaldi: bool
    phase: Progress = field(default_factory=lambda: Progress(AREA))
    comparisons: list[Comparison] = field(default_factory=list)


@dataclass
class Curve:
    """The WER-vs-speed points and the data they were measured on."""

    points: list[CurvePoint]
    utterances: int
    frames: int


def parse_args(argv: list[str] | None) -> Bench:
    p = area_parser(__doc__, "lattice")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--repeat", type=int, default=None, help="best of this many runs")
    args = p.parse_args(argv)
    one_thread()
    mode = mode_of(args)
    sz = MODES[mode]
    rep = Report(AREA, "HLG / HCLG lattice decoding: k2dec 1best vs kaldi-decoder")
    missing = kaldi.import_error()
    if missing is not None:
        rep.peer_missing(kaldi.PEER, missing)
    return Bench(mode, sz, args.repeat or sz.repeat, args.seed, args.report, rep,
                 missing is None)


def real_section(bench: Bench) -> tuple[Problem, ShippedBatch] | None:
    """The shipped HLG against kaldi at the mode's beams (None where it is not run)."""
    sz = bench.sizes
    if sz.real_cuts == 0:
        bench.rep.note(f"--{bench.mode} mode: synthetic graphs only (the real shipped HLG is "
                       "not loaded), so the targets are not evaluated.")
        return None
    if not bench.have_kaldi:
        return None
    b = shipped_batch(max_cuts=sz.real_cuts)
    hlg = b.assets.resources.graphs["HLG"]
    fst = kaldi.cached_fst(hlg, b.graph_dir / "HLG.pt", b.graph_dir.parent / "kaldi")
    real = Problem(f"shipped HLG ({hlg.num_arcs / 1e6:.1f}M arcs)", hlg, b.ctc_log_probs,
                   b.encoder_lens, fst)
    refs = References.of(b)
    bench.phase("shipped batch and kaldi FST")
    for beam in sz.real_beams:
        beam, max_active = beam if isinstance(beam, tuple) else (beam, 10000)
        bench.comparisons.append(compare(real, beam, bench.repeat, refs, max_active))
        bench.phase(f"shipped HLG beam {beam:g}, max-active {max_active}")
    return real, b


def curve_section(bench: Bench, real: Problem, b: ShippedBatch) -> Curve:
    """WER vs speed with the HLG's scores x HLG_SCALE on all shipped utterances (quick: the
    real section's)."""
    scaled = scaled_graph(real.graph, HLG_SCALE)
    fst = kaldi.cached_fst(scaled, b.graph_dir / "HLG.pt", b.graph_dir.parent / "kaldi",
                           tag=f"-x{HLG_SCALE:g}")
    all_b = b if bench.mode == "quick" else shipped_batch()
    problem = Problem("scaled HLG", scaled, all_b.ctc_log_probs, all_b.encoder_lens, fst)
    points = wer_curves(problem, References.of(all_b), CURVE_BEAMS[bench.mode], bench.repeat)
    bench.phase("WER vs speed curves")
    return Curve(points, len(all_b.cut_ids), int(all_b.encoder_lens.sum()))


def synthetic_section(bench: Bench) -> Problem:
    """The synthetic graphs against kaldi at the mode's beams; returns the HLG-like problem."""
    sz = bench.sizes
    hlg, hclg = synthetic_problems(bench.seed, sz.words, sz.tokens, sz.utts, sz.frames)
    if bench.have_kaldi:
        for p in (hlg, hclg):
            compared = Problem(p.name, p.graph, p.log_probs, p.lengths,
                               k2_to_kaldi_decoder_fst(p.graph))
            for beam in sz.synth_beams:
                bench.comparisons.append(compare(compared, beam, bench.repeat))
            bench.phase(p.name)
    return hlg


def settings(bench: Bench, real: Problem | None) -> str:
    sz = bench.sizes
    real_desc = (f"real: the shipped model's CTC log-probs on the first {sz.real_cuts} cuts "
                 f"of each shipped test set ({int(real.lengths.sum())} frames) with the shipped "
                 "HLG" if real is not None else "real HLG: not run")
    return (
        f"Mode {bench.mode}. {real_desc}; synthetic: {sz.utts} utterances of up to {sz.frames} "
        f"frames, {sz.words} words, {sz.tokens} tokens (seed {bench.seed}). Equal beam: "
        "k2 search_beam = kaldi beam, output_beam = beam/2, max_active 10000 (k2dec's default) "
        "unless the row says otherwise, min_active 30, no retries, for both. One torch thread; "
        "times are the best of "
        f"{bench.repeat} runs; frames/s counts network frames decoded per second.")


def report_curve(bench: Bench, curve: Curve | None) -> None:
    """The WER-vs-speed tables, the equal-WER target and plot."""
    rep = bench.rep
    if curve is None:
        rep.target(TARGET_TIME, f"not measured ({bench.mode} mode or kaldi-decoder missing)",
                   None)
        return
    rep.table(f"WER vs speed on the shipped test sets ({curve.utterances} utterances, "
              f"{curve.frames} frames; HLG scores x {HLG_SCALE:g}; k2dec in batches of 40; "
              f"each setting's runs interleaved, best of {bench.repeat})",
              ["system", "setting", "WER %", "frames/s", "spread (slowest/fastest)"],
              [[p.system, p.setting, p.wer, p.fps, p.spread] for p in curve.points])
    rows, ratios = equal_wer(curve.points)
    rep.table("Equal WER: for each kaldi-decoder setting, k2dec's fastest run (any "
              "variant) with a WER not worse",
              ["kaldi-decoder setting", "kaldi WER %", "kaldi frames/s", "k2dec run",
               "k2dec WER %", "k2dec frames/s", "k2dec/kaldi speed"], rows)
    reached = [r for r in ratios if r is not None]
    worst = min(reached) if reached else None
    listed = ", ".join(f"{r:.2f}" if r is not None else "unreached" for r in ratios)
    value = (f"k2dec/kaldi speed at equal WER: {listed} (kaldi settings from most to least "
             f"accurate); worst {worst:.2f}x" if worst is not None
             else "no k2dec run reaches any kaldi WER")
    rep.target(TARGET_TIME, value, None if bench.mode != "full" else
               (len(reached) == len(ratios) and worst >= 1.5))
    path = rep.plot_path(bench.report_dir, "lattice_wer.png")
    if path is not None:
        plots.wer_vs_speed(curve.points, path, f"HLG 1best (scores x {HLG_SCALE:g}): WER vs "
                           "speed", "frames / s (1 thread, log scale)",
                           "WER % (shipped test sets)")


def measure_scaling(bench: Bench, p: Problem) -> Scaling:
    """The runner against kaldi, and a busy loop's scaling as the machine's ceiling."""
    load_before = load1()
    scaling = runner_scaling(p, bench.sizes.target_beam, bench.repeat)
    bench.phase("runner scaling")
    scaling.load = max(load_before, load1())
    scaling.ceiling = cpu_scaling_ceiling()
    bench.phase("busy-loop scaling baseline")
    return scaling


def report_scaling(bench: Bench, s: Scaling, where: str) -> None:
    rep, beam = bench.rep, bench.sizes.target_beam
    rows = [[1, s.frames / s.t1, 1.0, s.same[0], s.stats1.utilization(1), 1.0],
            [2, s.frames / s.t2, s.t1 / s.t2, s.same[1], s.stats2.utilization(2),
             s.contention]]
    if s.t_kd is not None:
        rows.append(["kaldi-decoder, 1 process", s.frames / s.t_kd, s.t1 / s.t_kd, "n/a",
                     None, None])
    rows.append(["baseline: busy loop, 2 processes", None, s.ceiling, "n/a", None, None])
    rep.table(f"ParallelOneBestDecoder scaling on the {where} (beam {beam:g}, {s.cores} "
              "cores available; runs interleaved)",
              ["workers", "frames/s", "speed vs 1 worker", "identical to one_best_decoding",
               "worker utilization", "decode seconds vs 1 worker"], rows)
    rep.note("ParallelOneBestDecoder scaling: 'worker utilization' is the workers' decoding "
             "seconds over workers x wall seconds (the rest is the pool's own cost and the "
             "wait for the slower group); 'decode seconds vs 1 worker' sums both workers' "
             "decoding seconds per batch over one worker's: above 1.0 the two searches slow "
             "each other down (shared caches and memory bandwidth), which no pool change "
             "removes. Speed is "
             "about 2 x utilization / that ratio (the speeds are best-of runs, the two "
             "columns sums over all runs).")
    if s.cores < 2:
        rep.target(TARGET_SCALING, f"only {s.cores} core available", None)
    elif s.loaded:
        rep.target(TARGET_SCALING, f"{s.t1 / s.t2:.2f}x measured, not evaluable ({s.why})",
                   None)
    else:
        rep.target(TARGET_SCALING, f"{s.t1 / s.t2:.2f}x (a busy loop: {s.ceiling:.2f}x)",
                   s.t1 / s.t2 >= 1.7)
    if s.t_kd is None:
        rep.target(TARGET_RUNNER, "not measured (kaldi-decoder missing)", None)
        return
    ratio = s.t_kd / s.t2
    value = (f"runner (2 workers) {ratio:.2f}x kaldi-decoder's speed (1 process) at "
             f"beam {beam:g} on the {where}")
    if s.loaded and s.cores >= 2:
        rep.target(TARGET_RUNNER, f"{value}; not evaluable ({s.why})", None)
    else:
        rep.target(TARGET_RUNNER, value, ratio > 1.0 if s.cores >= 2 else None)


def scaling_section(bench: Bench, p: Problem, where: str) -> None:
    """Multi-process scaling and the runner against kaldi; a note when the machine was
    shared."""
    cores, load = available_cores(), load1()
    if bench.mode == "smoke":
        bench.rep.note("--smoke mode: the multi-process runner is not measured (worker "
                       "start-up would dominate the run).")
        bench.rep.target(TARGET_SCALING, "not measured (smoke mode)", None)
        bench.rep.target(TARGET_RUNNER, "not measured (smoke mode)", None)
    else:
        scaling = measure_scaling(bench, p)
        report_scaling(bench, scaling, where)
        load = scaling.load
    if load > cores + 0.5:
        bench.rep.note(
            f"The machine was shared during this run (load average {load:.1f} on "
            f"{cores} cores): absolute times are pessimistic and k2dec/kaldi ratios noisy "
            "(runs are interleaved to even that out)."
            + (" Linux autogroup scheduling is on, so all processes of this run share one "
               "session's CPU share: extra worker processes get little extra CPU while "
               "other sessions are busy." if autogroup() else ""))


def finish(bench: Bench, p: Problem, where: str) -> None:
    """The profile table, the closing note and the throughput plot; writes the report."""
    rep = bench.rep
    rep.table(f"Where k2dec's 1best time goes ({where}, beam {bench.sizes.target_beam:g}, one "
              "call under cProfile)", ["part", "ms", "% of total"],
              profile_split(p.graph, p.log_probs, p.lengths, bench.sizes.target_beam))
    rep.table(f"Where the lattice-free search's time goes ({where}, beam "
              f"{bench.sizes.target_beam:g}, max-active {PROFILE_MAX_ACTIVE}, one call under "
              "cProfile)", ["part", "ms", "% of total"],
              profile_viterbi(p.graph, p.log_probs, p.lengths, bench.sizes.target_beam,
                              PROFILE_MAX_ACTIVE))
    rep.note("k2dec counts an utterance whose lattice has no final path as failed; "
             "kaldi-decoder's FasterDecoder then returns its best partial path (column "
             "'no final path'). 'better score' counts utterances where one system found a "
             "strictly better-scoring path than the other (pruning differences).")
    path = rep.plot_path(bench.report_dir, "lattice.png")
    if path is not None and bench.comparisons:
        path.parent.mkdir(parents=True, exist_ok=True)
        plot(bench.comparisons, path)
    elif path is not None:
        rep.plots.remove("lattice.png")
    rep.write(bench.report_dir)


def main(argv: list[str] | None = None) -> None:
    bench = parse_args(argv)
    shipped = real_section(bench)
    real = shipped[0] if shipped is not None else None
    curve = (curve_section(bench, *shipped)
             if shipped is not None and bench.mode in CURVE_BEAMS else None)
    synthetic = synthetic_section(bench)
    bench.rep.settings = settings(bench, real)
    if bench.comparisons:
        bench.rep.table("1best: k2dec vs kaldi-decoder FasterDecoder (same graph, same "
                        "log-probs)", HEADERS, [c.row() for c in bench.comparisons])
    report_curve(bench, curve)
    # Multi-process scaling and the runner against kaldi, on the real HLG when there is one.
    if real is not None:
        target, where = real, "shipped HLG"
    else:
        fst = k2_to_kaldi_decoder_fst(synthetic.graph) if bench.have_kaldi else None
        target = Problem(synthetic.name, synthetic.graph, synthetic.log_probs,
                         synthetic.lengths, fst)
        where = "synthetic HLG-like graph"
    scaling_section(bench, target, where)
    finish(bench, target, where)


if __name__ == "__main__":
    main()
