"""The lang-dir commands on bad input: prepare-lang, compile-graph, draw-graph and
train-token-lm exit with a message that names the file (and line) and says what to do, never
with a traceback."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from k2dec.cli import main
from k2dec.lang import LangDir
from k2dec.testing.lang import TINY_ARPA, TINY_LEXICON

LEXICON = "".join(f"{w} {' '.join(t)}\n" for w, t in TINY_LEXICON)


def _run(*args: str):
    return CliRunner().invoke(main, list(args))


def _assert_clear(result, code: int, *parts: str) -> None:
    """Exit ``code`` (2: usage error, 1: other error), no traceback, every part shown."""
    assert result.exit_code == code, result.output
    assert not isinstance(result.exception, Exception) or isinstance(
        result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    for part in parts:
        assert part in result.output, (part, result.output)


@pytest.mark.parametrize("name, content, message", [
    ("blank token", "A a\nHELLO <blk> b\n", ":2: word 'HELLO' has the epsilon/blank token "
     "'<blk>'"),
    ("probability 1.7", "HELLO 1.7 a b\nWORLD 0.5 b\n",
     ":1: word 'HELLO' has the pronunciation probability 1.7, outside (0, 1]"),
    ("probability -0.5", "HELLO 0.5 a b\nWORLD -0.5 b\n",
     ":2: word 'WORLD' has the pronunciation probability -0.5"),
    ("binary", bytes(range(128, 256)), ":1: lexicon is not UTF-8"),
    ("sos/eos token", "A a <sos/eos>\n", ":1: word 'A' has the reserved token '<sos/eos>'"),
], ids=lambda x: x if isinstance(x, str) and len(x) < 20 else "")
def test_prepare_lang_refuses_bad_lexicons_naming_the_line(tmp_path, name, content, message):
    lex = tmp_path / "lexicon.txt"
    if isinstance(content, bytes):
        lex.write_bytes(content)
    else:
        lex.write_text(content)
    r = _run("prepare-lang", "--lang-dir", str(tmp_path / "lang"), "--lexicon", str(lex))
    _assert_clear(r, 2, f"{lex}{message}")
    assert not (tmp_path / "lang" / "tokens.txt").exists()


def test_prepare_lang_drops_a_byte_order_mark(tmp_path):
    lex = tmp_path / "lexicon.txt"
    lex.write_bytes(("\ufeff" + LEXICON).encode())
    r = _run("prepare-lang", "--lang-dir", str(tmp_path / "lang"), "--lexicon", str(lex))
    assert r.exit_code == 0, r.output
    lang = LangDir(tmp_path / "lang")
    assert "A" in lang.word_table and lang.word_table.get(1) == "A"
    assert not any(s.startswith("\ufeff") for s in lang.word_table.symbols)


@pytest.mark.parametrize("case", ["binary words", "empty words", "bad bpe model",
                                  "lang dir is a file", "sil token not a token",
                                  "sil prob 1.5", "lexicon and words"])
def test_prepare_lang_other_bad_inputs(tmp_path, case):
    lex = tmp_path / "lexicon.txt"
    lex.write_text(LEXICON)
    words = tmp_path / "words.txt"
    words.write_text("A B C\n")
    lang = tmp_path / "lang"
    args = ["prepare-lang", "--lang-dir", str(lang), "--lexicon", str(lex)]
    code, expect = 2, []
    if case == "binary words":
        words.write_bytes(bytes(range(128, 256)))
        args = ["prepare-lang", "--lang-dir", str(lang), "--words", str(words)]
        expect = [f"{words}:1: word list is not UTF-8"]
    elif case == "empty words":
        words.write_text("\n")
        args = ["prepare-lang", "--lang-dir", str(lang), "--words", str(words)]
        expect = [f"word list {words} has no words"]
    elif case == "bad bpe model":
        args = ["prepare-lang", "--lang-dir", str(lang), "--words", str(words),
                "--bpe-model", str(lex)]
        expect = [f"BPE model {lex} cannot be read"]
    elif case == "lang dir is a file":
        lang.write_text("x")
        expect = [f"lang dir {lang} is a file, not a directory"]
    elif case == "sil token not a token":
        args += ["--sil-token", "SIL"]
        expect = ["silence token 'SIL' is not in tokens.txt"]
    elif case == "sil prob 1.5":
        args += ["--sil-token", "a", "--sil-prob", "1.5"]
        expect = ["--sil-prob", "1.5 is not in the range 0<x<1"]
    else:
        args += ["--words", str(words)]
        expect = ["give exactly one of --lexicon and --words"]
    _assert_clear(_run(*args), code, *expect)


def test_compile_graph_oov_error_names_the_users_gzipped_arpa(tmp_path):
    lex = tmp_path / "lexicon.txt"
    lex.write_text(LEXICON)
    lang = tmp_path / "lang"
    assert _run("prepare-lang", "--lang-dir", str(lang), "--lexicon", str(lex)).exit_code == 0
    arpa = tmp_path / "lm.arpa.gz"
    arpa.write_bytes(gzip.compress(TINY_ARPA.replace("-0.1 A B", "-0.1 A ZEBRA").encode()))
    for kind in ("HLG", "G"):
        r = _run("compile-graph", "--lang-dir", str(lang), "--type", kind, "--arpa", str(arpa))
        _assert_clear(r, 2, f"{arpa}:", "word 'ZEBRA' is not in words.txt (OOV)", "<UNK>")
        assert "/tmp/tmp" not in r.output


def test_draw_graph_without_graphviz_says_what_to_install(tmp_path, monkeypatch):
    lex = tmp_path / "lexicon.txt"
    lex.write_text(LEXICON)
    lang = tmp_path / "lang"
    assert _run("prepare-lang", "--lang-dir", str(lang), "--lexicon", str(lex)).exit_code == 0
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))  # no dot on PATH, whatever this machine has
    r = _run("draw-graph", str(lang / "L.pt"), "--out", str(tmp_path / "L.svg"))
    _assert_clear(r, 1, "graphviz's 'dot' program", "apt-get install graphviz")
    from k2dec.graph import GraphvizNotFound, draw_graph, load_graph

    with pytest.raises(GraphvizNotFound):
        draw_graph(load_graph(lang / "L.pt"), tmp_path / "L.svg")
    r = _run("draw-graph", str(lex), "--out", str(tmp_path / "L.svg"))
    _assert_clear(r, 2, f"{lex}")


@pytest.fixture(scope="module")
def bpe_lang(tmp_path_factory) -> Path:
    from k2dec.lang import train_bpe_model

    d = tmp_path_factory.mktemp("bpe_lang")
    text = d / "text.txt"
    text.write_text("THE CAT SAT\nA DOG RAN HOME\nTHE DOG SAT ON A MAT\nHOME IS WHERE THE CAT "
                    "IS\nA MAT AND A CAT\n" * 10)
    train_bpe_model(text, d / "lang", vocab_size=24)
    return d


def test_train_token_lm_writes_the_lodr_bigram(bpe_lang, tmp_path):
    from k2dec.scorers import TokenNgramScorer, read_arpa

    out = tmp_path / "2gram.arpa"
    r = _run("train-token-lm", "--lang-dir", str(bpe_lang / "lang"), "--text",
             str(bpe_lang / "text.txt"), "-o", str(out))
    assert r.exit_code == 0, r.output
    assert f"wrote {out}" in r.output and "2-grams" in r.output and "--lodr-arpa" in r.output
    assert read_arpa(out).order == 2
    assert TokenNgramScorer.from_arpa(out, 24).vocab_size == 24
    # a second run with another order replaces it
    r = _run("train-token-lm", "--bpe-model", str(bpe_lang / "lang" / "bpe.model"), "--text",
             str(bpe_lang / "text.txt"), "--order", "3", "-o", str(out))
    assert r.exit_code == 0, r.output
    assert read_arpa(out).order == 3


@pytest.mark.parametrize("case", ["no bpe.model", "both", "binary text", "order 7"])
def test_train_token_lm_bad_inputs(bpe_lang, tmp_path, case):
    text = bpe_lang / "text.txt"
    args = ["train-token-lm", "--lang-dir", str(bpe_lang / "lang"), "--text", str(text),
            "-o", str(tmp_path / "out.arpa")]
    if case == "no bpe.model":
        bare = tmp_path / "bare"
        shutil.copytree(bpe_lang / "lang", bare)
        (bare / "bpe.model").unlink()
        args[2] = str(bare)
        expect = [f"{bare} has no bpe.model"]
    elif case == "both":
        args += ["--bpe-model", str(bpe_lang / "lang" / "bpe.model")]
        expect = ["exactly one of --lang-dir and --bpe-model"]
    elif case == "binary text":
        bad = tmp_path / "bad.txt"
        bad.write_bytes(bytes(range(128, 256)))
        args[4] = str(bad)
        expect = [f"{bad}:1: LM text is not UTF-8"]
    else:
        args += ["--order", "7"]
        expect = ["--order", "7 is not in the range 1<=x<=5"]
    _assert_clear(_run(*args), 2, *expect)
    assert not (tmp_path / "out.arpa").exists()


def test_train_token_lm_matches_the_bpe_models_case(bpe_lang, tmp_path):
    """Lower-case text trains the same n-gram as the upper-case text the BPE model was trained
    on (the case decode gives references); a text the BPE model cannot spell (mostly <unk>)
    is refused naming the file, not written as a useless n-gram."""
    lower = tmp_path / "lower.txt"
    lower.write_text((bpe_lang / "text.txt").read_text().lower())
    outs = {}
    for name, text in (("upper", bpe_lang / "text.txt"), ("lower", lower)):
        outs[name] = tmp_path / f"{name}.arpa"
        r = _run("train-token-lm", "--lang-dir", str(bpe_lang / "lang"), "--text", str(text),
                 "-o", str(outs[name]))
        assert r.exit_code == 0, r.output
    assert outs["lower"].read_text() == outs["upper"].read_text()
    greek = tmp_path / "greek.txt"
    greek.write_text("Η ΓΑΤΑ ΚΑΘΕΤΑΙ\nΟ ΣΚΥΛΟΣ ΤΡΕΧΕΙ\n")
    out = tmp_path / "greek.arpa"
    r = _run("train-token-lm", "--lang-dir", str(bpe_lang / "lang"), "--text", str(greek),
             "-o", str(out))
    _assert_clear(r, 2, f"LM text {greek}", "tokens are <unk>")
    assert not out.exists()
