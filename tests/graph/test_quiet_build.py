"""Building graphs says nothing unless asked (``-v``): kaldilm's ``[I] Reading \\data\\
section`` (C++ on the process's stderr) goes to the log at INFO, and a lexicon's markup word
(``<UNK>``) that the n-gram LM lacks is not reported as a word that can never be decoded
(a text-trained LM has none); a real word the LM lacks still is."""

from __future__ import annotations

import logging

import pytest

from k2dec.graph import build_G, build_rescoring_G, prepare_decoding_graphs
from k2dec.lang import write_lang_dir
from k2dec.testing.lang import TINY_ARPA, TINY_LEXICON

KALDILM_NOISE = "Reading"


@pytest.mark.parametrize("build", [build_G, build_rescoring_G])
def test_kaldilm_is_quiet_unless_info_is_logged(tiny_lang, capfd, caplog, build):
    lang, arpa = tiny_lang
    with caplog.at_level(logging.WARNING):
        G = build(arpa, lang.word_table)
    assert G.num_arcs > 0
    out, err = capfd.readouterr()
    assert KALDILM_NOISE not in err and KALDILM_NOISE not in out
    assert not caplog.records
    with caplog.at_level(logging.INFO, logger="k2dec.graph.ngram"):
        build(arpa, lang.word_table)
    assert KALDILM_NOISE not in capfd.readouterr().err
    said = [r.getMessage() for r in caplog.records if r.name == "k2dec.graph.ngram"]
    assert any(KALDILM_NOISE in m and str(arpa) in m for m in said), said


def test_stderr_is_restored_after_kaldilm(tiny_lang, capfd):
    import os

    lang, arpa = tiny_lang
    build_G(arpa, lang.word_table)
    os.write(2, b"after\n")
    assert capfd.readouterr().err == "after\n"


def test_demo_style_graph_build_is_quiet(tmp_path, capfd, caplog):
    """A lexicon with <UNK> (as the shipped one) and an LM without it: HLG, LG and the
    rescoring G build without a word on stderr or a warning in the log."""
    lang = write_lang_dir(tmp_path / "lang", [("<UNK>", ["<unk>"])] + TINY_LEXICON)
    arpa = tmp_path / "lm.arpa"
    arpa.write_text(TINY_ARPA)
    with caplog.at_level(logging.WARNING):
        paths = prepare_decoding_graphs(lang.path, arpa, arpa, graph_dir=tmp_path / "graphs")
    assert set(paths) == {"HLG", "LG", "G"}
    out, err = capfd.readouterr()
    assert err == "" and KALDILM_NOISE not in out
    assert not caplog.records, [r.getMessage() for r in caplog.records]


def test_a_real_word_the_lm_lacks_is_still_news(tmp_path, caplog):
    lang = write_lang_dir(tmp_path / "lang", [("<UNK>", ["<unk>"]), ("NOLM", ["c", "a"])]
                          + TINY_LEXICON)
    arpa = tmp_path / "lm.arpa"
    arpa.write_text(TINY_ARPA)
    with caplog.at_level(logging.WARNING):
        prepare_decoding_graphs(lang.path, arpa, graph_dir=tmp_path / "graphs")
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 2 and all("1 of 8 lexicon words are on no arc and can never be "
                                    "decoded: NOLM" in w for w in warned), warned
