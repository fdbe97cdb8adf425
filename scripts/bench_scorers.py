#!/usr/bin/env python3
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
   pyctcdecode's prefix beam search (no LM) on the same CTC log-probs, WER and time.

Times are the best of ``--repeat`` runs at one torch thread; the machine may be shared, so
compare times only within one run.

Usage (from the repository root)::

    python scripts/bench_scorers.py [--quick | --smoke] [--report DIR] [--repeat N]
        [--sections fusion,hotwords,ctc] [--hotword-methods NAME,...]
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import benchlib  # noqa: E402

from k2dec.methods import (  # noqa: E402
    AedInputs,
    CtcInputs,
    Resources,
    TransducerInputs,
    get_method,
)
from k2dec.methods.registry import override_config  # noqa: E402

AREA = "scorers"
NUM_HOTWORDS = 30
#: the token-level methods: (bonus scheme, hotwords_score); icefall's scheme pays a phrase's
#: whole bonus on the way and completes it on its last token, k2dec's default pays half on
#: the way and completes it at a word end (k2dec.methods.hotwords)
ICEFALL_SCHEME = ("hotwords_partial_share=1.0", "hotwords_whole_words=false")
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


def lm_text(work: Path) -> Path:
    """The corpus' LM text (sentences in no evaluation split), rebuilt from the fortunes text
    with the corpus maker's own functions and settings, normalized as the recipe does."""
    import json

    from k2dec.data.text import normalize_text
    from k2dec.tools.synth import FORTUNES_DIR, CorpusConfig, load_sentences, plan_corpus

    out = work / "lm" / "lm_text.txt"
    if out.is_file():
        return out
    settings = json.loads((benchlib.SHIPPED / "corpus" / "corpus.json").read_text())["config"]
    config = CorpusConfig(**{k: tuple(v) if isinstance(v, list) else v
                             for k, v in settings.items()})
    sentences = load_sentences([FORTUNES_DIR], config.min_words, config.max_words)
    from k2dec.tools.synth import VOICE_CATALOG
    _, lm = plan_corpus(sentences, list(VOICE_CATALOG), config)
    lines = [normalize_text(s) for s in lm]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(x for x in lines if x) + "\n")
    return out


def to_words(result, sp, word_table) -> list[list[str]]:
    from k2dec.results import bpe_ids_to_words, word_ids_to_words

    if result.words is not None:
        return word_ids_to_words(result.words, word_table)
    return bpe_ids_to_words(result.tokens, sp)


def wer(refs, hyps) -> float:
    from k2dec.results import compute_wer

    return compute_wer([(str(i), r, h) for i, (r, h) in enumerate(zip(refs, hyps))]).wer


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


def main() -> None:
    parser = benchlib.area_parser(__doc__, AREA)
    parser.add_argument("--repeat", type=int, default=None, help="timed runs per setting "
                        "(default: 2 in full mode, 1 otherwise)")
    parser.add_argument("--sections", default=",".join(SECTIONS),
                        help="which parts to run (comma-separated: fusion, hotwords, ctc)")
    parser.add_argument("--hotword-methods", default=None,
                        help="the biased methods to measure (default: all)")
    args = parser.parse_args()
    mode = "smoke" if args.smoke else "quick" if args.quick else "full"
    sizes = MODES[mode]
    if args.repeat is not None:
        sizes = Sizes(sizes.cuts, args.repeat)
    sections = set(args.sections.split(","))
    if not sections <= set(SECTIONS):
        parser.error(f"--sections: unknown {sorted(sections - set(SECTIONS))}")
    biased_methods = BIASED if args.hotword_methods is None else [
        (n, f) for n, f in BIASED if n in args.hotword_methods.split(",")]
    benchlib.one_thread()
    report = benchlib.Report(AREA, "Scorers: hotwords, LM fusion / LODR, CTC prefix beam "
                             "search (shipped model)")
    settings: list[str] = [f"mode {mode}"]
    b = benchlib.shipped_batch(max_cuts=sizes.cuts)
    assets = b.assets
    sp, words = assets.sp, assets.lang.word_table
    from k2dec.lm import load_lm
    from k2dec.scorers import TokenNgramScorer, train_token_arpa

    lm = load_lm(benchlib.SHIPPED / "lm" / "rnn_lm.pt").eval()
    work = benchlib.REPO / "exp" / "bench" / "work"
    text = lm_text(work)
    counts = Counter(w for line in text.read_text().splitlines() for w in line.split())
    common = {w for w, _ in counts.most_common(300)}
    arpa = train_token_arpa(text, assets.lang.path / "bpe.model",
                            work / "lm" / "tokens_2gram.arpa", order=2)
    lodr = TokenNgramScorer.from_arpa(arpa, sp.get_piece_size())
    res = assets.resources
    res.lms["rnn_lm"] = lm
    res.lodr = lodr
    refs = b.refs
    model = assets.model
    tin = TransducerInputs(model, b.encoder_out, b.encoder_lens)
    cin = CtcInputs(b.ctc_log_probs, b.encoder_lens, memory=b.encoder_out,
                    memory_lens=b.encoder_lens)
    ain = AedInputs(b.encoder_out, b.encoder_lens, ctc_log_probs=b.ctc_log_probs)
    n_utts, frames = len(refs), int(b.encoder_lens.sum())
    settings.append(f"{n_utts} utterances of the shipped test sets ({frames} encoder frames)")

    def run(name: str, inputs, resources: Resources, sets: tuple[str, ...] = (),
            warm: bool = False):
        method = get_method(name)
        cfg = override_config(method.default_config(), list(sets))
        warm_seconds = 0.0
        if warm:  # one utterance first: builds (and caches) the setting's graphs
            warm_seconds, _ = benchlib.best_time(1, method, first_utterance(inputs), resources, cfg)
        seconds, out = benchlib.best_time(sizes.repeat, method, inputs, resources, cfg)
        if warm:
            return seconds, out, warm_seconds
        scored = {r.key: wer(refs, to_words(r, sp, words)) for r in out}
        best = min(scored, key=scored.get)
        return seconds, out, scored, best

    # 2. LM fusion / LODR
    rows = []
    base = None
    hyps_of: dict[str, list[list[str]]] = {}
    for name in FUSION if "fusion" in sections else FUSION[:1]:
        seconds, out, scored, best = run(name, tin, res)
        first = out[0].key
        hyps_of[name] = to_words(out[0], sp, words)
        if base is None:
            base = scored[first]
        rows.append([name, f"{scored[first]:.2f}" + ("" if len(out) == 1 else f" ({first})"),
                     f"{scored[best]:.2f} ({best})" if len(out) > 1 else "",
                     f"{scored[best] - base:+.2f}", f"{seconds:.1f}"])
    if "fusion" in sections:
        report.table("WER (%) of LM fusion / LODR / n-best LM rescoring on the shipped test "
                     "sets (icefall defaults: fusion lm_scale 0.3; LODR lm_scale 0.42, bigram "
                     "scale -0.24)", ["method", "WER (default / first key)",
                                      "best key on the test sets",
                                      "best - modified_beam_search", "seconds"], rows)
    if "hotwords" in sections:
        hotword_section(report, mode, sizes, run, refs, hyps_of, common, res, sp, words,
                        {"transducer": tin, "ctc": cin, "aed": ain}, biased_methods, settings)
    if "ctc" in sections:
        ctc_section(report, run, b, refs, cin, res, sp)
    report.settings = "; ".join(settings)
    report.write(args.report)
    report.print()


def first_utterance(inputs):
    """The first utterance of a batch of method inputs."""
    if isinstance(inputs, TransducerInputs):
        return TransducerInputs(inputs.model, inputs.encoder_out[:1],
                                inputs.encoder_out_lens[:1])
    if isinstance(inputs, AedInputs):
        return AedInputs(inputs.memory[:1], inputs.memory_lens[:1],
                         ctc_log_probs=inputs.ctc_log_probs[:1])
    return CtcInputs(inputs.log_probs[:1], inputs.lengths[:1],
                     memory=None if inputs.memory is None else inputs.memory[:1],
                     memory_lens=None if inputs.memory_lens is None else inputs.memory_lens[:1])


def hotword_section(report, mode, sizes, run, refs, hyps_of, common, res, sp, words, inputs_of,
                    biased_methods, settings) -> None:
    from k2dec.scorers import encode_hotword_words, encode_hotwords

    # 1. Hotwords
    hotwords = pick_hotwords(refs, hyps_of["modified_beam_search"], NUM_HOTWORDS, common)
    hw_set = set(hotwords)
    biased_res = Resources(graphs=res.graphs, lms=res.lms, attention_decoder=res.attention_decoder,
                           hotwords=tuple((tuple(t), s) for t, s in
                                          encode_hotwords(hotwords, sp)), lodr=res.lodr,
                           hotword_words=tuple((tuple(w), s) for w, s in
                                               encode_hotword_words(hotwords, words)),
                           word_start=res.word_start)
    settings.append("hotwords: " + " ".join(hotwords))
    settings.append("attention-beam-search with " + " ".join(BASE_SETS["attention-beam-search"]))
    rows = []
    for name, family in biased_methods:
        base = BASE_SETS.get(name, ())
        t0, out0, w0 = run(name, inputs_of[family], res, base, warm=True)
        r0, u0 = biasing_stats(refs, to_words(out0[0], sp, words), hw_set)
        grid = ([("per word", s) for s in WORD_HOTWORD_SCORES] if name in WORD_BIASED
                else HOTWORD_SETTINGS)
        for scheme, score in grid:
            sets = base + (f"hotwords_score={score}",) + (
                ICEFALL_SCHEME if scheme == "icefall" else ())
            t1, out1, w1 = run(name, inputs_of[family], biased_res, sets, warm=True)
            r1, u1 = biasing_stats(refs, to_words(out1[0], sp, words), hw_set)
            extra = 100.0 * (t1 - t0) / t0
            rows.append([name, scheme, score, f"{r0:.1f}", f"{r1:.1f}", f"{u0:.2f}",
                         f"{u1:.2f}", f"{u1 - u0:+.2f}", f"{t0:.2f}", f"{t1:.2f}",
                         f"{extra:+.1f}", f"{max(0.0, w1 - w0):.2f}"])
            what = f"hotwords, {name}, {scheme} scheme, hotwords_score {score}"
            report.target(f"{what}: U-WER rises by <= 0.5 points", f"{u1 - u0:+.2f}",
                          None if mode == "smoke" else u1 - u0 <= 0.5)
            report.target(f"{what}: biasing costs < 10% extra time", f"{extra:+.1f}%",
                          None if mode == "smoke" else extra < 10.0)
    report.table(f"Hotwords: recall of the {len(hotwords)} listed words and U-WER (%) without / "
                 "with the list, per bonus scheme and hotwords_score (token-level methods: "
                 "icefall's scheme, the whole per-token bonus on the way, a phrase complete on "
                 "its last token; k2dec's default, half of it on the way, the rest when the "
                 "phrase completes at a word end; the HLG methods 1best / nbest / mbr: a bonus "
                 "per word)",
                 ["method", "scheme", "hotwords_score", "recall without", "recall with",
                  "U-WER without", "U-WER with", "U-WER rise", "seconds without",
                  "seconds with", "extra time %", "graph build s (once)"], rows)


def ctc_section(report, run, b, refs, cin, res, sp) -> None:
    # 3. CTC prefix beam search vs HLG vs pyctcdecode
    rows = []
    for name in CTC_METHODS:
        sets = ("hlg_scale=0.4",) if name == "1best" else ()  # the demo's dev-tuned scale
        seconds, out, scored, best = run(name, cin, res, sets)
        label = f"k2dec {name}" + (" (HLG scores x 0.4, as make demo)" if sets else "")
        rows.append([label, f"{scored[best]:.2f}" + (f" ({best})" if len(out) > 1 else ""),
                     f"{seconds:.2f}"])
    seconds, out, scored, _ = run("ctc-prefix-beam-search", cin, res, ("beam=8",))
    rows.insert(2, ["k2dec ctc-prefix-beam-search, beam 8", f"{scored[out[0].key]:.2f}",
                    f"{seconds:.2f}"])
    rows += pyctcdecode_rows(b, sp, refs, report)
    report.table("CTC decoding of the same log-probs without an LM (ctc-decoding: 1best "
                 "through H) and through HLG (1best; the HLG rescoring methods are in the "
                 "ctc_lm area): WER (%) and seconds", ["decoder", "WER", "seconds"], rows)


def pyctcdecode_rows(b, sp, refs, report) -> list[list[str]]:
    try:
        from pyctcdecode import build_ctcdecoder
    except ImportError as e:
        report.peer_missing("pyctcdecode", f"not installed ({e}); make bench installs it")
        return []
    from bench_ctc_lm import read_tokens

    labels = read_tokens(b.lang_dir / "tokens.txt", sp.get_piece_size())
    labels[0] = ""  # the blank
    decoder = build_ctcdecoder(labels)
    lp = b.ctc_log_probs
    rows = []
    for beam in (4, 100):
        start = time.perf_counter()
        hyps = []
        for i in range(lp.size(0)):
            logits = lp[i, : int(b.encoder_lens[i])].numpy()
            hyps.append(decoder.decode(logits, beam_width=beam).split())
        rows.append([f"pyctcdecode prefix beam search, beam {beam} (no LM)",
                     f"{wer(refs, hyps):.2f}", f"{time.perf_counter() - start:.2f}"])
    return rows


if __name__ == "__main__":
    with torch.no_grad():
        main()
