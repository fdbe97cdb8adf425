"""``k2dec tune``: the chosen setting is the best of deciding every setting separately, the
settings file it writes makes ``k2dec decode --config`` reproduce the tuned WER, and what
cannot be tuned is refused before decoding."""

from __future__ import annotations

import json
import math

import pytest
from click.testing import CliRunner

from k2dec.cli import main
from k2dec.job import (
    DecodeConfig,
    DecodeSettings,
    decode_cuts,
    load_assets,
    plan_methods,
    read_settings,
    tune_methods,
    tuned_settings,
    write_settings,
)
from k2dec.methods import override_config

CFG = DecodeConfig(max_duration=3.0, num_buckets=2)


@pytest.fixture(scope="module")
def graphs(decode_setup, tmp_path_factory):
    """HLG/LG in the lang dir (the fixture's), the rescoring G in a graph dir of its own."""
    gdir = tmp_path_factory.mktemp("graphs")
    s = decode_setup
    r = CliRunner().invoke(main, ["compile-graph", "--lang-dir", str(s["lang_dir"]), "--type",
                                  "G", "--arpa", str(s["dir"] / "lm.arpa"), "--graph-dir",
                                  str(gdir)])
    assert r.exit_code == 0, r.output
    return gdir


def _brute_force_best(assets, cuts, run, points, tmp_path):
    """WER of every (grid point, scale) setting, each decoded on its own (no sweep)."""
    wers = {}
    for point in points:
        cfg = override_config(run.config, [*point, *(["rescore.sweep=true"] if run.method.sweeps
                                                     else [])])
        for setting in run.method.settings(cfg):
            single = override_config(run.config, [*point, *setting.assignments])
            key = point + setting.assignments
            out = tmp_path / "brute" / str(len(wers))
            summary = decode_cuts(assets, cuts, run.method, out, "dev", single, CFG)
            wers[key] = next(iter(summary.wers.values()))
    return wers


def test_tune_chooses_the_best_setting_of_a_brute_force_search(decode_setup, graphs, tmp_path):
    s = decode_setup
    assets = load_assets(s["model_path"], s["lang_dir"], graph_dir=graphs)
    runs = plan_methods(["nbest-rescoring", "1best"],
                        ["ngram_lm_scales=0.1,1.0,4.0", "num_paths=5", "ngram_lm_scale=0.5"])
    results = tune_methods(assets, {"dev": s["cuts"]}, runs, tmp_path / "tune",
                           ["graph.scale=0.3,0.6"], CFG)
    assert [r.method for r in results] == ["nbest-rescoring", "1best"]
    for run, result in zip(runs, results):
        points = [(), ("graph.scale=0.3",)]  # graph.scale=0.6 is the default: no new point
        wers = _brute_force_best(assets, s["cuts"], run, points, tmp_path / run.method.name)
        assert result.num_settings == len(wers)
        assert result.dev_wer == pytest.approx(min(wers.values()))
        assert result.start_wer == pytest.approx(wers[()])
        assert wers[result.chosen] == pytest.approx(result.dev_wer)
        # the first of equally good settings wins
        assert result.chosen == next(k for k, w in wers.items()
                                     if w == pytest.approx(result.dev_wer))
        # the full assignments reproduce the chosen config from the defaults
        assert override_config(run.method.default_config(), result.assignments) == \
            override_config(run.config, result.chosen)


def test_tune_writes_a_file_that_decode_reads(decode_setup, graphs, tmp_path):
    s = decode_setup
    out = tmp_path / "tuned.json"
    common = ["--cuts", str(s["cuts_path"]), "--model", str(s["model_path"]), "--lang-dir",
              str(s["lang_dir"]), "--graph-dir", str(graphs), "--max-duration", "3"]
    r = CliRunner().invoke(main, ["tune", *common, "--method", "whole-lattice-rescoring",
                                  "--method", "nbest-rescoring", "--set", "num_paths=5",
                                  "--set", "ngram_lm_scales=0.1,1.0,4.0", "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tuned.json"]  # nothing else
    data = json.loads(out.read_text())
    assert set(data["methods"]) == {"whole-lattice-rescoring", "nbest-rescoring"}
    assert "num_paths=5" in data["methods"]["nbest-rescoring"]
    settings = read_settings(out)
    tuned = {m: settings.tuned[m]["dev_wer"] for m in settings.methods}
    r = CliRunner().invoke(main, ["decode", *common, "--config", str(out), "--method",
                                  "whole-lattice-rescoring", "--method", "nbest-rescoring",
                                  "--out-dir", str(tmp_path / "dec")])
    assert r.exit_code == 3, r.output  # the fixture's too short cut
    rows = [line.split(" | ") for line in r.output.splitlines() if line.startswith("| cuts |")]
    assert len(rows) == 2
    for row in rows:
        assert float(row[3]) == pytest.approx(tuned[row[1]], abs=0.006)
    # --set on the command line wins over the file
    plan = plan_methods(["nbest-rescoring"], ["ngram_lm_scale=0.77"], settings=settings)
    assert plan[0].config.rescore.ngram_lm_scale == 0.77 and plan[0].config.nbest.num_paths == 5


def test_settings_files_apply_in_order_and_bad_ones_are_refused(tmp_path):
    settings = DecodeSettings(("num_paths=9", "beam_size=3"),
                              {"nbest": ("num_paths=11",), "1best": ("graph.scale=0.9",)})
    path = write_settings(settings, tmp_path / "s.json")
    back = read_settings(path)
    assert back == settings
    runs = {r.method.name: r for r in plan_methods(
        ["nbest", "greedy_search", "nbest-oracle", "modified_beam_search"], ["graph.scale=0.7"],
        settings=back)}
    assert runs["modified_beam_search"].config.search.beam_size == 3
    assert runs["nbest"].config.nbest.num_paths == 11  # per method after the global set
    assert runs["nbest-oracle"].config.nbest.num_paths == 9
    assert runs["nbest"].config.graph.scale == runs["nbest-oracle"].config.graph.scale == 0.7
    assert runs["greedy_search"].assignments == ()  # "beam_size" is no field of greedy search
    assert runs["nbest"].assignments == ("num_paths=9", "num_paths=11", "graph.scale=0.7")
    bad = {"x.json": ("{", "not a readable JSON file"),
           "y.json": ('{"sets": []}', "unknown keys sets"),
           "z.json": ('{"methods": {"nope": []}}', "unknown decoding method 'nope'"),
           "w.json": ('{"methods": {"nbest": "num_paths=3"}}', "list of 'KEY=VALUE'"),
           "v.json": ('{"set": ["num_paths"]}', "expected KEY=VALUE, got 'num_paths'")}
    for name, (text, message) in bad.items():
        (tmp_path / name).write_text(text)
        with pytest.raises(ValueError, match=message) as e:
            read_settings(tmp_path / name)
        assert name in str(e.value)
    with pytest.raises(ValueError, match=r"nbest_scale must be > 0 .* \(in nbest\)"):
        plan_methods(["nbest"], settings=DecodeSettings(methods={"nbest": ("nbest_scale=0",)}))


@pytest.mark.parametrize("methods, grid, message", [
    (["greedy_search"], [], "nothing to tune for greedy_search"),
    (["1best"], ["graph.scale=0.6"], "nothing to tune for 1best"),  # the default: no change
    (["nbest-rescoring"], ["nope=1,2"], "no given method has a field for the grid nope"),
    (["nbest-rescoring"], ["graph.scale="], "expected FIELD=V1,V2,... for a grid"),
    (["fast_beam_search_LG"], ["beam=4,8"], "method 'fast_beam_search_LG' needs the LG graph"),
])
def test_tune_refuses_before_decoding(decode_setup, tmp_path, methods, grid, message):
    s = decode_setup
    assets = load_assets(s["model_path"])
    with pytest.raises(ValueError, match=message):
        tune_methods(assets, {"dev": s["cuts"]}, plan_methods(methods), tmp_path, grid, CFG)
    assert not list(tmp_path.rglob("*.jsonl"))


def test_tune_needs_references(decode_setup, tmp_path):
    from lhotse import CutSet
    from lhotse.utils import fastcopy

    s = decode_setup
    cuts = CutSet.from_cuts(fastcopy(c, supervisions=[fastcopy(c.supervisions[0], text=None)])
                            for c in s["cuts"])
    assets = load_assets(s["model_path"], s["lang_dir"])
    with pytest.raises(ValueError, match="tuning needs references, but 6 cuts of 'dev'"):
        tune_methods(assets, {"dev": cuts}, plan_methods(["1best"]), tmp_path,
                     ["graph.scale=0.5,1.0"], CFG)


def test_tuned_settings_keep_the_other_methods_of_the_starting_file():
    from k2dec.job import TuneResult

    base = DecodeSettings(("beam_size=3",), {"rnn-lm": ("rescore.lm_scale=0.1",),
                                             "nbest-rescoring": ("ngram_lm_scale=9",)})
    r = TuneResult("nbest-rescoring", ("ngram_lm_scale=0.3",), ("ngram_lm_scale=0.3",), 10.0,
                   12.0, 17)
    out = tuned_settings([r], ["dev"], base)
    assert out.assignments == ("beam_size=3",)
    assert out.methods == {"rnn-lm": ("rescore.lm_scale=0.1",),
                           "nbest-rescoring": ("ngram_lm_scale=0.3",)}
    assert out.tuned["nbest-rescoring"]["dev_wer"] == 10.0
    assert not math.isnan(out.tuned["nbest-rescoring"]["start_wer"])


def _words_and_correctness(results_path, key):
    """Per word of setting ``key``: its confidence and whether kaldialign pairs it with the
    same reference word, read straight off the JSONL records."""
    import kaldialign

    from k2dec.results import read_results

    confs, correct = [], []
    for rec in read_results(results_path).values():
        if rec["status"] != "ok" or rec["hyps"][key].get("error"):
            continue
        hyp = rec["hyps"][key]
        confs += hyp["word_confidences"]
        pairs = kaldialign.align(rec["ref"], hyp["text"], "*")
        correct += [r == h for r, h in pairs if h != "*"]
    return confs, correct


def test_tune_calibrates_the_chosen_settings_confidences_and_decode_applies_it(
        decode_setup, graphs, tmp_path):
    from k2dec.job import run_decode
    from k2dec.results import (
        Calibration,
        fit_calibration,
        normalized_cross_entropy,
        read_ctm,
        read_results,
    )

    s = decode_setup
    assets = load_assets(s["model_path"], s["lang_dir"], graph_dir=graphs)
    runs = (plan_methods(["nbest-rescoring"], ["ngram_lm_scales=0.1,1.0,4.0", "num_paths=5"])
            + plan_methods(["mbr"]))
    results = tune_methods(assets, {"dev": s["cuts"]}, runs, tmp_path / "tune",
                           ["am_posterior_scale=0.5,1.0"], CFG)
    settings = tuned_settings(results, ["dev"],
                              base=DecodeSettings(calibration={
                                  "nbest-rescoring": {"stale": Calibration(2.0, 1.0)},
                                  "rnn-lm": {"rnn_lm_scale_0.5": Calibration(3.0, 0.0)}}))
    # a re-tuned method's old calibration goes, another method's stays
    assert settings.calibration["rnn-lm"] == {"rnn_lm_scale_0.5": Calibration(3.0, 0.0)}
    path = write_settings(settings, tmp_path / "tuned.json")
    assert read_settings(path) == settings
    runs = plan_methods(["nbest-rescoring", "mbr"], settings=read_settings(path))
    rows = run_decode(assets, {"dev": s["cuts"]}, runs, tmp_path / "dec", CFG)
    checked = 0
    for run, result, row in zip(runs, results, rows):
        keys = sorted(row.wers)
        # every setting the tuned config reports is calibrated (mbr: "mbr" and "1best")
        assert sorted(result.calibration) == keys == sorted(run.calibration)
        assert settings.calibration[run.method.name] == result.calibration
        summary = (tmp_path / "dec" / run.method.name / "confidence-summary-dev.txt")
        lines = {r.split("\t")[0]: r.split("\t") for r in summary.read_text().splitlines()[1:]}
        for key in keys:
            confs, correct = _words_and_correctness(row.results_path, key)
            cal = fit_calibration(confs, correct)  # the tuned setting's words are the dev's
            got = result.calibration[key]
            assert (got.a, got.b) == pytest.approx((cal.a, cal.b), abs=1e-6)
            want = cal(confs).tolist()
            ctm = read_ctm(tmp_path / "dec" / run.method.name / f"ctm-dev-{key}.ctm")
            written = [w.confidence for cut in sorted(ctm) for w in ctm[cut]]
            assert written == pytest.approx(want, abs=1e-4)  # CTM: calibrated
            records = read_results(row.results_path)  # JSONL: the method's own
            assert [c for r in sorted(records) if records[r]["status"] == "ok"
                    for c in records[r]["hyps"][key].get("word_confidences", [])] == confs
            line = lines[key]
            assert float(line[4]) == pytest.approx(normalized_cross_entropy(want, correct),
                                                   abs=1e-4)
            assert float(line[8]) == pytest.approx(normalized_cross_entropy(confs, correct),
                                                   abs=1e-4)
            assert line[7] == f"{got.a:.4f},{got.b:.4f}"
            assert float(line[4]) >= float(line[8]) - 1e-9  # fit in-sample: not worse
            checked += 1
    assert checked == 3


def test_calibrations_in_settings_files_are_checked(tmp_path):
    bad = {"a.json": ('{"calibration": {"nope": {"k": [1, 0]}}}',
                      "unknown decoding method 'nope'"),
           "b.json": ('{"calibration": {"mbr": {"mbr": [1]}}}', r"\[a, b\] \(two finite"),
           "c.json": ('{"calibration": {"mbr": {"mbr": [1, NaN]}}}', "two finite numbers"),
           "d.json": ('{"calibration": {"mbr": [1, 0]}}', "must map setting keys")}
    for name, (text, message) in bad.items():
        (tmp_path / name).write_text(text)
        with pytest.raises(ValueError, match=message):
            read_settings(tmp_path / name)


def test_tune_keeps_its_decodes_only_in_a_work_dir_on_request(decode_setup, tmp_path,
                                                             caplog):
    """--work-dir keeps the dev-set decodes there (a rerun resumes them: the same file, no
    cut decoded again); without it nothing is left beside the output."""
    import logging

    s = decode_setup
    args = ["tune", "--cuts", str(s["cuts_path"]), "--model", str(s["model_path"]),
            "--lang-dir", str(s["lang_dir"]), "--max-duration", "3", "--method", "1best",
            "--grid", "graph.scale=0.4,0.8"]
    work = tmp_path / "work"
    first = CliRunner().invoke(main, [*args, "--out", str(tmp_path / "a.json"), "--work-dir",
                                      str(work)])
    assert first.exit_code == 0, first.output
    assert len(sorted(work.rglob("results-cuts.jsonl"))) == 3  # 0.6 (configured), 0.4, 0.8
    with caplog.at_level(logging.INFO, logger="k2dec.job"):
        again = CliRunner().invoke(main, [*args, "--out", str(tmp_path / "b.json"),
                                          "--work-dir", str(work)])
    assert again.exit_code == 0, again.output
    assert (tmp_path / "a.json").read_text() == (tmp_path / "b.json").read_text()
    assert caplog.text.count("cuts 1best: 6 utterances, 0 to decode") == 3, caplog.text
    plain = tmp_path / "plain"
    plain.mkdir()
    r = CliRunner().invoke(main, [*args, "--out", str(plain / "c.json")])
    assert r.exit_code == 0, r.output
    assert sorted(p.name for p in plain.iterdir()) == ["c.json"]
