"""``k2dec decode`` as a user meets it: graphs from --graph-dir next to a lang dir that is
only read, the ``hyp`` of a sweeping method at its configured scales, no third-party
warnings, a progress bar with a total."""

from __future__ import annotations

import shutil
import warnings

import pytest
from click.testing import CliRunner

from k2dec.cli import main
from k2dec.job import DecodeConfig, decode_cuts, load_assets, plan_methods
from k2dec.results import read_results


@pytest.fixture(scope="module")
def bare_lang(decode_setup, tmp_path_factory):
    """A copy of the fixture's lang dir without graphs, and a graph dir with HLG, LG, G."""
    d = tmp_path_factory.mktemp("bare")
    s = decode_setup
    lang = d / "lang"
    shutil.copytree(s["lang_dir"], lang,
                    ignore=lambda _, names: [n for n in names if n.endswith(".pt")])
    gdir = d / "graphs"
    for kind in ("HLG", "LG", "G"):
        r = CliRunner().invoke(main, ["compile-graph", "--lang-dir", str(lang), "--type", kind,
                                      "--arpa", str(s["dir"] / "lm.arpa"), "--graph-dir",
                                      str(gdir)])
        assert r.exit_code == 0, r.output
    return lang, gdir


def _decode(s, out, *extra):
    return CliRunner().invoke(main, [
        "decode", "--cuts", str(s["cuts_path"]), "--model", str(s["model_path"]),
        "--out-dir", str(out), "--max-duration", "3", *extra])


def test_graphs_come_from_the_graph_dir(decode_setup, bare_lang, tmp_path):
    s = decode_setup
    lang, gdir = bare_lang
    before = sorted(p.name for p in lang.iterdir())
    r = _decode(s, tmp_path / "no", "--lang-dir", str(lang), "--method", "1best")
    assert r.exit_code != 0 and "HLG.pt in --graph-dir or the lang dir" in r.output
    r = _decode(s, tmp_path / "out", "--lang-dir", str(lang), "--graph-dir", str(gdir),
                "--method", "1best", "--method", "fast_beam_search_LG", "--method",
                "nbest-rescoring", "--set", "num_paths=5")
    assert r.exit_code == 3, r.output  # the fixture's too short cut
    assert sorted(p.name for p in lang.iterdir()) == before
    # the same hypotheses as with the graphs in the lang dir (compiled there by the fixture)
    cfg = DecodeConfig(max_duration=3.0)
    for run in plan_methods(["1best", "fast_beam_search_LG"]):
        ref = decode_cuts(load_assets(s["model_path"], s["lang_dir"]), s["cuts"], run.method,
                          tmp_path / "ref", "cuts", run.config, cfg)
        got = read_results(tmp_path / "out" / run.method.name / "results-cuts.jsonl")
        assert got == read_results(ref.results_path)
    r = _decode(s, tmp_path / "x", "--graph-dir", str(gdir), "--method", "1best")
    assert r.exit_code != 0 and "graph_dir needs the lang dir" in r.output


def test_hyp_is_the_configured_setting_also_in_a_sweep(decode_setup, bare_lang, tmp_path):
    s = decode_setup
    lang, gdir = bare_lang
    r = _decode(s, tmp_path, "--lang-dir", str(lang), "--graph-dir", str(gdir), "--method",
                "nbest-rescoring", "--set", "num_paths=5", "--set", "ngram_lm_scale=0.7",
                "--set", "sweep=true", "--set", "ngram_lm_scales=0.1,3.0")
    assert r.exit_code == 3, r.output  # the fixture's too short cut
    lines = read_results(tmp_path / "nbest-rescoring" / "results-cuts.jsonl")
    ok = [rec for rec in lines.values() if rec["status"] == "ok"]
    assert ok
    for rec in ok:
        assert list(rec["hyps"]) == ["ngram_lm_scale_0.7", "ngram_lm_scale_0.1",
                                     "ngram_lm_scale_3.0"]
        assert rec["hyp"] == rec["hyps"]["ngram_lm_scale_0.7"]["text"]


def test_no_third_party_warnings_and_a_progress_total(decode_setup, tmp_path):
    from lhotse import CutSet
    from lhotse.utils import fastcopy

    s = decode_setup
    # 12 cuts (2 too short): enough for the duration buckets of lhotse's bucketing sampler
    cuts = CutSet.from_cuts(fastcopy(c, id=f"{c.id}-{k}") for k in range(2) for c in s["cuts"])
    cuts.to_file(tmp_path / "twice.jsonl.gz")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = _decode(dict(s, cuts_path=tmp_path / "twice.jsonl.gz"), tmp_path / "out",
                    "--lang-dir", str(s["lang_dir"]), "--method", "greedy_search",
                    "--method", "1best")
    assert r.exit_code == 3, r.output  # the fixture's too short cuts
    assert [str(w.message) for w in caught] == []
    assert "twice greedy_search: 100%" in r.output and "10/10" in r.output


#: token-output methods: none reads words.txt
TOKEN_METHODS = ("ctc-greedy-search", "ctc-prefix-beam-search", "ctc-decoding",
                 "ctc-prefix-beam-search-attention-decoder-rescoring", "greedy_search",
                 "modified_beam_search", "fast_beam_search", "attention-beam-search")


def test_token_methods_need_no_words_txt(decode_setup, tmp_path):
    """A lang dir with tokens.txt and bpe.model only (as icefall and sherpa-onnx exports ship
    them): every token method decodes every cut, with the hypotheses of the full lang dir
    (hotwords too: the token-level ones)."""
    s = decode_setup
    lang = tmp_path / "lang"
    lang.mkdir()
    for name in ("tokens.txt", "bpe.model"):
        shutil.copy(s["lang_dir"] / name, lang / name)
    (tmp_path / "hot.txt").write_text("THE CAT\n")
    args = [a for m in TOKEN_METHODS for a in ("--method", m)] + [
        "--hotwords", str(tmp_path / "hot.txt")]
    r = _decode(s, tmp_path / "bare", "--lang-dir", str(lang), *args)
    assert "words.txt" not in r.output, r.output
    full = _decode(s, tmp_path / "full", "--lang-dir", str(s["lang_dir"]), *args)
    assert r.exit_code == full.exit_code, (r.output, full.output)
    for m in TOKEN_METHODS:
        got = read_results(tmp_path / "bare" / m / "results-cuts.jsonl")
        assert sorted(k for k, v in got.items() if v["status"] != "ok") == ["utt5"], got
        assert got == read_results(tmp_path / "full" / m / "results-cuts.jsonl")
