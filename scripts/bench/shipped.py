"""Real inputs for the benchmark areas: the shipped model's outputs on the shipped test sets,
its graphs (scaled as a method scales them) and the corpus' LM text."""

from __future__ import annotations

import gzip
import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .common import SHIPPED, WORK

__all__ = ["ShippedBatch", "lm_text", "scaled_graph", "shipped_batch", "token_bigram_arpa"]


@dataclass
class ShippedBatch:
    """The shipped model's outputs on the shipped test sets (real inputs for benchmarks).

    ``feats``/``feat_lens``: fbank ``(N, T, 80)`` float32 / ``(N,)`` int64;
    ``encoder_out``/``encoder_lens``: ``(N, T', D)`` / ``(N,)``;
    ``ctc_log_probs``: ``(N, T', V)`` float32 log-softmax (blank = 0);
    ``refs``: reference word lists; ``cut_ids``; ``test_sets``: each cut's test set.
    ``assets`` is k2dec.job.DecodeAssets (model, lang dir, BPE model, graphs
    ``resources.graphs["HLG" | "LG" | "G" | "H"]``); ``lang_dir`` (the shipped one) holds
    words.txt, tokens.txt, lexicon.txt; ``graph_dir`` HLG.pt, LG.pt, G_4_gram.pt; ``arpa`` maps
    "3gram"/"4gram" to uncompressed copies of the shipped ARPA files (for the peers)."""

    feats: Any
    feat_lens: Any
    encoder_out: Any
    encoder_lens: Any
    ctc_log_probs: Any
    refs: list[list[str]]
    cut_ids: list[str]
    test_sets: list[str]
    assets: Any
    lang_dir: Path
    arpa: dict[str, Path]
    graph_dir: Path


def shipped_batch(max_cuts: int | None = None, test_sets: tuple[str, ...] = ("test-clean",
                  "test-other"), work_dir: str | Path | None = None) -> ShippedBatch:
    """Run the shipped model's encoder on the first ``max_cuts`` cuts (sorted by id) of each
    shipped test set. Graphs and features are cached under ``work_dir`` (default
    ``exp/bench/work``), built once by k2dec.demo.prepare_demo."""
    import torch
    from lhotse import CutSet

    from k2dec.demo import prepare_demo
    from k2dec.job import load_assets

    work = Path(work_dir) if work_dir is not None else WORK
    lang, graphs, cut_paths = prepare_demo(SHIPPED, work)
    dec = load_assets(SHIPPED / "model.pt", lang, graph_dir=graphs)
    feats, ids, refs, sets = [], [], [], []
    for ts in test_sets:
        cuts = sorted(CutSet.from_file(cut_paths[ts]), key=lambda c: c.id)
        for c in cuts[:max_cuts] if max_cuts else cuts:
            feats.append(torch.from_numpy(c.load_features()))
            ids.append(c.id)
            refs.append(c.supervisions[0].text.split())
            sets.append(ts)
    lens = torch.tensor([f.shape[0] for f in feats], dtype=torch.int64)
    x = torch.nn.utils.rnn.pad_sequence(feats, batch_first=True)
    with torch.no_grad():
        enc, enc_lens = dec.model(x, lens)
        lp = dec.model.ctc_log_probs(enc)
    arpa = {n: _gunzip(SHIPPED / "lm" / f"{n}.arpa.gz", work / "lm" / f"{n}.arpa")
            for n in ("3gram", "4gram")}
    return ShippedBatch(x, lens, enc, enc_lens, lp, refs, ids, sets, dec, lang, arpa, graphs)


def _gunzip(src: Path, dst: Path) -> Path:
    """An uncompressed copy of ``src`` at ``dst`` (made once)."""
    if not dst.is_file():
        dst.parent.mkdir(parents=True, exist_ok=True)
        tmp = dst.with_suffix(".tmp")
        with gzip.open(src, "rb") as f, open(tmp, "wb") as g:
            shutil.copyfileobj(f, g)
        tmp.replace(dst)
    return dst


def scaled_graph(graph, scale: float, lm_scores: bool = False):
    """A copy of a decoding graph (``k2.Fsa``) with its scores times ``scale``; with
    ``lm_scores`` the scaled scores are also copied to ``lm_scores`` (icefall's convention to
    split AM and LM in lattices), else the copy keeps the graph's own ``lm_scores``."""
    g = graph.clone()
    g.scores = graph.scores * scale
    if lm_scores:
        g.lm_scores = g.scores.clone()
    return g


def lm_text(work: Path = WORK) -> Path:
    """The corpus' LM text (sentences in no evaluation split), rebuilt from the fortunes text
    with the corpus maker's own functions and settings, normalized as the recipe does; cached
    under ``work``."""
    from k2dec.data.text import normalize_text
    from k2dec.train.synth import (
        FORTUNES_DIR,
        VOICE_CATALOG,
        CorpusConfig,
        load_sentences,
        plan_corpus,
    )

    out = work / "lm" / "lm_text.txt"
    if out.is_file():
        return out
    settings = json.loads((SHIPPED / "corpus" / "corpus.json").read_text())["config"]
    config = CorpusConfig(**{k: tuple(v) if isinstance(v, list) else v
                             for k, v in settings.items()})
    sentences = load_sentences([FORTUNES_DIR], config.min_words, config.max_words)
    _, lm = plan_corpus(sentences, list(VOICE_CATALOG), config)
    lines = [normalize_text(s) for s in lm]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(x for x in lines if x) + "\n")
    return out


def token_bigram_arpa(lang_dir: Path, work: Path = WORK) -> Path:
    """LODR's token bigram: trained with kaldingram on :func:`lm_text` over the lang dir's BPE
    pieces (cached under ``work``)."""
    from k2dec.scorers import train_token_arpa

    return train_token_arpa(lm_text(work), lang_dir / "bpe.model",
                            work / "lm" / "tokens_2gram.arpa", order=2)
