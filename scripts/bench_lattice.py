#!/usr/bin/env python3
"""Benchmark: decoding-only throughput of k2dec lattice 1best against PyPI kaldi-decoder's
FasterDecoder on the same graph and log-likelihoods, at several beams; and scaling of the
multi-process DecodeRunner from 1 worker to all cores.

The graph is a synthetic HLG-like CTC lexicon graph (labels: tokens, aux_labels: words, unigram
word scores); inputs are peaked log-softmax frames around random word strings. Times exclude
graph building and process start-up; each is the best of --repeat runs. One torch thread.

Usage:
    python scripts/bench_lattice.py [--words 300] [--tokens 40] [--utts 16] [--frames 300]
                                    [--repeat 3]
"""

from __future__ import annotations

import argparse
import time

import k2
import numpy as np
import torch

from k2dec.lattice import DecodeRunner, LatticeConfig, one_best_decoding
from k2dec.lattice.runner import available_cores


def lexicon_graph(rng: np.random.Generator, num_words: int, num_tokens: int) -> tuple[k2.Fsa, dict]:
    """CTC lexicon graph: state 0 is the word boundary; word w is a chain of token states with
    self-loops; its first token arc outputs w with a unigram score; word ends go back to state 0
    on blank, directly into any word starting with a different token, or to the final state."""
    lexicon = {}
    for w in range(1, num_words + 1):
        n = int(rng.integers(2, 6))
        toks = [int(rng.integers(1, num_tokens))]
        while len(toks) < n:
            t = int(rng.integers(1, num_tokens))
            if t != toks[-1]:
                toks.append(t)
        lexicon[w] = toks
    scores = np.log(rng.dirichlet(np.ones(num_words)))
    arcs = []
    state = 1
    starts, ends = [], []
    for w, toks in lexicon.items():
        first = state
        for i, t in enumerate(toks):
            arcs.append((state, state, t, 0, 0.0))
            if i + 1 < len(toks):
                arcs.append((state, state + 1, toks[i + 1], 0, 0.0))
            state += 1
        starts.append((w, toks[0], first, float(scores[w - 1])))
        ends.append((toks[-1], state - 1))
    final = state
    arcs.append((0, 0, 0, 0, 0.0))
    arcs.append((0, final, -1, -1, 0.0))
    for w, t, s, sc in starts:
        arcs.append((0, s, t, w, sc))
    for last, e in ends:
        arcs.append((e, 0, 0, 0, 0.0))
        arcs.append((e, final, -1, -1, 0.0))
        for w, t, s, sc in starts:
            if t != last:
                arcs.append((e, s, t, w, sc))
    arcs.sort(key=lambda a: a[0])
    text = "\n".join(f"{a} {b} {c} {d} {e!r}" for a, b, c, d, e in arcs) + f"\n{final}"
    return k2.arc_sort(k2.Fsa.from_str(text, acceptor=False)), lexicon


def hmm_graph(rng: np.random.Generator, num_words: int, num_phones: int) -> tuple[k2.Fsa, dict]:
    """Monophone HCLG-like graph: 2 HMM states (pdfs) per phone with self-loop and forward
    transition scores, pdf ids as labels (no blank), words on each word's first arc, unigram
    word scores; after a word any word may follow, or the utterance may end."""
    lexicon = {w: [int(p) for p in rng.integers(0, num_phones, size=int(rng.integers(2, 5)))]
               for w in range(1, num_words + 1)}
    scores = np.log(rng.dirichlet(np.ones(num_words)))
    arcs, chains, state = [], [], 1
    for w, phones in lexicon.items():
        pdfs = [2 * p + k for p in phones for k in range(2)]
        states = list(range(state, state + len(pdfs)))
        state += len(pdfs)
        chains.append((w, pdfs, states))
        for i, (pdf, st) in enumerate(zip(pdfs, states)):
            arcs.append((st, st, pdf, 0, -0.4))
            if i + 1 < len(pdfs):
                arcs.append((st, st + 1, pdfs[i + 1], 0, -1.1))
    final = state
    for src in [0] + [c[2][-1] for c in chains]:
        for w, pdfs, states in chains:
            arcs.append((src, states[0], pdfs[0], w, float(scores[w - 1])))
        if src:
            arcs.append((src, final, -1, -1, 0.0))
    arcs.sort(key=lambda a: a[0])
    text = "\n".join(f"{a} {b} {c} {d} {e!r}" for a, b, c, d, e in arcs) + f"\n{final}"
    pdf_lexicon = {w: pdfs for w, pdfs, _ in chains}
    return k2.arc_sort(k2.Fsa.from_str(text, acceptor=False)), pdf_lexicon


def to_kaldi_fst(fsa: k2.Fsa):
    """kaldi-decoder's graph convention: input label = k2 label + 1, weight = -score, k2's -1
    arcs become final weights."""
    import kaldifst

    arcs = fsa.arcs.values()[:, :3].tolist()
    scores = fsa.scores.double().tolist()
    aux = fsa.aux_labels.tolist()
    lines, finals = [], {}
    for (src, dst, label), score, a in zip(arcs, scores, aux):
        if label == -1:
            finals[src] = max(finals.get(src, -float("inf")), score)
        else:
            lines.append(f"{src} {dst} {label + 1} {max(a, 0)} {-score!r}")
    lines.extend(f"{s} {-w!r}" for s, w in finals.items())
    return kaldifst.compile("\n".join(lines), acceptor=False)


def make_inputs(rng, lexicon, num_tokens, utts, frames, blank=True):
    """Peaked log-probs: a random word string, each token held 1-3 frames (blanks between)."""
    lp = np.full((utts, frames, num_tokens), 0.0, dtype=np.float32)
    lengths = []
    words = list(lexicon)
    for u in range(utts):
        seq = []
        while len(seq) < frames:
            for t in lexicon[int(rng.choice(words))]:
                seq += [t] * int(rng.integers(1, 4)) + [0] * int(blank and rng.integers(0, 2))
        n = int(rng.integers(frames // 2, frames + 1))
        seq = seq[:n]
        logits = rng.normal(size=(n, num_tokens)).astype(np.float32)
        logits[np.arange(n), seq] += 5.0
        lp[u, :n] = logits
        lengths.append(n)
    x = torch.from_numpy(lp).log_softmax(-1)
    return x, torch.tensor(lengths)


def kaldi_decode(fst, log_probs, lengths, beam, max_active, min_active):
    import kaldi_decoder as kd
    import kaldifst

    opts = kd.FasterDecoderOptions(beam=beam, max_active=max_active, min_active=min_active)
    decoder = kd.FasterDecoder(fst, opts)
    out = []
    for i in range(log_probs.shape[0]):
        decoder.decode(kd.DecodableCtc(log_probs[i, : lengths[i]].numpy()))
        ok, lat = decoder.get_best_path()
        _, _, olabels, w = kaldifst.get_linear_symbol_sequence(lat)
        out.append((tuple(olabels), -(w.value1 + w.value2)))
    return out


def best_time(repeat: int, fn, *args):
    """``(seconds, result)`` of the fastest of ``repeat`` calls ``fn(*args)`` (the machine may
    be shared)."""
    best = None
    for _ in range(max(1, repeat)):
        t0 = time.perf_counter()
        result = fn(*args)
        elapsed = time.perf_counter() - t0
        best = elapsed if best is None else min(best, elapsed)
    return best, result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--words", type=int, default=300)
    p.add_argument("--tokens", type=int, default=40)
    p.add_argument("--utts", type=int, default=16)
    p.add_argument("--frames", type=int, default=300)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--repeat", type=int, default=3, help="timings are the best of this many runs")
    args = p.parse_args()
    torch.set_num_threads(1)
    rng = np.random.default_rng(args.seed)
    print(f"{args.utts} utterances of up to {args.frames} frames per graph; torch threads: "
          f"{torch.get_num_threads()}; kaldi-decoder FasterDecoder beam = search_beam, same "
          "min/max active")
    print()
    print("| graph | beam (search/output) | k2dec 1best frames/s | kaldi-decoder frames/s "
          "| k2dec speed / kaldi speed | same words | max score diff | higher score: k2dec/kaldi |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    hlg, lexicon = lexicon_graph(rng, args.words, args.tokens)
    hlg_inputs = make_inputs(rng, lexicon, args.tokens, args.utts, args.frames)
    hclg, pdf_lexicon = hmm_graph(rng, args.words, args.tokens // 2)
    hclg_inputs = make_inputs(rng, pdf_lexicon, args.tokens, args.utts, args.frames, blank=False)
    for name, graph, (log_probs, lengths) in (
        (f"HLG-like CTC ({hlg.num_arcs} arcs)", hlg, hlg_inputs),
        (f"HCLG-like HMM ({hclg.num_arcs} arcs)", hclg, hclg_inputs),
    ):
        fst = to_kaldi_fst(graph)
        total_frames = int(lengths.sum())
        for search_beam, output_beam in ((8.0, 4.0), (12.0, 6.0), (20.0, 8.0)):
            config = LatticeConfig(search_beam=search_beam, output_beam=output_beam)
            one_best_decoding(log_probs[:2], lengths[:2], graph, config)  # warm-up
            t_k2, hyps = best_time(
                args.repeat, one_best_decoding, log_probs, lengths, graph, config
            )
            t_kd, ref = best_time(
                args.repeat, kaldi_decode, fst, log_probs, lengths, search_beam,
                config.max_active_states, config.min_active_states,
            )
            same = sum(h.words == r[0] for h, r in zip(hyps, ref))
            diff = max(abs(h.score - r[1]) for h, r in zip(hyps, ref))
            k2_better = sum(h.score > r[1] + 1e-3 for h, r in zip(hyps, ref))
            kd_better = sum(r[1] > h.score + 1e-3 for h, r in zip(hyps, ref))
            print(f"| {name} | {search_beam:g}/{output_beam:g} | {total_frames / t_k2:,.0f} | "
                  f"{total_frames / t_kd:,.0f} | {t_kd / t_k2:.2f} | {same}/{len(hyps)} | "
                  f"{diff:.2e} | {k2_better}/{kd_better} |")
    graph, (log_probs, lengths) = hlg, hlg_inputs
    total_frames = int(lengths.sum())
    print()
    cores = available_cores()
    print(f"DecodeRunner scaling on the HLG-like graph (default beams, {cores} cores available)")
    print()
    print("| workers | frames/s | speed-up vs 1 | identical to 1 process |")
    print("| --- | --- | --- | --- |")
    base_rate = None
    expected = one_best_decoding(log_probs, lengths, graph)
    for workers in sorted({1, 2, cores}):
        with DecodeRunner(graph, num_workers=workers) as runner:
            runner.decode(log_probs[:workers], lengths[:workers])  # start-up and warm-up
            elapsed, hyps = best_time(args.repeat, runner.decode, log_probs, lengths)
            rate = total_frames / elapsed
        base_rate = base_rate or rate
        print(f"| {workers} | {rate:,.0f} | {rate / base_rate:.2f} | {hyps == expected} |")


if __name__ == "__main__":
    main()
