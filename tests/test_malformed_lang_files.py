"""Malformed lang-dir and LM files: lexicons (lexiconp probabilities, reserved tokens), symbol
tables, word lists, BPE models, token ARPA files (LODR), LM texts and hotword lists. Each case
asserts the exact exception class and that the message names the file, and the line where
there is one.

None of these reach kaldilm or k2 (whose errors can abort the process), so they run in this
process, unlike tests/test_malformed_inputs.py.
"""

from __future__ import annotations

import gzip
import random
from collections.abc import Callable
from pathlib import Path

import pytest

from k2dec.lang import (
    make_symbol_table,
    prepare_lexicon,
    read_lexicon,
    read_symbol_table,
    read_word_list,
    write_lang_dir,
)
from k2dec.lm.data import encode_text_file
from k2dec.scorers import TokenNgramScorer, read_arpa, read_hotwords, train_token_arpa
from k2dec.testing.lang import TINY_ARPA

BINARY = bytes(range(256)) * 4
UTF16 = "A a\nB b\n".encode("utf-16")
LATIN1 = "A a\nCAF\xc9 k a f e\n".encode("latin-1")

#: a token bigram over ids 3..6 (as train_token_arpa writes it)
TOKEN_ARPA = """\\data\\
ngram 1=6
ngram 2=3

\\1-grams:
-1.0 </s>
-99 <s> -0.5
-0.6 3 -0.2
-0.7 4 -0.2
-0.8 5 -0.3
-0.9 6 -0.3

\\2-grams:
-0.2 <s> 3
-0.1 3 4
-0.3 6 </s>

\\end\\
"""

SENTENCES = ("THE CAT SAT\nA DOG RAN HOME\nTHE DOG SAT ON A MAT\nHOME IS WHERE THE CAT IS\n"
             "A MAT AND A CAT\n")

PHONES = make_symbol_table([("<eps>", 0), ("a", 1), ("b", 2), ("c", 3)])


def _write(path: Path, data: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data, encoding="utf-8")
    return path


# (case id, file name, content, reader(path), exception class, substring of the message;
#  "{name}" is the file name)
Case = tuple[str, str, "str | bytes", Callable[[Path], object], type, str]

LEXICON_CASES: list[Case] = [
    ("<blk> pronunciation", "lexicon.txt", "A a\nHELLO <blk> b\n", read_lexicon, ValueError,
     "{name}:2: word 'HELLO' has the epsilon/blank token '<blk>'"),
    ("<sos/eos> pronunciation", "lexicon.txt", "A a <sos/eos>\n", read_lexicon, ValueError,
     "{name}:1: word 'A' has the reserved token '<sos/eos>'"),
    ("#1 in lexicon.txt", "lexicon.txt", "A a\nB b #1\n", read_lexicon, ValueError,
     "{name}:2: word 'B' has the reserved token '#1'"),
    ("<eps> pronunciation", "lexicon.txt", "A <eps>\n", read_lexicon, ValueError,
     "{name}:1: word 'A' has the epsilon/blank token '<eps>'"),
    ("lexiconp 1.7", "lexiconp.txt", "HELLO 1.7 a b\nWORLD 0.5 b\n", read_lexicon, ValueError,
     "{name}:1: word 'HELLO' has the pronunciation probability 1.7, outside (0, 1]"),
    ("lexiconp -0.5", "lexiconp.txt", "HELLO 1.0 a b\nWORLD -0.5 b\n", read_lexicon,
     ValueError, "{name}:2: word 'WORLD' has the pronunciation probability -0.5"),
    ("lexiconp 0", "lexiconp.txt", "HELLO 0.2 a\nWORLD 0 b\n", read_lexicon, ValueError,
     "{name}:2: word 'WORLD' has the pronunciation probability 0"),
    ("lexiconp 1e3", "lexiconp.txt", "HELLO 1e3 a\nWORLD 1 b\n", read_lexicon, ValueError,
     "{name}:1: word 'HELLO' has the pronunciation probability 1e3"),
    ("lexiconp in range", "lexiconp.txt", "HELLO 1.0 a\nWORLD 0.5 b\n", read_lexicon,
     ValueError, "{name} looks like a Kaldi lexiconp.txt"),
    ("one probability among tokens", "lexicon.txt", "A a\nB b\nC 0.25 c\n", read_lexicon,
     ValueError, "{name}:3: word 'C' starts its pronunciation with '0.25', a number"),
    ("word without tokens", "lexicon.txt", "A a\nB\n", read_lexicon, ValueError,
     "{name}:2: word 'B' has an empty pronunciation"),
    ("reserved word </s>", "lexicon.txt", "A a\n</s> b\n", read_lexicon, ValueError,
     "{name}:2: '</s>' is reserved"),
    ("utf-16", "lexicon.txt", UTF16, read_lexicon, ValueError, "{name}:1: lexicon is not UTF-8"),
    ("latin-1", "lexicon.txt", LATIN1, read_lexicon, ValueError,
     "{name}:2: lexicon is not UTF-8"),
    ("binary", "lexicon.txt", BINARY, read_lexicon, ValueError, "{name}:1: lexicon"),
    ("NUL bytes", "lexicon.txt", b"A a\nB \x00b\n", read_lexicon, ValueError,
     "{name}:2: lexicon has NUL bytes"),
    ("gzip cut short", "lexicon.txt.gz", gzip.compress(b"A a\nB b\n" * 40)[:20], read_lexicon,
     ValueError, "{name}: cannot read lexicon"),
    ("only blank lines", "lexicon.txt", "\n\n  \n", read_lexicon, ValueError,
     "lexicon {name} is empty"),
    ("token not in tokens.txt", "lexicon.txt", "A a\nD d\n",
     lambda p: read_lexicon(p, PHONES), ValueError,
     "{name}:2: token 'd' of word 'D' is not in tokens.txt"),
    ("disambiguation symbol not in tokens.txt", "lexicon_disambig.txt", "A a #1\n",
     lambda p: read_lexicon(p, PHONES, disambig=True), ValueError,
     "{name}:1: disambiguation symbol '#1' of word 'A' is not in tokens.txt"),
]

SYMBOL_CASES: list[Case] = [
    ("duplicate id", "tokens.txt", "<blk> 0\na 1\nb 1\n", read_symbol_table, ValueError,
     "{name}:3: duplicate id 1 (already used by 'a')"),
    ("duplicate symbol", "tokens.txt", "<blk> 0\na 1\na 2\n", read_symbol_table, ValueError,
     "{name}:3: duplicate symbol 'a'"),
    ("binary", "tokens.txt", BINARY, read_symbol_table, ValueError,
     "{name}:1: symbol table"),
    ("utf-16", "tokens.txt", "<blk> 0\na 1\n".encode("utf-16"), read_symbol_table,
     ValueError, "{name}:1: symbol table is not UTF-8"),
    ("gzipped garbage", "tokens.txt", gzip.compress(BINARY), read_symbol_table, ValueError,
     "{name}:1: symbol table"),
    ("one field", "tokens.txt", "<blk> 0\na\n", read_symbol_table, ValueError,
     "{name}:2: expected 'symbol id'"),
    ("float id", "words.txt", "<eps> 0\nA 1.5\n", read_symbol_table, ValueError,
     "{name}:2: id '1.5' is not an integer"),
    ("empty", "words.txt", "", read_symbol_table, ValueError, "symbol table {name} is empty"),
]

WORD_LIST_CASES: list[Case] = [
    ("binary", "words.txt", BINARY, read_word_list, ValueError, "{name}:1: word list"),
    ("latin-1", "words.txt", LATIN1, read_word_list, ValueError,
     "{name}:2: word list is not UTF-8"),
    ("empty", "words.txt", "", read_word_list, ValueError, "word list {name} has no words"),
    ("blank lines", "words.txt", "\n \n\n", read_word_list, ValueError,
     "word list {name} has no words"),
    ("<s> in a word list", "words.txt", "HELLO WORLD\nTHE <s> END\n", read_word_list,
     ValueError, "{name}:2: '<s>' is a reserved word"),
    ("#3 in a word list", "words.txt", "#3\n", read_word_list, ValueError,
     "{name}:1: '#3' is a reserved word"),
    ("symbol table of special words only", "words.txt", "<eps> 0\n#0 1\n<s> 2\n</s> 3\n",
     read_word_list, ValueError, "word list {name} has no words besides the special ones"),
]

ARPA_CASES: list[Case] = [
    ("binary", "2gram.arpa", BINARY, read_arpa, ValueError, "{name}:1: ARPA file"),
    ("utf-16", "2gram.arpa", TOKEN_ARPA.encode("utf-16"), read_arpa, ValueError,
     "{name}:1: ARPA file is not UTF-8"),
    ("gzipped garbage", "2gram.arpa.gz", gzip.compress(BINARY), read_arpa, ValueError,
     "{name}:1: ARPA file"),
    ("gzip cut short", "2gram.arpa.gz", gzip.compress(TOKEN_ARPA.encode())[:30], read_arpa,
     ValueError, "{name}: cannot read ARPA file"),
    ("no \\end\\", "2gram.arpa", TOKEN_ARPA.replace("\\end\\\n", ""), read_arpa, ValueError,
     "{name}: missing \\end\\"),
    ("counts mismatch", "2gram.arpa", TOKEN_ARPA.replace("ngram 2=3", "ngram 2=4"), read_arpa,
     ValueError, "{name}: \\data\\ says ngram 2=4 but found 3"),
    ("-inf log-prob", "2gram.arpa", TOKEN_ARPA.replace("-0.6 3 -0.2", "-inf 3 -0.2"),
     read_arpa, ValueError, "{name}:8: '-inf' is not a finite log10 value"),
    ("a word too many", "2gram.arpa", TOKEN_ARPA.replace("-0.1 3 4", "-0.1 3 4 5 6"),
     read_arpa, ValueError, "{name}:15: a 2-gram line needs"),
    ("not a number", "2gram.arpa", TOKEN_ARPA.replace("-0.1 3 4", "x 3 4"), read_arpa,
     ValueError, "{name}:15: 'x' is not a number"),
    ("no <s>", "2gram.arpa", TOKEN_ARPA.replace("-99 <s> -0.5\n", "").replace(
        "ngram 1=6", "ngram 1=5").replace("-0.2 <s> 3", "-0.2 5 3"), read_arpa, ValueError,
     "{name}: the 1-grams have no <s>"),
    ("plain text", "2gram.arpa", "just some text\n", read_arpa, ValueError,
     "{name}: no \\data\\ header"),
    ("ids of a bigger vocabulary", "2gram.arpa", TOKEN_ARPA.replace(" 6", " 600"),
     lambda p: TokenNgramScorer.from_arpa(p, 256), ValueError,
     "{name}: ARPA word '600' is not a token id in [0, 256)"),
    ("pieces another model spells", "2gram.arpa",
     TOKEN_ARPA.replace(" 3", " \u2581THE").replace(" 4", " \u2581CAT").replace(" 5", " S")
     .replace(" 6", " \u2581ZEBRA"),
     lambda p: TokenNgramScorer.from_arpa(p, 8, {"\u2581THE": 3, "\u2581CAT": 4, "S": 5}),
     ValueError, "{name}: ARPA word '\u2581ZEBRA' is not a token id in [0, 8) of token_table"),
]

HOTWORD_CASES: list[Case] = [
    ("binary", "hotwords.txt", BINARY, read_hotwords, ValueError, "{name}:1: hotwords file"),
    ("utf-16", "hotwords.txt", "HELLO\n".encode("utf-16"), read_hotwords, ValueError,
     "{name}:1: hotwords file is not UTF-8"),
    ("latin-1", "hotwords.txt", "CAF\xc9 :2\n".encode("latin-1"), read_hotwords, ValueError,
     "{name}:1: hotwords file is not UTF-8"),
    ("empty", "hotwords.txt", "", read_hotwords, ValueError,
     "hotwords file {name} has no phrases"),
    ("comments only", "hotwords.txt", "# nothing\n\n# here\n", read_hotwords, ValueError,
     "hotwords file {name} has no phrases"),
    ("bad score", "hotwords.txt", "HELLO\nWORLD :high\n", read_hotwords, ValueError,
     "{name}:2: bad score 'high'"),
    ("inf score", "hotwords.txt", "HELLO :inf\n", read_hotwords, ValueError,
     "{name}:1: phrase 'HELLO': a hotword score must be a finite number in [-50, 50]"),
    ("nan score", "hotwords.txt", "A B\nHELLO :nan\n", read_hotwords, ValueError,
     "{name}:2: phrase 'HELLO': a hotword score must be a finite number in [-50, 50]"),
    ("score without a phrase", "hotwords.txt", "HELLO\n:2.5\n", read_hotwords, ValueError,
     "{name}:2: a score with no phrase"),
    ("NUL bytes", "hotwords.txt", b"HELLO\x00\n", read_hotwords, ValueError,
     "{name}:1: hotwords file has NUL bytes"),
]

LM_TEXT_CASES: list[Case] = [
    ("binary", "lm.txt", BINARY[128:], lambda p: encode_text_file(p, None), ValueError,
     "{name}:1: text file is not UTF-8"),
    ("NUL bytes", "lm.txt", b"THE CAT\n\x00\n", lambda p: encode_text_file(p, None),
     ValueError, "{name}:2: text file has NUL bytes"),
    ("blank lines", "lm.txt", "\n  \n", lambda p: encode_text_file(p, None), ValueError,
     "text file '{name}' has no non-empty lines"),
]

CASES = [("lexicon", *c) for c in LEXICON_CASES] + [("symbols", *c) for c in SYMBOL_CASES] + [
    ("word list", *c) for c in WORD_LIST_CASES] + [("ARPA", *c) for c in ARPA_CASES] + [
    ("hotwords", *c) for c in HOTWORD_CASES] + [("LM text", *c) for c in LM_TEXT_CASES]


@pytest.mark.parametrize("kind, case, name, data, reader, exc, message", CASES,
                         ids=[f"{c[0]}: {c[1]}" for c in CASES])
def test_malformed_file_is_a_clear_error(tmp_path, kind, case, name, data, reader, exc,
                                         message):
    path = _write(tmp_path / kind.replace(" ", "_") / name, data)
    with pytest.raises(Exception) as info:
        reader(path)
    assert type(info.value) is exc, f"{type(info.value).__name__}: {info.value}"
    assert message.format(name=path) in str(info.value)


@pytest.mark.parametrize("reader, what", [
    (read_lexicon, "lexicon"), (read_symbol_table, "symbol table"),
    (read_word_list, "word list"), (read_arpa, "ARPA file"), (read_hotwords, "hotwords file")])
@pytest.mark.parametrize("where", ["missing", "a directory"])
def test_missing_file_or_directory_is_named(tmp_path, reader, what, where):
    path = tmp_path / "nope.txt"
    if where == "a directory":
        path.mkdir()
    with pytest.raises(ValueError) as info:
        reader(path)
    state = "does not exist" if where == "missing" else "is not a file"
    assert str(info.value) == f"{what} {path} {state}"


@pytest.fixture(scope="module")
def bpe(tmp_path_factory) -> Path:
    from k2dec.lang import train_bpe_model

    d = tmp_path_factory.mktemp("bpe")
    text = _write(d / "text.txt", SENTENCES * 10)
    return train_bpe_model(text, d, vocab_size=24)


@pytest.mark.parametrize("case", ["not a model", "binary", "no <blk> at id 0"])
def test_bpe_model_that_cannot_serve_is_named(tmp_path, case):
    import sentencepiece as spm

    from k2dec.lang import load_bpe_model

    path = tmp_path / "bpe.model"
    if case == "not a model":
        path.write_text("THE CAT\n")
    elif case == "binary":
        path.write_bytes(BINARY)
    else:  # trained without icefall's special symbols
        text = _write(tmp_path / "t.txt", SENTENCES * 10)
        spm.SentencePieceTrainer.train(input=str(text), model_prefix=str(tmp_path / "bpe"),
                                       vocab_size=24, minloglevel=2)
    with pytest.raises(ValueError) as info:
        load_bpe_model(path)
    assert str(path) in str(info.value)
    if case == "no <blk> at id 0":
        assert "token 0 must be '<blk>'" in str(info.value)


def test_prepare_lexicon_refusals_name_the_input(tmp_path, bpe):
    lexicon = _write(tmp_path / "lexicon.txt", "HELLO HH AH\n")
    with pytest.raises(ValueError, match=r"lexicon.txt \(spelled with .*bpe.model's pieces\): "
                                         r"entry 1 \('HELLO'\): token 'HH' is not in tokens"):
        prepare_lexicon(lexicon=lexicon, bpe_model=bpe)
    words = _write(tmp_path / "words.txt", "HELLO QWXZZY\n")
    with pytest.raises(ValueError, match=r"words.txt: 1 words are not in CMUdict \(first: "
                                         r"QWXZZY\); pass --allow-oov"):
        prepare_lexicon(words=words)
    nothing = _write(tmp_path / "nothing.txt", "QWXZZY\n")
    with pytest.raises(ValueError, match=r"nothing.txt: none of its words is in CMUdict"):
        prepare_lexicon(words=nothing, allow_oov=True)
    with pytest.raises(ValueError, match="exactly one of a lexicon and a word list"):
        prepare_lexicon(lexicon=lexicon, words=words)
    with pytest.raises(ValueError, match=r"lang dir .*lexicon.txt is a file"):
        write_lang_dir(lexicon, [("A", ["a"])])


def test_prepare_lexicon_from_a_words_txt_uses_its_words(tmp_path, bpe, caplog):
    words = _write(tmp_path / "words.txt", "<eps> 0\nCAT 1\nDOG 2\n#0 3\n<s> 4\n</s> 5\n")
    with caplog.at_level("WARNING"):
        src = prepare_lexicon(words=words, bpe_model=bpe)
    assert "is a symbol table" in caplog.text
    assert [w for w, _ in src.lexicon] == ["<UNK>", "CAT", "DOG"]
    assert src.blank == "<blk>" and src.tokens.get(0) == "<blk>"


def test_a_byte_order_mark_is_dropped_from_every_text_file(tmp_path, caplog):
    bom = "\ufeff"
    lex = _write(tmp_path / "lexicon.txt", bom + "HELLO a b\n")
    words = _write(tmp_path / "words.txt", bom + "HELLO WORLD\n")
    hot = _write(tmp_path / "hot.txt", bom + "HELLO :2\n")
    arpa = _write(tmp_path / "2gram.arpa", bom + TOKEN_ARPA)
    with caplog.at_level("WARNING"):
        assert read_lexicon(lex) == [("HELLO", ["a", "b"])]
        assert read_word_list(words) == ["HELLO", "WORLD"]
        assert [h.text for h in read_hotwords(hot)] == ["HELLO"]
        assert read_arpa(arpa).order == 2
    assert caplog.text.count("byte-order mark") == 4


def test_token_ngram_over_pieces_equals_the_one_over_ids(tmp_path):
    """icefall's 2gram.arpa (words = BPE pieces) gives the tables of the same n-gram written
    over token ids."""
    ids = _write(tmp_path / "ids.arpa", TOKEN_ARPA)
    pieces = {"\u2581THE": 3, "\u2581CAT": 4, "S": 5, "\u2581ZEBRA": 6}
    text = TOKEN_ARPA
    for piece, i in pieces.items():
        text = text.replace(f" {i}", f" {piece}")
    by_piece = _write(tmp_path / "pieces.arpa", text)
    a = TokenNgramScorer.from_arpa(ids, 8)
    b = TokenNgramScorer.from_arpa(by_piece, 8, pieces)
    rng = random.Random(0)
    totals = set()
    for _ in range(50):  # the same score for every token sequence (state ids may differ)
        sa, sb, ta, tb = a.start, b.start, 0.0, 0.0
        for t in (rng.randrange(8) for _ in range(rng.randint(0, 6))):
            ta, tb = ta + float(a.score_table[sa, t]), tb + float(b.score_table[sb, t])
            sa, sb = int(a.next_state[sa, t]), int(b.next_state[sb, t])
        ta, tb = ta + float(a.final[sa]), tb + float(b.final[sb])
        assert ta == pytest.approx(tb, abs=1e-12)
        totals.add(round(ta, 9))
    assert len(totals) > 10  # not vacuous


@pytest.mark.parametrize("case", ["binary text", "blank text", "order 0", "order 6",
                                  "not a BPE model"])
def test_train_token_arpa_refusals_name_the_input(tmp_path, bpe, case):
    text = _write(tmp_path / "lm.txt", "THE CAT SAT\n")
    model = bpe
    order = 2
    if case == "binary text":
        _write(text, BINARY)
    elif case == "blank text":
        _write(text, "\n \n")
    elif case == "not a BPE model":
        model = _write(tmp_path / "fake.model", "THE\n")
    else:
        order = int(case.split()[1])
    with pytest.raises(ValueError) as info:
        train_token_arpa(text, model, tmp_path / "out.arpa", order=order)
    expect = {"binary text": f"{text}:1: LM text", "blank text": f"LM text {text} has no "
              "sentences", "order 0": "order must be in 1..5", "order 6": "order must be in "
              "1..5", "not a BPE model": f"BPE model {model} cannot be read"}[case]
    assert expect in str(info.value)
    assert not (tmp_path / "out.arpa").exists()


def test_train_token_arpa_writes_a_scorer_the_model_can_use(tmp_path, bpe, caplog):
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor()
    sp.load(str(bpe))
    text = _write(tmp_path / "lm.txt", "THE CAT SAT\n\nA DOG RAN HOME\n" * 3)
    arpa = train_token_arpa(text, bpe, tmp_path / "2gram.arpa.gz")
    with open(arpa, "rb") as f:
        assert f.read(2) == b"\x1f\x8b"  # gzipped as its name says
    model = read_arpa(arpa)
    assert model.order == 2
    seen = {int(w) for (w,) in (k for k in model.prob if len(k) == 1) if w.isdigit()}
    assert seen == {i for line in ("THE CAT SAT", "A DOG RAN HOME") for i in sp.encode(line)}
    scorer = TokenNgramScorer.from_arpa(arpa, sp.get_piece_size())
    assert scorer.vocab_size == sp.get_piece_size()
    # an existing file is kept unless overwrite; lower-case text is put in the BPE model's
    # case (the same n-gram); a text it cannot spell (mostly <unk>) is refused
    lower = _write(tmp_path / "lower.txt", "the cat sat\n\na dog ran home\n" * 3)
    other = _write(tmp_path / "other.txt", "THE CAT\n")
    assert train_token_arpa(other, bpe, arpa) == arpa and read_arpa(arpa).prob == model.prob
    train_token_arpa(lower, bpe, arpa, overwrite=True)
    assert read_arpa(arpa).prob == model.prob
    greek = _write(tmp_path / "greek.txt", "Η ΓΑΤΑ ΚΑΘΕΤΑΙ\n")
    with pytest.raises(ValueError, match="tokens are <unk>"):
        train_token_arpa(greek, bpe, tmp_path / "greek.arpa")


def test_the_reference_arpa_still_reads():
    """Guards the cases above: the well-formed files they break are accepted."""
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        assert read_arpa(_write(Path(d) / "t.arpa", TOKEN_ARPA)).order == 2
        assert read_arpa(_write(Path(d) / "w.arpa", TINY_ARPA)).order == 2
        assert read_lexicon(_write(Path(d) / "l.txt", "A a\nB b c\n"))[1] == ("B", ["b", "c"])
        assert read_hotwords(_write(Path(d) / "h.txt", "HELLO :2\n"))[0].score == 2.0
