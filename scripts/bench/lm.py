"""Benchmark of neural LM scoring (k2dec.lm) at one torch thread.

For an RnnLM and a TransformerLM with the default config sizes (random weights), scores the
same random ragged batch of token sequences with:

* ``batch``: :meth:`score_sequences`, one padded forward pass (teacher forcing);
* ``batch/chunk``: :meth:`score_sequences` with ``batch_size=--chunk`` (length-sorted chunks);
* ``step+state``: :meth:`step` once per position over all sequences, carrying the state
  (RNN: ``(h, c)``; Transformer: per-layer key/value caches), as in shallow fusion;
* ``step, no state``: :meth:`step` with ``state=None`` at every position (the whole prefix is
  re-run each time: what a Transformer state that keeps only the prefix would cost).

It prints sequences/s and the time ratio to ``batch``, and checks that every way gives the same
per-sequence totals.

Usage (from the repository root):

    python -m scripts.bench.lm
    python -m scripts.bench.lm --num-seqs 500 --min-len 5 --max-len 40 --chunk 100

It is not an area of ``make bench`` (it prints its table and writes no report).
"""

from __future__ import annotations

import argparse
import time

import k2
import torch

from k2dec.lm import RnnLM, RnnLmConfig, TransformerLM, TransformerLmConfig


def _totals_by_steps(lm, seqs: list[list[int]], keep_state: bool) -> torch.Tensor:
    """Per-sequence totals from ``step`` over all sequences in parallel (eos-padded)."""
    max_len = max(len(s) for s in seqs)
    padded = torch.full((len(seqs), max_len + 2), lm.eos_id, dtype=torch.int64)
    padded[:, 0] = lm.sos_id
    for i, s in enumerate(seqs):
        padded[i, 1 : len(s) + 1] = torch.tensor(s, dtype=torch.int64)
    lens = torch.tensor([len(s) for s in seqs])
    totals = torch.zeros(len(seqs))
    state = None
    for u in range(1, max_len + 2):
        log_probs, new_state = lm.step(padded[:, :u], state)
        state = new_state if keep_state else None
        target_lp = log_probs.gather(1, padded[:, u : u + 1]).squeeze(1)
        totals += torch.where(lens >= u - 1, target_lp, torch.zeros_like(target_lp))
    return totals


def _time(fn, repeat: int) -> tuple[float, object]:
    out = fn()  # warm-up
    start = time.perf_counter()
    for _ in range(repeat):
        out = fn()
    return (time.perf_counter() - start) / repeat, out


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m scripts.bench.lm",
                                description=__doc__.split("\n")[0])
    p.add_argument("--num-seqs", type=int, default=200)
    p.add_argument("--min-len", type=int, default=5)
    p.add_argument("--max-len", type=int, default=30)
    p.add_argument("--vocab", type=int, default=500)
    p.add_argument("--chunk", type=int, default=50)
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    g = torch.Generator().manual_seed(args.seed)
    lens = torch.randint(args.min_len, args.max_len + 1, (args.num_seqs,), generator=g)
    seqs = [torch.randint(3, args.vocab, (int(n),), generator=g).tolist() for n in lens]
    ragged = k2.RaggedTensor(seqs, dtype=torch.int32)
    models = {
        "rnn": RnnLM(RnnLmConfig(vocab_size=args.vocab)),
        "transformer": TransformerLM(TransformerLmConfig(vocab_size=args.vocab)),
    }
    print(f"{args.num_seqs} sequences, lengths {args.min_len}..{args.max_len} "
          f"({int(lens.sum())} tokens), V={args.vocab}, 1 thread")
    print(f"{'model':<12} {'method':<16} {'seconds':>9} {'seqs/s':>9} {'x batch':>8} "
          f"{'max |diff|':>11}")
    for name, lm in models.items():
        lm.eval()
        with torch.no_grad():
            ways = {
                "batch": lambda lm=lm: lm.score_sequences(ragged).totals,
                "batch/chunk": lambda lm=lm: lm.score_sequences(ragged, args.chunk).totals,
                "step+state": lambda lm=lm: _totals_by_steps(lm, seqs, keep_state=True),
                "step, no state": lambda lm=lm: _totals_by_steps(lm, seqs, keep_state=False),
            }
            base_time, base = None, None
            for method, fn in ways.items():
                seconds, totals = _time(fn, args.repeat)
                if base is None:
                    base_time, base = seconds, totals
                diff = float((totals - base).abs().max())
                print(f"{name:<12} {method:<16} {seconds:9.3f} {args.num_seqs / seconds:9.1f} "
                      f"{seconds / base_time:8.2f} {diff:11.2e}")


if __name__ == "__main__":
    main()
