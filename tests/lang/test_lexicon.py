from __future__ import annotations

import pytest

from k2dec.lang import (
    LangDir,
    add_disambig_symbols,
    cmudict_lexicon,
    read_lexicon,
    read_symbol_table,
    write_lang_dir,
    write_lexicon,
)


def test_disambig_homophones_and_prefixes_hand_worked():
    lexicon = [
        ("A", ["a"]),  # prefix of "a b" -> #1
        ("AB", ["a", "b"]),  # prefix of "a b c" -> #1
        ("ABC", ["a", "b", "c"]),  # unique, no prefix -> none
        ("RED", ["r", "e", "d"]),  # homophone -> #1
        ("READ", ["r", "e", "d"]),  # homophone -> #2
        ("REED", ["r", "e", "d"]),  # homophone -> #3
        ("X", ["x"]),  # unique -> none
    ]
    out, max_disambig = add_disambig_symbols(lexicon)
    assert out == [
        ("A", ["a", "#1"]),
        ("AB", ["a", "b", "#1"]),
        ("ABC", ["a", "b", "c"]),
        ("RED", ["r", "e", "d", "#1"]),
        ("READ", ["r", "e", "d", "#2"]),
        ("REED", ["r", "e", "d", "#3"]),
        ("X", ["x"]),
    ]
    assert max_disambig == 3
    assert lexicon[0] == ("A", ["a"]), "input must not be modified"


def test_disambig_homophone_that_is_also_a_prefix():
    lexicon = [("TO", ["t", "u"]), ("TWO", ["t", "u"]), ("TOOK", ["t", "u", "k"])]
    out, n = add_disambig_symbols(lexicon)
    assert out == [("TO", ["t", "u", "#1"]), ("TWO", ["t", "u", "#2"]), ("TOOK", ["t", "u", "k"])]
    assert n == 2


def test_no_disambig_needed():
    out, n = add_disambig_symbols([("A", ["a"]), ("B", ["b"])])
    assert out == [("A", ["a"]), ("B", ["b"])] and n == 0


def test_disambig_rejects_existing_disambig_and_empty():
    with pytest.raises(ValueError, match="already uses"):
        add_disambig_symbols([("A", ["a", "#1"])])
    with pytest.raises(ValueError, match="empty pronunciation"):
        add_disambig_symbols([("A", [])])


def test_read_lexicon_errors_name_file_and_line(tmp_path):
    p = tmp_path / "lexicon.txt"
    p.write_text("A a\n\nB\n")
    with pytest.raises(ValueError, match=r"lexicon.txt:3: word 'B' has an empty pronunciation"):
        read_lexicon(p)
    p.write_text("A a\nB b q\n")
    tokens = read_symbol_table_from(tmp_path, "<eps> 0\na 1\nb 2\n")
    with pytest.raises(ValueError, match=r"lexicon.txt:2: token 'q' of word 'B'"):
        read_lexicon(p, tokens)
    p.write_text("")
    with pytest.raises(ValueError, match="is empty"):
        read_lexicon(p)


def read_symbol_table_from(tmp_path, text):
    (tmp_path / "tokens.txt").write_text(text)
    return read_symbol_table(tmp_path / "tokens.txt")


def test_write_lang_dir_layout(tmp_path):
    lexicon = [("A", ["a"]), ("AB", ["a", "b"]), ("B", ["b"])]
    lang = write_lang_dir(tmp_path / "lang", lexicon)
    assert (tmp_path / "lang/tokens.txt").read_text().split("\n")[:5] == [
        "<eps> 0", "a 1", "b 2", "#0 3", "#1 4"
    ]
    words = (tmp_path / "lang/words.txt").read_text().split()
    assert words == ["<eps>", "0", "A", "1", "AB", "2", "B", "3", "#0", "4", "<s>", "5",
                     "</s>", "6"]
    assert (tmp_path / "lang/lexicon_disambig.txt").read_text() == "A a #1\nAB a b\nB b\n"
    again = LangDir(tmp_path / "lang")
    assert again.lexicon == lexicon
    assert again.first_token_disambig_id == 3 and again.first_word_disambig_id == 4
    assert again.max_token_id == 2 and lang.blank_symbol == "<eps>"


def test_write_lang_dir_rejects_unknown_tokens(tmp_path):
    with pytest.raises(ValueError, match="token 'z' is not in tokens.txt"):
        write_lang_dir(tmp_path / "lang", [("A", ["z"])], tokens=["a"])


def test_write_lexicon_rejects_empty(tmp_path):
    with pytest.raises(ValueError, match="empty pronunciation"):
        write_lexicon([("A", [])], tmp_path / "l.txt")


def test_cmudict_lexicon():
    lexicon, oov = cmudict_lexicon(["hello", "WORLD", "qzxqzx"], max_prons=1)
    entries = dict(lexicon)
    assert entries["HELLO"] in (["HH", "AH", "L", "OW"], ["HH", "EH", "L", "OW"])
    assert entries["WORLD"] == ["W", "ER", "L", "D"]
    assert entries["!SIL"] == ["SIL"] and entries["<UNK>"] == ["SPN"]
    assert oov == ["QZXQZX"]
    stressed, _ = cmudict_lexicon(["world"], strip_stress=False, add_silence_entries=False)
    assert stressed == [("WORLD", ["W", "ER1", "L", "D"])]
    with pytest.raises(ValueError, match="max_prons"):
        cmudict_lexicon(["a"], max_prons=0)


def test_langdir_missing(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        LangDir(tmp_path / "nope")


@pytest.mark.parametrize("line, message", [
    ("SIL <eps>\n", r"lex.txt:2: word 'SIL' has the epsilon/blank token '<eps>'"),
    ("A a <eps> b\n", r"lex.txt:2: word 'A' has the epsilon/blank token '<eps>'"),
    ("<eps> a\n", r"lex.txt:2: '<eps>' is reserved"),
    ("<s> a\n", r"lex.txt:2: '<s>' is reserved"),
    ("#0 a\n", r"lex.txt:2: '#0' is reserved"),
    ("#3 a\n", r"lex.txt:2: '#3' is reserved"),
])
def test_lexicon_epsilon_pronunciations_and_reserved_words_are_refused(tmp_path, line, message):
    path = tmp_path / "lex.txt"
    path.write_text("B b\n" + line)
    with pytest.raises(ValueError, match=message):
        read_lexicon(path)


def test_lexicon_token_with_id_0_is_refused(tmp_path):
    from k2dec.lang import make_symbol_table

    tokens = make_symbol_table([("<blk>", 0), ("a", 1), ("b", 2)])
    path = tmp_path / "lex.txt"
    path.write_text("A a\nB <blk> b\n")
    with pytest.raises(ValueError, match=r"lex.txt:2: word 'B' has the epsilon/blank token "
                                         r"'<blk>' \(id 0\)"):
        read_lexicon(path, tokens)
    path.write_text("A a\nB b\n")
    assert read_lexicon(path, tokens) == [("A", ["a"]), ("B", ["b"])]


def test_kaldi_lexiconp_is_recognized_and_refused(tmp_path):
    path = tmp_path / "lexiconp.txt"
    path.write_text("HELLO 1.0 HH AH L OW\nHELLO 0.5 HH EH L OW\nWORLD 1.0 W ER L D\n")
    with pytest.raises(ValueError, match=r"looks like a Kaldi lexiconp.txt .*lexiconp.txt:1 is "
                                         r"HELLO '1.0 HH AH L OW'"):
        read_lexicon(path)
    # a token table that has those "probabilities" as tokens: a real lexicon after all
    from k2dec.lang import make_symbol_table

    tokens = make_symbol_table([("<eps>", 0), ("1.0", 1), ("0.5", 2)] + [
        (t, i) for i, t in enumerate(["HH", "AH", "L", "OW", "EH", "W", "ER", "D"], start=3)])
    assert read_lexicon(path, tokens)[0] == ("HELLO", ["1.0", "HH", "AH", "L", "OW"])
    # one line with a decimal number first, others without: a probability all the same
    path.write_text("ONE w ah n\nHELLO 1.0 HH\n")
    with pytest.raises(ValueError, match=r"lexiconp.txt:2: word 'HELLO' starts its "
                                         r"pronunciation with '1.0', a number"):
        read_lexicon(path)
    # integers are tokens of some inventories (digits): a lexicon with one is kept
    path.write_text("ONE w ah n\nTWO 2\n")
    assert read_lexicon(path)[1] == ("TWO", ["2"])


@pytest.mark.parametrize("text, line, value", [
    ("HELLO 1.7 HH AH\nWORLD 0.5 W ER\n", 1, "1.7"),
    ("HELLO 1.0 HH AH\nWORLD -0.5 W ER\n", 2, "-0.5"),
    ("HELLO 0.3 HH AH\nWORLD 0 W ER\n", 2, "0"),
    ("HELLO 1.0 HH\nWORLD 1e3 W\n", 2, "1e3"),
    ("HELLO h\nWORLD 1e-3 W\n", 2, "1e-3"),
])
def test_lexiconp_probability_outside_0_1_names_the_line(tmp_path, text, line, value):
    path = tmp_path / "lexiconp.txt"
    path.write_text(text)
    with pytest.raises(ValueError) as e:
        read_lexicon(path)
    assert f"lexiconp.txt:{line}: word " in str(e.value) and value in str(e.value)


@pytest.mark.parametrize("token", ["<blk>", "<sos/eos>", "#1", "<eps>"])
def test_reserved_tokens_in_a_pronunciation_are_refused(tmp_path, token):
    path = tmp_path / "lex.txt"
    path.write_text(f"B b\nHELLO h {token} e\n")
    with pytest.raises(ValueError, match=rf"lex.txt:2: word 'HELLO' has the .* {token!r}"):
        read_lexicon(path)


def test_lexicon_disambig_reads_its_disambiguation_symbols(tmp_path):
    lang = write_lang_dir(tmp_path / "lang", [("A", ["a"]), ("AB", ["a", "b"]),
                                              ("B", ["b"]), ("BB", ["b"])])
    assert lang.lexicon_disambig == [("A", ["a", "#1"]), ("AB", ["a", "b"]),
                                     ("B", ["b", "#1"]), ("BB", ["b", "#2"])]
    # the same file is no lexicon.txt: #N are reserved there
    with pytest.raises(ValueError, match=r"lexicon_disambig.txt:1: word 'A' has the reserved "
                                         r"token '#1'"):
        read_lexicon(lang.path / "lexicon_disambig.txt", lang.token_table)


def test_a_byte_order_mark_is_not_part_of_the_first_word(tmp_path, caplog):
    path = tmp_path / "lex.txt"
    path.write_bytes("\ufeffHELLO h e\nWORLD w\n".encode())
    with caplog.at_level("WARNING"):
        assert read_lexicon(path) == [("HELLO", ["h", "e"]), ("WORLD", ["w"])]
    assert "byte-order mark" in caplog.text and "lex.txt" in caplog.text
    table = tmp_path / "tokens.txt"
    table.write_bytes("\ufeff<blk> 0\na 1\n".encode())
    assert read_symbol_table(table).get(0) == "<blk>"


def test_gzipped_and_non_utf8_lexicons(tmp_path):
    import gzip

    gz = tmp_path / "lexicon.txt.gz"
    with gzip.open(gz, "wt", encoding="utf-8") as f:
        f.write("A a\nB b\n")
    assert read_lexicon(gz) == [("A", ["a"]), ("B", ["b"])]
    latin = tmp_path / "latin1.txt"
    latin.write_bytes("A a\nCAF\xc9 k a f e\n".encode("latin-1"))
    with pytest.raises(ValueError, match=r"latin1.txt:2: lexicon is not UTF-8 text"):
        read_lexicon(latin)
    broken = tmp_path / "broken.txt"
    broken.write_bytes(gzip.compress(b"A a\nB b\n")[:15])
    with pytest.raises(ValueError, match=r"broken.txt: cannot read lexicon"):
        read_lexicon(broken)


@pytest.mark.parametrize("empty", [[], (), iter([])])
def test_write_lang_dir_refuses_an_empty_lexicon(tmp_path, empty):
    from k2dec.lang import write_lang_dir

    with pytest.raises(ValueError, match=r"lexicon is empty: a lang dir \(.*lang\) needs at "
                                         "least one word"):
        write_lang_dir(tmp_path / "lang", empty)
    assert not (tmp_path / "lang" / "words.txt").exists()
