"""Batch scaling: fast_beam_search over many streams and HLG decoding at several batch sizes.

The seed paper decodes 200+ transducer streams at once on a GPU; this area measures how
k2dec's batched searches scale with the number of utterances decoded together, on the
device given (``--device cuda`` on a machine with an NVIDIA GPU; CPU by default):

- ``fast_beam_search`` (one-best, trivial graph and LG) on the shipped model's encoder
  outputs, 1 / 16 / 64 / 256 streams (utterances of the shipped test sets, repeated when
  there are fewer);
- HLG 1best (``k2.intersect_dense_pruned``) on its CTC outputs at the same batch sizes.

Each row: decode time of the whole batch (best of ``--repeat``; every search returns Python
lists, so a CUDA run has finished when the timer stops), RTF (decode time / seconds of audio
in the batch), utterances per second, the speed-up over decoding the same utterances one at a
time (each timed alone once, in the same run), and whether every utterance got the same
hypothesis as when decoded alone (the searches are batch-invariant). The encoder runs once,
before timing; one torch thread on CPU.

    python -m scripts.bench.streams [--device cuda] [--quick | --smoke] [--report DIR]
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .common import Report, area_parser, best_time, device_name, one_thread
from .shipped import ShippedBatch, shipped_batch

AREA = "streams"
SIZES = (1, 16, 64, 256)
#: seconds of audio per encoder output frame of the shipped model (10 ms fbank, 4x subsampling)
FRAME_SECONDS = 0.04


@dataclass
class Inputs:
    """The shipped batch's network outputs on the device: encoder output ``(N, T, D)``, its
    lengths ``(N,)`` and the CTC log-probs ``(N, T, V)``."""

    enc: Any
    enc_lens: Any
    lp: Any
    #: search name -> utterance index -> (its hypothesis, seconds) when decoded alone
    alone: dict[str, dict[int, tuple[Any, float]]] = field(default_factory=dict)

    @property
    def size(self) -> int:
        return self.enc.size(0)

    def rows_of(self, indices: list[int]):
        """The batch of the given utterance indices, padded to its longest."""
        import torch

        idx = torch.tensor(indices, dtype=torch.int64)
        lens = self.enc_lens[idx]
        t = int(lens.max())
        return self.enc[idx, :t], lens, self.lp[idx, :t]


def systems(data: ShippedBatch, device) -> dict[str, Callable]:
    """search name -> decode(encoder_out, lengths, log_probs) returning hypotheses."""
    import torch

    from k2dec.lattice import LatticeConfig, one_best_decoding
    from k2dec.transducer import FastBeamSearchConfig, fast_beam_search

    transducer = data.assets.model.transducer
    graphs = data.assets.resources.graphs
    LG, HLG = graphs["LG"].to(device), graphs["HLG"].to(device)
    fbs_cfg, lat_cfg = FastBeamSearchConfig(), LatticeConfig()

    def fbs(graph):
        def run(e, lens, _lp):
            with torch.no_grad():
                return [h.tokens for h in fast_beam_search(transducer, e, lens, graph,
                                                            fbs_cfg).hyps]
        return run

    def hlg(_e, lens, lp_):
        return [list(h.words) for h in one_best_decoding(lp_, lens, HLG, lat_cfg)]

    return {"fast_beam_search (trivial graph)": fbs(None),
            "fast_beam_search (LG)": fbs(LG), "HLG 1best": hlg}


def measure(name: str, run: Callable, n: int, inputs: Inputs, repeat: int) -> list:
    """One search at batch size ``n``: the table row (each utterance also decoded alone once,
    the first time it is met)."""
    indices = [i % inputs.size for i in range(n)]
    batch = inputs.rows_of(indices)
    seconds, hyps = best_time(repeat, run, *batch)
    alone = inputs.alone.setdefault(name, {})
    for i in indices:
        if i not in alone:
            t, h = best_time(1, run, *inputs.rows_of([i]))
            alone[i] = (h[0], t)
    same = all(alone[i][0] == h for i, h in zip(indices, hyps))
    one_by_one = sum(alone[i][1] for i in indices)
    audio = float(batch[1].sum()) * FRAME_SECONDS
    print(f"{name} x{n}: {seconds:.3f} s, RTF {seconds / audio:.4f}, "
          f"{one_by_one / seconds:.2f}x one by one, same as alone: {same}", flush=True)
    return [name, n, round(seconds, 4), f"{seconds / audio:.5f}", round(n / seconds, 1),
            round(one_by_one / seconds, 2), same]


def write_report(rows: list[list], device, device_arg: str, n_avail: int, repeat: int,
                 out_dir: str | None) -> None:
    dev_name = device_name(device)
    rep = Report(
        area=AREA, title=f"Batch scaling: many streams and HLG batch sizes ({device.type})",
        settings=(f"Device: {dev_name} ({device_arg}). The shipped model's encoder outputs "
                  f"({n_avail} utterances of the shipped test sets, repeated to fill a batch) "
                  "decoded together; fast_beam_search with FastBeamSearchConfig() defaults "
                  "(beam 20, max_contexts 8, max_states 64), HLG 1best with LatticeConfig() "
                  f"defaults; best of {repeat} runs; one torch thread."),
    )
    rep.table("Decode time per batch, RTF, and speed-up over decoding the same utterances one "
              "at a time",
              ["search", "streams / batch size", "batch time s", "RTF", "utterances/s",
               "speed-up vs one at a time", "same hypotheses as alone"], rows)
    invariant = all(r[-1] for r in rows)
    rep.target("every utterance gets the hypothesis it gets alone, at every batch size",
               "yes" if invariant else "no: " + ", ".join(f"{r[0]} x{r[1]}" for r in rows
                                                            if not r[-1]), invariant)
    if device.type != "cuda":
        rep.note("CPU run: the GPU figures (the seed paper: 200+ streams at RTF 0.0025 on a "
                 "V100) need `--device cuda` on a machine with k2's CUDA build.")
    rep.write(out_dir)


def main() -> None:
    p = area_parser(__doc__, AREA)
    p.add_argument("--device", default="cpu", help="torch device (cpu, cuda, cuda:1, ...)")
    p.add_argument("--repeat", type=int, default=None, help="timing repeats (best kept)")
    args = p.parse_args()
    one_thread()
    import torch

    device = torch.device(args.device)
    sizes = (1, 2) if args.smoke else (1, 16) if args.quick else SIZES
    repeat = args.repeat or (1 if args.smoke else 2 if args.quick else 3)
    data = shipped_batch(max_cuts=4 if args.smoke else None)
    data.assets.model.to(device).eval()
    inputs = Inputs(data.encoder_out.to(device), data.encoder_lens.to(device),
                    data.ctc_log_probs.to(device))
    rows = [measure(name, run, n, inputs, repeat)
            for name, run in systems(data, device).items() for n in sizes]
    write_report(rows, device, args.device, inputs.size, repeat, args.report)


if __name__ == "__main__":
    main()
