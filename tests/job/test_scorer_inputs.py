"""``k2dec decode --hotwords FILE --lodr-arpa FILE``: the files reach the scorer methods."""

from __future__ import annotations

from click.testing import CliRunner

from k2dec.cli import main
from k2dec.job import load_assets
from k2dec.lang import load_bpe_model
from k2dec.scorers import TokenNgramScorer, train_token_arpa
from tests.job.conftest import TEXT


def test_load_assets_encodes_hotwords_and_reads_the_lodr_ngram(decode_setup, tmp_path):
    s = decode_setup
    hot = tmp_path / "hot.txt"
    hot.write_text("CAT SAT\nHOME :3.5\nCAT NOSUCHWORD\n")
    arpa = train_token_arpa(s["dir"] / "text.txt", s["lang_dir"] / "bpe.model",
                            tmp_path / "tokens.arpa")
    assets = load_assets(s["model_path"], s["lang_dir"], hotwords=hot, lodr_arpa=arpa)
    sp = load_bpe_model(s["lang_dir"] / "bpe.model")
    assert assets.resources.hotwords == ((tuple(sp.encode("CAT SAT")), None),
                                         (tuple(sp.encode("HOME")), 3.5),
                                         (tuple(sp.encode("CAT NOSUCHWORD")), None))
    wt = assets.lang.word_table  # the HLG methods' phrases: words.txt ids, OOV phrase left out
    assert assets.resources.hotword_words == (((wt["CAT"], wt["SAT"]), None),
                                              ((wt["HOME"],), 3.5))
    assert isinstance(assets.resources.lodr, TokenNgramScorer)
    assert assets.resources.lodr.vocab_size == sp.get_piece_size()


def test_cli_decode_with_hotwords_and_lodr(decode_setup, tmp_path):
    s = decode_setup
    hot = tmp_path / "hot.txt"
    hot.write_text("\n".join(sorted({w for t in TEXT for w in t.split()})[:3]) + "\n")
    arpa = train_token_arpa(s["dir"] / "text.txt", s["lang_dir"] / "bpe.model",
                            tmp_path / "tokens.arpa")
    args = ["decode", "--cuts", str(s["cuts_path"]), "--model", str(s["model_path"]),
            "--lang-dir", str(s["lang_dir"]), "--method", "modified_beam_search",
            "--method", "ctc-prefix-beam-search", "--method", "1best", "--method", "mbr",
            "--method", "fast_beam_search_nbest_LG", "--hotwords", str(hot), "--lodr-arpa",
            str(arpa), "--out-dir", str(tmp_path / "out"), "--max-duration", "3"]
    # a bonus per token in the token-level methods, per word in the HLG ones: two names
    r = CliRunner().invoke(main, [*args, "--set", "hotwords_score=1.5"])
    assert r.exit_code == 2 and "'hotwords_score' was renamed in k2dec 0.2" in r.output, \
        r.output
    r = CliRunner().invoke(main, [*args, "--set", "token_score=1.5",
                                  "--set", "word_hotwords.word_score=1.5"])
    assert r.exit_code == 3, (r.output, r.exception)  # utt5 is too short
    for m in ("modified_beam_search", "ctc-prefix-beam-search", "1best", "mbr",
              "fast_beam_search_nbest_LG"):
        assert (tmp_path / "out" / m / "results-cuts.jsonl").is_file()
    r = CliRunner().invoke(main, [
        "decode", "--cuts", str(s["cuts_path"]), "--model", str(s["model_path"]),
        "--lang-dir", str(s["lang_dir"]), "--method", "modified_beam_search_LODR",
        "--out-dir", str(tmp_path / "out2")])
    assert r.exit_code != 0 and "--lodr-arpa" in r.output
