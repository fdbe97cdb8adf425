"""References in another letter case than the vocabulary score as in its case (icefall scores
upper-case text), oracle methods read them in its case, and a job warns when most reference
words are outside the vocabulary (issue 30: lower-case references scored 100% WER, silently)."""

from __future__ import annotations

import logging

from lhotse import CutSet
from lhotse.utils import fastcopy

from k2dec.job import DecodeConfig, load_assets, plan_methods, run_decode


def _with_texts(cuts: CutSet, edit) -> CutSet:
    return CutSet.from_cuts(fastcopy(c, supervisions=[fastcopy(s, text=edit(s.text))
                                                      for s in c.supervisions]) for c in cuts)


def test_lower_case_references_score_as_upper_case(decode_setup, tmp_path, caplog):
    s = decode_setup
    assets = load_assets(s["model_path"], s["lang_dir"])
    runs = plan_methods(["1best", "nbest-oracle", "fast_beam_search_nbest_oracle",
                         "greedy_search"], ["nbest.num_paths=5"], require_used=False)
    cfg = DecodeConfig(max_duration=3.0)
    upper = run_decode(assets, {"t": s["cuts"]}, runs, tmp_path / "upper", cfg)
    with caplog.at_level(logging.WARNING, logger="k2dec.job"):
        lower = run_decode(assets, {"t": _with_texts(s["cuts"], str.lower)}, runs,
                           tmp_path / "lower", cfg)
    assert "reference words" not in caplog.text
    assert [r.wers for r in lower] == [r.wers for r in upper]
    assert [r.wers for r in upper if r.method == "nbest-oracle"][0]["nbest-oracle"] < 100
    # the oracles chose with the references in the vocabulary's case
    oracle = next(r for r in upper if r.method == "nbest-oracle")
    assert oracle.wers["nbest-oracle"] <= next(r for r in upper if r.method == "1best").wers[
        "1best"]


def test_a_job_warns_when_most_reference_words_are_unknown(decode_setup, tmp_path, caplog):
    s = decode_setup
    assets = load_assets(s["model_path"], s["lang_dir"])
    cuts = _with_texts(s["cuts"], lambda t: "DER HUND " + t.split()[0])  # 2 of 3 unknown
    with caplog.at_level(logging.WARNING, logger="k2dec.job"):
        run_decode(assets, {"german": cuts}, plan_methods(["greedy_search"]), tmp_path,
                   DecodeConfig(max_duration=3.0))
    lines = [r.getMessage() for r in caplog.records if "reference words" in r.getMessage()]
    assert len(lines) == 1, caplog.text
    assert lines[0].startswith("german: 12 of 18 reference words (67%) are not in ")
    assert "words.txt (e.g. DER, HUND)" in lines[0]
