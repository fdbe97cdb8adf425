#!/usr/bin/env python3
"""Benchmark of the transducer searches (k2dec.transducer) on one fixed random model.

For each method it reports throughput (encoder frames per second), the time ratio to the
batched run, and the share of wall time spent outside the decoder + joiner networks (the part
the search itself can still win). Variants:

* ``batched``: one search over all N utterances (what the library does);
* ``cache``: the same with the context-keyed decoder-output cache (``decoder_cache_size``);
* ``per-utt``: N searches of one utterance each (no batching);
* ``reference``: the per-utterance Python-loop reference of tests/reference (greedy and
  modified beam search only; run on the first ``--reference-utts`` utterances, throughput
  scaled accordingly).

``dec/join rows`` is the number of decoder evaluations per joiner evaluation: icefall's
modified_beam_search recomputes the decoder for every hypothesis on every frame (ratio 1.0);
k2dec carries decoder outputs along with hypotheses and recomputes them only after a token.
Token sequences of every variant are checked against ``batched``.

Usage (from the repository root, one torch thread):

    python scripts/bench_transducer.py
    python scripts/bench_transducer.py --num-utts 32 --frames 300 --vocab 500 --dim 512
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from k2dec.transducer import (  # noqa: E402
    FastBeamSearch,
    FastBeamSearchConfig,
    GreedySearch,
    GreedySearchConfig,
    Joiner,
    LinearEncoder,
    ModifiedBeamSearch,
    ModifiedBeamSearchConfig,
    StatelessDecoder,
    Transducer,
)
from tests.reference.transducer_reference import (  # noqa: E402
    NetOracle,
    greedy_reference,
    modified_beam_search_reference,
    pick_best,
)


def make_problem(args: argparse.Namespace):
    torch.manual_seed(args.seed)
    model = Transducer(
        LinearEncoder(args.dim, args.dim),
        StatelessDecoder(args.vocab, args.dim, blank_id=0, context_size=args.context_size),
        Joiner(args.dim, args.dim, args.dim, args.vocab),
    ).eval()
    with torch.no_grad():
        model.joiner.output_linear.weight.mul_(4.0)  # peaky, like a trained model
        model.joiner.output_linear.bias[0] += args.blank_bias  # mostly blank frames
    g = torch.Generator().manual_seed(args.seed)
    enc = torch.randn(args.num_utts, args.frames, args.dim, generator=g)
    lens = torch.randint(args.frames // 2, args.frames + 1, (args.num_utts,), generator=g)
    lens[0] = args.frames
    return model, enc, lens


def run_search(search, enc, lens, per_utt: bool):
    search.net.timing = True
    search.net.net_seconds = 0.0
    start = time.perf_counter()
    with torch.no_grad():
        if per_utt:
            hyps = []
            for i in range(enc.size(0)):
                n = int(lens[i])
                streams = [search.new_stream()]
                search.decode_chunk(streams, enc[i : i + 1, :n], lens[i : i + 1])
                hyps += search.results(streams)
        else:
            streams = [search.new_stream() for _ in range(enc.size(0))]
            search.decode_chunk(streams, enc, lens)
            hyps = search.results(streams)
    seconds = time.perf_counter() - start
    rows = search.net.decoder_rows / max(1, search.net.joiner_rows)
    return seconds, search.net.net_seconds, [h.tokens for h in hyps], rows


def run_reference(kind, model, enc, lens, n_utts, beam):
    start = time.perf_counter()
    tokens = []
    with torch.no_grad():
        for i in range(n_utts):
            oracle = NetOracle(model, enc[i])
            if kind == "greedy":
                tokens.append(greedy_reference(oracle, int(lens[i]))[0])
            else:
                hyps = modified_beam_search_reference(oracle, int(lens[i]), beam)
                tokens.append(list(pick_best(hyps, True, model.decoder.context_size)[0]))
    return time.perf_counter() - start, tokens


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--num-utts", type=int, default=16)
    parser.add_argument("--frames", type=int, default=200)
    parser.add_argument("--vocab", type=int, default=500)
    parser.add_argument("--dim", type=int, default=256)
    parser.add_argument("--context-size", type=int, default=2)
    parser.add_argument("--blank-bias", type=float, default=4.5)
    parser.add_argument("--cache-size", type=int, default=20000)
    parser.add_argument("--reference-utts", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=2, help="best of this many runs")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(1)

    model, enc, lens = make_problem(args)
    total_frames = int(lens.sum())
    print(
        f"# {args.num_utts} utts, {total_frames} frames (max {args.frames}), V={args.vocab}, "
        f"dim={args.dim}, context_size={args.context_size}, torch threads=1"
    )
    methods = [
        ("greedy", lambda c: GreedySearch(model, GreedySearchConfig(), **c), "greedy"),
        (
            "greedy max_sym=3",
            lambda c: GreedySearch(model, GreedySearchConfig(max_sym_per_frame=3), **c),
            None,
        ),
        (
            "modified_beam_search beam=4",
            lambda c: ModifiedBeamSearch(model, ModifiedBeamSearchConfig(beam=4), **c),
            "modified",
        ),
        (
            "fast_beam_search 20/8/64",
            lambda c: FastBeamSearch(model, None, FastBeamSearchConfig(), **c),
            None,
        ),
    ]
    header = (
        f"{'method':30s} {'variant':10s} {'frames/s':>10s} {'seconds':>8s} {'ratio':>6s} "
        f"{'outside NN':>10s} {'dec/join rows':>13s} {'same tokens':>11s}"
    )
    print(header)
    print("-" * len(header))
    for name, make, ref_kind in methods:
        variants = [("batched", {}, False), ("per-utt", {}, True)]
        if name.startswith(("modified", "fast")):
            variants.insert(1, ("cache", {"decoder_cache_size": args.cache_size}, False))
        base_time, base_tokens = None, None
        for variant, kwargs, per_utt in variants:
            best = None
            for _ in range(args.repeats):
                out = run_search(make(kwargs), enc, lens, per_utt)
                if best is None or out[0] < best[0]:
                    best = out
            seconds, net_seconds, tokens, rows = best
            if base_time is None:
                base_time, base_tokens = seconds, tokens
                if name == "greedy":
                    emitted = sum(len(t) for t in tokens)
                    print(f"# greedy emits {emitted / total_frames:.2f} tokens per frame")
            outside = 1.0 - net_seconds / seconds
            print(
                f"{name:30s} {variant:10s} {total_frames / seconds:10.0f} {seconds:8.3f} "
                f"{seconds / base_time:6.2f} {100 * outside:9.1f}% {rows:13.3f} "
                f"{str(tokens == base_tokens):>11s}"
            )
        if ref_kind is not None and args.reference_utts > 0:
            n = min(args.reference_utts, args.num_utts)
            seconds, tokens = run_reference(ref_kind, model, enc, lens, n, 4)
            frames = int(lens[:n].sum())
            scaled = seconds * total_frames / frames
            print(
                f"{name:30s} {'reference':10s} {frames / seconds:10.0f} {scaled:8.3f} "
                f"{scaled / base_time:6.2f} {'-':>10s} {'-':>13s} "
                f"{str(tokens == base_tokens[:n]):>11s}"
            )


if __name__ == "__main__":
    main()
