"""References holding characters the vocabulary lacks (after scoring's normalization: case and
punctuation at word edges do not count) get one warning per test set naming how many and a
few examples: the model can never output those words, so the WER counts them as errors."""

from __future__ import annotations

import logging

from lhotse import CutSet
from lhotse.utils import fastcopy

from k2dec.job import load_assets, plan_methods, run_decode
from k2dec.job.checks import unknown_characters, vocabulary_characters

LOGGER = "k2dec.job.checks"


def _texts(cuts, texts):
    return CutSet.from_cuts(fastcopy(c, supervisions=[fastcopy(c.supervisions[0], text=t)])
                            for c, t in zip(cuts, texts))


def test_vocabulary_characters_are_the_words_and_pieces(decode_setup):
    s = decode_setup
    known, name = vocabulary_characters(load_assets(s["model_path"], s["lang_dir"]))
    assert "words.txt" in name and "BPE model" in name
    # the words of the lang dir's text, upper case; no markup (<UNK>, #0) or word-start mark
    assert set("THECASDOGRNMIWE") <= known and not {"<", ">", "#", "\u2581"} & known
    assert unknown_characters(["Hello? cat!", "THE CAT"], frozenset("HELOCAT")) == {}
    assert unknown_characters(["Café naïve", "CAFÉ"], frozenset("CAFENIV")) == {"É": 2, "Ï": 1}


def test_one_warning_per_test_set_naming_count_and_examples(decode_setup, tmp_path, caplog):
    s = decode_setup
    cuts = list(s["cuts"])[:3]
    sets = {"odd": _texts(cuts, ["THE CATÉ SAT", "A ranï DOG?", "Ünder THE CATÉ"]),
            "clean": _texts(cuts, ["The cat sat.", "A DOG, RAN", "\"HOME\" IS"])}
    runs = plan_methods(["ctc-greedy-search", "greedy_search"])
    assets = load_assets(s["model_path"], s["lang_dir"])
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        run_decode(assets, sets, runs, tmp_path)
    warned = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    assert len(warned) == 1, warned  # once for the test set, not per method or cut
    assert warned[0].startswith("odd: the references hold 3 characters not in ")
    assert "(4 times, in 3 words; e.g. 'É', 'Ï', 'Ü' in CATÉ, RANÏ, ÜNDER)" in warned[0]
