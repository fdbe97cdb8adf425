#!/usr/bin/env python3
"""Data preparation for the LibriSpeech recipe (icefall-style stages).

    # a real LibriSpeech download (LibriSpeech/train-clean-100, dev-clean, ...) or the offline
    # synthetic corpus made by scripts/make_synthetic_corpus.py
    python recipes/librispeech/prepare.py --corpus-dir /path/to/LibriSpeech --data-dir data

Stages (``--stage`` / ``--stop-stage``; each is skipped when its outputs exist):
  0  lhotse manifests                      data/manifests/
  1  80-bin fbank                          data/fbank/
  2  LM text and word list                 data/lm/text.txt, data/lm/words.txt
  3  BPE lang dir (sentencepiece unigram)  data/lang_bpe_<V>/
  4  phone lang dir (CMUdict)              data/lang_phone/
  5  3-gram and 4-gram ARPA (kaldingram)   data/lm/3gram.arpa, data/lm/4gram.arpa
  6  graphs: HLG and LG (3-gram), G_4_gram.pt for rescoring, in the BPE lang dir
"""

from __future__ import annotations

import logging
from pathlib import Path

import click

from k2dec.data import compute_fbank, corpus_parts, prepare_manifests
from k2dec.data.text import normalize_text
from k2dec.graph import prepare_decoding_graphs, train_arpa, write_lexicon_graphs
from k2dec.lang import (
    bpe_lexicon,
    bpe_token_table,
    cmudict_lexicon,
    load_bpe_model,
    train_bpe_model,
    write_lang_dir,
)

logger = logging.getLogger("prepare")


def lm_text(corpus_dir: Path, manifests: dict, out: Path) -> Path:
    """The LM text: the corpus' own LM text if it ships one (``lm/lm-norm.txt``), else the
    transcripts of the training parts."""
    if out.is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    shipped = corpus_dir / "lm" / "lm-norm.txt"
    if shipped.is_file():
        lines = shipped.read_text().splitlines()
    else:
        lines = [s.text for part, m in manifests.items() if part.startswith("train")
                 for s in m["supervisions"]]
    lines = [normalize_text(x) for x in lines]
    out.write_text("\n".join(x for x in lines if x) + "\n")
    return out


@click.command()
@click.option("--corpus-dir", required=True, type=click.Path(exists=True, file_okay=False,
                                                             path_type=Path))
@click.option("--data-dir", default=Path("data"), type=click.Path(path_type=Path),
              show_default=True)
@click.option("--vocab-size", default=256, show_default=True, help="BPE vocabulary size.")
@click.option("--stage", default=0, show_default=True)
@click.option("--stop-stage", default=6, show_default=True)
@click.option("--num-jobs", default=1, show_default=True, help="fbank extraction processes.")
def main(corpus_dir: Path, data_dir: Path, vocab_size: int, stage: int, stop_stage: int,
         num_jobs: int) -> None:
    """Prepare manifests, features, lang dirs, LMs and graphs."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")

    def run(n: int) -> bool:
        return stage <= n <= stop_stage

    manifests_dir, fbank_dir, lm_dir = data_dir / "manifests", data_dir / "fbank", data_dir / "lm"
    bpe_dir, phone_dir = data_dir / f"lang_bpe_{vocab_size}", data_dir / "lang_phone"
    if run(0) or run(2):
        logger.info("stage 0: manifests for %s", corpus_parts(corpus_dir))
        manifests = prepare_manifests(corpus_dir, manifests_dir)
    if run(1):
        logger.info("stage 1: fbank")
        compute_fbank(manifests_dir, fbank_dir, num_jobs=num_jobs)
    text = lm_dir / "text.txt"
    if run(2):
        logger.info("stage 2: LM text")
        lm_text(corpus_dir, manifests, text)
        words = sorted({w for line in text.read_text().splitlines() for w in line.split()})
        (lm_dir / "words.txt").write_text("\n".join(words) + "\n")
    if run(3):
        logger.info("stage 3: BPE lang dir %s", bpe_dir)
        model = train_bpe_model(text, bpe_dir, vocab_size)
        sp = load_bpe_model(model)
        words = (lm_dir / "words.txt").read_text().split()
        lang = write_lang_dir(bpe_dir, bpe_lexicon(sp, words), tokens=bpe_token_table(sp),
                              blank="<blk>")
        write_lexicon_graphs(lang.path)
    if run(4):
        logger.info("stage 4: phone lang dir %s", phone_dir)
        words = (lm_dir / "words.txt").read_text().split()
        lexicon, oov = cmudict_lexicon(words)
        if oov:
            logger.warning("%d words not in CMUdict are left out of the phone lexicon", len(oov))
        write_lang_dir(phone_dir, lexicon)
        write_lexicon_graphs(phone_dir, sil_token="SIL", sil_prob=0.5)
    if run(5):
        logger.info("stage 5: n-gram LMs")
        train_arpa(text, lm_dir / "3gram.arpa", order=3)
        train_arpa(text, lm_dir / "4gram.arpa", order=4)
    if run(6):
        logger.info("stage 6: graphs in %s", bpe_dir)
        prepare_decoding_graphs(bpe_dir, lm_dir / "3gram.arpa", lm_dir / "4gram.arpa")
    logger.info("done")


if __name__ == "__main__":
    main()
