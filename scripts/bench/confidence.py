"""Benchmark area "confidence": MBR decoding and word confidences from lattices on the shipped
model's outputs (issue 17).

Lattice kinds: ``HLG`` (CTC log-probs through the shipped HLG, the demo's settings:
``hlg_scale`` 0.4, ``output_beam`` 4) and ``fast_beam_search_LG`` (transducer lattices through
the shipped LG at icefall's default ``ngram_lm_scale`` 0.01, other settings icefall's
defaults). For each kind, test set and
acoustic scale of the posteriors:

- WER of the best path (``1best`` / ``fast_beam_search_LG``) and of the MBR consensus
  (``k2dec.lattice.mbr``, Xu et al.'s recursion, as Kaldi's ``lattice-mbr-decode``);
- quality of the word confidences (the words' sausage posteriors, as Kaldi's
  ``lattice-to-ctm-conf``): NCE, AUC of correct vs wrong words (kaldialign alignment against
  the reference), expected calibration error; a reliability plot;
- time of the MBR step relative to producing the lattices, in the same run (one torch thread).

Acoustic scale 1.0 is the untuned headline; the other scales are shown for information (they
are chosen on the test sets themselves, so they are optimistic). Lattice posteriors are
overconfident (pruned lattices, a sharp model), which NCE punishes; Kaldi recipes calibrate
them on held-out data, and so does ``k2dec tune`` (Platt scaling fit on the dev words, applied
to CTM files). The "calibrated" NCE column does that with held-out words by 2-fold
cross-fitting over the two test sets: Platt scaling fit on one set's words, applied to the
other's. The confidence targets are on these held-out-calibrated confidences (NCE > 0) and
on the raw ones' ranking (AUC > 0.5, which calibration does not change); the raw NCE is
reported beside them, not a target.

Usage (from the repository root)::

    python -m scripts.bench.confidence [--quick | --smoke] [--report DIR]
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from .common import SHIPPED, Report, area_parser, mode_of, one_thread, wer
from .shipped import ShippedBatch, scaled_graph, shipped_batch

AREA = "confidence"
HLG_SCALE = 0.4  # the demo's (tuned on the recipe's dev-clean split)
NGRAM_LM_SCALE = 0.01  # icefall's default for fast_beam_search_LG
OUTPUT_BEAM = 4.0  # the demo's
ACOUSTIC_SCALES = (0.25, 0.5, 1.0)


@dataclass(frozen=True)
class Sizes:
    cuts: int  # cuts per shipped test set (None: all)
    batch: int  # utterances per lattice batch


MODES = {"full": Sizes(0, 25), "quick": Sizes(30, 30), "smoke": Sizes(3, 3)}


def _kind_lattices(kind: str, b: ShippedBatch, idx: torch.Tensor, graphs: dict):
    """Lattices of the utterances ``idx`` and their topology."""
    from k2dec.lattice import LatticeConfig, Topology, get_lattice
    from k2dec.transducer import FastBeamSearchConfig, fast_beam_search

    n = int(b.encoder_lens[idx].max())
    if kind == "HLG":
        lat = get_lattice(b.ctc_log_probs[idx, :n], b.encoder_lens[idx], graphs["HLG"],
                          LatticeConfig(output_beam=OUTPUT_BEAM)).lattice
        return lat, Topology.CTC
    lat = fast_beam_search(b.assets.model, b.encoder_out[idx, :n], b.encoder_lens[idx],
                           graphs["LG"], FastBeamSearchConfig()).lattice
    return lat, Topology.TRANSDUCER


def _cross_fitted(per_set, test_sets, fit):
    """Confidences calibrated 2-fold across the test sets (Platt scaling fit on the other
    sets' words, applied to each set), with their correctness; None if a fit is impossible."""
    if len(test_sets) < 2:
        return None
    confs, correct = [], []
    for ts in test_sets:
        train_c = [x for o in test_sets if o != ts for x in per_set[o][0]]
        train_y = [x for o in test_sets if o != ts for x in per_set[o][1]]
        try:
            cal = fit(train_c, train_y)
        except ValueError:
            return None
        confs += cal(per_set[ts][0]).tolist()
        correct += per_set[ts][1]
    return confs, correct


@dataclass
class KindOutput:
    """One lattice kind on every utterance: per (acoustic scale, MBR or not) each utterance's
    words and confidences, and the seconds spent on lattices, confidences and MBR."""

    out: dict[tuple[float, bool], dict[int, tuple[list[str], list[float]]]] = field(
        default_factory=dict)
    t_lat: float = 0.0
    t_mbr: dict[float, float] = field(default_factory=lambda: {s: 0.0 for s in ACOUSTIC_SCALES})
    t_conf: dict[float, float] = field(default_factory=lambda: {s: 0.0 for s in
                                                                ACOUSTIC_SCALES})


def decode_kind(kind: str, b: ShippedBatch, batches: list[torch.Tensor], graphs: dict,
                word_start) -> KindOutput:
    """Lattices of each batch, then the 1best and MBR words with confidences at every
    acoustic scale, timed apart."""
    from k2dec.lattice.mbr import MbrConfig
    from k2dec.lattice.posteriors import PosteriorConfig
    from k2dec.lattice.timed_units import lattice_timed_units

    table = b.assets.lang.word_table
    res = KindOutput()
    for idx in batches:
        start = time.perf_counter()
        with torch.no_grad():
            lat, topo = _kind_lattices(kind, b, idx, graphs)
        res.t_lat += time.perf_counter() - start
        for scale in ACOUSTIC_SCALES:
            for mbr in (False, True):
                cfg = MbrConfig(posterior=PosteriorConfig(acoustic_scale=scale), decode_mbr=mbr)
                start = time.perf_counter()
                units, _ = lattice_timed_units(lat, topo, cfg, word_start=word_start)
                (res.t_mbr if mbr else res.t_conf)[scale] += time.perf_counter() - start
                ids, confs = units.ids.tolist(), units.confidences.tolist()
                got = res.out.setdefault((scale, mbr), {})
                for j, u in enumerate(idx.tolist()):
                    got[u] = ([table.get(w) for w in ids[j]], confs[j])
    return res


@dataclass
class Tables:
    """The report's rows, the targets' WERs and the reliability curves, over both kinds."""

    wer_rows: list[list] = field(default_factory=list)
    conf_rows: list[list] = field(default_factory=list)
    time_rows: list[list] = field(default_factory=list)
    curves: dict = field(default_factory=dict)
    targets: list[tuple] = field(default_factory=list)
    held_out_nce: dict = field(default_factory=dict)  # scale 1: NCE after held-out calibration


def wer_row(kind: str, scale: float, res: KindOutput, b: ShippedBatch,
            test_sets: list[str]) -> list:
    """The 1best and MBR WER of each test set and of all utterances."""
    row = [kind, scale]
    for ts in test_sets + ["all"]:
        utts = [u for u in range(len(b.refs)) if ts == "all" or b.test_sets[u] == ts]
        for mbr in (False, True):
            row.append(wer([b.refs[u] for u in utts],
                           [res.out[(scale, mbr)][u][0] for u in utts]))
    return row


def confidence_rows(kind: str, scale: float, res: KindOutput, b: ShippedBatch,
                    test_sets: list[str], tables: Tables) -> None:
    """Confidence metrics of the 1best and the MBR words (raw and 2-fold calibrated)."""
    from k2dec.results import (
        confidence_metrics,
        fit_calibration,
        normalized_cross_entropy,
        word_correctness,
    )

    for mbr in (False, True):
        per_set: dict[str, tuple[list[float], list[bool]]] = {}
        for u in range(len(b.refs)):
            words, c = res.out[(scale, mbr)][u]
            confs, correct = per_set.setdefault(b.test_sets[u], ([], []))
            confs += [min(1.0, max(0.0, x)) for x in c]
            correct += word_correctness(b.refs[u], words)
        confs = [x for ts in test_sets for x in per_set[ts][0]]
        correct = [x for ts in test_sets for x in per_set[ts][1]]
        m = confidence_metrics(confs, correct)
        calibrated = _cross_fitted(per_set, test_sets, fit_calibration)
        cal_nce = (normalized_cross_entropy(calibrated[0], calibrated[1])
                   if calibrated else float("nan"))
        name = f"{kind} {'MBR' if mbr else '1best'}"
        accuracy = 100.0 * m.num_correct / max(1, m.num_words)
        tables.conf_rows.append([name, scale, m.num_words, accuracy, m.mean_confidence, m.nce,
                                 cal_nce, m.auc, m.ece])
        if scale == 1.0:
            tables.curves[name] = m
            tables.held_out_nce[name] = cal_nce
            if calibrated and not mbr:
                tables.curves[f"{name}, calibrated"] = confidence_metrics(*calibrated)


def kind_rows(kind: str, res: KindOutput, b: ShippedBatch, test_sets: list[str],
              tables: Tables) -> None:
    for scale in ACOUSTIC_SCALES:
        row = wer_row(kind, scale, res, b, test_sets)
        tables.wer_rows.append(row)
        if scale == 1.0:
            tables.targets.append((kind, row[-2], row[-1]))
        confidence_rows(kind, scale, res, b, test_sets, tables)
        tables.time_rows.append([kind, scale, res.t_lat, res.t_conf[scale], res.t_mbr[scale],
                                 res.t_conf[scale] / res.t_lat, res.t_mbr[scale] / res.t_lat])


def write_report(report: Report, tables: Tables, test_sets: list[str], out_dir) -> None:
    from k2dec.results import plot_reliability

    headers = ["lattice", "acoustic scale"]
    for ts in test_sets + ["all"]:
        headers += [f"{ts} 1best WER %", f"{ts} MBR WER %"]
    report.table("WER of the best path and of the MBR consensus", headers, tables.wer_rows)
    report.table("Word confidences (sausage posteriors of the output words), both test sets",
                 ["output", "acoustic scale", "words", "correct %", "mean confidence", "NCE",
                  "NCE calibrated (2-fold)", "AUC", "ECE"], tables.conf_rows)
    report.table("Time (s) to make the lattices, and of the confidence / MBR step after them",
                 ["lattice", "acoustic scale", "lattices", "1best confidences", "MBR",
                  "confidences / lattices", "MBR / lattices"], tables.time_rows)
    for kind, wer_1best, wer_mbr in tables.targets:
        report.target(f"{kind}: MBR WER <= 1best WER (acoustic scale 1, both test sets)",
                      f"{wer_mbr:.2f}% vs {wer_1best:.2f}%", wer_mbr <= wer_1best)
    for name, m in tables.curves.items():
        if name.endswith("calibrated"):
            continue
        cal_nce = tables.held_out_nce.get(name, float("nan"))
        report.target(f"{name}: calibrated on held-out words (2-fold Platt), confidences "
                      "better than a constant (NCE > 0), AUC > 0.5",
                      f"calibrated NCE {cal_nce:.3f} (raw {m.nce:.3f}), AUC {m.auc:.3f}",
                      cal_nce > 0 and m.auc > 0.5)
    path = report.plot_path(out_dir, "confidence_reliability.png")
    if path is not None:
        plot_reliability(tables.curves, path, title="Word confidences on the shipped test sets "
                                                    "(acoustic scale 1)")
    report.note("Raw lattice posteriors at acoustic scale 1 rank words well (AUC) but are "
                "over-confident (mean confidence above the fraction correct), which NCE "
                "punishes, down to below 0; the NCE targets are stated on confidences "
                "Platt-calibrated on held-out words, as Kaldi recipes and k2dec tune calibrate "
                "them (here: fit on one test set, applied to the other), raw NCE beside them.")
    report.note("Confidences are Kaldi's lattice-to-ctm-conf definition (the posterior of the "
                "word in its sausage bin, Xu et al.'s recursion); the recursion is tested "
                "against a plain-Python transcription of Kaldi's MinimumBayesRisk.")


def main() -> None:
    args = area_parser(__doc__, AREA).parse_args()
    mode = mode_of(args)
    sizes = MODES[mode]
    one_thread()
    from k2dec.lang import bpe_word_start_mask

    report = Report(AREA, "MBR decoding and word confidences from lattices")
    if not (SHIPPED / "model.pt").is_file():
        report.note("the shipped model is missing: nothing to measure")
        report.write(args.report)
        return
    b = shipped_batch(max_cuts=sizes.cuts or None)
    graphs = {"HLG": scaled_graph(b.assets.resources.graphs["HLG"], HLG_SCALE, lm_scores=True),
              "LG": scaled_graph(b.assets.resources.graphs["LG"], NGRAM_LM_SCALE)}
    word_start = bpe_word_start_mask(b.assets.lang.token_table)
    test_sets = sorted(set(b.test_sets))
    n = len(b.refs)
    counts = ", ".join(f"{b.test_sets.count(t)} of {t}" for t in test_sets)
    report.settings = (
        f"{mode} mode: {n} utterances ({counts}), "
        f"lattice batches of {sizes.batch}, one torch thread; HLG: hlg_scale {HLG_SCALE}, "
        f"output_beam {OUTPUT_BEAM}; fast_beam_search_LG: icefall's defaults. Times are wall "
        "seconds on a machine shared with other jobs; compare the ratios of one run only.")
    order = torch.argsort(b.encoder_lens, descending=True)
    batches = [order[i:i + sizes.batch] for i in range(0, n, sizes.batch)]
    tables = Tables()
    for kind in ("HLG", "fast_beam_search_LG"):
        kind_rows(kind, decode_kind(kind, b, batches, graphs, word_start), b, test_sets, tables)
    write_report(report, tables, test_sets, args.report)
    report.write(args.report)


if __name__ == "__main__":
    main()
