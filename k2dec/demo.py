"""``make demo`` / ``k2dec demo``: the main job.

With the shipped model (``assets/librispeech-synth`` in the repository: a small joint
CTC / transducer / attention model trained by ``recipes/librispeech`` on the offline
synthetic corpus, its BPE lang dir, 3-gram and 4-gram LMs and two test sets of
synthesized speech) it compiles the decoding graphs from the gzipped LMs into a graph dir of
its own (the shipped lang dir is only read), extracts features, decodes the first
:data:`DEMO_CUTS` utterances of both test sets with every method whose resources ship, with
the methods' default settings and the shipped settings file (:data:`SHIPPED_SETTINGS`, scales
tuned by ``k2dec tune`` on the other utterances, see :func:`tune_shipped`), and writes icefall
result files, a WER / RTF table (``RESULTS.md``) and a plot of WER against RTF
(``wer_vs_rtf.png``).

Without it (e.g. a wheel install) it falls back to :func:`run_synthetic_demo`, which
decodes SYNTHETIC CTC posteriors through example graphs and says so.
"""

from __future__ import annotations

import logging
import math
import random
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from .primitives.sizes import MAX_DURATION

if TYPE_CHECKING:
    import k2

    from .job import DecodeSummary
    from .lang import LangDir, Lexicon

logger = logging.getLogger(__name__)

SENTENCES = [
    "THE CAT SAT ON THE MAT",
    "THE DOG SAT ON THE LOG",
    "A CAT AND A DOG RAN HOME",
    "THE MAN SAW THE CAT",
    "THE DOG SAW A MAN ON THE ROAD",
    "SHE READ THE BOOK AT HOME",
    "HE WROTE A LETTER TO HIS MOTHER",
    "THE SUN IS HOT TODAY",
    "WE WALKED DOWN THE ROAD TO THE RIVER",
    "THE RIVER RAN PAST THE OLD MILL",
    "HIS MOTHER READ HIM A BOOK",
    "THE OLD MAN SAT BY THE RIVER",
    "A LETTER CAME FOR THE OLD MAN TODAY",
    "SHE SAW THE SUN ON THE RIVER",
    "THE CAT RAN DOWN THE ROAD",
    "WE READ THE LETTER AT HOME",
    "THE MILL IS OLD AND THE ROAD IS LONG",
    "HE SAT ON THE LOG BY THE MILL",
]


def _synthetic_log_probs(
    phone_ids: list[int], vocab: int, rng: random.Random, gen: torch.Generator,
    confusion: float = 0.15,
) -> torch.Tensor:
    """Frames for ``phone_ids`` (2-4 frames each, blanks between), peaked log-probs with
    noise; a fraction ``confusion`` of phones peaks at a random wrong phone instead."""
    frames: list[int] = [0]
    for p in phone_ids:
        shown = p if rng.random() > confusion else rng.randint(1, vocab - 1)
        frames += [shown] * rng.randint(2, 4) + [0] * rng.randint(0, 2)
    frames.append(0)
    logits = torch.randn(len(frames), vocab, generator=gen) * 1.5
    logits[torch.arange(len(frames)), torch.tensor(frames)] += 6.0
    return logits.log_softmax(dim=-1)


def run_synthetic_demo(work_dir: str | Path, num_utts: int = 20, seed: int = 0
                       ) -> dict[str, float]:
    """Decode synthetic posteriors through example graphs; returns ``{method: error rate}``
    and prints a table."""
    from .lattice import AuxLabels, LatticeConfig, ctc_greedy_search, one_best_decoding

    print(
        "k2dec demo: the shipped model is not in this installation (wheels carry no assets),\n"
        "so this demo compiles example graphs (CMUdict phone lexicon + kaldingram 3-gram ->\n"
        "H, HLG) and decodes SYNTHETIC CTC posteriors made from known transcripts with noise\n"
        "and ~15% phone confusions. The error rates show the graph + LM repairing those\n"
        "confusions, nothing more.\n"
    )
    lang, lexicon, H, HLG = _demo_graphs(Path(work_dir))
    rng = random.Random(seed)
    gen = torch.Generator().manual_seed(seed)
    vocab = lang.max_token_id + 1
    lex = dict(lexicon)
    refs = [rng.choice(SENTENCES).split() for _ in range(num_utts)]
    ref_phones = [[lang.token_table.get(p) for w in r for p in lex[w]] for r in refs]
    feats = [_synthetic_log_probs(p, vocab, rng, gen) for p in ref_phones]
    lengths = torch.tensor([f.shape[0] for f in feats], dtype=torch.int32)
    log_probs = torch.nn.utils.rnn.pad_sequence(feats, batch_first=True)
    num_frames = int(lengths.sum())

    rows = []
    t0 = time.perf_counter()
    greedy = ctc_greedy_search(log_probs, lengths)
    rows.append(("ctc-greedy", "PER", _error_rate(ref_phones, [list(h.tokens) for h in greedy]),
                 time.perf_counter() - t0))
    t0 = time.perf_counter()
    ctc = one_best_decoding(log_probs, lengths, H, LatticeConfig(), aux_labels=AuxLabels.TOKENS)
    rows.append(("ctc-decoding (H)", "PER",
                 _error_rate(ref_phones, [list(h.tokens) for h in ctc]), time.perf_counter() - t0))
    t0 = time.perf_counter()
    hlg = one_best_decoding(log_probs, lengths, HLG, LatticeConfig())
    hyp_words = [[lang.word_table.get(i) for i in h.words] for h in hlg]
    rows.append(("1best (HLG)", "WER", _error_rate(refs, hyp_words), time.perf_counter() - t0))

    print(f"\n{num_utts} synthetic utterances, {num_frames} frames, {vocab} outputs\n")
    print(f"{'method':<18} {'metric':<6} {'error %':>8} {'frames/s':>10}")
    for name, metric, err, secs in rows:
        print(f"{name:<18} {metric:<6} {err:8.2f} {num_frames / max(secs, 1e-9):10.0f}")
    for r, h in list(zip(refs, hyp_words))[:3]:
        print(f"\nREF: {' '.join(r)}\nHYP: {' '.join(h)}")
    return {name: err for name, _, err, _ in rows}


def _demo_graphs(work_dir: Path) -> tuple[LangDir, Lexicon, k2.Fsa, k2.Fsa]:
    """The demo's lang dir (CMUdict phones of :data:`SENTENCES`' words), its lexicon, and H and
    HLG (with a 3-gram trained on the sentences) compiled under ``work_dir``."""
    from .graph import compile_graph, write_lexicon_graphs
    from .graph.ngram import train_arpa
    from .lang import cmudict_lexicon, write_lang_dir

    work_dir.mkdir(parents=True, exist_ok=True)
    text = work_dir / "lm_text.txt"
    text.write_text("\n".join(SENTENCES) + "\n")
    words = sorted({w for s in SENTENCES for w in s.split()})
    lexicon, oov = cmudict_lexicon(words, max_prons=1, add_silence_entries=False)
    if oov:
        raise RuntimeError(f"demo words missing from CMUdict: {oov}")
    lang = write_lang_dir(work_dir / "lang", lexicon)
    write_lexicon_graphs(lang.path)
    arpa = train_arpa(text, work_dir / "lm_3gram.arpa", order=3)
    t0 = time.perf_counter()
    H, _ = compile_graph(lang.path, "H")
    HLG, _ = compile_graph(lang.path, "HLG", arpa=arpa)
    print(f"compiled H ({H.num_arcs} arcs) and HLG ({HLG.num_arcs} arcs) in "
          f"{time.perf_counter() - t0:.2f}s under {lang.path}")
    return lang, lexicon, H, HLG


def _error_rate(refs: Sequence[Sequence], hyps: Sequence[Sequence]) -> float:
    """Edit distance of ``hyps`` to ``refs`` in percent of the reference length."""
    import kaldialign

    errs = sum(kaldialign.edit_distance(r, h)["total"] for r, h in zip(refs, hyps))
    return 100.0 * errs / max(1, sum(len(r) for r in refs))


#: Where the shipped model and test sets live (a source checkout; absent from wheels).
ASSETS = Path(__file__).resolve().parents[1] / "assets" / "librispeech-synth"

#: The shipped model's settings file (``k2dec decode --config``): scales picked by
#: ``k2dec tune`` on utterances of the shipped test sets that the demo does not report (see
#: :func:`tune_shipped`).
SHIPPED_SETTINGS = ASSETS / "decode.json"

#: The shipped token bigram of the LODR methods (``k2dec train-token-lm`` on the LM text),
#: in ``ASSETS / "lm"``.
SHIPPED_TOKEN_LM = "token_2gram.arpa.gz"

_MBS_VARIANT = ("a neural-LM or LODR variant of modified_beam_search, which the demo runs; left "
                "out to keep the demo short")

#: Registered methods the demo leaves out, each with the reason (``k2dec demo --method NAME``
#: runs any of them). The demo runs every other registered method (:func:`demo_methods`), so
#: a newly registered method is in the demo unless it is added here.
DEMO_LEAVES_OUT: dict[str, str] = {
    "beam_search": "icefall's classic search, one symbol per step: the slowest transducer "
                   "search, and modified_beam_search (in the demo) is its batched successor",
    "modified_beam_search_lm_shallow_fusion": _MBS_VARIANT,
    "modified_beam_search_LODR": _MBS_VARIANT,
    "modified_beam_search_lm_rescore": _MBS_VARIANT,
    "modified_beam_search_lm_rescore_LODR": _MBS_VARIANT,
    "ctc-prefix-beam-search": "the demo's CTC searches are ctc-greedy-search and the lattice "
                              "methods",
    "ctc-prefix-beam-search-shallow-fussion": "a variant of ctc-prefix-beam-search (left out)",
    "ctc-prefix-beam-search-attention-decoder-rescoring": "a variant of ctc-prefix-beam-search "
                                                          "(left out)",
    "attention-decoder-rescoring-no-ngram": "attention-decoder (in the demo) rescores with the "
                                            "n-gram too",
    "fast_beam_search_with_nbest_rescoring": "fast_beam_search_nbest_LG (in the demo) has the "
                                             "word n-gram in its graph",
    "fast_beam_search_with_nbest_rnn_rescoring": "scores every sampled path with the RNN LM: "
                                                 "the slowest method",
}


def demo_methods() -> tuple[str, ...]:
    """The methods the demo runs: every registered method but :data:`DEMO_LEAVES_OUT`, in the
    order of ``--list-methods`` (those needing a neural LM are skipped when none ships)."""
    from .methods import family_order, list_methods

    return tuple(m.name for m in family_order(list_methods()) if m.name not in DEMO_LEAVES_OUT)


def __getattr__(name: str):
    if name == "DEMO_METHODS":  # the tuple this module used to hold: derived from the registry
        return demo_methods()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: Utterances of each shipped test set the demo reports (the first, sorted by id); the others
#: are the dev set of :func:`tune_shipped`.
DEMO_CUTS = 30


def prepare_demo(assets: Path, work_dir: Path) -> tuple[Path, Path, dict[str, Path]]:
    """Decoding graphs (HLG, LG from the shipped 3-gram, G_4_gram from the 4-gram; the
    gzipped ARPA files are read as they are) under ``work_dir/graphs`` and fbank cuts of the
    shipped test sets under ``work_dir`` (idempotent). The shipped lang dir is only read.

    Returns:
      ``(lang_dir, graph_dir, {test_set: cuts_path})``.
    """
    from .data import compute_fbank, prepare_manifests
    from .data.manifests import manifest_path
    from .graph import prepare_decoding_graphs

    lang, graphs = assets / "lang", work_dir / "graphs"
    prepare_decoding_graphs(lang, assets / "lm" / "3gram.arpa.gz",
                            assets / "lm" / "4gram.arpa.gz", graph_dir=graphs)
    prepare_manifests(assets / "corpus", work_dir / "manifests")
    cuts = compute_fbank(work_dir / "manifests", work_dir / "fbank", progress=False)
    return lang, graphs, {part: manifest_path(work_dir / "fbank", "cuts", part) for part in cuts}


def _shipped_assets(assets: Path, work_dir: Path):
    """``(DecodeAssets, {test_set: sorted cuts}, rnn_lm path)`` of the shipped model."""
    from lhotse import CutSet

    from .job import load_assets

    lang, graphs, cut_paths = prepare_demo(assets, work_dir)
    rnn_lm, lodr = assets / "lm" / "rnn_lm.pt", assets / "lm" / SHIPPED_TOKEN_LM
    dec = load_assets(assets / "model.pt", lang, graph_dir=graphs,
                      lm_paths={"rnn_lm": rnn_lm} if rnn_lm.is_file() else None,
                      lodr_arpa=lodr if lodr.is_file() else None)
    cuts = {t: sorted(CutSet.from_file(p), key=lambda c: c.id)
            for t, p in sorted(cut_paths.items()) if not t.startswith("train")}
    return dec, cuts, rnn_lm


def plot_wer_vs_rtf(rows: Sequence[DecodeSummary], path: Path) -> Path:
    """Scatter each row's WER (its configured setting's) against its RTF, one marker per
    (test set, method)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 6))
    plotted = 0
    for test_set, marker in (("test-clean", "o"), ("test-other", "s")):
        # a row without a WER or a timed RTF (every cut failed) has no place on the plot
        pts = [(r.rtf, r.headline[1], r.method) for r in rows if r.test_set == test_set
               and math.isfinite(r.headline[1]) and math.isfinite(r.rtf) and r.rtf > 0]
        if not pts:
            continue
        plotted += len(pts)
        ax.scatter([p[0] for p in pts], [p[1] for p in pts], marker=marker, label=test_set)
        for x, y, name in pts:
            ax.annotate(name, (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
    if plotted:
        ax.set_xscale("log")
        ax.legend()
    ax.set_xlabel("real-time factor (decode seconds / audio seconds, log scale)")
    ax.set_ylabel("WER %")
    ax.set_title("k2dec: WER vs speed of each decoding method (shipped model)")
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def run_demo(work_dir: str | Path, num_utts: int = 20, seed: int = 0,
             methods: tuple[str, ...] | None = None, assets: Path | None = None,
             max_duration: float = MAX_DURATION, max_cuts: int | None = DEMO_CUTS,
             settings: Path | None = None, overrides: tuple[str, ...] = (),
             ) -> list[DecodeSummary]:
    """The main job (see the module docstring): the shipped test sets' first ``max_cuts``
    utterances decoded with every method, the methods' default settings and the shipped
    settings file (``settings``, default :data:`SHIPPED_SETTINGS` when it exists: what
    ``k2dec decode --config`` reads), then ``overrides`` (``KEY=VALUE``). Returns one row per
    test set and method (empty for the synthetic-posterior fallback)."""
    import torch
    from lhotse import CutSet

    from .job import (
        DecodeConfig,
        plan_methods,
        read_settings,
        results_table,
        run_decode,
        split_available,
    )
    from .methods import get_method

    assets = ASSETS if assets is None else Path(assets)
    work_dir = Path(work_dir)
    if not (assets / "model.pt").is_file():
        print(f"no shipped model under {assets}; running the synthetic-posterior demo")
        run_synthetic_demo(work_dir, num_utts=num_utts, seed=seed)
        return []
    torch.set_num_threads(min(2, torch.get_num_threads()))
    if settings is None and (assets / SHIPPED_SETTINGS.name).is_file():
        settings = assets / SHIPPED_SETTINGS.name
    print(f"k2dec demo: decoding {max_cuts or 'all'} utterances of each shipped test set with "
          f"the shipped model ({assets.name}), every method's default settings"
          + (f", the tuned scales of {settings}" if settings else "")
          + (f" and {', '.join(overrides)}" if overrides else ""))
    dec, all_cuts, rnn_lm = _shipped_assets(assets, work_dir)
    ok, lacking = split_available([get_method(m) for m in methods or demo_methods()],
                                  dec.resources)
    for name, needs in lacking.items():
        print(f"skipping {name}: missing {', '.join(needs)} (e.g. {rnn_lm} for a neural LM)")
    runs = plan_methods(ok, overrides, require_used=False,
                        settings=read_settings(settings) if settings else None)
    test_sets = {t: CutSet.from_cuts(c[:max_cuts] if max_cuts else c)
                 for t, c in all_cuts.items()}
    rows = run_decode(dec, test_sets, runs, work_dir / "decode",
                      DecodeConfig(max_duration=max_duration, num_buckets=4))
    table = results_table(rows)
    (work_dir / "RESULTS.md").write_text(table + "\n")
    plot = plot_wer_vs_rtf(rows, work_dir / "wer_vs_rtf.png")
    print(table)
    print(f"\nresult files under {work_dir / 'decode'}; table {work_dir / 'RESULTS.md'}; "
          f"plot {plot}")
    return rows


#: What :func:`tune_shipped` tunes: each method with its scale sweep (if it has one) and a
#: grid of other fields (``k2dec tune --grid``).
TUNE_PLAN: dict[str, tuple[str, ...]] = {
    "nbest-rescoring": (),
    "whole-lattice-rescoring": (),
    "attention-decoder": (),
    "rnn-lm": (),
    "multi-pass": ("multi_pass.lm_scale=0.3,0.5,0.7,0.9",),
    "attention-beam-search": ("fusion.ctc_weight=0.0,0.3,0.5",),
}


def tune_shipped(work_dir: str | Path, out: str | Path, assets: Path | None = None,
                 methods: Sequence[str] | None = None, max_duration: float = MAX_DURATION) -> Path:
    """Make the shipped settings file (:data:`SHIPPED_SETTINGS`) again: ``k2dec tune`` of each
    method of :data:`TUNE_PLAN` (or of ``methods``, with their plan's grid) on the utterances
    of the shipped test sets after the first :data:`DEMO_CUTS` (those the demo does not
    report). Writes ``out`` and returns its path; with ``methods``, the other methods'
    entries of an existing ``out`` are kept."""
    from lhotse import CutSet

    from .job import (
        DecodeConfig,
        plan_methods,
        read_settings,
        tune_methods,
        tuned_settings,
        write_settings,
    )

    assets = ASSETS if assets is None else Path(assets)
    work_dir = Path(work_dir)
    dec, all_cuts, _ = _shipped_assets(assets, work_dir)
    dev = {f"{t}[{DEMO_CUTS}:]": CutSet.from_cuts(c[DEMO_CUTS:]) for t, c in all_cuts.items()}
    cfg = DecodeConfig(max_duration=max_duration, num_buckets=4)
    results = []
    for name in methods or TUNE_PLAN:
        results += tune_methods(dec, dev, plan_methods([name]), work_dir / "tune",
                                TUNE_PLAN.get(name, ()), cfg)
    base = read_settings(out) if methods and Path(out).is_file() else None
    return write_settings(tuned_settings(results, list(dev), base), out)
