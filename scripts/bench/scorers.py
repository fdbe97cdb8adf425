"""Benchmark area "scorers": what the scorer-based methods do on the shipped model and test
sets, run through the methods registry as ``k2dec decode`` runs them.

1. Hotwords. The 30 reference words that ``modified_beam_search`` gets wrong most often (ties:
   alphabetical), leaving out the 300 most frequent words of the LM text (hotwords are rare
   words: names, terms), form the hotwords list. For every method that
   biases (transducer ``modified_beam_search``, ``fast_beam_search`` / ``_nbest`` / ``_mbr``
   (the hotword graph as their decoding graph), ``beam_search``,
   ``modified_beam_search_lm_shallow_fusion``, the LG methods ``fast_beam_search_LG`` /
   ``_nbest_LG`` / ``_mbr_LG`` (LG intersected with the token hotword automaton), CTC
   ``ctc-prefix-beam-search``, ``attention-beam-search`` (CTC weight 0.5) and the HLG
   methods ``1best`` / ``nbest`` / ``mbr`` (HLG intersected with the word hotword automaton;
   the bonus is per word there); the token-level ones with icefall's bonus scheme and with
   k2dec's default, at bonus 1 and 2) the recall of
   those words (reference occurrences aligned to the same hypothesis word) and the WER on the
   other words (U-WER: errors on reference words not in the list, plus insertions of words not
   in the list, over the number of such reference words) with and without the list, and the
   extra time biasing costs. Each setting is first run on one utterance (building and caching
   its graphs: the biased graph's build time is reported apart), then timed on all. Targets:
   U-WER rises by at most 0.5 points; biasing costs less than 10% extra time.
2. LM fusion and LODR with the shipped LSTM LM: WER of ``modified_beam_search`` alone, with
   shallow fusion, with LODR (a token bigram trained with kaldingram on the corpus' LM text,
   which is rebuilt from Debian's fortunes exactly as the corpus maker split it), and the
   n-best LM rescoring methods (their best scale on the test sets themselves, as icefall's
   sweeps report, and the first scale).
3. ``ctc-prefix-beam-search`` against greedy, H and HLG 1best and
   pyctcdecode's prefix beam search (no LM, ``peers/pyctc.py``) on the same CTC log-probs,
   WER and time.

Times are the best of ``--repeat`` runs at one torch thread; the machine may be shared, so
compare times only within one run.

Usage (from the repository root)::

    python -m scripts.bench.scorers [--quick | --smoke] [--report DIR] [--repeat N]
        [--sections fusion,hotwords,ctc] [--hotword-methods NAME,...]
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import torch

from k2dec.methods import (
    AedInputs,
    CtcInputs,
    MethodResult,
    Resources,
    TransducerInputs,
    get_method,
    override_config,
)

from .common import SHIPPED, WORK, Report, area_parser, best_time, mode_of, one_thread, wer
from .peers import pyctc
from .shipped import ShippedBatch, lm_text, shipped_batch, token_bigram_arpa

AREA = "scorers"
NUM_HOTWORDS = 30
#: the token-level methods: (bonus scheme, hotwords_score); icefall's scheme pays a phrase's
#: whole bonus on the way and completes it on its last token, k2dec's default pays half on
#: the way and completes it at a word end (k2dec.methods.hotword_biasing)
ICEFALL_SCHEME = ("hotwords.partial_share=1.0", "hotwords.whole_words=false")
HOTWORD_SETTINGS = (("icefall", 1.0), ("icefall", 2.0), ("k2dec", 1.0), ("k2dec", 2.0))
#: the HLG methods' bonus is per word (a word is ~2-3 BPE tokens of the shipped model)
WORD_HOTWORD_SCORES = (1.0, 2.0, 4.0)
WORD_BIASED = {"1best", "nbest", "mbr"}
BIASED = [("modified_beam_search", "transducer"), ("fast_beam_search", "transducer"),
          ("beam_search", "transducer"),
          ("modified_beam_search_lm_shallow_fusion", "transducer"),
          ("fast_beam_search_nbest", "transducer"), ("fast_beam_search_mbr", "transducer"),
          ("fast_beam_search_LG", "transducer"), ("fast_beam_search_nbest_LG", "transducer"),
          ("fast_beam_search_mbr_LG", "transducer"), ("ctc-prefix-beam-search", "ctc"),
          ("attention-beam-search", "aed"), ("1best", "ctc"), ("nbest", "ctc"), ("mbr", "ctc")]
#: settings every run of a method gets: the shipped model's tuned CTC weight of the
#: attention beam search (assets/librispeech-synth/decode.json; at 0 its WER is ~90%)
BASE_SETS = {"attention-beam-search": ("ctc_weight=0.5",)}
SECTIONS = ("fusion", "hotwords", "ctc")
FUSION = ["modified_beam_search", "modified_beam_search_lm_shallow_fusion",
          "modified_beam_search_LODR", "modified_beam_search_lm_rescore",
          "modified_beam_search_lm_rescore_LODR"]
CTC_METHODS = ["ctc-greedy-search", "ctc-prefix-beam-search", "ctc-decoding", "1best"]


@dataclass(frozen=True)
class Sizes:
    cuts: int | None  # cuts per shipped test set (None: all)
    repeat: int


MODES = {"full": Sizes(None, 2), "quick": Sizes(15, 1), "smoke": Sizes(3, 1)}


def biasing_stats(refs, hyps, hotwords: set[str]) -> tuple[float, float]:
    """(recall of hotword occurrences in %, U-WER in %)."""
    from k2dec.results import align_words
    from k2dec.results.wer import EPS

    hits = total = u_err = u_ref = 0
    for ref, hyp in zip(refs, hyps):
        for r, h in align_words(ref, hyp):
            if r == EPS:
                u_err += h not in hotwords
                continue
            if r in hotwords:
                total += 1
                hits += r == h
            else:
                u_ref += 1
                u_err += r != h
    return 100.0 * hits / max(total, 1), 100.0 * u_err / max(u_ref, 1)


def pick_hotwords(refs, hyps, n: int, common: set[str]) -> list[str]:
    from k2dec.results import align_words

    missed: Counter = Counter()
    for ref, hyp in zip(refs, hyps):
        for r, h in align_words(ref, hyp):
            if r != h and r not in common and r.isalpha():
                missed[r] += 1
    return [w for w, _ in sorted(missed.items(), key=lambda kv: (-kv[1], kv[0]))[:n]]


def first_utterance(inputs):
    """The first utterance of a batch of method inputs."""
    if isinstance(inputs, TransducerInputs):
        return TransducerInputs(inputs.model, inputs.encoder_out[:1],
                                inputs.encoder_out_lens[:1])
    if isinstance(inputs, AedInputs):
        return AedInputs(inputs.memory[:1], inputs.memory_lens[:1],
                         ctc_log_probs=inputs.ctc_log_probs[:1])
    return CtcInputs(inputs.log_probs[:1], inputs.log_probs_lens[:1],
                     memory=None if inputs.memory is None else inputs.memory[:1],
                     memory_lens=None if inputs.memory_lens is None else inputs.memory_lens[:1])


@dataclass
class Bench:
    """One run of the area: sizes, inputs, resources and the report's settings so far."""

    mode: str
    sizes: Sizes
    sections: set[str]
    biased_methods: list[tuple[str, str]]
    report_dir: str | None
    report: Report
    settings: list[str] = field(default_factory=list)
    batch: ShippedBatch | None = None
    res: Resources | None = None
    common: set[str] = field(default_factory=set)
    tin: TransducerInputs | None = None
    cin: CtcInputs | None = None
    ain: AedInputs | None = None

    @property
    def refs(self) -> list[list[str]]:
        return self.batch.refs

    def words_of(self, result: MethodResult) -> list[list[str]]:
        from k2dec.job import hypothesis_texts

        return hypothesis_texts(result, self.batch.assets)

    def _method(self, name: str, sets: tuple[str, ...]):
        method = get_method(name)
        return method, override_config(method.default_config(), list(sets))

    def run(self, name: str, inputs, resources: Resources, sets: tuple[str, ...] = ()
            ) -> tuple[float, list[MethodResult], dict[str, float], str]:
        """Best seconds of ``repeat`` runs, the results, each result key's WER and the key
        with the lowest."""
        method, cfg = self._method(name, sets)
        seconds, out = best_time(self.sizes.repeat, method, inputs, resources, cfg)
        scored = {r.key: wer(self.refs, self.words_of(r)) for r in out}
        return seconds, out, scored, min(scored, key=scored.get)

    def run_warm(self, name: str, inputs, resources: Resources, sets: tuple[str, ...] = ()
                 ) -> tuple[float, list[MethodResult], float]:
        """Like :meth:`run` after one utterance first, which builds (and caches) the
        setting's graphs: the best seconds, the results and that first run's seconds."""
        method, cfg = self._method(name, sets)
        warm_seconds, _ = best_time(1, method, first_utterance(inputs), resources, cfg)
        seconds, out = best_time(self.sizes.repeat, method, inputs, resources, cfg)
        return seconds, out, warm_seconds


def parse_args() -> Bench:
    parser = area_parser(__doc__, AREA)
    parser.add_argument("--repeat", type=int, default=None, help="timed runs per setting "
                        "(default: 2 in full mode, 1 otherwise)")
    parser.add_argument("--sections", default=",".join(SECTIONS),
                        help="which parts to run (comma-separated: fusion, hotwords, ctc)")
    parser.add_argument("--hotword-methods", default=None,
                        help="the biased methods to measure (default: all)")
    args = parser.parse_args()
    mode = mode_of(args)
    sizes = MODES[mode]
    if args.repeat is not None:
        sizes = Sizes(sizes.cuts, args.repeat)
    sections = set(args.sections.split(","))
    if not sections <= set(SECTIONS):
        parser.error(f"--sections: unknown {sorted(sections - set(SECTIONS))}")
    biased_methods = BIASED if args.hotword_methods is None else [
        (n, f) for n, f in BIASED if n in args.hotword_methods.split(",")]
    one_thread()
    report = Report(AREA, "Scorers: hotwords, LM fusion / LODR, CTC prefix beam search "
                          "(shipped model)")
    return Bench(mode, sizes, sections, biased_methods, args.report, report, [f"mode {mode}"])


def load(bench: Bench) -> None:
    """The shipped batch, the LSTM LM, LODR's token bigram, the LM text's common words and
    the methods' inputs."""
    from k2dec.lm import load_lm
    from k2dec.scorers import TokenNgramScorer

    b = bench.batch = shipped_batch(max_cuts=bench.sizes.cuts)
    assets = b.assets
    text = lm_text(WORK)
    counts = Counter(w for line in text.read_text().splitlines() for w in line.split())
    bench.common = {w for w, _ in counts.most_common(300)}
    arpa = token_bigram_arpa(assets.lang.path, WORK)
    bench.res = assets.resources
    bench.res.sources["rnn_lm"] = load_lm(SHIPPED / "lm" / "rnn_lm.pt").eval()
    bench.res.sources["lodr"] = TokenNgramScorer.from_arpa(arpa, assets.sp.get_piece_size())
    bench.tin = TransducerInputs(assets.model, b.encoder_out, b.encoder_lens)
    bench.cin = CtcInputs(b.ctc_log_probs, b.encoder_lens, memory=b.encoder_out,
                          memory_lens=b.encoder_lens)
    bench.ain = AedInputs(b.encoder_out, b.encoder_lens, ctc_log_probs=b.ctc_log_probs)
    bench.settings.append(f"{len(b.refs)} utterances of the shipped test sets "
                          f"({int(b.encoder_lens.sum())} encoder frames)")


def fusion_section(bench: Bench) -> dict[str, list[list[str]]]:
    """2. LM fusion / LODR (only modified_beam_search, for the hotwords, without the section):
    the table, and the words of each method's first result."""
    rows = []
    base = None
    hyps_of: dict[str, list[list[str]]] = {}
    for name in FUSION if "fusion" in bench.sections else FUSION[:1]:
        seconds, out, scored, best = bench.run(name, bench.tin, bench.res)
        first = out[0].key
        hyps_of[name] = bench.words_of(out[0])
        if base is None:
            base = scored[first]
        rows.append([name, f"{scored[first]:.2f}" + ("" if len(out) == 1 else f" ({first})"),
                     f"{scored[best]:.2f} ({best})" if len(out) > 1 else "",
                     f"{scored[best] - base:+.2f}", f"{seconds:.1f}"])
    if "fusion" in bench.sections:
        bench.report.table("WER (%) of LM fusion / LODR / n-best LM rescoring on the shipped "
                           "test sets (icefall defaults: fusion lm_scale 0.3; LODR lm_scale "
                           "0.42, bigram scale -0.24)", ["method", "WER (default / first key)",
                                                        "best key on the test sets",
                                                        "best - modified_beam_search",
                                                        "seconds"], rows)
    return hyps_of


def biased_resources(bench: Bench, hotwords: list[str]) -> Resources:
    from k2dec.scorers import encode_hotword_words, encode_hotwords

    res, assets = bench.res, bench.batch.assets
    sources = {**res.sources,
               "hotwords": tuple((tuple(t), s) for t, s in encode_hotwords(hotwords, assets.sp)),
               "hotword_words": tuple((tuple(w), s) for w, s in
                                      encode_hotword_words(hotwords, assets.lang.word_table))}
    return Resources(graphs=res.graphs, sources=sources,
                     attention_decoder=res.attention_decoder, word_start=res.word_start)


def hotword_rows(bench: Bench, name: str, family: str, biased_res: Resources,
                 hw_set: set[str]) -> list[list]:
    """One biased method without and with the list at each bonus scheme and hotwords_score;
    its targets."""
    inputs = {"transducer": bench.tin, "ctc": bench.cin, "aed": bench.ain}[family]
    base = BASE_SETS.get(name, ())
    t0, out0, w0 = bench.run_warm(name, inputs, bench.res, base)
    r0, u0 = biasing_stats(bench.refs, bench.words_of(out0[0]), hw_set)
    grid = ([("per word", s) for s in WORD_HOTWORD_SCORES] if name in WORD_BIASED
            else HOTWORD_SETTINGS)
    rows = []
    for scheme, score in grid:
        key = "word_hotwords.word_score" if name in WORD_BIASED else "hotwords.token_score"
        sets = base + (f"{key}={score}",) + (
            ICEFALL_SCHEME if scheme == "icefall" else ())
        t1, out1, w1 = bench.run_warm(name, inputs, biased_res, sets)
        r1, u1 = biasing_stats(bench.refs, bench.words_of(out1[0]), hw_set)
        extra = 100.0 * (t1 - t0) / t0
        rows.append([name, scheme, score, f"{r0:.1f}", f"{r1:.1f}", f"{u0:.2f}",
                     f"{u1:.2f}", f"{u1 - u0:+.2f}", f"{t0:.2f}", f"{t1:.2f}",
                     f"{extra:+.1f}", f"{max(0.0, w1 - w0):.2f}"])
        what = f"hotwords, {name}, {scheme} scheme, hotwords_score {score}"
        smoke = bench.mode == "smoke"
        bench.report.target(f"{what}: U-WER rises by <= 0.5 points", f"{u1 - u0:+.2f}",
                            None if smoke else u1 - u0 <= 0.5)
        bench.report.target(f"{what}: biasing costs < 10% extra time", f"{extra:+.1f}%",
                            None if smoke else extra < 10.0)
    return rows


def hotword_section(bench: Bench, hyps_of: dict[str, list[list[str]]]) -> None:
    """1. Hotwords: the words modified_beam_search misses most, for every biasing method."""
    hotwords = pick_hotwords(bench.refs, hyps_of["modified_beam_search"], NUM_HOTWORDS,
                             bench.common)
    biased_res = biased_resources(bench, hotwords)
    bench.settings.append("hotwords: " + " ".join(hotwords))
    bench.settings.append("attention-beam-search with "
                          + " ".join(BASE_SETS["attention-beam-search"]))
    rows = []
    for name, family in bench.biased_methods:
        rows += hotword_rows(bench, name, family, biased_res, set(hotwords))
    bench.report.table(
        f"Hotwords: recall of the {len(hotwords)} listed words and U-WER (%) without / "
        "with the list, per bonus scheme and hotwords_score (token-level methods: "
        "icefall's scheme, the whole per-token bonus on the way, a phrase complete on "
        "its last token; k2dec's default, half of it on the way, the rest when the "
        "phrase completes at a word end; the HLG methods 1best / nbest / mbr: a bonus "
        "per word)",
        ["method", "scheme", "hotwords_score", "recall without", "recall with",
         "U-WER without", "U-WER with", "U-WER rise", "seconds without", "seconds with",
         "extra time %", "graph build s (once)"], rows)


def ctc_section(bench: Bench) -> None:
    """3. CTC prefix beam search vs HLG vs pyctcdecode."""
    rows = []
    for name in CTC_METHODS:
        sets = ("graph.scale=0.4",) if name == "1best" else ()  # the demo's dev-tuned scale
        seconds, out, scored, best = bench.run(name, bench.cin, bench.res, sets)
        label = f"k2dec {name}" + (" (HLG scores x 0.4, as make demo)" if sets else "")
        rows.append([label, f"{scored[best]:.2f}" + (f" ({best})" if len(out) > 1 else ""),
                     f"{seconds:.2f}"])
    seconds, out, scored, _ = bench.run("ctc-prefix-beam-search", bench.cin, bench.res,
                                        ("beam_size=8",))
    rows.insert(2, ["k2dec ctc-prefix-beam-search, beam 8", f"{scored[out[0].key]:.2f}",
                    f"{seconds:.2f}"])
    rows += pyctcdecode_rows(bench)
    bench.report.table("CTC decoding of the same log-probs without an LM (ctc-decoding: 1best "
                       "through H) and through HLG (1best; the HLG rescoring methods are in "
                       "the ctc_lm area): WER (%) and seconds", ["decoder", "WER", "seconds"],
                       rows)


def pyctcdecode_rows(bench: Bench) -> list[list[str]]:
    b = bench.batch
    try:
        decoder = pyctc.PyctcDecoder(b.lang_dir, b.assets.sp.get_piece_size())
    except ImportError as e:
        bench.report.peer_missing(pyctc.PEER, f"not installed ({e}); make bench installs it")
        return []
    rows = []
    for beam in (4, 100):
        seconds, hyps = best_time(1, decoder.decode, b.ctc_log_probs, b.encoder_lens, beam)
        rows.append([f"pyctcdecode prefix beam search, beam {beam} (no LM)",
                     f"{wer(bench.refs, hyps):.2f}", f"{seconds:.2f}"])
    return rows


def main() -> None:
    bench = parse_args()
    load(bench)
    hyps_of = fusion_section(bench)
    if "hotwords" in bench.sections:
        hotword_section(bench, hyps_of)
    if "ctc" in bench.sections:
        ctc_section(bench)
    bench.report.settings = "; ".join(bench.settings)
    bench.report.write(bench.report_dir)


if __name__ == "__main__":
    with torch.no_grad():
        main()
