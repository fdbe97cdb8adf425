"""The decode driver: one place that plans methods, checks everything before the first cut,
decodes every test set with every method and makes the table."""

from __future__ import annotations

import math

import pytest
from click.testing import CliRunner

from k2dec.cli import main
from k2dec.job import (
    DecodeConfig,
    decode_cuts,
    load_assets,
    plan_methods,
    results_table,
    run_decode,
)
from k2dec.methods import get_method, list_methods
from k2dec.primitives.hypothesis import HypothesisRecord
from k2dec.results import read_results


def test_plan_applies_assignments_where_the_field_is():
    runs = plan_methods(["nbest", "modified_beam_search", "fast_beam_search_nbest_LG"],
                        ["beam_size=8", "fast_beam_search_nbest_LG:beam=8", "num_paths=7",
                         "lattice.search_beam=12"])
    cfg = {r.method.name: r.config for r in runs}
    assert cfg["nbest"].nbest.num_paths == 7 and cfg["nbest"].lattice.search_beam == 12.0
    assert cfg["modified_beam_search"].search.beam_size == 8
    assert cfg["fast_beam_search_nbest_LG"].search.beam == 8.0
    assert cfg["fast_beam_search_nbest_LG"].nbest.num_paths == 7
    assert [r.method for r in runs] == [get_method("nbest"), get_method("modified_beam_search"),
                                        get_method("fast_beam_search_nbest_LG")]
    assert plan_methods(["greedy_search"], ["beam=3"], require_used=False)[0].config == \
        get_method("greedy_search").default_config()


@pytest.mark.parametrize("methods, assignments, message", [
    (["nope"], [], "unknown decoding method 'nope'"),
    (["1best", "1best"], [], "method '1best' is given twice"),
    (["greedy_search"], ["nope=1"], "no given method has a field for nope=1"),
    (["greedy_search"], ["beam"], "expected KEY=VALUE, got 'beam'"),
    (["nbest-oracle", "nbest"], ["num_paths=2.7"], "num_paths=2.7: num_paths='2.7' does not fit "
     "the field's type \\(int\\) \\(in nbest-oracle, nbest\\)"),
    (["ctc-greedy-search"], ["attention_scale=2.0"],
     "no given method has a field for attention_scale=2.0"),
    (["nbest"], ["num_paths=0"], r"NbestConfig.num_paths must be an int in \[1, 10000\], got 0"),
    (["nbest"], ["nbest_scale=0"], "nbest_scale must be > 0"),
    (["rnn-lm"], ["lm_scales="], "lm_scales='' does not fit"),
])
def test_plan_refuses_bad_input(methods, assignments, message):
    with pytest.raises(ValueError, match=message):
        plan_methods(methods, assignments)


def test_a_key_means_one_thing_in_the_given_methods():
    """Every key means one thing (each part is one class): a plain key applies to every
    given method that has it; METHOD:KEY sets one method's; a key of version 0.1 that a given
    method has under a new name is refused, naming it."""
    with pytest.raises(ValueError) as e:
        plan_methods(["modified_beam_search", "fast_beam_search"], ["beam=8"])
    said = str(e.value)
    assert "'beam' was renamed in k2dec 0.2: use search.beam_size" in said
    assert "(in modified_beam_search)" in said
    runs = {r.method.name: r.config for r in plan_methods(
        ["1best", "modified_beam_search"], ["word_hotwords.word_score=3",
                                            "hotwords.token_score=1.5"])}
    assert runs["1best"].word_hotwords.word_score == 3.0
    assert runs["modified_beam_search"].hotwords.token_score == 1.5
    with pytest.raises(ValueError, match="'hotwords_score' was renamed in k2dec 0.2: use "
                                         "word_hotwords.word_score"):
        plan_methods(["1best", "modified_beam_search"], ["hotwords_score=3"])
    runs = plan_methods(["fast_beam_search_LG", "1best"], ["graph.scale=0.5"])
    assert [r.config.graph.scale for r in runs] == [0.5, 0.5]  # the graph's weight in both
    with pytest.raises(ValueError, match="'ngram_lm_scale' was renamed .* graph.scale"):
        plan_methods(["fast_beam_search_LG", "nbest-rescoring"], ["ngram_lm_scale=0.5"])
    runs = plan_methods(["modified_beam_search", "beam_search", "ctc-prefix-beam-search"],
                        ["beam_size=6", "temperature=1.5"])  # hypotheses kept in all three
    assert [r.config.search.beam_size for r in runs] == [6, 6, 6]
    assert plan_methods(["fast_beam_search", "modified_beam_search"],
                        ["fast_beam_search:beam=8"])[0].config.search.beam == 8.0
    with pytest.raises(ValueError, match="'nope:beam=3' names no given method"):
        plan_methods(["fast_beam_search"], ["nope:beam=3"])
    with pytest.raises(ValueError, match="no given method has a field for "
                                         "greedy_search:num_paths=3"):
        plan_methods(["greedy_search"], ["greedy_search:num_paths=3"])


def test_unused_keys_are_refused_with_the_keys_there_are():
    """The issue's example: none of these is read by ctc-greedy-search."""
    with pytest.raises(ValueError) as e:
        plan_methods(["ctc-greedy-search"], ["attention_scale=2.0", "num_paths=7",
                                             "hotwords_score=5"])
    assert "no given method has a field for attention_scale=2.0, num_paths=7, " \
           "hotwords_score=5 (the given methods' keys: search.subsampling_factor)" in str(e.value)
    assert "'hotwords_score' was renamed in k2dec 0.2 (now hotwords.token_score or " \
           "word_hotwords.word_score)" in str(e.value)


def test_list_methods_shows_each_methods_own_settings_by_part():
    from k2dec.job import describe_method, method_table
    from k2dec.methods import config_keys, describe_settings

    table = method_table(list_methods(), verbose=True)
    assert max(len(line) for line in table.splitlines()) <= 100
    blocks: dict[str, str] = {}
    for line in table.splitlines()[1:]:  # a method's row, then its indented lines
        if not line.startswith(" "):
            blocks[line.split()[0]] = ""
        if blocks:
            name = list(blocks)[-1]
            sep = "" if blocks[name].endswith(",") else " "
            blocks[name] += (sep if line.startswith(" " * 5) else "\n") + line.strip()
    for m in list_methods():
        lines = blocks[m.name].splitlines()
        parts = [x for x in lines if x.split(":")[0] in ("settings", *_config_parts(m))]
        keys = []
        for part in parts:
            name, values = part.split(": ", 1)
            prefix = "" if name == "settings" else f"{name}."
            keys += [prefix + kv.split("=")[0] for kv in values.split()]
        assert sorted(keys) == sorted(config_keys(m.default_config())), m.name
        assert parts == describe_settings(m.default_config()), m.name
    assert "attention_scale" not in blocks["1best"] and "num_paths" not in blocks["1best"]
    assert "rescore: sweep=false ngram_lm_scale=1.3 ngram_lm_scales=" in blocks["nbest-rescoring"]
    assert "sweep=false" not in method_table(list_methods())
    described = describe_method("fast_beam_search_LG").splitlines()
    assert described[0] == "fast_beam_search_LG (transducer; needs: LG.pt; hotwords: yes)"
    described = described[described.index("settings (--set PART.FIELD=VALUE):") + 1:]
    assert described == ["  search: beam=20.0 max_contexts=8 max_states=64 "
                             "temperature=1.0 blank_penalty=0.0 ilme_scale=0.0",
                             "      allow_partial=false termination_frame=true "
                             "decoder_tables=true", "  graph: scale=0.01",
                             "  hotwords: token_score=1.0 partial_share=0.5 whole_words=true"]
    with pytest.raises(ValueError, match="unknown decoding method 'nope'"):
        describe_method("nope")


def _config_parts(m) -> list[str]:
    """The part names of a method's config (``settings`` for its top-level fields)."""
    from k2dec.methods import describe_settings

    return [line.split(":")[0] for line in describe_settings(m.default_config())]


def _cli(s, out, *extra):
    return CliRunner().invoke(main, [
        "decode", "--cuts", str(s["cuts_path"]), "--model", str(s["model_path"]),
        "--out-dir", str(out), "--max-duration", "3", *extra])


@pytest.mark.parametrize("extra, message", [
    (["--method", "nbest", "--set", "num_paths=2.7"], "does not fit the field's type (int)"),
    (["--method", "nbest", "--set", "num_paths=0"],
     "NbestConfig.num_paths must be an int in [1, 10000], got 0"),
    (["--method", "nbest", "--set", "nbest_scale=0"], "nbest_scale must be > 0"),
    (["--method", "rnn-lm", "--set", "lm_scales="], "lm_scales='' does not fit"),
    (["--method", "1best"],
     "method '1best' needs the HLG graph (HLG.pt in --graph-dir or the lang dir"),
    (["--method", "rnn-lm"], "a neural LM (--rnn-lm FILE"),
    (["--method", "greedy_search", "--threads", "0"], "0 is not in the range x>=1"),
])
def test_cli_refuses_before_decoding_any_cut(decode_setup, tmp_path, extra, message):
    r = _cli(decode_setup, tmp_path / "out", *extra)
    assert r.exit_code != 0 and message in r.output, r.output
    assert not list(tmp_path.rglob("*.jsonl")), "nothing may be decoded"


def test_run_decode_equals_decode_cuts_and_makes_the_table(decode_setup, tmp_path):
    s = decode_setup
    assets = load_assets(s["model_path"], s["lang_dir"])
    cfg = DecodeConfig(max_duration=3.0, num_buckets=2)
    runs = plan_methods(["1best", "greedy_search"], ["lattice.output_beam=6"])
    rows = run_decode(assets, {"a": s["cuts"], "b": s["cuts"]}, runs, tmp_path / "run", cfg)
    assert [(r.test_set, r.method) for r in rows] == [
        ("a", "1best"), ("a", "greedy_search"), ("b", "1best"), ("b", "greedy_search")]
    one = decode_cuts(assets, s["cuts"], "1best", tmp_path / "one", "a", runs[0].config, cfg)
    assert read_results(one.results_path) == read_results(rows[0].results_path)
    assert rows[0].wers == one.wers and rows[0].headline == ("1best", one.wers["1best"])
    table = results_table(rows).splitlines()
    assert table[0] == ("| test set | method | setting | WER % | RTF | failed cuts (not in "
                        "WER) | degenerate hyps |")
    assert table[2].startswith(f"| a | 1best | 1best | {one.wers['1best']:.2f} | ")
    assert table[2].endswith(" | 1 of 6 | 0 |") and len(table) == 2 + 4
    with pytest.raises(ValueError, match="method 'fast_beam_search_LG' needs the LG graph"):
        run_decode(load_assets(s["model_path"]), {"a": s["cuts"]},
                   plan_methods(["fast_beam_search_LG"]), tmp_path / "x", cfg)
    assert not (tmp_path / "x").exists()


def test_results_lines_carry_the_hypothesis_records(decode_setup, tmp_path):
    s = decode_setup
    assets = load_assets(s["model_path"], s["lang_dir"])
    cfg = DecodeConfig(max_duration=3.0, num_buckets=2)
    for name in ("1best", "greedy_search"):
        summary = decode_cuts(assets, s["cuts"], name, tmp_path, "t", config=cfg)
        for rec in read_results(summary.results_path).values():
            if rec["status"] != "ok":
                continue
            hyp = rec["hyps"][name]
            assert hyp["text"] == rec["hyp"]
            back = HypothesisRecord(**{k: tuple(v) if isinstance(v, list) else v
                                       for k, v in hyp.items() if k != "text"})
            assert back.token_frames is not None and math.isfinite(back.score)
            assert (back.words is not None) == (name == "1best")
            if name == "1best":
                assert back.word_frames is not None


def test_a_settings_file_set_is_checked_like_set(decode_setup, tmp_path):
    """``"set": ["nosuch_field=3"]`` in a --config file is refused as ``--set nosuch_field=3``
    is: exit status 2 before anything is decoded, the file named."""
    from k2dec.job import DecodeSettings, write_settings

    path = write_settings(DecodeSettings(("nosuch_field=3",)), tmp_path / "s.json")
    by_set = _cli(decode_setup, tmp_path / "a", "--method", "greedy_search", "--set",
                  "nosuch_field=3")
    by_file = _cli(decode_setup, tmp_path / "b", "--method", "greedy_search", "--config",
                   str(path))
    assert by_set.exit_code == by_file.exit_code == 2, (by_set.output, by_file.output)
    assert "no given method has a field for nosuch_field=3" in by_file.output
    assert str(path) in by_file.output.replace("\n", "")
    assert not list(tmp_path.rglob("*.jsonl"))
    # a field of another given method is no error; the demo's plan ignores unused ones
    runs = plan_methods(["greedy_search", "modified_beam_search"],
                        settings=DecodeSettings(("beam_size=8",)))
    assert runs[1].config.search.beam_size == 8
    with pytest.raises(ValueError, match="no given method has a field for beam_size=8"):
        plan_methods(["greedy_search"], settings=DecodeSettings(("beam_size=8",)))
    assert plan_methods(["greedy_search"], settings=DecodeSettings(("beam_size=8",)),
                        require_used=False)[0].assignments == ()
    with pytest.raises(ValueError, match="'beam' was renamed .* \\(in modified_beam_search\\)"):
        plan_methods(["modified_beam_search"], settings=DecodeSettings(("beam=8",)))


def test_the_table_shows_the_configured_setting_never_the_lowest_wer(tmp_path):
    """Rows and settings keep their order; the headline of a method is its configured
    setting (its first), not the one with the lowest test WER; failed cuts beside it."""
    from k2dec.job import DecodeSummary

    rows = [DecodeSummary("m", "t", {"lm_scale_0.5": 40.0, "lm_scale_0.1": 10.0,
                                     "lm_scale_3.0": 90.0}, 0.5, 30, ["x", "y"],
                          tmp_path / "r.jsonl", "ValueError: too long"),
            DecodeSummary("a", "t", {"a": 20.0}, 0.25, 30, [], tmp_path / "q.jsonl",
                          degenerate=3)]
    assert rows[0].headline == ("lm_scale_0.5", 40.0)
    table = results_table(rows).splitlines()[2:]
    assert table == ["| t | m | lm_scale_0.5 | 40.00 | 0.5000 | 2 of 30 | 0 |",
                     "| t | a | a | 20.00 | 0.2500 | 0 of 30 | 3 |"]
    swept = results_table(rows, all_settings=True).splitlines()[2:]
    assert [line.split(" | ")[2] for line in swept] == ["lm_scale_0.5", "lm_scale_0.1",
                                                       "lm_scale_3.0", "a"]


@pytest.mark.parametrize("extra, message", [
    (["--max-duration", "0"], "0.0 is not in the range"),
    (["--max-duration", "-5"], "-5.0 is not in the range"),
    ([], "method 'greedy_search' needs a bpe.model or tokens.txt"),
])
def test_what_would_fail_every_cut_is_refused_up_front(decode_setup, tmp_path, extra,
                                                       message):
    """No batch size, or no token table for a method that gives token ids (the model file has
    none beside it, and no --lang-dir): exit 2 before any cut, not a job of failed cuts."""
    r = _cli(decode_setup, tmp_path / "out", "--method", "greedy_search", *extra)
    assert r.exit_code == 2 and message in r.output, r.output
    assert not list(tmp_path.rglob("*.jsonl")), "nothing may be decoded"
    for bad in (0, -5, float("nan"), float("inf")):
        with pytest.raises(ValueError,
                           match=r"DecodeConfig.max_duration must be a number in \(0, 100000\]"):
            DecodeConfig(max_duration=bad)


def test_exit_status_says_whether_every_cut_was_decoded(decode_setup, tmp_path):
    """0 when every cut of every method decoded; 3 when some failed, after writing the
    others, with one line per method: how many failed and the first reason."""
    s = decode_setup
    good = s["cuts"].filter(lambda c: c.id != "utt5")
    good.to_file(tmp_path / "good.jsonl.gz")
    lang = ["--lang-dir", str(s["lang_dir"]), "--method", "greedy_search", "--method", "1best"]
    r = _cli(dict(s, cuts_path=tmp_path / "good.jsonl.gz"), tmp_path / "good", *lang)
    assert r.exit_code == 0 and "failed (first" not in r.output, r.output
    r = _cli(s, tmp_path / "bad", *lang)
    assert r.exit_code == 3, r.output
    for m in ("greedy_search", "1best"):
        assert (f"cuts {m}: 1 of 6 cuts failed (first: utt5: too short: 3 feature frames, the "
                f"model needs at least 7)") in r.output
        records = read_results(tmp_path / "bad" / m / "results-cuts.jsonl")
        assert sorted(k for k, v in records.items() if v["status"] == "ok") == [
            f"utt{i}" for i in range(5)]
        assert (tmp_path / "bad" / m / "wer-summary-cuts.txt").read_text().splitlines()[
            1].endswith("\t1 of 6")


def test_outputs_words_says_which_methods_give_word_ids(decode_setup, tmp_path):
    """``Method.outputs_words`` (what the up-front check of words.txt / tokens relies on)
    matches the hypotheses of every method the fixture's assets run."""
    from k2dec.job import split_available
    from k2dec.methods import list_methods

    s = decode_setup
    assets = load_assets(s["model_path"], s["lang_dir"])
    ok, _ = split_available([m for m in list_methods() if assets.model.supports(m)],
                            assets.resources)
    assert len(ok) > 15
    cuts = s["cuts"].subset(first=2)
    rows = run_decode(assets, {"t": cuts}, plan_methods(ok, ["nbest.num_paths=3"],
                                                        require_used=False),
                      tmp_path, DecodeConfig(max_duration=3.0))
    for method, row in zip(ok, rows):
        records = [r for r in read_results(row.results_path).values() if r["status"] == "ok"]
        assert records, method.name
        words = {h.get("words") is not None for r in records for h in r["hyps"].values()}
        assert words == {method.outputs_words}, method.name
