#!/usr/bin/env python3
"""Benchmark area "ctc_lm": CTC decoding with a lexicon and an n-gram LM. k2dec's HLG 1best
(+ 4-gram whole-lattice / n-best rescoring) against torchaudio's flashlight lexicon beam search
(``torchaudio.models.decoder.ctc_decoder``) and pyctcdecode, on the same CTC log-probs and the
same 3-gram ARPA.

Inputs: the shipped model's CTC log-probs (BPE 256, blank 0) on the shipped test sets
(``benchlib.shipped_batch``; full: all 100 + 100 utterances, ``--quick``: 20 + 20, ``--smoke``:
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

    python scripts/bench_ctc_lm.py [--quick | --smoke] [--report DIR]
"""

from __future__ import annotations

import logging
import math
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import benchlib  # noqa: E402

from k2dec.lattice import LatticeConfig  # noqa: E402
from k2dec.lattice.rescore import RescoreConfig  # noqa: E402
from k2dec.methods import CtcInputs, Resources, get_method  # noqa: E402
from k2dec.methods.ctc import CtcConfig  # noqa: E402
from k2dec.nbest import NbestConfig  # noqa: E402
from k2dec.results import compute_wer, word_ids_to_words  # noqa: E402

AREA = "ctc_lm"
K2_1BEST = "k2dec 1best (HLG, 3-gram)"
K2_1BEST_FAST = "k2dec 1best (HLG, 3-gram), token_top_k 8 + blank_skip 0.95"
FAST_SWITCHES = {"token_top_k": 8, "blank_skip_threshold": 0.95}
TARGET_EQUAL_WER = ("HLG 1best at equal WER on the shipped test sets: k2dec's frames/s >= "
                    "torchaudio ctc_decoder's, single process")
K2_WLR = "k2dec 1best + 4-gram whole-lattice"
K2_NBEST = "k2dec + 4-gram nbest-rescoring"
TORCHAUDIO = "torchaudio ctc_decoder"
PYCTC = "pyctcdecode"
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
                  ((8.0, 3.0, 200), (10.0, 4.0, 300)), ((8.0, 3.0, 200),),
                  ((10, 8), (25, 16), (50, 16), (100, 32)), (10, 8),
                  (10, 25), 10, 2),
    "quick": Sizes(20, 10, (0.2, 0.3, 0.5),
                   ((8.0, 3.0, 200), (10.0, 4.0, 300)), (8.0, 3.0, 200),
                   ((5.0, 3.0, 100), (8.0, 3.0, 200)),
                   ((8.0, 3.0, 200),), (),
                   ((10, 8), (50, 16)), (10, 8),
                   (10,), 10, 1),
    "smoke": Sizes(2, 2, (0.5,), ((10.0, 4.0, 300),), (10.0, 4.0, 300), ((8.0, 3.0, 200),),
                   ((10.0, 4.0, 300),),
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


def subset(b: benchlib.ShippedBatch, per_set: int | None) -> Data:
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


@contextmanager
def quiet_stderr() -> Iterator[None]:
    """Silence C-level stderr (KenLM's ARPA loading progress bars)."""
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


# ----------------------------------------------------------------------------- k2dec


class K2System:
    """k2dec through the methods registry, on HLG whose scores are scaled by lambda."""

    def __init__(self, b: benchlib.ShippedBatch, batch_size: int) -> None:
        self.hlg = b.assets.resources.graph("HLG", "bench")
        self.g4 = b.assets.resources.graph("G", "bench")
        self.word_table = b.assets.lang.word_table
        self.batch_size = batch_size
        self._resources: dict[float, Resources] = {}

    def resources(self, lam: float) -> Resources:
        if lam not in self._resources:
            g = self.hlg.clone()
            g.scores = self.hlg.scores * lam
            if hasattr(g, "lm_scores"):
                g.lm_scores = self.hlg.lm_scores * lam
            self._resources[lam] = Resources(graphs={"HLG": g, "G": self.g4})
        return self._resources[lam]

    @staticmethod
    def config(beam: tuple[float, float, int], scales: tuple[float, ...] = RESCORE_SCALES,
               num_paths: int = NUM_PATHS, **switches: Any) -> CtcConfig:
        sb, ob, ma = beam
        lattice = LatticeConfig(search_beam=sb, output_beam=ob, max_active_states=ma,
                                **switches)
        # the HLG scale is applied by resources(lam): the method's own hlg_scale stays 1; every
        # rescoring scale is reported (sweep), the first one being the configured one
        return CtcConfig(lattice=lattice, hlg_scale=1.0, lm_scales=scales,
                         nbest=NbestConfig(num_paths), ngram_lm_scale=scales[0],
                         whole_lattice_lm_scale=scales[0], sweep=True,
                         whole_lattice=RescoreConfig(lm_scales=scales))

    def decode(self, method: str, data: Data, lam: float, cfg: CtcConfig
               ) -> dict[str, list[list[str]]]:
        """``{result key: [utt][word]}`` over all utterances, in batches."""
        m = get_method(method)
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


# ----------------------------------------------------------------------------- peers


class TorchaudioSystem:
    """torchaudio 0.13's flashlight lexicon decoder with KenLM on the ARPA."""

    def __init__(self, b: benchlib.ShippedBatch, vocab: int) -> None:
        from torchaudio.models.decoder import ctc_decoder

        self._factory = ctc_decoder
        self.lexicon = str(b.lang_dir / "lexicon.txt")
        self.tokens = read_tokens(b.lang_dir / "tokens.txt", vocab)
        self.arpa = str(b.arpa["3gram"])
        self._decoders: dict[tuple, Any] = {}

    def decoder(self, lam: float, beam: tuple[int, int]):
        """The decoder for one setting (only the last one is kept: each holds its own KenLM)."""
        key = (lam, beam)
        if key not in self._decoders:
            self._decoders.clear()
            with quiet_stderr():
                self._decoders[key] = self._factory(
                    lexicon=self.lexicon, tokens=self.tokens, lm=self.arpa,
                    beam_size=beam[0], beam_size_token=beam[1], beam_threshold=25.0,
                    lm_weight=lam * math.log(10.0), word_score=0.0, sil_score=0.0,
                    blank_token="<blk>", sil_token="<sos/eos>", unk_word="<UNK>")
        return self._decoders[key]

    def decode(self, data: Data, lam: float, beam: tuple[int, int]) -> list[list[str]]:
        hyps = self.decoder(lam, beam)(data.log_probs, data.lengths)
        return [list(h[0].words) if h else [] for h in hyps]


class PyctcdecodeSystem:
    """pyctcdecode's beam search with KenLM on the ARPA, over BPE pieces (no lexicon)."""

    def __init__(self, b: benchlib.ShippedBatch, vocab: int) -> None:
        import pyctcdecode

        logging.getLogger("pyctcdecode").setLevel(logging.ERROR)
        labels = read_tokens(b.lang_dir / "tokens.txt", vocab)
        labels[0] = ""  # the blank
        with quiet_stderr():
            self.decoder = pyctcdecode.build_ctcdecoder(
                labels, kenlm_model_path=str(b.arpa["3gram"]), alpha=0.5, beta=0.0)

    def decode(self, data: Data, lam: float, beam_width: int) -> list[list[str]]:
        self.decoder.reset_params(alpha=lam, beta=0.0)
        lp = data.log_probs.numpy()
        lens = data.lengths.tolist()
        return [self.decoder.decode(lp[i, : lens[i]], beam_width=beam_width).split()
                for i in range(len(lens))]


def read_tokens(path: Path, vocab: int) -> list[str]:
    """The first ``vocab`` symbols of tokens.txt, by id."""
    table: dict[int, str] = {}
    for line in path.read_text().splitlines():
        sym, i = line.split()
        table[int(i)] = sym
    missing = [i for i in range(vocab) if i not in table]
    if missing:
        raise ValueError(f"{path} has no symbols for ids {missing[:5]} of the {vocab} outputs")
    return [table[i] for i in range(vocab)]


def clean(e: BaseException) -> str:
    """An error message without this checkout's location (reports are committed)."""
    text = str(e).replace(str(benchlib.REPO) + os.sep, "").replace(str(benchlib.REPO), ".")
    return text.replace(sys.prefix, "<venv>")


# ----------------------------------------------------------------------------- measuring


def measure(system: str, setting: str, weights: str, data: Data, repeat: int,
            fn: Callable[[], list[list[str]]]) -> Run:
    with benchlib.track_peak_rss() as mem:
        seconds, hyps = benchlib.best_time(1, fn)
        for _ in range(repeat - 1):
            if seconds > REPEAT_BUDGET:
                break
            t, _ = benchlib.best_time(1, fn)
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
    target = min(peer_runs, key=lambda r: (r.wers["all"], r.seconds))
    ok = [r for r in k2 if r.seconds <= target.seconds]
    if not ok:
        fastest = min(k2, key=lambda r: r.seconds)
        return rows, {"value": f"{peer} at {target.setting}: WER {target.wers['all']:.2f}% at "
                               f"{target.fps:.0f} frames/s; no k2dec setting is as fast (fastest "
                               f"k2dec: {fastest.fps:.0f} frames/s, WER "
                               f"{fastest.wers['all']:.2f}%). " + matched(k2, peer_runs),
                      "met": False}
    best = min(ok, key=lambda r: (r.wers["all"], r.seconds))
    met = best.wers["all"] <= target.wers["all"]
    return rows, {"value": f"{peer}'s most accurate setting ({target.setting}): WER "
                           f"{target.wers['all']:.2f}% at {target.fps:.0f} frames/s; k2dec's "
                           f"best not slower ({best.system}, {best.setting}): WER "
                           f"{best.wers['all']:.2f}% at {best.fps:.0f} frames/s (time ratio "
                           f"{best.seconds / target.seconds:.2f}). " + matched(k2, peer_runs),
                  "met": met}


def equal_wer(runs: list[Run], peer: str) -> tuple[list[list], list[float | None]]:
    """For each ``peer`` setting (most accurate first): k2dec 1best's fastest run with a WER
    not worse, and its speed over the peer's (None where no 1best run is that accurate)."""
    k2 = [r for r in runs if r.system in (K2_1BEST, K2_1BEST_FAST)]
    rows, ratios = [], []
    for p in sorted((r for r in runs if r.system == peer), key=lambda r: r.wers["all"]):
        ok = [r for r in k2 if r.wers["all"] <= p.wers["all"]]
        best = max(ok, key=lambda r: r.fps) if ok else None
        ratio = best.fps / p.fps if best else None
        ratios.append(ratio)
        rows.append([p.setting, p.wers["all"], p.fps,
                     f"{best.system}, {best.setting}" if best else "none as accurate",
                     best.wers["all"] if best else None, best.fps if best else None, ratio])
    return rows, ratios


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


def plot(runs: list[Run], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    systems = list(dict.fromkeys(r.system for r in runs))
    for i, s in enumerate(systems):
        rs = sorted((r for r in runs if r.system == s), key=lambda r: r.fps)
        style = "o-" if s.startswith("k2dec") else "s--"
        ax.plot([r.fps for r in rs], [r.wers["all"] for r in rs], style, color=f"C{i}", label=s)
    ax.set_xscale("log")
    ax.set_xlabel("encoder frames / s (decode only, 1 thread, log scale)")
    ax.set_ylabel("WER % (both shipped test sets)")
    ax.set_title("CTC + n-gram LM: WER vs speed")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


RUN_HEADERS = ["system", "setting", "LM weights", "WER test-clean", "WER test-other", "WER all",
               "frames/s", "peak +MiB"]


def run_row(r: Run) -> list:
    return [r.system, r.setting, r.weights, r.wers.get("test-clean"), r.wers.get("test-other"),
            r.wers["all"], r.fps, r.mem_mb]


BUILDERS = {TORCHAUDIO: "torchaudio.models.decoder.ctc_decoder",
            PYCTC: "pyctcdecode.build_ctcdecoder with the ARPA (needs kenlm)"}


def bench_torchaudio(ta: TorchaudioSystem, sz: Sizes, data: Data, tune_data: Data,
                     repeat: int) -> tuple[list[Run], list[list]]:
    lam, rows = tune(tune_data, sz.lm_weights, lambda lam: ta.decode(tune_data, lam, sz.ta_tune))
    tuning = [[TORCHAUDIO, f"beam {sz.ta_tune[0]}, beam_size_token {sz.ta_tune[1]}", x, w]
              for x, w in rows]
    runs = []
    for beam in sz.ta_beams:
        ta.decoder(lam, beam)  # load the ARPA outside the measurement
        runs.append(measure(TORCHAUDIO, f"beam {beam[0]}, beam_size_token {beam[1]}",
                            f"λ={lam:g} (lm_weight {lam * math.log(10):.3g})", data, repeat,
                            lambda beam=beam: ta.decode(data, lam, beam)))
    return runs, tuning


def bench_pyctcdecode(pc: PyctcdecodeSystem, sz: Sizes, data: Data, tune_data: Data,
                      repeat: int) -> tuple[list[Run], list[list]]:
    lam, rows = tune(tune_data, sz.lm_weights,
                     lambda lam: pc.decode(tune_data, lam, sz.pyctc_tune))
    tuning = [[PYCTC, f"beam_width {sz.pyctc_tune}", x, w] for x, w in rows]
    runs = [measure(PYCTC, f"beam_width {bw}", f"alpha={lam:g}, beta=0", data, repeat,
                    lambda bw=bw: pc.decode(data, lam, bw)) for bw in sz.pyctc_beams]
    return runs, tuning


def main(argv: list[str] | None = None) -> None:
    p = benchlib.area_parser(__doc__, "ctc_lm")
    p.add_argument("--repeat", type=int, default=None, help="best of this many runs")
    p.add_argument("--batch-size", type=int, default=40, help="utterances per k2dec call")
    args = p.parse_args(argv)
    benchlib.one_thread()
    mode_name = "smoke" if args.smoke else "quick" if args.quick else "full"
    sz = MODES[mode_name]
    repeat = args.repeat or sz.repeat
    rep = benchlib.Report(AREA, "CTC + n-gram LM: k2dec HLG (+ rescoring) vs torchaudio "
                                "ctc_decoder and pyctcdecode")

    b = benchlib.shipped_batch(sz.cuts)
    data = subset(b, None)
    tune_data = subset(b, sz.tune_cuts)
    vocab = data.log_probs.shape[-1]
    n_sets = len(set(data.test_sets))
    rep.settings = (
        f"{mode_name} mode: the shipped model's CTC log-probs (V={vocab}, blank 0) on "
        f"{len(data.cut_ids)} utterances of {n_sets} shipped test sets ({data.frames} encoder "
        f"frames); first pass with the shipped 3-gram ARPA for every system, k2dec rescoring "
        f"with the 4-gram. LM weight lambda (natural-log LM score per acoustic log-prob, no word "
        f"bonus) tuned per system on the grid {list(sz.lm_weights)} over the first "
        f"{sz.tune_cuts} utterances of each test set; k2dec's 4-gram scale likewise. Times: "
        f"decode only, best of {repeat} (runs over {REPEAT_BUDGET:g} s once), 1 torch thread, 1 "
        f"process; k2dec in batches of {args.batch_size} utterances, peers one utterance at a "
        f"time; nbest-rescoring with {NUM_PATHS} paths. torchaudio: flashlight "
        f"lexicon decoder (lang dir lexicon.txt), beam_threshold 25, silence token <sos/eos>; "
        f"pyctcdecode: no lexicon (BPE pieces, ▁ = word start), default beam_prune_logp -10 and "
        f"token_min_logp -5.")

    runs: list[Run] = []
    tuning: list[list] = []

    # -- k2dec
    k2 = K2System(b, args.batch_size)
    k2.decode("1best", tune_data, 1.0, k2.config(sz.k2_tune))  # warm-up
    lam_k2, rows = tune(tune_data, sz.lm_weights, lambda lam: k2.decode(
        "1best", tune_data, lam, k2.config(sz.k2_tune))["1best"])
    tuning += [[K2_1BEST, beam_name(sz.k2_tune), lam, w] for lam, w in rows]
    for beam in sz.k2_beams:
        cfg = k2.config(beam)
        runs.append(measure(K2_1BEST, beam_name(beam), f"λ={lam_k2:g}", data, repeat,
                            lambda cfg=cfg: k2.decode("1best", data, lam_k2, cfg)["1best"]))
    for beam in sz.k2_fast:
        cfg = k2.config(beam, **FAST_SWITCHES)
        runs.append(measure(K2_1BEST_FAST, beam_name(beam), f"λ={lam_k2:g}", data, repeat,
                            lambda cfg=cfg: k2.decode("1best", data, lam_k2, cfg)["1best"]))
    for method, name, beams in (("whole-lattice-rescoring", K2_WLR, sz.rescore_beams),
                                ("nbest-rescoring", K2_NBEST, sz.nbest_beams)):
        if not beams:
            continue
        scale, w = tune_rescoring(tune_data, k2.decode(method, tune_data, lam_k2,
                                                       k2.config(beams[0])))
        tuning.append([name, beam_name(beams[0]), f"λ={lam_k2:g}, 4-gram scale {scale:g}", w])
        for beam in beams:
            cfg = k2.config(beam, scales=(scale,))
            runs.append(measure(
                name, beam_name(beam), f"λ={lam_k2:g}, 4-gram {scale:g}", data, repeat,
                lambda cfg=cfg, method=method: next(iter(k2.decode(method, data, lam_k2,
                                                                    cfg).values()))))
    # -- peers: a peer that cannot be built, or fails while decoding, is reported missing
    peer_ok = {}
    for peer, build, bench_peer in ((TORCHAUDIO, TorchaudioSystem, bench_torchaudio),
                                    (PYCTC, PyctcdecodeSystem, bench_pyctcdecode)):
        try:
            system = build(b, vocab)
        except Exception as e:  # ImportError, or a broken install (missing libs, ABI)
            rep.peer_missing(peer, f"cannot build {BUILDERS[peer]} ({type(e).__name__}: "
                                   f"{clean(e)}); install requirements/bench-ctc.txt")
            continue
        try:
            peer_runs, peer_tuning = bench_peer(system, sz, data, tune_data, repeat)
        except Exception as e:  # the peer's own failure must not sink the report
            rep.peer_missing(peer, f"failed while decoding ({type(e).__name__}: {clean(e)})")
            continue
        runs += peer_runs
        tuning += peer_tuning
        peer_ok[peer] = True

    rep.table(f"WER and speed on {len(data.cut_ids)} utterances ({data.frames} frames)",
              RUN_HEADERS, [run_row(r) for r in runs])
    for peer in PEERS:
        rows, target = compare(runs, peer)
        if target is None:
            if peer == TORCHAUDIO:
                rep.target(TARGET_EQUAL_WER, f"not evaluated: {peer} is missing", None)
            continue
        rep.table(f"k2dec vs {peer}: for each {peer} setting, k2dec's most accurate run that "
                  "is not slower",
                  [f"{peer} setting", f"{peer} WER", f"{peer} frames/s", "k2dec run",
                   "k2dec WER", "time k2dec/peer", "WER diff (k2dec - peer)"], rows)
        rows, ratios = equal_wer(runs, peer)
        rep.table(f"Equal WER, HLG 1best vs {peer}: for each {peer} setting, k2dec 1best's "
                  "fastest run (exact or with the switches) whose WER is not worse",
                  [f"{peer} setting", f"{peer} WER", f"{peer} frames/s", "k2dec run",
                   "k2dec WER", "k2dec frames/s", "k2dec/peer speed"], rows)
        if peer != TORCHAUDIO:
            continue
        reached = [r for r in ratios if r is not None]
        listed = ", ".join(f"{r:.2f}" if r is not None else "unreached" for r in ratios)
        value = (f"k2dec/torchaudio speed at equal WER: {listed} (torchaudio settings from most "
                 f"to least accurate)")
        met = bool(reached) and len(reached) == len(ratios) and min(reached) >= 1.0
        rep.target(TARGET_EQUAL_WER, value, met if mode_name == "full" else None)
    rep.table(f"LM weight tuning on the first {sz.tune_cuts} utterances of each test set "
              f"({tune_data.frames} frames)", ["system", "setting", "LM weight", "WER all"],
              tuning)
    if PYCTC in peer_ok:
        rep.note("pyctcdecode decodes without a lexicon: it may output words that are not in "
                 "the lexicon or the ARPA (scored with its unknown-word offset), which the "
                 "lexicon-constrained systems cannot.")
    rep.note("peak +MiB: the increase of the process' peak RSS while decoding; loading the LMs "
             "and graphs (HLG and G in k2dec, KenLM's ARPA in each peer) happens before and is "
             "not counted.")
    rep.note("Tuning and test data overlap (the tuning subset is part of the test sets); every "
             "system is tuned the same way on the same subset.")
    if mode_name != "full":
        rep.note(f"{mode_name} mode decodes a small subset: WERs differ by single words between "
                 "systems there, so the full run decides the targets.")
    path = rep.plot_path(args.report, "ctc_lm.png")
    if path is not None and runs:
        Path(args.report).mkdir(parents=True, exist_ok=True)
        plot(runs, path)
    rep.write(args.report)


if __name__ == "__main__":
    main()
