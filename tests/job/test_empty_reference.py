"""An utterance with an empty reference (a silent recording: an id alone on its line of a
``--text`` file, a supervision whose text is ``""``) has a reference: oracle methods run with
it and the WER counts its insertions. Only a missing reference (no supervision, text ``None``,
no line in ``--text``) is "no reference"."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from lhotse import CutSet
from lhotse.utils import fastcopy

from k2dec.cli import main
from k2dec.job import check_references, decode_cuts, load_assets
from k2dec.results import compute_wer, read_results
from k2dec.results.text import scoring_words

ORACLES = ["nbest-oracle", "fast_beam_search_nbest_oracle"]


def _with_text(cut, text):
    return fastcopy(cut, supervisions=[fastcopy(cut.supervisions[0], text=text)])


@pytest.mark.parametrize("method", ORACLES)
def test_an_empty_reference_is_a_reference(method):
    check_references([method], {"a": "", "b": "A B"})
    with pytest.raises(ValueError, match=rf"{method}.*1 of 2 cuts have none \(e\.g\. a\)"):
        check_references([method], {"a": None, "b": "A B"})


@pytest.mark.parametrize("method", ORACLES + ["greedy_search"])
def test_oracles_decode_and_the_wer_counts_its_insertions(decode_setup, tmp_path, method):
    s = decode_setup
    cuts = list(s["cuts"])[:5]  # the decodable ones
    cuts = CutSet.from_cuts([_with_text(cuts[0], "")] + cuts[1:])
    assets = load_assets(s["model_path"], s["lang_dir"])
    summary = decode_cuts(assets, cuts, method, tmp_path, "silent")
    records = read_results(summary.results_path)
    assert records["utt0"]["status"] == "ok" and records["utt0"]["ref"] == []
    expected = compute_wer([(k, scoring_words(r["ref"]), scoring_words(r["hyp"]))
                            for k, r in sorted(records.items())])
    assert expected.num_ins >= len(records["utt0"]["hyp"])
    assert summary.wers[summary.headline[0]] == pytest.approx(expected.wer, abs=0.01)
    summary_file = (tmp_path / method / "wer-summary-silent.txt").read_text()
    assert f"{expected.wer:.2f}" in summary_file


def test_only_empty_references_report_no_wer(decode_setup, tmp_path):
    s = decode_setup
    cuts = CutSet.from_cuts([_with_text(c, "") for c in list(s["cuts"])[:2]])
    assets = load_assets(s["model_path"], s["lang_dir"])
    summary = decode_cuts(assets, cuts, "nbest-oracle", tmp_path, "silent")
    assert summary.wers == {} and not summary.failed


def test_cli_text_line_with_an_id_only(decode_setup, tmp_path):
    s = decode_setup
    audio = tmp_path / "wavs"
    audio.mkdir()
    for i in range(2):
        (audio / f"utt{i}.wav").symlink_to(s["dir"] / f"utt{i}.wav")
    text = tmp_path / "text"
    text.write_text("utt0\nutt1 THE CAT\n")
    r = CliRunner().invoke(main, [
        "decode", "--audio-dir", str(audio), "--text", str(text), "--model",
        str(s["model_path"]), "--lang-dir", str(s["lang_dir"]), "--method", "nbest-oracle",
        "--method", "fast_beam_search_nbest_oracle", "--out-dir", str(tmp_path / "out")])
    assert r.exit_code == 0, r.output
    for method in ORACLES:
        records = read_results(tmp_path / "out" / method / "results-wavs.jsonl")
        assert records["utt0"]["ref"] == [] and records["utt1"]["ref"] == ["THE", "CAT"]
    # a file with no line at all is still "no reference"
    text.write_text("utt1 THE CAT\n")
    r = CliRunner().invoke(main, [
        "decode", "--audio-dir", str(audio), "--text", str(text), "--model",
        str(s["model_path"]), "--lang-dir", str(s["lang_dir"]), "--method", "nbest-oracle",
        "--out-dir", str(tmp_path / "out2")])
    assert r.exit_code == 2 and "1 of 2 cuts have none (e.g. utt0)" in r.output


def test_tune_takes_an_empty_reference_as_a_reference(decode_setup):
    """``k2dec tune``'s dev sets follow the decode job's convention: an empty reference is a
    reference; a missing one, or a set with no reference word at all, is refused."""
    from k2dec.job.tune import check_dev_references

    cuts = list(decode_setup["cuts"])[:3]
    check_dev_references("dev", CutSet.from_cuts([_with_text(cuts[0], "")] + cuts[1:]))
    with pytest.raises(ValueError, match=r"1 cuts of 'dev' have none \(e\.g\. utt0\)"):
        check_dev_references("dev", CutSet.from_cuts([_with_text(cuts[0], None)] + cuts[1:]))
    with pytest.raises(ValueError, match="every reference of 'dev' is empty"):
        check_dev_references("dev", CutSet.from_cuts([_with_text(c, "") for c in cuts]))
