"""An icefall-sized model on a GPU: the encoder included, 1 / 16 / 64 / 256 streams.

The seed paper decodes 200+ transducer streams at RTF 0.0025 on a V100 with an 80M-parameter
model, the network included. This area measures the same kind of figure for k2dec's batched
searches with a model of that size, on the device given:

- the model: a seeded random :class:`k2dec.model.JointModel` of icefall's sizes (Conformer
  encoder of 12 layers, dimension 512, 8 heads, feed-forward 2048, kernel 31; stateless decoder
  and joiner of dimension 512, context 2; CTC head; vocabulary 500: 76M parameters, 73M of them
  in the encoder). Random weights, with two changes so that the outputs behave like a trained
  model's. The joiner's and the CTC head's input projections standardize the encoder output
  (mean and deviation per dimension, measured on a separate random batch): a random deep
  encoder's output frames point nearly the same way (cosine 0.9 between frames), so without
  this every frame would give the same distribution. And their output weights are scaled and
  the blank logits raised so that the distributions are peaked as a trained model's (measured
  on a random batch: the transducer's greedy search emits about 0.3 tokens per frame, and
  about 0.3 of the CTC head's frames are not blank, highest probability 0.86 on average) where
  a freshly initialized model's are nearly flat, which makes every search explore far more
  than it does on speech;
- the inputs: seeded random 80-dimensional features of 4 to 8 seconds (10 ms frames);
- the searches: greedy_search (batched, max_sym_per_frame 1), fast_beam_search one-best with
  a trivial graph and with an LG (a random lexicon of 2000 words and a random bigram LM, as
  the transducer area's icefall-sized model), modified_beam_search (beam 4), and HLG 1best
  on the CTC head (the HLG of the same lexicon and LM, ``k2.intersect_dense_pruned``), each
  with its config's defaults.

Each row times one batch: the encoder (and CTC head) plus the search, best of ``--repeat``
after one untimed warm-up batch per search (every search returns Python lists, so a CUDA run
has finished when the timer stops); the encoder's share; the RTF (time / seconds of audio in
the batch) and its inverse RTFx (audio seconds per second, the Open ASR Leaderboard's measure),
end to end and of the search alone (encoder time left out); utterances per second; the peak
GPU memory of the batch (CUDA only); and whether the first utterances of the batch of 16 get
the hypotheses they get when searched alone from the same encoder output rows.

Not one of ``make bench``'s areas: on a CPU one batch of 256 takes minutes with this model.
Run it by hand on a GPU machine and keep the report in docs/bench/gpu/ (``--smoke``: a 2-layer
encoder, 1 and 2 streams, to try the code)::

    python -m scripts.bench.large_model --device cuda --report docs/bench/gpu [--budget S]
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .common import Report, area_parser, device_name, one_thread

AREA = "large_model"
SIZES = (1, 16, 64, 256)
VOCAB = 500
#: utterance durations (seconds), uniform; feature frames are 10 ms
SECONDS = (4.0, 8.0)
#: the joiner's and the CTC head's output weights are multiplied by these and the blank
#: logit raised (after their inputs are standardized), so that about 0.3 tokens per frame
#: are emitted (the shipped trained model: 0.29)
JOINER_SCALE, JOINER_BLANK_BIAS = 4.0, 3.8
CTC_SCALE, CTC_BLANK_BIAS = 4.0, 13.0
#: utterances of the random batch the encoder output statistics are measured on
CALIBRATION_UTTS = 4
#: utterances of the batch of 16 also searched alone (batch invariance)
ALONE = 4
INVARIANCE_SIZE = 16


def large_model(seed: int, device, num_layers: int = 12):
    """The seeded random icefall-sized JointModel (see the module docstring), in eval mode on
    ``device`` (``num_layers``: encoder layers; ``--smoke`` runs 2)."""
    import torch

    from k2dec.model import JointConfig, JointModel
    from k2dec.model.conformer import ConformerConfig

    enc = ConformerConfig(num_features=80, d_model=512, nhead=8, num_layers=num_layers,
                          dim_feedforward=2048, conv_kernel=31, dropout=0.0)
    torch.manual_seed(seed)
    model = JointModel(JointConfig(vocab_size=VOCAB, encoder=enc, decoder_dim=512,
                                   joiner_dim=512)).eval().to(device)
    cal = random_batch(CALIBRATION_UTTS, seed + 1, device)
    with torch.no_grad():
        enc, lens = model.encoder(cal.feats, cal.lens)
        frames = enc[torch.arange(enc.size(1), device=device)[None] < lens[:, None]]
        mean, std = frames.mean(0), frames.std(0)
        for proj in (model.joiner.encoder_proj, model.ctc_output[-1]):
            proj.weight.div_(std)
            proj.bias.sub_(proj.weight @ mean)
        model.joiner.output_linear.weight.mul_(JOINER_SCALE)
        model.joiner.output_linear.bias[0] += JOINER_BLANK_BIAS
        ctc = model.ctc_output[-1]
        ctc.weight.mul_(CTC_SCALE)
        ctc.bias[0] += CTC_BLANK_BIAS
    return model


@dataclass
class Batch:
    """Features ``(N, T, 80)`` and their lengths ``(N,)`` on the device."""

    feats: Any
    lens: Any

    def first(self, n: int) -> Batch:
        t = int(self.lens[:n].max())
        return Batch(self.feats[:n, :t], self.lens[:n])

    @property
    def seconds(self) -> float:
        return float(self.lens.sum()) * 0.01


def random_batch(n: int, seed: int, device) -> Batch:
    import torch

    g = torch.Generator().manual_seed(seed)
    lo, hi = (int(s * 100) for s in SECONDS)
    lens = torch.randint(lo, hi + 1, (n,), generator=g)
    feats = torch.randn(n, int(lens.max()), 80, generator=g)
    return Batch(feats.to(device), lens.to(device))


def searches(model, device, seed: int) -> dict[str, Callable]:
    """search name -> search(encoder_out, lengths) returning hypotheses (token or word lists)."""
    from k2dec.lattice import LatticeConfig, one_best_decoding
    from k2dec.transducer import (
        FastBeamSearchConfig,
        fast_beam_search,
        greedy_search,
        modified_beam_search,
    )

    from .transducer import random_graph

    LG = random_graph(VOCAB, seed, "LG").to(device)
    HLG = random_graph(VOCAB, seed, "HLG").to(device)
    fbs_cfg, lat_cfg = FastBeamSearchConfig(), LatticeConfig()

    def fbs(graph):
        def run(enc, lens):
            return [h.tokens for h in fast_beam_search(model, enc, lens, graph, fbs_cfg).hyps]
        return run

    def greedy(enc, lens):
        return [h.tokens for h in greedy_search(model, enc, lens)]

    def mbs(enc, lens):
        return [h.tokens for h in modified_beam_search(model, enc, lens)]

    def hlg(enc, lens):
        lp = model.ctc_log_probs(enc)
        return [list(h.words) for h in one_best_decoding(lp, lens, HLG, lat_cfg)]

    return {"greedy_search (batched)": greedy, "fast_beam_search (trivial graph)": fbs(None),
            "fast_beam_search (LG)": fbs(LG), "modified_beam_search (beam 4)": mbs,
            "HLG 1best (CTC head)": hlg}


def _sync(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(model, search: Callable, batch: Batch, device) -> tuple[float, float, list, Any]:
    """(encoder seconds, total seconds, hypotheses, encoder output and lengths) of one batch."""
    import torch

    with torch.no_grad():
        _sync(device)
        t0 = time.perf_counter()
        enc, enc_lens = model.encoder(batch.feats, batch.lens)
        _sync(device)
        t1 = time.perf_counter()
        hyps = search(enc, enc_lens)
        t2 = time.perf_counter()
    return t1 - t0, t2 - t0, hyps, (enc, enc_lens)


def same_as_alone(search: Callable, hyps: list, enc_out) -> bool:
    """Whether the first :data:`ALONE` utterances get ``hyps`` when searched one at a time
    from the same encoder output rows."""
    import torch

    enc, lens = enc_out
    with torch.no_grad():
        return all(search(enc[i:i + 1, :int(lens[i])], lens[i:i + 1])[0] == hyps[i]
                   for i in range(min(ALONE, len(hyps))))


def measure(model, name: str, search: Callable, n: int, data: Batch, device,
            repeat: int, invariance_size: int = INVARIANCE_SIZE) -> list:
    import torch

    batch = data.first(n)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    best = None
    for _ in range(repeat):
        run = timed(model, search, batch, device)
        if best is None or run[1] < best[1]:
            best = run
    enc_s, total, hyps, enc_out = best
    peak = (f"{torch.cuda.max_memory_allocated(device) / 2**20:.0f}" if device.type == "cuda"
            else "")
    same = same_as_alone(search, hyps, enc_out) if n == invariance_size else ""
    frames = int(enc_out[1].sum())
    units = sum(len(h) for h in hyps) / max(frames, 1)
    print(f"{name} x{n}: {total:.3f} s (encoder {enc_s:.3f} s), RTF "
          f"{total / batch.seconds:.5f}, peak {peak} MiB, units/frame {units:.3f}"
          + (f", same as alone: {same}" if same != "" else ""), flush=True)
    search_s = max(total - enc_s, 1e-9)
    return [name, n, round(batch.seconds, 2), round(total, 4), round(enc_s, 4),
            f"{total / batch.seconds:.5f}", round(batch.seconds / total, 1),
            round(batch.seconds / search_s, 1), round(n / total, 1), peak, round(units, 3), same]


HEADERS = ["search", "streams / batch size", "audio s", "encoder + search s", "of which encoder s",
           "RTF", "RTFx (audio s per s)", "search-only RTFx", "utterances/s", "peak GPU MiB",
           "output units per encoder frame",
           f"same hypotheses as alone (first {ALONE} of {INVARIANCE_SIZE}; --smoke: of 2)"]


def write_report(rows: list[list], skipped: list[str], device, n_params: float, repeat: int,
                 out_dir: str | None) -> None:
    dev_name = device_name(device)
    rep = Report(
        area=AREA, title=f"An icefall-sized model, encoder included ({device.type})",
        settings=(f"Device: {dev_name} ({device.type}). A seeded random JointModel of "
                  f"icefall's sizes ({n_params:.1f}M parameters: Conformer encoder 12 x 512, "
                  "8 heads, "
                  "feed-forward 2048; decoder and joiner 512, context 2; vocabulary 500; "
                  "joiner and CTC head scaled to peaked outputs) on seeded random features "
                  f"of {SECONDS[0]:g}-{SECONDS[1]:g} s; float32 (torch's default: no TF32 "
                  "matmuls); each search with its config's defaults (fast_beam_search beam "
                  "20, max_contexts 8, max_states 64; modified_beam_search beam 4; HLG "
                  "LatticeConfig()); the LG and HLG of a random 2000-word lexicon and bigram "
                  f"LM; best of {repeat} after a warm-up batch; one torch thread."))
    rep.table("Encoder + search time per batch, RTF and peak memory", HEADERS, rows)
    inv = [r for r in rows if r[-1] != ""]
    ok = all(r[-1] for r in inv)
    rep.target("the first utterances of a batch get the hypotheses they get alone",
               "yes" if ok else "no: " + ", ".join(r[0] for r in inv if not r[-1]),
               ok if inv else None)
    rep.note("The seed paper: 200+ streams at RTF 0.0025 on a V100 with an 80M-parameter "
             "model, network included. Here the RTF column includes the encoder (and the CTC "
             "head), not feature extraction; the random model's outputs are peaked like a "
             "trained model's but its hypotheses are not speech (the last column but one says "
             "how many tokens or words each search emitted per encoder frame).")
    for s in skipped:
        rep.note(f"not measured (the --budget ran out): {s}")
    rep.write(out_dir)


def main(argv: list[str] | None = None) -> None:
    p = area_parser(__doc__, AREA)
    p.add_argument("--device", default="cpu", help="torch device (cpu, cuda, cuda:1, ...)")
    p.add_argument("--repeat", type=int, default=None, help="timing repeats (best kept)")
    p.add_argument("--budget", type=float, default=None,
                   help="seconds: start no new batch after this (the rest is reported as "
                        "not measured)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    one_thread()
    import torch

    t_start = time.perf_counter()
    device = torch.device(args.device)
    sizes = (1, 2) if args.smoke else (1, 16) if args.quick else SIZES
    repeat = args.repeat or (1 if args.smoke else 2)
    model = large_model(args.seed, device, 2 if args.smoke else 12)
    n_params = sum(p.numel() for p in model.parameters()) / 1e6
    data = random_batch(max(sizes), args.seed, device)
    rows, skipped = [], []
    for name, search in searches(model, device, args.seed).items():
        inv = min(INVARIANCE_SIZE, max(sizes))
        timed(model, search, data.first(inv), device)  # warm-up
        for n in sizes:
            if args.budget is not None and time.perf_counter() - t_start > args.budget:
                skipped.append(f"{name} x{n}")
                continue
            rows.append(measure(model, name, search, n, data, device, repeat, inv))
    write_report(rows, skipped, device, n_params, repeat, args.report)


if __name__ == "__main__":
    main()
