from __future__ import annotations

import shutil

import pytest
from click.testing import CliRunner

from k2dec.cli import main
from k2dec.graph import load_graph
from k2dec.lang import LangDir
from tests.graph.conftest import TINY_ARPA, TINY_LEXICON

SUBCOMMANDS = ["prepare-lang", "compile-graph", "draw-graph", "decode", "demo", "train-lm",
               "export-lm", "lm-perplexity"]


@pytest.mark.parametrize("cmd", [[]] + [[c] for c in SUBCOMMANDS])
def test_help_on_every_subcommand(cmd):
    result = CliRunner().invoke(main, cmd + ["--help"])
    assert result.exit_code == 0, result.output
    assert "usage:" in result.output.lower()


def test_every_subcommand_is_listed():
    assert sorted(main.commands) == sorted(SUBCOMMANDS)


def test_export_lm_writes_a_loadable_average(tmp_path):
    import dataclasses

    import torch

    from k2dec.lm import RnnLM, RnnLmConfig, load_lm

    cfg = RnnLmConfig(vocab_size=7, embedding_dim=4, hidden_dim=4, num_layers=1)
    paths = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        lm = RnnLM(cfg)
        paths.append(tmp_path / f"checkpoint-{seed}.pt")
        torch.save({"model_type": lm.model_type, "model_config": dataclasses.asdict(cfg),
                    "model": lm.state_dict()}, paths[-1])
    out = tmp_path / "lm.pt"
    r = CliRunner().invoke(main, ["export-lm", *map(str, paths), "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert "from 2 checkpoint(s)" in r.output
    a, b, avg = (load_lm(p).state_dict() for p in (*paths, out))
    for name, value in avg.items():
        torch.testing.assert_close(value, (a[name] + b[name]) / 2, rtol=1e-3, atol=1e-3)
    r = CliRunner().invoke(main, ["export-lm", "-o", str(out)])
    assert r.exit_code != 0  # no checkpoints given


@pytest.fixture
def lexicon_file(tmp_path):
    p = tmp_path / "lexicon.txt"
    p.write_text("".join(f"{w} {' '.join(t)}\n" for w, t in TINY_LEXICON))
    (tmp_path / "lm.arpa").write_text(TINY_ARPA)
    return p


def test_prepare_lang_and_compile_every_graph(tmp_path, lexicon_file):
    runner = CliRunner()
    lang_dir = tmp_path / "lang"
    r = runner.invoke(main, ["prepare-lang", "--lang-dir", str(lang_dir),
                             "--lexicon", str(lexicon_file)])
    assert r.exit_code == 0, r.output
    for f in ("tokens.txt", "words.txt", "lexicon.txt", "lexicon_disambig.txt", "L.pt",
              "L_disambig.pt"):
        assert (lang_dir / f).is_file(), f
    lang = LangDir(lang_dir)
    for kind in ("H", "L", "HL", "HLG", "LG"):
        args = ["compile-graph", "--lang-dir", str(lang_dir), "--type", kind]
        if kind in ("HLG", "LG"):
            args += ["--arpa", str(tmp_path / "lm.arpa")]
        r = runner.invoke(main, args)
        assert r.exit_code == 0, (kind, r.output, r.exception)
        g = load_graph(lang_dir / f"{kind}.pt", lang.token_table, lang.word_table, kind=kind)
        assert g.num_arcs > 0


def test_compile_hlg_without_arpa_is_an_error(tmp_path, lexicon_file):
    runner = CliRunner()
    lang_dir = tmp_path / "lang"
    runner.invoke(main, ["prepare-lang", "--lang-dir", str(lang_dir), "--lexicon",
                         str(lexicon_file)])
    r = runner.invoke(main, ["compile-graph", "--lang-dir", str(lang_dir), "--type", "HLG"])
    assert r.exit_code != 0
    assert "needs an ARPA" in str(r.exception)


def test_prepare_lang_from_words_with_cmudict(tmp_path):
    words = tmp_path / "words.txt"
    words.write_text("HELLO WORLD\nHELLO THERE\n")
    r = CliRunner().invoke(main, ["prepare-lang", "--lang-dir", str(tmp_path / "lang"),
                                  "--words", str(words), "--sil-token", "SIL"])
    assert r.exit_code == 0, r.output
    lang = LangDir(tmp_path / "lang")
    assert "SIL" in lang.token_table and "WORLD" in lang.word_table
    words.write_text("HELLO QZXQZX\n")
    r = CliRunner().invoke(main, ["prepare-lang", "--lang-dir", str(tmp_path / "lang2"),
                                  "--words", str(words)])
    assert r.exit_code != 0 and "QZXQZX" in r.output and "--allow-oov" in r.output


@pytest.mark.skipif(shutil.which("dot") is None, reason="graphviz 'dot' is not installed")
@pytest.mark.parametrize("fmt", ["svg", "png"])
def test_draw_graph(tmp_path, lexicon_file, fmt):
    runner = CliRunner()
    lang_dir = tmp_path / "lang"
    runner.invoke(main, ["prepare-lang", "--lang-dir", str(lang_dir), "--lexicon",
                         str(lexicon_file)])
    out = tmp_path / f"L.{fmt}"
    r = runner.invoke(main, ["draw-graph", str(lang_dir / "L.pt"), "--out", str(out),
                             "--lang-dir", str(lang_dir)])
    assert r.exit_code == 0, (r.output, r.exception)
    data = out.read_bytes()
    assert data.startswith(b"\x89PNG") if fmt == "png" else b"<svg" in data
    r = runner.invoke(main, ["draw-graph", str(lang_dir / "L.pt"), "--out", str(out),
                             "--max-arcs", "3"])
    assert r.exit_code != 0 and "too big to draw" in str(r.exception)


def test_demo_runs_end_to_end(tmp_path, capsys):
    from k2dec.demo import run_synthetic_demo

    rates = run_synthetic_demo(tmp_path / "demo", num_utts=4, seed=1)
    out = capsys.readouterr().out
    assert "SYNTHETIC" in out and "1best (HLG)" in out
    assert set(rates) == {"ctc-greedy", "ctc-decoding (H)", "1best (HLG)"}
    assert all(0.0 <= v <= 100.0 for v in rates.values())


def test_prepare_decoding_graphs_is_idempotent(tmp_path, lexicon_file):
    from k2dec.graph import prepare_decoding_graphs
    from k2dec.lang import read_lexicon, write_lang_dir

    lang = write_lang_dir(tmp_path / "lang", read_lexicon(lexicon_file))
    arpa = tmp_path / "lm.arpa"
    paths = prepare_decoding_graphs(lang.path, arpa, arpa)
    assert set(paths) == {"HLG", "LG", "G"} and all(p.is_file() for p in paths.values())
    stamps = {k: p.stat().st_mtime_ns for k, p in paths.items()}
    prepare_decoding_graphs(lang.path, arpa, arpa)
    assert stamps == {k: p.stat().st_mtime_ns for k, p in paths.items()}
    g = load_graph(paths["G"], lang.token_table, lang.word_table, kind="G_4_gram")
    assert hasattr(g, "lm_scores")


def test_compile_graph_prints_size_and_names_words_on_no_arc(tmp_path, lexicon_file):
    """Homophones (D/E) are on arcs; a lexicon word the LM lacks is named in a warning."""
    runner = CliRunner()
    lexicon_file.write_text(lexicon_file.read_text() + "NOLM c a\n")
    lang_dir = tmp_path / "lang"
    runner.invoke(main, ["prepare-lang", "--lang-dir", str(lang_dir), "--lexicon",
                         str(lexicon_file)])
    for kind, missing in (("L", None), ("HLG", "NOLM"), ("LG", "NOLM")):
        args = ["compile-graph", "--lang-dir", str(lang_dir), "--type", kind]
        r = runner.invoke(main, args + (["--arpa", str(tmp_path / "lm.arpa")]
                                        if kind != "L" else []))
        assert r.exit_code == 0, r.output
        g = load_graph(lang_dir / f"{kind}.pt")
        assert f"{g.shape[0]} states, {g.num_arcs} arcs" in r.output
        if missing is None:
            assert "all 8 lexicon words are on some arc" in r.output
        else:
            assert f"1 of 8 lexicon words are on no arc and can never be decoded: {missing}" \
                in r.output
