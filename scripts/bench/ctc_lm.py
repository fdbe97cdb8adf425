"""Benchmark area "ctc_lm": CTC decoding with a lexicon and an n-gram LM. k2dec's HLG 1best
(+ 4-gram whole-lattice / n-best rescoring) against torchaudio's flashlight lexicon beam search
(``torchaudio.models.decoder.ctc_decoder``, ``peers/torchaudio_ctc.py``) and pyctcdecode
(``peers/pyctc.py``), on the same CTC log-probs and the same 3-gram ARPA.

Inputs: the shipped model's CTC log-probs (BPE 256, blank 0) on the shipped test sets
(``shipped.shipped_batch``; full: all 100 + 100 utterances, ``--quick``: 20 + 20, ``--smoke``:
2 + 2). Every system reads the same 3-gram: k2dec through HLG (compiled from the ARPA by
kaldilm), the peers through KenLM reading the ARPA. torchaudio gets the lang dir's lexicon.txt
(word followed by its BPE pieces: flashlight's format) and tokens.txt's first V symbols
(``<blk>`` is the blank; flashlight needs a silence token, ``<sos/eos>`` plays it: the CTC
head never emits it). pyctcdecode has no lexicon: it decodes BPE pieces freely (``▁`` starts a
word) and scores words with KenLM, giving out-of-ARPA words an offset of -10.

LM weight: one convention for everyone, lambda times the LM's natural-log probability added to
the acoustic log-prob (no word bonus): k2dec scales the scores of HLG by lambda (HLG's scores
are G's, so paths get ``am + lambda * lm``); torchaudio's ``lm_weight`` is lambda * ln(10)
(flashlight adds KenLM's log10 scores); pyctcdecode's ``alpha`` is lambda (it converts to
natural log itself). lambda is picked per system from a tiny grid on a tuning subset (the first
cuts of each test set, which are also part of the test data) at one middle beam, the same
procedure for every system; k2dec's rescoring methods pick their 4-gram scale on that subset
the same way. Then every beam setting is decoded on the whole test data with the picked
weights.

Times are decode wall time only (graphs and LMs are loaded beforehand), best of ``--repeat``
runs, one torch thread, one process: k2dec decodes batches of ``--batch-size`` utterances,
torchaudio and pyctcdecode one utterance after the other (their batch calls loop the same way;
pyctcdecode's multiprocessing pool is not used). Frames/s counts encoder frames (40 ms).

Usage (from the repository root)::

    python -m scripts.bench.ctc_lm [--quick | --smoke] [--report DIR]
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import torch

from k2dec.lattice import LatticeConfig
from k2dec.methods import CtcInputs, Resources, get_method
from k2dec.methods.ctc import OneBestSearchConfig
from k2dec.methods.parts import GraphConfig, RescorePart
from k2dec.nbest import NbestConfig
from k2dec.results import compute_wer, word_ids_to_words

from . import plots
from .common import (
    Report,
    area_parser,
    best_time,
    clean_error,
    equal_wer_rows,
    mode_of,
    one_thread,
    track_peak_rss,
)
from .peers import pyctc, torchaudio_ctc
from .shipped import ShippedBatch, scaled_graph, shipped_batch

AREA = "ctc_lm"
K2_1BEST = "k2dec 1best (HLG, 3-gram)"
K2_1BEST_FAST = "k2dec 1best (HLG, 3-gram), token_top_k 8 + blank_skip 0.95"
K2_FREE = "k2dec 1best lattice-free (HLG, 3-gram)"
K2_FREE_FAST = "k2dec 1best lattice-free (HLG, 3-gram), token_top_k 8 + blank_skip 0.95"
K2_1BEST_FASTER = "k2dec 1best (HLG, 3-gram), token_top_k 4 + blank_skip 0.9"
K2_1BEST_PARTIAL = "k2dec 1best (HLG, 3-gram), token_top_k 4 + blank_skip 0.9, allow_partial"
K2_1BEST_SYSTEMS = (K2_1BEST, K2_1BEST_FAST, K2_FREE, K2_FREE_FAST, K2_1BEST_FASTER,
                    K2_1BEST_PARTIAL)
#: what a system sets beyond its beams and switches (the lattice-free search; the opt-in best
#: partial path instead of retries for utterances that end with no final state active)
VARIANTS: dict[str, dict[str, bool]] = {K2_FREE: {"lattice_free": True},
                                        K2_FREE_FAST: {"lattice_free": True},
                                        K2_1BEST_PARTIAL: {"allow_partial": True}}
FAST_SWITCHES = {"token_top_k": 8, "blank_skip_threshold": 0.95}
#: the fast end's stronger switches (chosen on the tuning subset among token_top_k 2 / 4 / 8
#: with blank_skip 0.8 / 0.9 / 0.95 at beams 2/1/10 to 5/3/100; the lattice search only: the
#: lattice-free one is slower with switches at small beams)
FASTER_SWITCHES = {"token_top_k": 4, "blank_skip_threshold": 0.9}
TARGET_EQUAL_WER = ("HLG 1best at equal WER on the shipped test sets: k2dec's frames/s >= "
                    "torchaudio ctc_decoder's, single process")
K2_WLR = "k2dec 1best + 4-gram whole-lattice"
K2_NBEST = "k2dec + 4-gram nbest-rescoring"
TORCHAUDIO = torchaudio_ctc.PEER
PYCTC = pyctc.PEER
PEERS = (TORCHAUDIO, PYCTC)
RESCORE_SCALES = (0.1, 0.2, 0.3, 0.5, 0.7, 1.0)
NUM_PATHS = 30  # nbest-rescoring (k2dec's demo setting; icefall's default is 100)


@dataclass(frozen=True)
class Sizes:
    """What one mode measures."""

    cuts: int | None  # per test set (None: all)
    tune_cuts: int  # per test set, the tuning subset
    lm_weights: tuple[float, ...]  # lambda grid
    k2_beams: tuple[tuple[float, float, int], ...]  # search_beam, output_beam, max_active
    k2_tune: tuple[float, float, int]
    k2_fast: tuple[tuple[float, float, int], ...]  # 1best with FAST_SWITCHES
    k2_faster: tuple[tuple[float, float, int], ...]  # 1best with FASTER_SWITCHES
    rescore_beams: tuple[tuple[float, float, int], ...]  # whole-lattice rescoring settings
    nbest_beams: tuple[tuple[float, float, int], ...]  # nbest-rescoring settings
    ta_beams: tuple[tuple[int, int], ...]  # beam_size, beam_size_token
    ta_tune: tuple[int, int]
    pyctc_beams: tuple[int, ...]  # beam_width
    pyctc_tune: int
    repeat: int


MODES = {
    "full": Sizes(None, 20, (0.1, 0.2, 0.3, 0.5, 1.0),
                  ((7.0, 3.0, 150), (8.0, 3.0, 200), (10.0, 4.0, 300), (12.0, 4.0, 500)),
                  (10.0, 4.0, 300),
                  ((4.0, 2.0, 50), (5.0, 3.0, 100), (6.0, 3.0, 100), (8.0, 3.0, 200)),
                  ((2.0, 1.0, 10), (3.0, 1.0, 20), (3.0, 2.0, 30), (4.0, 2.0, 50),
                   (5.0, 3.0, 100)),
                  ((8.0, 3.0, 200), (10.0, 4.0, 300)), ((8.0, 3.0, 200),),
                  ((10, 8), (25, 16), (50, 16), (100, 32)), (10, 8),
                  (10, 25), 10, 2),
    "quick": Sizes(20, 10, (0.2, 0.3, 0.5),
                   ((8.0, 3.0, 200), (10.0, 4.0, 300)), (8.0, 3.0, 200),
                   ((5.0, 3.0, 100), (8.0, 3.0, 200)), ((3.0, 2.0, 30), (5.0, 3.0, 100)),
                   ((8.0, 3.0, 200),), (),
                   ((10, 8), (50, 16)), (10, 8),
                   (10,), 10, 1),
    "smoke": Sizes(2, 2, (0.5,), ((10.0, 4.0, 300),), (10.0, 4.0, 300), ((8.0, 3.0, 200),),
                   ((3.0, 2.0, 30),), ((10.0, 4.0, 300),),
                   (), ((10, 8),), (10, 8), (10,), 10, 1),
}
REPEAT_BUDGET = 10.0  # seconds: a run longer than this is not repeated


@dataclass
class Run:
    """One system at one setting on the test data."""

    system: str
    setting: str
    weights: str
    seconds: float
    frames: int
    wers: dict[str, float]  # test set -> WER %, plus "all"
    mem_mb: float | None

    @property
    def fps(self) -> float:
        return self.frames / self.seconds


@dataclass
class Data:
    """The log-probs and references of one subset of the shipped batch."""

    log_probs: torch.Tensor  # (N, T, V) float32
    lengths: torch.Tensor  # (N,) int64
    refs: list[list[str]]
    cut_ids: list[str]
    test_sets: list[str]

    @property
    def frames(self) -> int:
        return int(self.lengths.sum())

    def wers(self, hyps: list[list[str]]) -> dict[str, float]:
        out = {}
        for ts in sorted(set(self.test_sets)) + ["all"]:
            res = [(c, r, h) for c, r, h, s in zip(self.cut_ids, self.refs, hyps, self.test_sets)
                   if ts in ("all", s)]
            out[ts] = compute_wer(res).wer
        return out


def subset(b: ShippedBatch, per_set: int | None) -> Data:
    """The first ``per_set`` cuts of each test set (all of them for None), trimmed to the
    longest kept utterance."""
    seen: dict[str, int] = {}
    idx = []
    for i, ts in enumerate(b.test_sets):
        seen[ts] = seen.get(ts, 0) + 1
        if per_set is None or seen[ts] <= per_set:
            idx.append(i)
    index = torch.tensor(idx, dtype=torch.int64)
    lengths = b.encoder_lens[index].to(torch.int64)
    log_probs = b.ctc_log_probs[index, : int(lengths.max())].to(torch.float32).contiguous()
    return Data(log_probs, lengths, [b.refs[i] for i in idx], [b.cut_ids[i] for i in idx],
                [b.test_sets[i] for i in idx])


# ----------------------------------------------------------------------------- k2dec


def min_active(max_active: int) -> int:
    """k2dec's default ``min_active_states`` (30), at most half of ``max_active`` (k2 needs
    the minimum below the maximum; the small grid points go down to 10)."""
    return min(LatticeConfig.min_active_states, max_active // 2)


class K2System:
    """k2dec through the methods registry, on HLG whose scores are scaled by lambda."""

    def __init__(self, b: ShippedBatch, batch_size: int) -> None:
        self.hlg = b.assets.resources.graph("HLG", "bench")
        self.g4 = b.assets.resources.graph("G", "bench")
        self.word_table = b.assets.lang.word_table
        self.batch_size = batch_size
        self._resources: dict[float, Resources] = {}

    def resources(self, lam: float) -> Resources:
        if lam not in self._resources:
            g = scaled_graph(self.hlg, lam)
            if hasattr(g, "lm_scores"):
                g.lm_scores = self.hlg.lm_scores * lam
            self._resources[lam] = Resources(graphs={"HLG": g, "G": self.g4})
        return self._resources[lam]

    @staticmethod
    def config(beam: tuple[float, float, int], scales: tuple[float, ...] = RESCORE_SCALES,
               num_paths: int = NUM_PATHS, lattice_free: bool = False, **switches: Any
               ) -> dict[str, Any]:
        """The settings of the CTC methods the bench runs (each method's config takes the
        fields it has: :meth:`decode`)."""
        sb, ob, ma = beam
        lattice = LatticeConfig(search_beam=sb, output_beam=ob, max_active_states=ma,
                                min_active_states=min_active(ma), **switches)
        # the HLG scale is applied by resources(lam): the method's own graph.scale stays 1;
        # every rescoring scale is reported (sweep), the first one being the configured one
        return dict(lattice=lattice, graph=GraphConfig(1.0), nbest=NbestConfig(num_paths),
                    search=OneBestSearchConfig(lattice_free=lattice_free),
                    rescore=RescorePart(sweep=True, ngram_lm_scale=scales[0],
                                        ngram_lm_scales=tuple(scales)))

    def decode(self, method: str, data: Data, lam: float, settings: dict[str, Any]
               ) -> dict[str, list[list[str]]]:
        """``{result key: [utt][word]}`` over all utterances, in batches (the method's config:
        the ``settings`` it has)."""
        m = get_method(method)
        own = {f.name for f in fields(m.config_cls)}
        cfg = m.config_cls(**{k: v for k, v in settings.items() if k in own})
        res = self.resources(lam)
        out: dict[str, list[list[str]]] = {}
        n = data.log_probs.shape[0]
        for start in range(0, n, self.batch_size):
            end = min(n, start + self.batch_size)
            lens = data.lengths[start:end]
            inputs = CtcInputs(data.log_probs[start:end, : int(lens.max())], lens)
            with torch.no_grad():
                for r in m(inputs, res, cfg):
                    out.setdefault(r.key, []).extend(word_ids_to_words(r.words, self.word_table))
        return out


# ----------------------------------------------------------------------------- measuring


def measure(system: str, setting: str, weights: str, data: Data, repeat: int,
            fn: Callable[[], list[list[str]]]) -> Run:
    with track_peak_rss() as mem:
        seconds, hyps = best_time(1, fn)
        for _ in range(repeat - 1):
            if seconds > REPEAT_BUDGET:
                break
            t, _ = best_time(1, fn)
            seconds = min(seconds, t)
    return Run(system, setting, weights, seconds, data.frames, data.wers(hyps),
               mem.increase_mb)


def beam_name(beam: tuple[float, float, int]) -> str:
    return f"beams {beam[0]:g}/{beam[1]:g}, max-active {beam[2]}"


def tune(tune_data: Data, grid: tuple[float, ...], decode: Callable[[float], list[list[str]]]
         ) -> tuple[float, list[tuple[float, float]]]:
    """The lambda of ``grid`` with the lowest WER on the tuning subset (ties: the first)."""
    rows = [(lam, tune_data.wers(decode(lam))["all"]) for lam in grid]
    return min(rows, key=lambda r: r[1])[0], rows


def tune_rescoring(tune_data: Data, sweep: dict[str, list[list[str]]]) -> tuple[float, float]:
    """The rescoring scale (from a sweep's result keys ``..._<scale>``) with the lowest WER."""
    best = min(((float(k.rsplit("_", 1)[1]), tune_data.wers(h)["all"])
                for k, h in sweep.items()), key=lambda r: (r[1], r[0]))
    return best


def compare(runs: list[Run], peer: str) -> tuple[list[list], dict | None]:
    """Per peer setting: k2dec's most accurate run that is not slower. Returns the rows and the
    target evaluation against the peer's most accurate setting."""
    k2 = [r for r in runs if r.system.startswith("k2dec")]
    rows = []
    peer_runs = sorted((r for r in runs if r.system == peer), key=lambda r: r.seconds)
    for p in peer_runs:
        ok = [r for r in k2 if r.seconds <= p.seconds]
        best = min(ok, key=lambda r: (r.wers["all"], r.seconds)) if ok else None
        rows.append([p.setting, p.wers["all"], p.fps,
                     f"{best.system}, {best.setting}" if best else "none as fast",
                     best.wers["all"] if best else None,
                     best.seconds / p.seconds if best else None,
                     best.wers["all"] - p.wers["all"] if best else None])
    if not peer_runs:
        return rows, None
    return rows, compare_target(k2, peer_runs, peer)


def compare_target(k2: list[Run], peer_runs: list[Run], peer: str) -> dict:
    """The peer's most accurate setting against k2dec's most accurate run that is not slower."""
    target = min(peer_runs, key=lambda r: (r.wers["all"], r.seconds))
    ok = [r for r in k2 if r.seconds <= target.seconds]
    if not ok:
        fastest = min(k2, key=lambda r: r.seconds)
        return {"value": f"{peer} at {target.setting}: WER {target.wers['all']:.2f}% at "
                         f"{target.fps:.0f} frames/s; no k2dec setting is as fast (fastest "
                         f"k2dec: {fastest.fps:.0f} frames/s, WER "
                         f"{fastest.wers['all']:.2f}%). " + matched(k2, peer_runs),
                "met": False}
    best = min(ok, key=lambda r: (r.wers["all"], r.seconds))
    met = best.wers["all"] <= target.wers["all"]
    return {"value": f"{peer}'s most accurate setting ({target.setting}): WER "
                     f"{target.wers['all']:.2f}% at {target.fps:.0f} frames/s; k2dec's "
                     f"best not slower ({best.system}, {best.setting}): WER "
                     f"{best.wers['all']:.2f}% at {best.fps:.0f} frames/s (time ratio "
                     f"{best.seconds / target.seconds:.2f}). " + matched(k2, peer_runs),
            "met": met}


def equal_wer(runs: list[Run], peer: str) -> tuple[list[list], list[float | None]]:
    """For each ``peer`` setting (most accurate first): k2dec 1best's fastest run with a WER
    not worse, and its speed over the peer's (None where no 1best run is that accurate)."""
    return equal_wer_rows([r for r in runs if r.system == peer],
                          [r for r in runs if r.system in K2_1BEST_SYSTEMS],
                          wer_of=lambda r: r.wers["all"])


def matched(k2: list[Run], peer_runs: list[Run]) -> str:
    """At k2dec's best WER: the fastest peer setting at least as accurate, as a time ratio."""
    top = min(k2, key=lambda r: (r.wers["all"], r.seconds))
    ok = [p for p in peer_runs if p.wers["all"] <= top.wers["all"]]
    if not ok:
        return (f"No {peer_runs[0].system} setting reaches k2dec's best WER "
                f"({top.wers['all']:.2f}%).")
    p = min(ok, key=lambda r: r.seconds)
    return (f"At equal accuracy: k2dec's best WER {top.wers['all']:.2f}% ({top.setting}) takes "
            f"{top.seconds / p.seconds:.2f}x the time of {p.system} at {p.setting} (WER "
            f"{p.wers['all']:.2f}%).")


RUN_HEADERS = ["system", "setting", "LM weights", "WER test-clean", "WER test-other", "WER all",
               "frames/s", "peak +MiB"]


def run_row(r: Run) -> list:
    return [r.system, r.setting, r.weights, r.wers.get("test-clean"), r.wers.get("test-other"),
            r.wers["all"], r.fps, r.mem_mb]


# ----------------------------------------------------------------------------- systems


@dataclass
class Bench:
    """One run of the area: sizes, data, report, and the runs and tuning rows so far."""

    mode: str
    sizes: Sizes
    repeat: int
    batch_size: int
    report_dir: str | None
    rep: Report
    batch: ShippedBatch | None = None
    data: Data | None = None
    tune_data: Data | None = None
    runs: list[Run] = field(default_factory=list)
    tuning: list[list] = field(default_factory=list)


def bench_k2dec_1best(bench: Bench, k2: K2System) -> float:
    """Tune lambda for 1best, then time 1best (exact and with the switches; the fast end with
    and without ``allow_partial``); returns lambda."""
    sz, data, tune_data = bench.sizes, bench.data, bench.tune_data
    k2.decode("1best", tune_data, 1.0, k2.config(sz.k2_tune))  # warm-up
    lam, rows = tune(tune_data, sz.lm_weights, lambda lam: k2.decode(
        "1best", tune_data, lam, k2.config(sz.k2_tune))["1best"])
    bench.tuning += [[K2_1BEST, beam_name(sz.k2_tune), x, w] for x, w in rows]
    # the lattice search and the lattice-free one in turns at each setting
    for names, beams, switches in (((K2_1BEST, K2_FREE), sz.k2_beams, {}),
                                   ((K2_1BEST_FAST, K2_FREE_FAST), sz.k2_fast, FAST_SWITCHES),
                                   ((K2_1BEST_FASTER, K2_1BEST_PARTIAL), sz.k2_faster,
                                    FASTER_SWITCHES)):
        for beam in beams:
            for name in names:
                cfg = k2.config(beam, **VARIANTS.get(name, {}), **switches)
                bench.runs.append(measure(
                    name, beam_name(beam), f"λ={lam:g}", data, bench.repeat,
                    lambda cfg=cfg: k2.decode("1best", data, lam, cfg)["1best"]))
    return lam


def bench_k2dec_rescoring(bench: Bench, k2: K2System, lam: float) -> None:
    """Whole-lattice and n-best rescoring with the 4-gram, its scale tuned like lambda."""
    sz, data, tune_data = bench.sizes, bench.data, bench.tune_data
    for method, name, beams in (("whole-lattice-rescoring", K2_WLR, sz.rescore_beams),
                                ("nbest-rescoring", K2_NBEST, sz.nbest_beams)):
        if not beams:
            continue
        scale, w = tune_rescoring(tune_data, k2.decode(method, tune_data, lam,
                                                       k2.config(beams[0])))
        bench.tuning.append([name, beam_name(beams[0]), f"λ={lam:g}, 4-gram scale {scale:g}",
                             w])
        for beam in beams:
            cfg = k2.config(beam, scales=(scale,))
            bench.runs.append(measure(
                name, beam_name(beam), f"λ={lam:g}, 4-gram {scale:g}", data, bench.repeat,
                lambda cfg=cfg, method=method: next(iter(k2.decode(method, data, lam,
                                                                    cfg).values()))))


def bench_torchaudio(bench: Bench, ta: torchaudio_ctc.TorchaudioDecoder
                     ) -> tuple[list[Run], list[list]]:
    sz, data, tune_data = bench.sizes, bench.data, bench.tune_data

    def decode(d: Data, lam: float, beam: tuple[int, int]) -> list[list[str]]:
        return ta.decode(d.log_probs, d.lengths, lam, beam)

    lam, rows = tune(tune_data, sz.lm_weights, lambda lam: decode(tune_data, lam, sz.ta_tune))
    tuning = [[TORCHAUDIO, f"beam {sz.ta_tune[0]}, beam_size_token {sz.ta_tune[1]}", x, w]
              for x, w in rows]
    runs = []
    for beam in sz.ta_beams:
        ta.decoder(lam, beam)  # load the ARPA outside the measurement
        runs.append(measure(TORCHAUDIO, f"beam {beam[0]}, beam_size_token {beam[1]}",
                            f"λ={lam:g} (lm_weight {lam * math.log(10):.3g})", data,
                            bench.repeat, lambda beam=beam: decode(data, lam, beam)))
    return runs, tuning


def bench_pyctcdecode(bench: Bench, pc: pyctc.PyctcDecoder) -> tuple[list[Run], list[list]]:
    sz, data, tune_data = bench.sizes, bench.data, bench.tune_data

    def decode(d: Data, lam: float, beam_width: int) -> list[list[str]]:
        pc.set_lm_weight(lam)
        return pc.decode(d.log_probs, d.lengths, beam_width)

    lam, rows = tune(tune_data, sz.lm_weights,
                     lambda lam: decode(tune_data, lam, sz.pyctc_tune))
    tuning = [[PYCTC, f"beam_width {sz.pyctc_tune}", x, w] for x, w in rows]
    runs = [measure(PYCTC, f"beam_width {bw}", f"alpha={lam:g}, beta=0", data, bench.repeat,
                    lambda bw=bw: decode(data, lam, bw)) for bw in sz.pyctc_beams]
    return runs, tuning


#: peer -> (what builds it, its builder from the shipped batch and vocabulary, its benchmark)
PEER_BENCHES: dict[str, tuple[str, Callable, Callable]] = {
    TORCHAUDIO: (torchaudio_ctc.BUILDER,
                 lambda b, vocab: torchaudio_ctc.TorchaudioDecoder(b.lang_dir, b.arpa["3gram"],
                                                                  vocab),
                 bench_torchaudio),
    PYCTC: (pyctc.BUILDER, lambda b, vocab: pyctc.PyctcDecoder(b.lang_dir, vocab,
                                                               b.arpa["3gram"]),
            bench_pyctcdecode),
}


def bench_peers(bench: Bench, vocab: int) -> set[str]:
    """Each peer in turn; one that cannot be built, or fails while decoding, is reported
    missing. Returns the peers that ran."""
    ran = set()
    for peer, (builder, build, bench_peer) in PEER_BENCHES.items():
        try:
            system = build(bench.batch, vocab)
        except Exception as e:  # ImportError, or a broken install (missing libs, ABI)
            bench.rep.peer_missing(peer, f"cannot build {builder} ({type(e).__name__}: "
                                         f"{clean_error(e)}); install requirements/bench-ctc.txt")
            continue
        try:
            runs, tuning = bench_peer(bench, system)
        except Exception as e:  # the peer's own failure must not sink the report
            bench.rep.peer_missing(peer, f"failed while decoding ({type(e).__name__}: "
                                         f"{clean_error(e)})")
            continue
        bench.runs += runs
        bench.tuning += tuning
        ran.add(peer)
    return ran


# ----------------------------------------------------------------------------- the report


def parse_args(argv: list[str] | None) -> Bench:
    p = area_parser(__doc__, "ctc_lm")
    p.add_argument("--repeat", type=int, default=None, help="best of this many runs")
    p.add_argument("--batch-size", type=int, default=40, help="utterances per k2dec call")
    args = p.parse_args(argv)
    one_thread()
    mode = mode_of(args)
    sz = MODES[mode]
    rep = Report(AREA, "CTC + n-gram LM: k2dec HLG (+ rescoring) vs torchaudio ctc_decoder and "
                       "pyctcdecode")
    return Bench(mode, sz, args.repeat or sz.repeat, args.batch_size, args.report, rep)


def settings(bench: Bench) -> str:
    sz, data = bench.sizes, bench.data
    vocab = data.log_probs.shape[-1]
    n_sets = len(set(data.test_sets))
    return (
        f"{bench.mode} mode: the shipped model's CTC log-probs (V={vocab}, blank 0) on "
        f"{len(data.cut_ids)} utterances of {n_sets} shipped test sets ({data.frames} encoder "
        f"frames); first pass with the shipped 3-gram ARPA for every system, k2dec rescoring "
        f"with the 4-gram. LM weight lambda (natural-log LM score per acoustic log-prob, no word "
        f"bonus) tuned per system on the grid {list(sz.lm_weights)} over the first "
        f"{sz.tune_cuts} utterances of each test set; k2dec's 4-gram scale likewise. Times: "
        f"decode only, best of {bench.repeat} (runs over {REPEAT_BUDGET:g} s once), 1 torch "
        f"thread, 1 process; k2dec in batches of {bench.batch_size} utterances, peers one "
        f"utterance at a time; nbest-rescoring with {NUM_PATHS} paths. torchaudio: flashlight "
        f"lexicon decoder (lang dir lexicon.txt), beam_threshold 25, silence token <sos/eos>; "
        f"pyctcdecode: no lexicon (BPE pieces, ▁ = word start), default beam_prune_logp -10 and "
        f"token_min_logp -5.")


def report_peer(bench: Bench, peer: str) -> None:
    """The comparison tables with one peer; the target against torchaudio."""
    rep, runs = bench.rep, bench.runs
    rows, target = compare(runs, peer)
    if target is None:
        if peer == TORCHAUDIO:
            rep.target(TARGET_EQUAL_WER, f"not evaluated: {peer} is missing", None)
        return
    rep.table(f"k2dec vs {peer}: for each {peer} setting, k2dec's most accurate run that "
              "is not slower",
              [f"{peer} setting", f"{peer} WER", f"{peer} frames/s", "k2dec run",
               "k2dec WER", "time k2dec/peer", "WER diff (k2dec - peer)"], rows)
    rows, ratios = equal_wer(runs, peer)
    rep.table(f"Equal WER, HLG 1best vs {peer}: for each {peer} setting, k2dec 1best's "
              "fastest run (exact or with the switches, lattice or lattice-free) whose WER "
              "is not worse",
              [f"{peer} setting", f"{peer} WER", f"{peer} frames/s", "k2dec run",
               "k2dec WER", "k2dec frames/s", "k2dec/peer speed"], rows)
    if peer != TORCHAUDIO:
        return
    reached = [r for r in ratios if r is not None]
    listed = ", ".join(f"{r:.2f}" if r is not None else "unreached" for r in ratios)
    value = (f"k2dec/torchaudio speed at equal WER: {listed} (torchaudio settings from most "
             f"to least accurate)")
    met = bool(reached) and len(reached) == len(ratios) and min(reached) >= 1.0
    rep.target(TARGET_EQUAL_WER, value, met if bench.mode == "full" else None)


def report_rest(bench: Bench, peers_ran: set[str]) -> None:
    """The tuning table, the notes and the plot."""
    rep = bench.rep
    rep.table(f"LM weight tuning on the first {bench.sizes.tune_cuts} utterances of each test "
              f"set ({bench.tune_data.frames} frames)", ["system", "setting", "LM weight",
                                                         "WER all"], bench.tuning)
    if PYCTC in peers_ran:
        rep.note("pyctcdecode decodes without a lexicon: it may output words that are not in "
                 "the lexicon or the ARPA (scored with its unknown-word offset), which the "
                 "lexicon-constrained systems cannot.")
    rep.note("peak +MiB: the increase of the process' peak RSS while decoding; loading the LMs "
             "and graphs (HLG and G in k2dec, KenLM's ARPA in each peer) happens before and is "
             "not counted.")
    rep.note("Tuning and test data overlap (the tuning subset is part of the test sets); every "
             "system is tuned the same way on the same subset.")
    if bench.mode != "full":
        rep.note(f"{bench.mode} mode decodes a small subset: WERs differ by single words "
                 "between systems there, so the full run decides the targets.")
    path = rep.plot_path(bench.report_dir, "ctc_lm.png")
    if path is not None and bench.runs:
        Path(bench.report_dir).mkdir(parents=True, exist_ok=True)
        plots.wer_vs_speed(bench.runs, path, "CTC + n-gram LM: WER vs speed",
                           "encoder frames / s (decode only, 1 thread, log scale)",
                           "WER % (both shipped test sets)", wer_of=lambda r: r.wers["all"])


def main(argv: list[str] | None = None) -> None:
    bench = parse_args(argv)
    bench.batch = shipped_batch(bench.sizes.cuts)
    bench.data = subset(bench.batch, None)
    bench.tune_data = subset(bench.batch, bench.sizes.tune_cuts)
    bench.rep.settings = settings(bench)
    k2 = K2System(bench.batch, bench.batch_size)
    lam = bench_k2dec_1best(bench, k2)
    bench_k2dec_rescoring(bench, k2, lam)
    peers_ran = bench_peers(bench, bench.data.log_probs.shape[-1])
    bench.rep.table(f"WER and speed on {len(bench.data.cut_ids)} utterances "
                    f"({bench.data.frames} frames)", RUN_HEADERS,
                    [run_row(r) for r in bench.runs])
    for peer in PEERS:
        report_peer(bench, peer)
    report_rest(bench, peers_ran)
    bench.rep.write(bench.report_dir)


if __name__ == "__main__":
    main()
