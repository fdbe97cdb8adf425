from __future__ import annotations

import math

import k2
import pytest
import torch

from k2dec.graph import build_G, build_L, check_arpa, train_arpa
from k2dec.testing.lang import TINY_ARPA, TINY_LEXICON


def test_check_arpa_accepts_tiny(tiny_lang):
    lang, arpa = tiny_lang
    info = check_arpa(arpa, lang.word_table)
    assert info.order == 2 and info.counts == (9, 6)


BAD_ARPAS = [
    (TINY_ARPA.replace("\\end\\\n", ""), "missing \\\\end\\\\"),
    (TINY_ARPA.replace("ngram 2=6", "ngram 2=7"), "ngram 2=7 but found 6"),
    (TINY_ARPA.replace("-0.1 A B", "x A B"), r"lm.arpa:\d+: 'x' is not a number"),
    (TINY_ARPA.replace("-0.1 A B", "-0.1 A ZEBRA"), r"lm.arpa:\d+: word 'ZEBRA' is not in words"),
    (TINY_ARPA.replace("-0.1 A B", "-0.1 A"), r"lm.arpa:\d+: a 2-gram line needs"),
    (TINY_ARPA.replace("-0.1 A B", "-0.1 A B -0.2"), r"lm.arpa:\d+: a 2-gram line needs"),
    (TINY_ARPA.replace("\\2-grams:", "\\3-grams:"), "not declared"),
    ("hello\nworld\n", "no \\\\data\\\\ header"),
    (TINY_ARPA.replace("ngram 1=9", "ngram one"), "expected 'ngram N=count'"),
    (TINY_ARPA.replace("-1.1 C -0.4", "nan C -0.4"), "not a finite log10 value"),
    # kaldilm aborts the process (SIGABRT) on these three: refused first
    (TINY_ARPA.replace("-1.1 C -0.4", "-inf C -0.4"), r"lm.arpa:\d+: '-inf' is not a finite"),
    (TINY_ARPA.replace("-1.1 C -0.4", "-1.1 C -inf"), r"lm.arpa:\d+: '-inf' is not a finite"),
    (TINY_ARPA.replace("ngram 1=9", "ngram 1=8").replace("-99 <s> -0.5\n", "")
     .replace("-0.2 <s> A\n", "-0.2 C A\n").replace("-0.6 <s> C\n", "-0.6 A C\n"),
     "the 1-grams have no <s>"),
    # without </s> kaldilm builds a G that accepts nothing
    (TINY_ARPA.replace("ngram 1=9", "ngram 1=8").replace("-1.0 </s>\n", "")
     .replace("-0.3 B </s>\n", "-0.3 B A\n"), "the 1-grams have no </s>"),
    # a strict reader's checks (kaldilm accepts these and builds a wrong G)
    (TINY_ARPA.replace("ngram 2=6", "ngram 2=7").replace("-0.5 D E\n", "-0.5 D E\n-0.9 D E\n"),
     r"lm.arpa:22: the n-gram 'D E' appears again \(first on line 21\)"),
    (TINY_ARPA.replace("ngram 1=9", "ngram 1=10").replace("-1.3 E -0.25\n",
                                                          "-1.3 E -0.25\n-0.2 A\n"),
     r"lm.arpa:15: the n-gram 'A' appears again \(first on line 8\)"),
    (TINY_ARPA.replace("-1.2 D -0.2", "0.2 D -0.2"), r"lm.arpa:13: log10 probability 0.2 is "
     "positive"),
]


@pytest.mark.parametrize("text, message", BAD_ARPAS)
def test_malformed_arpa_is_a_clear_error(tiny_lang, text, message):
    lang, arpa = tiny_lang
    arpa.write_text(text)
    with pytest.raises(ValueError, match=message):
        build_G(arpa, lang.word_table)


def test_build_G_needs_special_words(tiny_lang, tmp_path):
    from k2dec.lang import make_symbol_table

    _, arpa = tiny_lang
    table = make_symbol_table([("<eps>", 0), ("A", 1)])
    with pytest.raises(ValueError, match="words.txt has no '#0'"):
        build_G(arpa, table)


def test_max_order_1_drops_bigrams(tiny_lang):
    lang, arpa = tiny_lang
    G1 = build_G(arpa, lang.word_table, max_order=1)
    G2 = build_G(arpa, lang.word_table)
    assert G1.num_arcs < G2.num_arcs


def test_train_arpa_with_kaldingram(tmp_path):
    text = tmp_path / "text.txt"
    text.write_text("A B C\nA B\nB C A\n" * 5)
    arpa = train_arpa(text, tmp_path / "lm.arpa", order=2)
    info = check_arpa(arpa)
    assert info.order == 2 and {"A", "B", "C", "<s>", "</s>"} <= info.vocabulary
    with pytest.raises(ValueError, match="order"):
        train_arpa(text, tmp_path / "x.arpa", order=7)




def test_L_without_silence_spells_each_word(tiny_lang):
    lang, _ = tiny_lang
    L = build_L(lang.lexicon, lang.token_table, lang.word_table)
    tt, wt = lang.token_table, lang.word_table
    for word, pron in TINY_LEXICON:
        fsa = k2.linear_fsa([tt.get(t) for t in pron])
        inter = k2.intersect(fsa, k2.arc_sort(L), treat_epsilons_specially=True)
        inter = k2.connect(inter)
        words = {wt.get(int(w)) for w in inter.aux_labels.tolist() if w > 0}
        assert word in words
        assert torch.all(inter.scores == 0)


def test_L_with_optional_silence_scores(tiny_lang, tmp_path):
    from k2dec.lang import write_lang_dir

    # No "!SIL SIL" word here: it would offer a second, better path through SIL.
    lexicon = [("A", ["a"]), ("B", ["b"])]
    lang = write_lang_dir(tmp_path / "l2", lexicon, tokens=["SIL", "a", "b"])
    L = k2.arc_sort(build_L(lang.lexicon, lang.token_table, lang.word_table, "SIL", 0.3))
    tt = lang.token_table
    vec = k2.create_fsa_vec

    def best(tokens):
        inter = k2.connect(k2.intersect(k2.linear_fsa([tt.get(t) for t in tokens]), L,
                                        treat_epsilons_specially=True))
        return vec([inter]).get_tot_scores(use_double_scores=True, log_semiring=False).item()

    # "a b": no silence at start (0.7), after a (0.7), after b (0.7)
    assert best(["a", "b"]) == pytest.approx(3 * math.log(0.7), abs=1e-5)
    # "SIL a SIL b": silence at start (0.3) and after a (0.3), none after b (0.7)
    assert best(["SIL", "a", "SIL", "b"]) == pytest.approx(
        2 * math.log(0.3) + math.log(0.7), abs=1e-5)
    with pytest.raises(ValueError, match="sil_prob"):
        build_L(lang.lexicon, lang.token_table, lang.word_table, "SIL", 1.0)
    with pytest.raises(ValueError, match="silence token 'SPN'"):
        build_L(lang.lexicon, lang.token_table, lang.word_table, "SPN")


def test_L_bad_inputs(tiny_lang):
    lang, _ = tiny_lang
    with pytest.raises(ValueError, match="empty pronunciation"):
        build_L([("A", [])], lang.token_table, lang.word_table)
    with pytest.raises(ValueError, match="word 'ZZ' is not in words.txt"):
        build_L([("ZZ", ["a"])], lang.token_table, lang.word_table)
    with pytest.raises(ValueError, match="token 'q' not in tokens.txt"):
        build_L([("A", ["q"])], lang.token_table, lang.word_table)


def test_gzipped_arpa_builds_the_same_G(tiny_lang, tmp_path):
    import gzip

    lang, arpa = tiny_lang
    gz = tmp_path / "lm.arpa.gz"
    gz.write_bytes(gzip.compress(arpa.read_bytes()))
    assert check_arpa(gz, lang.word_table).counts == (9, 6)
    a, b = build_G(arpa, lang.word_table), build_G(gz, lang.word_table)
    assert torch.equal(a.arcs.values(), b.arcs.values())


def test_repeats_are_per_order_and_found_however_far_apart(tiny_lang):
    """``A`` as a unigram and ``A A`` / ``<s> A`` as bigrams are different n-grams; a repeat
    is found wherever it is (the check keeps a hash per n-gram, then reads both lines)."""
    lang, arpa = tiny_lang
    arpa.write_text(TINY_ARPA.replace("ngram 2=6", "ngram 2=7").replace(
        "-0.1 A B\n", "-0.1 A B\n-0.15 A A\n"))
    assert check_arpa(arpa, lang.word_table).counts == (9, 7)
    arpa.write_text(TINY_ARPA.replace("ngram 2=6", "ngram 2=7").replace(
        "-0.6 <s> C\n", "-0.6 <s> C\n-0.7 <s> A\n"))
    with pytest.raises(ValueError, match=r"lm.arpa:23: the n-gram '<s> A' appears again "
                                         r"\(first on line 17\)"):
        check_arpa(arpa, lang.word_table)


@pytest.mark.parametrize("form", ["crlf", "bom", "crlf+bom+gzip"])
def test_windows_line_ends_and_a_byte_order_mark_build_the_same_G(tiny_lang, tmp_path, form):
    """kaldilm reads a CRLF file's ``\\r`` as part of the last field, and aborts the process
    on a byte-order mark: it gets a plain copy."""
    import gzip

    lang, arpa = tiny_lang
    text = TINY_ARPA.replace("\n", "\r\n") if "crlf" in form else TINY_ARPA
    data = (("\ufeff" if "bom" in form else "") + text).encode()
    other = tmp_path / "windows.arpa"
    other.write_bytes(gzip.compress(data) if "gzip" in form else data)
    assert check_arpa(other, lang.word_table).crlf == ("crlf" in form)
    a, b = build_G(arpa, lang.word_table), build_G(other, lang.word_table)
    assert torch.equal(a.arcs.values(), b.arcs.values())
    assert torch.equal(a.aux_labels, b.aux_labels)
