from __future__ import annotations

import shutil

import pytest
from click.testing import CliRunner

from k2dec.cli import main
from k2dec.graph import load_graph
from k2dec.lang import LangDir
from k2dec.testing.lang import TINY_ARPA, TINY_LEXICON

SUBCOMMANDS = ["prepare-lang", "compile-graph", "draw-graph", "decode", "tune", "demo",
               "train-lm", "export-lm", "lm-perplexity", "train-token-lm", "align"]


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
    assert "needs an ARPA" in r.output


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
    assert r.exit_code == 2 and "too big to draw" in r.output, r.output


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


def _method_blocks(output: str) -> tuple[list[str], dict[str, list[str]]]:
    """The header and ``{method: its lines}`` of a ``--list-methods`` output: a row starts a
    method's block (unindented, its name first), every other line is indented."""
    lines = output.strip().splitlines()
    blocks: dict[str, list[str]] = {}
    current = None
    for line in lines[1:]:
        if not line.startswith(" "):
            current = line.split()[0]
            blocks[current] = []
        if current is not None:
            blocks[current].append(line)
    return lines[0].split(), blocks


def _unwrapped(lines: list[str]) -> list[str]:
    """Lines indented by more than 4 columns joined to the line before (wrapped text)."""
    out: list[str] = []
    for line in lines:
        if out and line.startswith(" " * 5):
            sep = "" if out[-1].endswith(",") else " "
            out[-1] += sep + line.strip()
        else:
            out.append(line)
    return out


@pytest.mark.parametrize("verbose", [[], ["-v"]])
def test_list_methods_fits_100_columns_and_names_every_method(verbose):
    from k2dec.methods import describe_settings, list_methods

    r = CliRunner().invoke(main, ["decode", "--list-methods", *verbose])  # no --model needed
    assert r.exit_code == 0, r.output
    assert max(len(line) for line in r.output.splitlines()) <= 100
    head, blocks = _method_blocks(r.output)
    assert head == ["method", "family", "hotwords", "needs"]
    assert sorted(blocks) == sorted(m.name for m in list_methods())
    for m in list_methods():
        row = " ".join(line.strip() for line in blocks[m.name]  # needs may wrap in its column
                       if not line.startswith(" ") or line.startswith(" " * 20))
        name, family, hotwords, needs = row.split(maxsplit=3)
        assert (family, hotwords) == (m.family.value, "yes" if m.hotwords else "-")
        text = " ".join(line.strip() for line in blocks[m.name][1:])
        assert " ".join(m.description.split()) in text  # nothing of it cut
        for key, value in m.scale_fields().items():
            assert f"{key}={value}" in text
        settings = [line.strip() for line in _unwrapped(blocks[m.name])
                    if line.strip() in describe_settings(m.default_config())]
        assert settings == (describe_settings(m.default_config()) if verbose else []), m.name
    rows = {k: " ".join(v) for k, v in blocks.items()}
    assert "HLG.pt, G_4_gram.pt" in rows["nbest-rescoring"]
    assert "HLG.pt, --rnn-lm" in rows["rnn-lm"] and "HLG.pt, references" in rows["nbest-oracle"]
    assert "LG.pt" in rows["fast_beam_search_nbest_LG"]
    assert "references" in rows["fast_beam_search_nbest_oracle"]
    assert "attention decoder" in rows["attention-beam-search"]
    assert rows["greedy_search"].split()[3] == "-"
    r = CliRunner().invoke(main, ["decode", "--method", "1best"])
    assert r.exit_code != 0 and "--out-dir is required" in r.output


def test_list_methods_verbose_from_the_group_option():
    r = CliRunner().invoke(main, ["-v", "decode", "--list-methods"])
    assert r.exit_code == 0, r.output
    assert "rescore: sweep=false ngram_lm_scale=1.3" in r.output
    r = CliRunner().invoke(main, ["decode", "--list-methods"])
    assert "sweep=false" not in r.output and "--describe METHOD" in r.output


def test_describe_shows_one_methods_settings_by_part():
    from k2dec.methods import describe_settings, list_methods

    r = CliRunner().invoke(main, ["decode", "--describe", "modified_beam_search_LODR"])
    assert r.exit_code == 0, r.output
    lines = r.output.strip().splitlines()
    assert lines[0].startswith("modified_beam_search_LODR (transducer; needs: --rnn-lm, "
                               "--lodr-arpa; hotwords: yes)")
    lines = lines[lines.index("settings (--set PART.FIELD=VALUE):") + 1:]
    parts = [line.split(":")[0].strip() for line in lines]
    assert parts == ["search", "fusion", "hotwords"]
    assert "beam_size=4" in lines[0] and "lm_scale=0.42 lodr_scale=-0.24" in lines[1]
    for m in list_methods():  # every line fits; nothing of a part is cut
        r = CliRunner().invoke(main, ["decode", "--describe", m.name])
        assert max(len(line) for line in r.output.splitlines()) <= 100, m.name
        start = r.output.splitlines().index("settings (--set PART.FIELD=VALUE):") + 1
        got = [line.strip() for line in _unwrapped(r.output.splitlines()[start:])]
        assert got == describe_settings(m.default_config()), m.name
    r = CliRunner().invoke(main, ["decode", "--describe", "nope"])
    assert r.exit_code == 2 and "unknown decoding method 'nope'" in r.output


def test_compile_graph_reads_gzipped_arpa_and_builds_the_rescoring_G(tmp_path, lexicon_file):
    import gzip

    import torch

    from k2dec.graph import build_rescoring_G

    runner = CliRunner()
    lang_dir = tmp_path / "lang"
    runner.invoke(main, ["prepare-lang", "--lang-dir", str(lang_dir), "--lexicon",
                         str(lexicon_file)])
    gz = tmp_path / "lm.arpa.gz"
    gz.write_bytes(gzip.compress((tmp_path / "lm.arpa").read_bytes()))
    lang = LangDir(lang_dir)
    for kind, file in (("HLG", "HLG.pt"), ("LG", "LG.pt"), ("G", "G_4_gram.pt")):
        got = {}
        for arpa in ("lm.arpa", "lm.arpa.gz"):
            out = tmp_path / f"graphs-{arpa}" / kind
            r = runner.invoke(main, ["compile-graph", "--lang-dir", str(lang_dir), "--type",
                                     kind, "--arpa", str(tmp_path / arpa), "--graph-dir",
                                     str(out)])
            assert r.exit_code == 0, r.output
            assert f"wrote {out / file}" in r.output
            got[arpa] = load_graph(out / file, lang.token_table, lang.word_table)
        plain, zipped = got.values()
        assert torch.equal(plain.arcs.values(), zipped.arcs.values())
        assert torch.equal(plain.scores, zipped.scores)
    want = build_rescoring_G(tmp_path / "lm.arpa", lang.word_table)
    assert torch.equal(zipped.arcs.values(), want.arcs.values())
    assert torch.equal(zipped.lm_scores, want.lm_scores)
    (tmp_path / "bad.arpa.gz").write_bytes(b"not gzip")
    r = runner.invoke(main, ["compile-graph", "--lang-dir", str(lang_dir), "--type", "G",
                             "--arpa", str(tmp_path / "bad.arpa.gz")])
    # not gzip after all: read as the text it is, which is no ARPA file (named, not a temp copy)
    assert r.exit_code == 2 and f"{tmp_path / 'bad.arpa.gz'}: no \\data\\ header" in r.output


def test_graph_dir_leaves_the_lang_dir_as_it_is(tmp_path, lexicon_file):
    from k2dec.lang import read_lexicon, write_lang_dir

    lang = write_lang_dir(tmp_path / "lang", read_lexicon(lexicon_file))  # no L.pt
    before = {p.name: p.stat().st_mtime_ns for p in lang.path.iterdir()}
    gdir = tmp_path / "graphs"
    for kind in ("HLG", "LG", "G", "L"):
        r = CliRunner().invoke(main, ["compile-graph", "--lang-dir", str(lang.path), "--type",
                                      kind, "--arpa", str(tmp_path / "lm.arpa"),
                                      "--graph-dir", str(gdir)])
        assert r.exit_code == 0, r.output
    assert {p.name: p.stat().st_mtime_ns for p in lang.path.iterdir()} == before
    assert sorted(p.name for p in gdir.iterdir()) == [
        "G_4_gram.pt", "HLG.pt", "L.pt", "LG.pt", "L_disambig.pt"]


def test_demo_help_describes_the_shipped_demo():
    r = CliRunner().invoke(main, ["demo", "--help"])
    assert r.exit_code == 0
    text = " ".join(r.output.split())
    assert "shipped test sets" in text and "every method" in text and "--tune" in text
    assert "Until a trained model ships" not in text
