"""The long-form bench (``scripts/bench/longform.py``): a worker gives a method the LMs
``k2dec decode`` would load for it (``--rnn-lm`` / ``--lodr-arpa``), so the LM-fusion and
LODR methods decode instead of failing for a missing LM; the accuracy part runs the methods
``--accuracy-methods`` names (every registered one with ``all``), keeps its rows, and says
why a row could not run."""

from __future__ import annotations

import pytest

from k2dec.job import check_references, load_assets
from k2dec.methods import get_method, list_methods
from scripts.bench import longform
from scripts.bench.common import SHIPPED, Report
from scripts.bench.longform import METHODS, accuracy_methods, lm_inputs, worker_references

LM_METHODS = [m.name for m in list_methods() if {"lm", "lodr"} & set(m.requires)]


def test_lm_inputs_only_for_the_methods_that_need_them():
    assert "modified_beam_search_LODR" in LM_METHODS
    for method in list_methods():
        got = lm_inputs((method.name,))
        assert (got["lm_paths"] is not None) == ("lm" in method.requires), method.name
        assert (got["lodr_arpa"] is not None) == ("lodr" in method.requires), method.name
    both = lm_inputs(("greedy_search", "modified_beam_search_LODR"))
    assert both["lm_paths"] is not None and both["lodr_arpa"] is not None


@pytest.mark.parametrize("method", LM_METHODS)
def test_loaded_assets_serve_the_method(method):
    """The shipped model with what lm_inputs gives lacks nothing but graphs for the method."""
    assets = load_assets(SHIPPED / "model.pt", SHIPPED / "lang", **lm_inputs((method,)))
    missing = assets.resources.missing(get_method(method).requires)
    assert not [r for r in missing if r in ("lm", "lodr", "attention_decoder")], missing


def test_oracle_workers_get_the_recordings_reference(tmp_path):
    """An oracle method's case is given the recording's reference, keyed by the id its audio
    file gets, so the job does not refuse it before decoding; the others get none."""
    (tmp_path / "long.wav").touch()
    (tmp_path / "text").write_text("long HELLO WORLD AGAIN\n")
    oracles = [m.name for m in list_methods() if m.needs_references]
    assert {"nbest-oracle", "fast_beam_search_nbest_oracle"} <= set(oracles)
    for method in list_methods():
        got = worker_references(tmp_path, method.name)
        if method.needs_references:
            assert got == {"long": "HELLO WORLD AGAIN"}, method.name
            check_references([method.name], {"long": got["long"]})
        else:
            assert got is None, method.name
    with pytest.raises(ValueError, match="nbest-oracle"):
        check_references(["nbest-oracle"], {"long": None})


def test_accuracy_methods_default_all_and_named():
    names = {m.name for m in list_methods()}
    assert accuracy_methods(None) == METHODS
    every = accuracy_methods("all")
    assert every[:len(METHODS)] == METHODS and set(every) == names and len(every) == len(names)
    assert {"nbest-oracle", "fast_beam_search_nbest_oracle"} <= set(every)
    assert accuracy_methods("ctc-decoding, 1best") == ("ctc-decoding", "1best")
    with pytest.raises(ValueError, match="--accuracy-methods.*no_such_method"):
        accuracy_methods("1best,no_such_method")
    with pytest.raises(ValueError, match="--accuracy-methods"):
        accuracy_methods(",")


def _table(rep: Report) -> dict[str, dict]:
    (table,) = rep.tables
    return {r[0]: dict(zip(table["headers"], r)) for r in table["rows"]}


def test_accuracy_rows_for_the_named_methods_kept_and_failures_said(tmp_path, monkeypatch):
    """Smoke mode, two cheap methods: a WER per segmenter (windows only for the default
    methods), the rows kept in the cases file and reused without decoding again; a method
    whose decode raises gets a row that says why, and misses the target."""
    cases = tmp_path / "acc.jsonl"
    rep = Report(area="longform", title="t")
    got = longform.accuracy("smoke", rep, ("greedy_search", "ctc-greedy-search"), cases)
    rows = _table(rep)
    assert list(rows) == ["greedy_search", "ctc-greedy-search"]
    for row in rows.values():
        assert 0 < row["per-utterance WER"] < 100 and 0 < row["VAD WER"] < 100, row
        assert row["VAD delta"] == pytest.approx(row["VAD WER"] - row["per-utterance WER"],
                                                 abs=0.01)
        assert row["VAD met"] == ("yes" if row["VAD delta"] <= 0.5 else "no"), row
        assert row["notes"] == "", row
    assert 0 < rows["greedy_search"]["windows WER"] < 100
    assert rows["ctc-greedy-search"]["windows WER"] == "-"
    assert sorted(got["vad"] + got["vad-missed"]) == ["ctc-greedy-search", "greedy_search"]
    assert got["windows"] + got["windows-missed"] == ["greedy_search"]
    assert len(cases.read_text().splitlines()) == 2

    def boom(*args, **kwargs):
        raise RuntimeError("no decoding here")

    monkeypatch.setattr(longform, "_decode", boom)
    again = Report(area="longform", title="t")
    longform.accuracy("smoke", again, ("greedy_search", "ctc-greedy-search"), cases)
    assert again.tables == rep.tables
    failing = Report(area="longform", title="t")
    got = longform.accuracy("smoke", failing, ("ctc-greedy-search", "ctc-decoding"), cases)
    row = _table(failing)["ctc-decoding"]
    assert row["per-utterance WER"] is None and row["VAD met"] == "n/a"
    assert "RuntimeError: no decoding here" in row["notes"]
    assert got["vad"] == (["ctc-greedy-search"] if _table(failing)["ctc-greedy-search"][
        "VAD met"] == "yes" else [])
    assert "ctc-decoding" in got["vad-missed"]
    assert len(cases.read_text().splitlines()) == 3
