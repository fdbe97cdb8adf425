"""Benchmark area "transducer": k2dec's transducer searches on the shipped model's real encoder
outputs, run through the methods registry exactly as ``k2dec decode`` runs them.

Methods: ``greedy_search``, ``modified_beam_search`` (beam 4), ``fast_beam_search`` (one-best),
``fast_beam_search_nbest``, ``fast_beam_search_nbest_LG`` and ``fast_beam_search_LG`` with
icefall's default configs (LG: the shipped lang dir's LG). For each: encoder frames decoded per
second, the share of wall time spent outside the decoder + joiner networks (network time is
measured by timing every call of ``model.decoder``, ``model.joiner`` and the joiner's
projections), the peak memory increase, and the WER as a sanity column. Each batched search is
also compared with k2dec's own per-utterance loop (the same method called on one utterance at a
time) on the same inputs: the ratio is per-utterance time / batched time, and the hypotheses
must be identical.

Peer: icefall's own ``beam_search.py`` (``greedy_search_batch``, per-utterance
``greedy_search`` with ``max_sym_per_frame`` 1 and 2, ``modified_beam_search``,
``fast_beam_search_one_best``, ``_nbest``, ``_nbest_LG`` and ``_nbest_oracle``;
``peers/icefall_search.py``), read from a local icefall checkout given by ``--icefall-dir``
(default: the ``ICEFALL_DIR`` environment variable), run on the same model and encoder outputs
as k2dec's searches with their icefall-compatible configs: the shipped model (its LG, BPE
references for the oracle), and a seeded random model of icefall's sizes (encoder output
dimension 384, decoder and joiner 512, vocabulary 500, output distributions as peaked as a
trained model's; a random LG and references, :func:`icefall_sized_problem`). Each pair runs
:data:`ICEFALL_RUNS` times, alternating, after a warm-up; the speed ratio of the median
icefall time over the median k2dec time (wall and CPU time) is checked against the issue's
targets (:data:`ICEFALL_TARGETS`: greedy_search_batch >= 1.3, every other search >= 1.5) and
the outputs compared. Without a checkout the targets are reported as not evaluated.

``--smoke`` runs a tiny random model instead of the shipped one (no LG methods, no WER).
Times are the best of ``--repeat`` runs at one torch thread.

Usage (from the repository root)::

    python -m scripts.bench.transducer [--quick | --smoke] [--report DIR] [--icefall-dir DIR]
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import k2
import torch

from k2dec.methods import get_method
from k2dec.methods.registry import MethodResult
from k2dec.methods.resources import Resources, TransducerInputs

from . import plots
from .common import (
    Progress,
    Report,
    Timed,
    area_parser,
    interleaved,
    mode_of,
    one_thread,
    track_peak_rss,
    wer,
)
from .peers import icefall_search
from .shipped import shipped_batch

AREA = "transducer"
METHODS = ("greedy_search", "modified_beam_search", "fast_beam_search",
           "fast_beam_search_nbest", "fast_beam_search_nbest_LG", "fast_beam_search_LG")


@dataclass(frozen=True)
class Sizes:
    cuts: int  # cuts per shipped test set (0: tiny random model instead)
    repeat: int
    per_utt_max: int  # utterances of the per-utterance loop


MODES = {"full": Sizes(20, 2, 16), "quick": Sizes(8, 1, 8), "smoke": Sizes(0, 1, 3)}


class NetworkTimer:
    """Wall time spent inside the decoder, the joiner and the joiner's projections, via forward
    hooks; nested calls count once."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.seconds = 0.0
        self.calls = 0
        self._depth = 0
        self._start = 0.0
        modules = [model.decoder, model.joiner]
        for name in ("encoder_proj", "decoder_proj"):
            if hasattr(model.joiner, name):
                modules.append(getattr(model.joiner, name))
        self._handles = []
        for m in modules:
            self._handles.append(m.register_forward_pre_hook(self._enter))
            self._handles.append(m.register_forward_hook(self._exit))

    def _enter(self, *_) -> None:
        if self._depth == 0:
            self._start = time.perf_counter()
        self._depth += 1

    def _exit(self, *_) -> None:
        self._depth -= 1
        if self._depth == 0:
            self.seconds += time.perf_counter() - self._start
            self.calls += 1

    def reset(self) -> None:
        self.seconds, self.calls = 0.0, 0

    def remove(self) -> None:
        for h in self._handles:
            h.remove()


@dataclass
class Problem:
    model: torch.nn.Module
    encoder_out: torch.Tensor
    encoder_lens: torch.Tensor
    resources: Resources
    refs: list[list[str]] | None
    cut_ids: list[str]
    to_words: object  # MethodResult -> list[list[str]] (None without a lang dir)
    description: str
    ref_tokens: list[list[int]] | None = None  # for the oracle (None: no oracle)


def shipped_problem(cuts: int) -> Problem:
    from k2dec.job import hypothesis_texts

    b = shipped_batch(max_cuts=cuts)
    assets = b.assets

    def to_words(r: MethodResult) -> list[list[str]]:
        return hypothesis_texts(r, assets)

    n = len(b.refs)
    desc = (f"the shipped model's encoder outputs on the first {cuts} cuts of each shipped test "
            f"set ({n} utterances, {int(b.encoder_lens.sum())} encoder frames)")
    assets.model.eval()
    ref_tokens = [assets.sp.encode(" ".join(words)) for words in b.refs]
    return Problem(assets.model, b.encoder_out, b.encoder_lens, assets.resources, b.refs,
                   b.cut_ids, to_words, desc, ref_tokens)


def seeded_transducer(seed: int, dim: int, vocab: int, weight_scale: float,
                      blank_bias: float, encoder_dim: int | None = None) -> torch.nn.Module:
    """A random transducer (context 2, decoder and joiner dimensions ``dim``, encoder output
    dimension ``encoder_dim``, default ``dim``) from ``torch.manual_seed(seed)``; the joiner's
    output weights are scaled and its blank logit raised."""
    from k2dec.transducer import Joiner, LinearEncoder, StatelessDecoder, Transducer

    torch.manual_seed(seed)
    enc_dim = dim if encoder_dim is None else encoder_dim
    model = Transducer(LinearEncoder(enc_dim, enc_dim), StatelessDecoder(vocab, dim, blank_id=0,
                                                                         context_size=2),
                       Joiner(enc_dim, dim, dim, vocab)).eval()
    with torch.no_grad():
        model.joiner.output_linear.weight.mul_(weight_scale)
        model.joiner.output_linear.bias[0] += blank_bias
    return model


def random_problem(seed: int) -> Problem:
    dim = 32
    model = seeded_transducer(seed, dim, 50, 4.0, 3.0)
    g = torch.Generator().manual_seed(seed)
    enc = torch.randn(3, 30, dim, generator=g)
    lens = torch.tensor([30, 22, 17])
    desc = "a tiny random transducer (vocab 50, dim 32), 3 utterances of up to 30 frames"
    return Problem(model, enc, lens, Resources(), None, [f"u{i}" for i in range(3)], None, desc)


@dataclass
class Run:
    seconds: float
    net_seconds: float
    result: MethodResult


def _method_on(method, prob: Problem, idx: list[int] | None) -> MethodResult:
    """The method on the whole batch (``idx=None``) or one utterance at a time over ``idx``;
    per-utterance results are concatenated."""
    with torch.no_grad():
        if idx is None:
            inputs = TransducerInputs(prob.model, prob.encoder_out, prob.encoder_lens)
            return method(inputs, prob.resources)[0]
        parts = []
        for i in idx:
            n = int(prob.encoder_lens[i])
            inputs = TransducerInputs(prob.model, prob.encoder_out[i : i + 1, :n],
                                      prob.encoder_lens[i : i + 1])
            parts.append(method(inputs, prob.resources)[0])
    return MethodResult(parts[0].key, tuple(h for p in parts for h in p.hyps), parts[0].config)


def run_method(name: str, prob: Problem, timer: NetworkTimer, idx: list[int] | None,
               repeat: int) -> Run:
    """Best of ``repeat`` runs of the method on the whole batch (``idx=None``) or one utterance
    at a time over ``idx``; per-utterance results are concatenated."""
    method = get_method(name)
    best = None
    for _ in range(max(1, repeat)):
        timer.reset()
        start = time.perf_counter()
        result = _method_on(method, prob, idx)
        seconds = time.perf_counter() - start
        if best is None or seconds < best.seconds:
            best = Run(seconds, timer.seconds, result)
    return best


def _batched_searcher(make, kwargs: dict, prob: Problem, repeat: int
                      ) -> tuple[float, list, float]:
    """Best seconds of a searcher class over all streams at once, its tokens, and the decoder
    rows it evaluated per joiner row."""
    enc, lens = prob.encoder_out, prob.encoder_lens
    best = None
    for _ in range(max(1, repeat)):
        search = make(kwargs)
        search.net.decoder_rows = search.net.joiner_rows = 0
        start = time.perf_counter()
        with torch.no_grad():
            streams = [search.new_stream() for _ in range(enc.size(0))]
            search.decode_chunk(streams, enc, lens)
            tokens = [h.tokens for h in search.results(streams)]
        seconds = time.perf_counter() - start
        rows = search.net.decoder_rows / max(1, search.net.joiner_rows)
        if best is None or seconds < best[0]:
            best = (seconds, tokens, rows)
    return best


def searcher_variants(prob: Problem, repeat: int) -> list[list]:
    """The searcher classes directly, with and without the context-keyed decoder-output cache
    (fast_beam_search has it by default, the others not): frames/s, decoder rows evaluated
    per joiner row, and whether the tokens equal the default batched search's. (The tests
    compare the searches with the Python-loop references of tests/reference; the bench does
    not import tests.)"""
    from k2dec.transducer import FastBeamSearch, GreedySearch, ModifiedBeamSearch

    model = prob.model
    frames = int(prob.encoder_lens.sum())
    out = []
    for name, make, kind in (
        ("greedy_search", lambda c: GreedySearch(model, **c), "greedy"),
        ("modified_beam_search", lambda c: ModifiedBeamSearch(model, **c), "modified"),
        ("fast_beam_search", lambda c: FastBeamSearch(model, None, **c), None),
    ):
        base_s, base_tokens, base_rows = _batched_searcher(make, {}, prob, repeat)
        out.append([name, "batched", frames / base_s, 1.0, base_rows, "(base)"])
        if kind != "greedy":
            size, label = ((20000, "batched + decoder cache") if kind else
                           (0, "batched without decoder cache"))
            sec, tokens, rows = _batched_searcher(make, {"decoder_cache_size": size}, prob,
                                                  repeat)
            out.append([name, label, frames / sec, base_s / sec, rows,
                        "yes" if tokens == base_tokens else "**no**"])
    return out


#: cuts per shipped test set compared with icefall (40 utterances, one icefall-sized batch)
ICEFALL_CUTS = 20
#: issue #29: k2dec's speed over icefall's on the same model and inputs, per search
ICEFALL_TARGETS = {"greedy_search": 1.3, "greedy_search max_sym_per_frame=1": 1.5,
                   "greedy_search max_sym_per_frame=2": 1.5, "modified_beam_search": 1.5,
                   "fast_beam_search": 1.5, "fast_beam_search_nbest": 1.5,
                   "fast_beam_search_nbest_LG": 1.5, "fast_beam_search_nbest_oracle": 1.5}
#: timed runs of each search and side (the median is reported)
ICEFALL_RUNS = 5
#: icefall-sized random transducer: zipformer's encoder output dimension, the decoder and
#: joiner dimension and the BPE vocabulary of icefall's LibriSpeech recipes (context 2)
ICEFALL_SIZES = {"encoder_dim": 384, "dim": 512, "vocab": 500}
#: its joiner's output weights are scaled and the blank logit raised so that its output
#: distributions are as peaked as a trained model's (the shipped model's: about 0.29 tokens
#: per frame, mean highest probability 0.87, 15 symbols within 10 nats of the best; these:
#: 0.29, 0.85, 16). At the default initialization every distribution is nearly flat
#: (entropy 6.2 nats of log 500 = 6.2), which no trained model gives: every one of the 500
#: arcs of every state then survives fast_beam_search's beam.
ICEFALL_SIZED_WEIGHT_SCALE = 25.0
ICEFALL_SIZED_BLANK_BIAS = 23.0
#: words of the random lexicon of the icefall-sized model's LG, and successors per word of
#: its random bigram LM
RANDOM_LG_WORDS = 2000
RANDOM_LG_SUCCESSORS = 8


def random_graph(vocab: int, seed: int, graph_type: str = "LG") -> k2.Fsa:
    """An LG (k2dec.graph.compile_graph, log weight pushing) or, with ``graph_type="HLG"``, an
    HLG for tokens ``1 .. vocab - 1`` (blank 0):
    :data:`RANDOM_LG_WORDS` random words of 1-4 tokens and a random bigram LM over them
    (:data:`RANDOM_LG_SUCCESSORS` bigrams per history holding half of its probability)."""
    import random
    import tempfile

    from k2dec.graph import compile_graph
    from k2dec.lang import write_lang_dir

    rng = random.Random(seed)
    tokens = [f"t{i}" for i in range(1, vocab)]
    words = [f"w{j}" for j in range(RANDOM_LG_WORDS)]
    lexicon = [(w, tuple(rng.choice(tokens) for _ in range(rng.randint(1, 4)))) for w in words]
    uni = {w: rng.uniform(0.2, 1.0) for w in words + ["</s>"]}
    total = sum(uni.values())
    uni = {w: p / total for w, p in uni.items()}
    lines = ["\\data\\", f"ngram 1={len(uni) + 1}",
             f"ngram 2={(len(words) + 1) * RANDOM_LG_SUCCESSORS}", "", "\\1-grams:"]
    grams = []
    for h in ["<s>"] + words:
        nxt = rng.sample(words + ["</s>"], RANDOM_LG_SUCCESSORS)
        shares = [rng.uniform(0.5, 1.0) for _ in nxt]
        grams += [(h, w, 0.5 * x / sum(shares)) for w, x in zip(nxt, shares)]
        backoff = 0.5 / (1.0 - sum(uni[w] for w in nxt))
        p = "-99" if h == "<s>" else f"{math.log10(uni[h]):.5f}"
        lines.append(f"{p}\t{h}\t{math.log10(backoff):.5f}")
    lines.append(f"{math.log10(uni['</s>']):.5f}\t</s>")
    lines += ["", "\\2-grams:"] + [f"{math.log10(p):.5f}\t{h} {w}" for h, w, p in grams]
    lines += ["", "\\end\\", ""]
    with tempfile.TemporaryDirectory() as tmp:
        lang = write_lang_dir(Path(tmp) / "lang", lexicon, tokens=tokens, blank="<blk>")
        arpa = Path(tmp) / "lm.arpa"
        arpa.write_text("\n".join(lines))
        graph, _ = compile_graph(lang.path, graph_type, arpa=arpa,
                                 graph_dir=Path(tmp) / "graphs")
    return graph


def icefall_sized_problem(seed: int, utts: int) -> Problem:
    """A seeded random transducer of icefall's sizes (:data:`ICEFALL_SIZES`, output
    distributions peaked as a trained model's) on seeded random encoder frames, with a random
    LG (:func:`random_graph`) and references for the oracle (each utterance's greedy tokens with
    every fifth dropped and every seventh replaced)."""
    from k2dec.transducer import greedy_search

    dim, vocab, enc_dim = (ICEFALL_SIZES[k] for k in ("dim", "vocab", "encoder_dim"))
    model = seeded_transducer(seed, dim, vocab, ICEFALL_SIZED_WEIGHT_SCALE,
                              ICEFALL_SIZED_BLANK_BIAS, enc_dim)
    g = torch.Generator().manual_seed(seed)
    lens = torch.randint(40, 160, (utts,), generator=g)
    enc = torch.randn(utts, int(lens.max()), enc_dim, generator=g)
    with torch.no_grad():
        greedy = [h.tokens for h in greedy_search(model, enc, lens)]
    refs = [[t if i % 7 != 6 else 1 + t % (vocab - 1) for i, t in enumerate(h) if i % 5 != 4]
            for h in greedy]
    desc = (f"a seeded random transducer of icefall's sizes (vocab {vocab}, encoder output "
            f"dim {enc_dim}, decoder and joiner dim {dim}, output distributions as peaked as "
            f"a trained model's), {utts} utterances, {int(lens.sum())} frames; LG of "
            f"{RANDOM_LG_WORDS} random words and a random bigram LM")
    resources = Resources(graphs={"LG": random_graph(vocab, seed)})
    return Problem(model, enc, lens, resources, None, [f"r{i}" for i in range(utts)], None,
                   desc, refs)


#: icefall's own Decoder / Joiner classes (from the checkout) at these sizes: (vocab,
#: decoder and joiner dim, encoder output dim); utterances per batch (icefall's decode
#: batches are larger: from 16 on k2dec drops the utterances that ended, see
#: k2dec.transducer.fast_beam_search.ICEFALL_MIN_ROWS)
ICEFALL_MODEL_SIZES = [(20, 32, 32), (500, 256, 384), (2000, 512, 512)]
ICEFALL_MODEL_UTTS = 24
#: their greedy tokens per frame (a trained BPE model's, about): the blank bias is set to it
ICEFALL_MODEL_TOKEN_RATE = 0.3


def icefall_class_problem(classes: tuple, sizes: tuple[int, int, int], seed: int,
                          utts: int) -> Problem:
    """A seeded transducer of icefall's own Decoder / Joiner objects
    (:func:`peers.icefall_search.icefall_model`, output weights scaled by 25, the blank
    bias bisected until greedy search emits :data:`ICEFALL_MODEL_TOKEN_RATE` tokens per
    frame), random frames, a random LG and references (as :func:`icefall_sized_problem`)."""
    from k2dec.transducer import greedy_search

    vocab, dim, enc_dim = sizes
    g = torch.Generator().manual_seed(seed)
    lens = torch.randint(40, 160, (utts,), generator=g).sort(descending=True).values
    enc = torch.randn(utts, int(lens.max()), enc_dim, generator=g)
    lo, hi = -10.0, 60.0
    for _ in range(12):
        bias = (lo + hi) / 2
        model = icefall_search.icefall_model(classes, vocab, dim, enc_dim, seed, 25.0, bias)
        with torch.no_grad():
            greedy = [h.tokens for h in greedy_search(model, enc, lens)]
        rate = sum(map(len, greedy)) / int(lens.sum())
        lo, hi = (bias, hi) if rate > ICEFALL_MODEL_TOKEN_RATE else (lo, bias)
    refs = [[t if i % 7 != 6 else 1 + t % (vocab - 1) for i, t in enumerate(h) if i % 5 != 4]
            for h in greedy]
    desc = (f"icefall's own zipformer Decoder / Joiner, vocab {vocab}, decoder and joiner dim "
            f"{dim}, encoder dim {enc_dim} ({rate:.2f} greedy tokens per frame), {utts} "
            f"utterances, {int(lens.sum())} frames, random LG")
    return Problem(model, enc, lens, Resources(graphs={"LG": random_graph(vocab, seed)}),
                   None, [f"i{i}" for i in range(utts)], None, desc, refs)


def _icefall_row(label: str, name: str, frames: int, ours: Timed, theirs: Timed) -> list:
    ratio = theirs.median / ours.median
    cpu_ratio = theirs.median_cpu / ours.median_cpu
    same = [list(h) for h in ours.result] == [list(h) for h in theirs.result]
    target = ICEFALL_TARGETS[name]
    print(f"[transducer] icefall {label} {name}: {ratio:.2f}x (CPU time {cpu_ratio:.2f}x)"
          f"{'' if same else ', other outputs'}", flush=True)
    return [label, name, frames / ours.median, frames / theirs.median, ratio, cpu_ratio,
            f">= {target}", "met" if ratio >= target else "NOT met",
            "yes" if same else "**no**"]


def icefall_rows(ice, problems: list[tuple[str, Problem]], runs: int) -> list[list]:
    """For each problem and search: ``runs`` timed runs of k2dec's call and icefall's,
    alternating; the speed ratio of the medians (wall time, and the process' CPU time, which
    other work on a shared machine disturbs less) and whether the outputs agree."""
    rows = []
    for label, prob in problems:
        frames = int(prob.encoder_lens.sum())
        inputs = icefall_search.SearchInputs(prob.model, prob.encoder_out, prob.encoder_lens,
                                             prob.resources.graphs.get("LG"), prob.ref_tokens)
        for name, (ours, theirs) in icefall_search.search_pairs(ice, inputs).items():
            with torch.no_grad():
                ours(), theirs()  # warm-up
                k2_run, ice_run = interleaved(runs, [ours, theirs])
            rows.append(_icefall_row(label, name, frames, k2_run, ice_run))
    return rows


def hyps_of(r: MethodResult) -> list:
    return r.words if r.words is not None else r.tokens


def method_wer(prob: Problem, r: MethodResult) -> float | None:
    if prob.refs is None or prob.to_words is None:
        return None
    return wer(prob.refs, prob.to_words(r), prob.cut_ids)


def _plot_wer_speed(ax, rows: list[dict]) -> None:
    for i, r in enumerate(rows):
        if r["wer"] is None:
            continue
        ax.scatter([r["fps"]], [r["wer"]], color=f"C{i}")
        ax.annotate(r["name"], (r["fps"], r["wer"]), fontsize=7, xytext=(3, 3),
                    textcoords="offset points")
    ax.set_xscale("log")
    ax.set_xlabel("encoder frames / s, batched (1 thread, log scale)")
    ax.set_ylabel("WER %")
    ax.set_title("WER vs speed (shipped model)")
    ax.grid(True, alpha=0.3)


def _plot_batched_vs_per_utt(ax, rows: list[dict]) -> None:
    names = [r["name"].replace("fast_beam_search", "fbs") for r in rows]
    x = range(len(rows))
    width = 0.4
    batched = [r["fps"] for r in rows]
    per_utt = [r["fps_utt"] for r in rows]
    ax.bar([i - width / 2 for i in x], batched, width, label="batched")
    ax.bar([i + width / 2 for i in x], per_utt, width, label="per-utterance loop")
    for i, r in enumerate(rows):
        ax.annotate(f"{100 * r['outside']:.0f}% search", (i - width / 2, batched[i]),
                    fontsize=6, ha="center", xytext=(0, 2), textcoords="offset points")
    ax.set_yscale("log")
    ax.set_xticks(list(x))
    ax.set_xticklabels(names, rotation=25, ha="right", fontsize=7)
    ax.set_ylabel("encoder frames / s (log scale)")
    ax.set_title("batched vs per-utterance loop (% = time outside the network)")
    ax.legend(fontsize=7)
    ax.grid(True, axis="y", alpha=0.3)


def plot(rows: list[dict], path: Path) -> None:
    fig, (ax1, ax2) = plots.pyplot().subplots(1, 2, figsize=(12, 4.8))
    _plot_wer_speed(ax1, rows)
    _plot_batched_vs_per_utt(ax2, rows)
    plots.save(fig, path)


def fast_beam_search_note(ice, problems: list[tuple[str, Problem]]) -> str:
    """Why k2dec's fast_beam_search is compared at icefall's ``termination_frame=False``, and
    how its default differs on each problem."""
    differs = "; ".join(f"{label} " + icefall_search.default_differs(
        ice, p.model, p.encoder_out, p.encoder_lens) for label, p in problems)
    return ("fast_beam_search: k2dec runs with icefall's termination_frame=False "
            "(k2dec.methods.icefall_compatible). With k2dec's default (True) every stream "
            "takes one more blank-only frame after its last, so the lattice also scores the "
            "last frame's emissions, which icefall drops (k2 uses the frame after the last "
            "arcs only to find final states): a different best path where the last frame "
            "matters, and a hypothesis where icefall's has no final state left (-inf, empty); "
            f"with the default: {differs}. icefall advances every stream over the padding "
            "frames of the batch as well; that changes nothing (k2 prunes each stream on its "
            "own, and its lattice ends at its own length).")


def icefall_table(rep: Report, icefall_dir: Path | None, prob: Problem, mode: str,
                  seed: int) -> None:
    """The comparison with icefall's beam_search.py and the issue's targets, met or not."""
    if icefall_dir is None:
        rep.peer_missing(icefall_search.PEER, "no checkout given (--icefall-dir or ICEFALL_DIR)")
        for name, target in ICEFALL_TARGETS.items():
            rep.target(f"{name} >= {target}x icefall's speed", "not evaluated: no icefall", None)
        return
    ice = icefall_search.load(Path(icefall_dir))
    if mode == "smoke":
        problems = [("tiny random", prob)]
    else:  # batches of a typical icefall decoding batch's size in every mode
        if prob.encoder_out.size(0) != 2 * ICEFALL_CUTS:
            prob = shipped_problem(ICEFALL_CUTS)
        problems = [("shipped", prob)]
        if mode == "full":  # (k2dec's own classes at icefall's sizes)
            problems.append(("icefall-sized random",
                             icefall_sized_problem(seed, 2 * ICEFALL_CUTS)))
        classes = icefall_search.model_classes(Path(icefall_dir))
        sizes = ICEFALL_MODEL_SIZES if mode == "full" else ICEFALL_MODEL_SIZES[:2]
        problems += [(f"icefall classes V{v} D{d}", icefall_class_problem(
            classes, (v, d, e), seed, ICEFALL_MODEL_UTTS)) for v, d, e in sizes]
    runs = {"smoke": 1, "quick": 3}.get(mode, ICEFALL_RUNS)
    rows = icefall_rows(ice, problems, runs)
    rep.table("k2dec vs icefall's beam_search.py, same model and encoder outputs, k2dec with its "
              "icefall-compatible configs (ratio = icefall time / k2dec time, medians of "
              f"{runs} alternating runs; the machine may be shared, so compare ratios, "
              "not frames/s): " + "; ".join(f"{lab}: {p.description}" for lab, p in problems),
              ["model", "search", "k2dec frames/s", "icefall frames/s", "speed ratio",
               "speed ratio (CPU time)", "target", "met", "same outputs"], rows)
    rep.note(fast_beam_search_note(ice, problems))
    for name, target in ICEFALL_TARGETS.items():
        mine = [r for r in rows if r[1] == name]
        value = ", ".join(f"{r[0]} {r[4]:.2f}x (CPU time {r[5]:.2f}x)" for r in mine)
        if mode == "smoke":
            rep.target(f"{name} >= {target}x icefall's speed",
                       f"not evaluated in --smoke mode (tiny model: {value or 'not run'})",
                       None)
        else:
            rep.target(f"{name} >= {target}x icefall's speed", value or "not run",
                       bool(mine) and min(r[4] for r in mine) >= target)


@dataclass
class Bench:
    """One run of the area: its mode, sizes, problem and report."""

    mode: str
    sizes: Sizes
    repeat: int
    seed: int
    icefall_dir: Path | None
    report_dir: str | None
    rep: Report
    prob: Problem | None = None
    phase: Progress = field(default_factory=lambda: Progress(AREA))


def parse_args(argv: list[str] | None) -> Bench:
    p = area_parser(__doc__, "transducer")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--repeat", type=int, default=None, help="best of this many runs")
    p.add_argument("--icefall-dir", type=Path, default=os.environ.get("ICEFALL_DIR") or None,
                   help="a local icefall checkout (the peer; default: $ICEFALL_DIR)")
    args = p.parse_args(argv)
    one_thread()
    mode = mode_of(args)
    sz = MODES[mode]
    rep = Report(AREA, "Transducer searches: batched vs per-utterance (shipped model)")
    return Bench(mode, sz, args.repeat or sz.repeat, args.seed, args.icefall_dir, args.report,
                 rep)


def method_row(bench: Bench, name: str, timer: NetworkTimer, idx: list[int]
               ) -> tuple[dict, list]:
    """One method batched and per utterance: the plot's point and the table's row."""
    prob = bench.prob
    run_method(name, prob, timer, [0], 1)  # warm-up
    with track_peak_rss() as mem:
        batched = run_method(name, prob, timer, None, bench.repeat)
    per_utt = run_method(name, prob, timer, idx, bench.repeat)
    fps = int(prob.encoder_lens.sum()) / batched.seconds
    fps_utt = int(prob.encoder_lens[idx].sum()) / per_utt.seconds
    outside = 1.0 - batched.net_seconds / batched.seconds
    outside_utt = 1.0 - per_utt.net_seconds / per_utt.seconds
    same = sum(a == b for a, b in zip(hyps_of(batched.result), hyps_of(per_utt.result)))
    w = method_wer(prob, batched.result)
    failed = sum(bool(f) for f in batched.result.failed)
    point = {"name": name, "fps": fps, "fps_utt": fps_utt, "outside": outside, "wer": w}
    return point, [name, fps, fps_utt, fps / fps_utt, f"{100 * outside:.0f}%",
                   f"{100 * outside_utt:.0f}%", mem.increase_mb, w, failed,
                   f"{same}/{len(idx)}"]


def method_rows(bench: Bench, idx: list[int]) -> tuple[list[dict], list[list]]:
    """Every method the problem has the resources for (a note for the others)."""
    timer = NetworkTimer(bench.prob.model)
    points, table = [], []
    for name in METHODS:
        missing = bench.prob.resources.missing(get_method(name).requires)
        if missing:
            bench.rep.note(f"{name} not run: no {', '.join(missing)} ({bench.mode} mode).")
            continue
        point, row = method_row(bench, name, timer, idx)
        points.append(point)
        table.append(row)
        bench.phase(name)
    timer.remove()
    return points, table


def settings(bench: Bench, idx: list[int]) -> str:
    prob = bench.prob
    return (
        f"Mode {bench.mode}. Inputs: {prob.description}. Methods run through k2dec's methods "
        "registry with icefall's default configs (modified_beam_search beam 4; "
        "fast_beam_search beam 20, max_contexts 8, max_states 64; n-best num_paths 200, "
        "nbest_scale 0.5; LG methods ngram_lm_scale 0.01). Batched: one call on all "
        f"{prob.encoder_out.size(0)} utterances; per-utterance: one call per utterance on the "
        f"first {len(idx)} utterances ({int(prob.encoder_lens[idx].sum())} frames). One torch "
        f"thread; times are the best of {bench.repeat} runs; the encoder is not timed.")


def notes(rep: Report, table: list[list], utts: int) -> None:
    """Where per-utterance and batched hypotheses differ, and what 'outside network' means."""
    differ = [r[0] for r in table if r[-1] != f"{utts}/{utts}"]
    sampled = [m for m in differ if "nbest" in m]
    other = [m for m in differ if "nbest" not in m]
    if sampled:
        rep.note(f"{', '.join(sampled)}: per-utterance and batched hypotheses differ, "
                 "although n-best sampling depends on the utterance's lattice only "
                 "(k2dec.nbest.sample_paths): its lattice scores changed with the batch.")
    if other:
        rep.note(f"{', '.join(other)}: per-utterance hypotheses differ from the batched "
                 "ones, although these searches should not depend on the batch.")
    rep.note("'outside network' is the share of wall time not spent in model.decoder, "
             "model.joiner or the joiner's projections: search bookkeeping, k2 calls and Python "
             "overhead, i.e. what a faster search could still win.")


def main(argv: list[str] | None = None) -> None:
    bench = parse_args(argv)
    sz, rep = bench.sizes, bench.rep
    bench.prob = shipped_problem(sz.cuts) if sz.cuts else random_problem(bench.seed)
    idx = list(range(min(bench.prob.encoder_out.size(0), sz.per_utt_max)))
    points, table = method_rows(bench, idx)
    variants = searcher_variants(bench.prob, bench.repeat)
    bench.phase("searcher variants")
    rep.settings = settings(bench, idx)
    rep.table(
        "Transducer searches: throughput, share of time outside the network, memory, WER",
        ["method", "batched frames/s", "per-utt frames/s", "speed-up batched/per-utt",
         "outside network (batched)", "outside network (per-utt)", "peak +MiB (batched)",
         "WER %", "failed utts", "per-utt hyps identical to batched"], table)
    rep.table("Searcher classes: the decoder-output cache; speed relative to the plain "
              "batched search",
              ["search", "variant", "frames/s", "speed vs batched", "decoder rows / joiner row",
               "same tokens as batched"], variants)
    icefall_table(rep, bench.icefall_dir, bench.prob, bench.mode, bench.seed)
    notes(rep, table, len(idx))
    path = rep.plot_path(bench.report_dir, "transducer.png")
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        plot(points, path)
    rep.write(bench.report_dir)


if __name__ == "__main__":
    main()
