"""``make demo`` / ``k2dec demo``: the main job until a trained model ships.

What it does, plainly: it builds a phone lang dir (CMUdict) and a 3-gram LM
(kaldingram) from a few built-in sentences, compiles H and HLG, makes SYNTHETIC
CTC posteriors from known transcripts (peaked at the right phone, with noise and
random confusions), and decodes them with CTC greedy search, H (ctc-decoding) and
HLG (1best). Error rates measure how well the graph + LM repair the confusions;
they say nothing about a real acoustic model.
"""

from __future__ import annotations

import logging
import random
import time
from pathlib import Path

import torch

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


def run_demo(work_dir: str | Path, num_utts: int = 20, seed: int = 0) -> dict[str, float]:
    """Run the demo; returns ``{method: error rate}`` and prints a table."""
    import kaldialign

    from .graph import compile_graph, write_lexicon_graphs
    from .graph.ngram import train_arpa
    from .lang import cmudict_lexicon, write_lang_dir
    from .lattice import AuxLabels, LatticeConfig, ctc_greedy_search, one_best_decoding

    print(
        "k2dec demo: no trained acoustic model ships yet, so this demo compiles example\n"
        "graphs (CMUdict phone lexicon + kaldingram 3-gram -> H, HLG) and decodes SYNTHETIC\n"
        "CTC posteriors made from known transcripts with noise and ~15% phone confusions.\n"
        "The error rates show the graph + LM repairing those confusions, nothing more.\n"
    )
    work_dir = Path(work_dir)
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

    def error_rate(refs_, hyps_) -> float:
        errs = sum(kaldialign.edit_distance(r, h)["total"] for r, h in zip(refs_, hyps_))
        return 100.0 * errs / max(1, sum(len(r) for r in refs_))

    rows = []
    t0 = time.perf_counter()
    greedy = ctc_greedy_search(log_probs, lengths)
    rows.append(("ctc-greedy", "PER", error_rate(ref_phones, [list(h.tokens) for h in greedy]),
                 time.perf_counter() - t0))
    t0 = time.perf_counter()
    ctc = one_best_decoding(log_probs, lengths, H, LatticeConfig(), aux_labels=AuxLabels.TOKENS)
    rows.append(("ctc-decoding (H)", "PER", error_rate(ref_phones, [list(h.tokens) for h in ctc]),
                 time.perf_counter() - t0))
    t0 = time.perf_counter()
    hlg = one_best_decoding(log_probs, lengths, HLG, LatticeConfig())
    hyp_words = [[lang.word_table.get(i) for i in h.words] for h in hlg]
    rows.append(("1best (HLG)", "WER", error_rate(refs, hyp_words), time.perf_counter() - t0))

    print(f"\n{num_utts} synthetic utterances, {num_frames} frames, {vocab} outputs\n")
    print(f"{'method':<18} {'metric':<6} {'error %':>8} {'frames/s':>10}")
    for name, metric, err, secs in rows:
        print(f"{name:<18} {metric:<6} {err:8.2f} {num_frames / max(secs, 1e-9):10.0f}")
    for r, h in list(zip(refs, hyp_words))[:3]:
        print(f"\nREF: {' '.join(r)}\nHYP: {' '.join(h)}")
    return {name: err for name, _, err, _ in rows}
