"""The word check of compiled graphs (which lexicon words no arc can output)."""

from __future__ import annotations

import logging

import k2
import pytest

from k2dec.graph import GraphCheck, check_graph_words, compile_graph, graph_words, load_graph
from k2dec.lang import write_lang_dir
from k2dec.testing.lang import TINY_ARPA, TINY_LEXICON


def test_words_the_lm_lacks_are_named_and_homophones_are_kept(tmp_path, caplog):
    lang = write_lang_dir(tmp_path / "lang", TINY_LEXICON + [("NOLM", ["c", "a"])])
    arpa = tmp_path / "lm.arpa"
    arpa.write_text(TINY_ARPA)
    words = {w for w, _ in TINY_LEXICON}
    with caplog.at_level(logging.WARNING, logger="k2dec.graph"):
        HLG, path = compile_graph(lang.path, "HLG", arpa=arpa)
    assert "can never be decoded: NOLM" in caplog.text and str(path) in caplog.text
    assert graph_words(HLG, lang.word_table) == words  # D and E (homophones) both
    check = check_graph_words(HLG, lang.word_table, words | {"NOLM"})
    assert check == GraphCheck(HLG.shape[0], HLG.num_arcs, 8, ("NOLM",))
    L = load_graph(lang.path / "L.pt")  # tensor aux_labels
    assert graph_words(L, lang.word_table) == words | {"NOLM"}
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="k2dec.graph"):
        compile_graph(lang.path, "H")
    assert caplog.text == ""


def test_describe_names_at_most_max_words():
    check = GraphCheck(3, 4, 30, tuple(f"W{i:02d}" for i in range(25)))
    text = check.describe(max_words=2)
    assert text.startswith("3 states, 4 arcs; WARNING: 25 of 30 lexicon words are on no arc")
    assert text.endswith("W00, W01 (and 23 more)")
    assert GraphCheck(3, 4, 30, ()).describe() == (
        "3 states, 4 arcs; all 30 lexicon words are on some arc")


def test_check_graph_words_validation():
    fsa = k2.Fsa.from_str("0 1 1 0\n1 2 -1 0\n2", acceptor=True)
    with pytest.raises(ValueError, match="aux_labels"):
        graph_words(fsa, k2.SymbolTable())
    with pytest.raises(ValueError, match="FsaVec"):
        check_graph_words(k2.create_fsa_vec([fsa]), k2.SymbolTable(), [])
