#!/usr/bin/env python3
"""Benchmark of the attention beam search (k2dec.aed.beam_search).

Compares, on random small Transformer decoders at one torch thread:

* ``batched``: one search over all N utterances x B beams (one decoder call per step);
* ``per-utt``: one batched search per utterance (N x as many calls, B rows each);
* ``per-hyp``: the per-hypothesis Python-loop reference in tests/reference/aed_reference.py
  (one decoder call per live hypothesis per step, from scratch, CTC recomputed per prefix);

each plain, with joint CTC prefix scoring, with LM shallow fusion, and with both. It prints
decoder calls, decoder rows (hypotheses scored), wall time and the time ratio to ``batched``,
and checks that all three give the same n-best tokens.

Usage (from the repository root):

    python scripts/bench_aed.py --num-utts 8 --frames 24 --beam 4
    python scripts/bench_aed.py --skip-reference --num-utts 32 --frames 100 --beam 10
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from k2dec.aed import BeamSearchConfig, TransformerDecoder, beam_search  # noqa: E402
from tests.aed.models import CountingDecoder, TinyLM  # noqa: E402
from tests.reference.aed_reference import reference_beam_search  # noqa: E402


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--num-utts", type=int, default=8)
    parser.add_argument("--frames", type=int, default=24)
    parser.add_argument("--vocab", type=int, default=32)
    parser.add_argument("--memory-dim", type=int, default=32)
    parser.add_argument("--d-model", type=int, default=32)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--max-len-ratio", type=float, default=0.5)
    parser.add_argument("--eos-bias", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3,
                        help="best of this many timed runs (the per-hyp reference runs once)")
    parser.add_argument("--skip-reference", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    dec, memory, lens, ctc, lm = _make_problem(args)

    modes = {
        "plain": {},
        "ctc": dict(ctc_weight=0.3),
        "lm": dict(lm_weight=0.3),
        "ctc+lm": dict(ctc_weight=0.3, lm_weight=0.3),
    }
    print(
        f"N={args.num_utts} T<={args.frames} V={args.vocab} B={args.beam} "
        f"d_model={args.d_model} layers={args.layers} max_len_ratio={args.max_len_ratio} "
        f"threads={torch.get_num_threads()} (wall: best of {args.repeats}; per-hyp: 1 run)"
    )
    print()
    print("| mode | search | decoder calls | decoder rows | wall s | x batched | same n-best |")
    print("| --- | --- | ---: | ---: | ---: | ---: | --- |")
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

        runs = [_run("batched", batched, dec, args.repeats),
                _run("per-utt", per_utt, dec, args.repeats)]
        if not args.skip_reference:
            runs.append(_run("per-hyp", per_hyp, dec, 1))
        base_time, base_tokens = runs[0][3], runs[0][4]
        for name, calls, rows, elapsed, tokens in runs:
            same = "yes" if tokens == base_tokens else "NO"
            print(f"| {mode} | {name} | {calls} | {rows} | {elapsed:.3f} | "
                  f"{elapsed / base_time:.1f} | {same} |")


if __name__ == "__main__":
    main()
