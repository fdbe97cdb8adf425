"""A rerun into the same out dir shows what its inputs give (issue 30): resuming is keyed on
everything that determines a method's results (config, model, graphs, tables, features,
version); changed references only re-score; failed cuts are tried again when the reason may
be gone; the RTF of a resumed job is the recorded one."""

from __future__ import annotations

import json
import logging
import math
import shutil
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from k2dec.cli import main
from k2dec.job import DecodeConfig, decode_cuts, load_assets, plan_methods
from k2dec.job.resume import JobInputs, content_digest, cut_digest
from k2dec.model import ConformerConfig, JointConfig, JointModel, export_model
from k2dec.results import read_results
from tests.job.conftest import TEXT


@pytest.fixture()
def audio(decode_setup, tmp_path):
    """The fixture's five decodable recordings in a folder, and a Kaldi text file."""
    d = tmp_path / "rec"
    d.mkdir()
    for i in range(5):
        shutil.copy(decode_setup["dir"] / f"utt{i}.wav", d / f"utt{i}.wav")
    text = tmp_path / "text"
    text.write_text("".join(f"utt{i} {TEXT[i]}\n" for i in range(5)))
    return d, text


def _decode(s, audio_dir, text, out, *extra, model=None):
    return CliRunner().invoke(main, [
        "decode", "--audio-dir", str(audio_dir), "--text", str(text), "--model",
        str(model or s["model_path"]), "--lang-dir", str(s["lang_dir"]), "--out-dir",
        str(out), "--max-duration", "3", *extra])


def _rows(output: str) -> dict[str, list[str]]:
    return {cells[2]: cells for cells in (line.split(" | ") for line in output.splitlines()
                                          if line.startswith("| rec |"))}


def _hyps(path: Path) -> dict[str, dict]:
    return {k: v["hyps"] for k, v in read_results(path).items()}


def _lines(path: Path) -> dict[str, dict]:
    """The results lines without their input digests (the features of another out dir are
    another file)."""
    return {k: {f: x for f, x in v.items() if f != "input"} for k, v in
            read_results(path).items()}


def test_a_changed_setting_decodes_again_and_changed_references_only_rescore(
        decode_setup, audio, tmp_path, caplog):
    s = decode_setup
    rec, text = audio
    out = tmp_path / "out"
    method = ["--method", "modified_beam_search", "--method", "1best"]
    first = _decode(s, rec, text, out, *method, "--set", "beam_size=1")
    assert first.exit_code == 0, first.output
    results = out / "modified_beam_search" / "results-rec.jsonl"
    before = read_results(results)
    rtf = {m: _rows(first.output)[m][4] for m in ("modified_beam_search", "1best")}
    # an unchanged rerun resumes: the same files, the recorded RTF (not nan)
    with caplog.at_level(logging.INFO, logger="k2dec.job"):
        again = _decode(s, rec, text, out, *method, "--set", "beam_size=1")
    assert again.exit_code == 0, again.output
    assert read_results(results) == before
    assert {m: _rows(again.output)[m][4] for m in rtf} == rtf and "nan" not in again.output
    assert "rec modified_beam_search: 5 utterances, 0 to decode" in caplog.text
    caplog.clear()
    # another beam and corrected references: decoded again, said in one line, the old
    # results moved aside; 1best only re-scores (its hypotheses stay)
    text.write_text("".join(f"utt{i} {TEXT[(i + 1) % 5]}\n" for i in range(5)))
    one_best = _hyps(out / "1best" / "results-rec.jsonl")
    with caplog.at_level(logging.INFO, logger="k2dec.job"):
        changed = _decode(s, rec, text, out, *method, "--set", "beam_size=8")
    assert changed.exit_code == 0, changed.output
    lines = [r.getMessage() for r in caplog.records if "decoding it again" in r.getMessage()]
    assert len(lines) == 1 and lines[0].startswith("rec modified_beam_search: config changed")
    assert (out / "modified_beam_search" / "replaced" / "rec" / "results-rec.jsonl").is_file()
    assert "rec 1best: 5 utterances, 0 to decode" in caplog.text
    assert "rec 1best: 5 references changed since they were decoded" in caplog.text
    assert _hyps(out / "1best" / "results-rec.jsonl") == one_best
    # what a fresh job with the new setting and references gives, WERs included
    fresh = _decode(s, rec, text, tmp_path / "fresh", *method, "--set", "beam_size=8")
    for m in ("modified_beam_search", "1best"):
        got = read_results(out / m / "results-rec.jsonl")
        assert _lines(out / m / "results-rec.jsonl") == \
            _lines(tmp_path / "fresh" / m / "results-rec.jsonl")
        assert all(r["ref"] == TEXT[(int(k[3]) + 1) % 5].split() for k, r in got.items())
        assert _rows(changed.output)[m][3] == _rows(fresh.output)[m][3]
        assert (out / m / "wer-summary-rec.txt").read_text() == \
            (tmp_path / "fresh" / m / "wer-summary-rec.txt").read_text()
    assert _rows(changed.output)["1best"][4] == rtf["1best"]  # decoded once, timed then


def test_another_model_in_the_same_file_decodes_again(decode_setup, audio, tmp_path, caplog):
    s = decode_setup
    rec, text = audio
    model = tmp_path / "model.pt"
    shutil.copy(s["model_path"], model)
    out = tmp_path / "out"
    assert _decode(s, rec, text, out, "--method", "greedy_search", model=model).exit_code == 0
    torch.manual_seed(5)  # the same architecture, other weights, the same file name
    cfg = JointConfig(vocab_size=24, encoder=ConformerConfig(d_model=32, nhead=2, num_layers=1,
                                                            dim_feedforward=32, conv_kernel=3),
                      decoder_dim=16, joiner_dim=16, attention_dim=16, attention_heads=2,
                      attention_layers=1, attention_ff=16)
    export_model(JointModel(cfg).eval(), model, half=False)
    with caplog.at_level(logging.INFO, logger="k2dec.job"):
        r = _decode(s, rec, text, out, "--method", "greedy_search", model=model)
    assert r.exit_code == 0, r.output
    assert "rec greedy_search: model changed" in caplog.text
    fresh = _decode(s, rec, text, tmp_path / "fresh", "--method", "greedy_search", model=model)
    assert fresh.exit_code == 0
    assert _lines(out / "greedy_search" / "results-rec.jsonl") == \
        _lines(tmp_path / "fresh" / "greedy_search" / "results-rec.jsonl")


def test_failed_cuts_are_retried_once_the_reason_may_be_gone(decode_setup, audio, tmp_path,
                                                             caplog):
    """Too long for --max-duration 1: failed, exit 3 (an unchanged rerun does not try them
    again); the rerun with --max-duration 3 decodes them without --retry-failed."""
    s = decode_setup
    rec, text = audio
    out = tmp_path / "out"
    for _ in range(2):
        with caplog.at_level(logging.INFO, logger="k2dec.job"):
            r = _decode(s, rec, text, out, "--method", "greedy_search", "--max-duration", "1")
        assert r.exit_code == 3 and "rec greedy_search: 3 of 5 cuts failed (first: utt0: " \
            "too long: 1.2 s" in r.output, r.output
    assert "rec greedy_search: 5 utterances, 0 to decode" in caplog.text
    r = _decode(s, rec, text, out, "--method", "greedy_search")
    assert r.exit_code == 0, r.output
    records = read_results(out / "greedy_search" / "results-rec.jsonl")
    assert all(v["status"] == "ok" for v in records.values()) and len(records) == 5


def test_a_cut_whose_manifest_changed_is_decoded_again(decode_setup, tmp_path):
    """(A CTC method: transducer scores differ by batch in the last float digits.)"""
    s = decode_setup
    assets = load_assets(s["model_path"], s["lang_dir"])
    cfg = DecodeConfig(max_duration=3.0)
    cuts = s["cuts"].filter(lambda c: c.id != "utt5").to_eager()
    decode_cuts(assets, cuts, "ctc-greedy-search", tmp_path, "t", config=cfg)
    # utt1 is now another recording (utt2's) under the same id
    swapped = cuts.modify_ids(lambda i: {"utt1": "utt2", "utt2": "utt1"}.get(i, i))
    assert cut_digest(swapped["utt1"]) != cut_digest(cuts["utt1"])
    got = decode_cuts(assets, swapped, "ctc-greedy-search", tmp_path, "t", config=cfg)
    want = decode_cuts(assets, swapped, "ctc-greedy-search", tmp_path / "fresh", "t", config=cfg)
    assert read_results(got.results_path) == read_results(want.results_path)
    assert math.isfinite(got.rtf) and got.rtf > 0


def test_the_key_names_each_input_and_follows_its_content(decode_setup, tmp_path):
    """Every input of the key changes with its content and only then; a method's key has the
    tables and graphs it reads and not the others."""
    s = decode_setup
    assets = load_assets(s["model_path"], s["lang_dir"])
    again = load_assets(s["model_path"], s["lang_dir"])
    runs = {r.method.name: r for r in plan_methods(["greedy_search", "1best", "nbest-oracle"])}
    keys = {n: JobInputs(assets).key(r.method, r.config) for n, r in runs.items()}
    assert keys == {n: JobInputs(again).key(r.method, r.config) for n, r in runs.items()}
    assert {"HLG", "words"} <= set(keys["1best"]) and "HLG" not in keys["greedy_search"]
    assert "words" not in keys["greedy_search"] and "words" in keys["nbest-oracle"]
    assert set(keys["greedy_search"]) >= {"k2dec", "method", "config", "features", "model",
                                          "tokens", "bpe"}
    other = JobInputs(assets).key(runs["1best"].method,
                                  plan_methods(["1best"], ["graph.scale=0.5"])[0].config)
    assert [k for k in other if other[k] != keys["1best"][k]] == ["config"]
    graph = assets.resources.graphs["HLG"]
    before = content_digest(graph)
    graph.scores = graph.scores + 1.0
    assert content_digest(graph) != before
    assert content_digest(json.loads('{"a": [1, 2]}')) == content_digest({"a": [1, 2]})


def test_exported_models_have_stable_digests_that_follow_their_files(tmp_path):
    """An ONNX folder and a TorchScript file loaded twice: one digest (no memory address of a
    runtime session in it); another joiner file: another digest."""
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    from k2dec.model import load_model
    from tests.model import icefall_like as il

    eager = il.build_transducer()
    paths = il.export_onnx(eager, tmp_path / "exp")
    il.write_tokens(tmp_path / "exp" / "tokens.txt", 12)
    jit = il.save_jit(eager, tmp_path / "jit_script.pt")
    folder = paths["encoder"].parent
    for path in (folder, jit):
        assert content_digest(load_model(path)) == content_digest(load_model(path)), path
    before = content_digest(load_model(folder))
    other = il.export_onnx(il.build_transducer(seed=1), tmp_path / "other")
    shutil.copy(other["joiner"], paths["joiner"])
    assert content_digest(load_model(folder)) != before


def test_an_oracle_decodes_again_when_its_references_change(decode_setup, audio, tmp_path,
                                                            caplog):
    """An oracle's hypotheses are read off its reference: a changed reference decodes those
    cuts again (what a fresh job gives), an unchanged one resumes."""
    s = decode_setup
    rec, text = audio
    out = tmp_path / "out"
    method = ["--method", "nbest-oracle"]
    first = _decode(s, rec, text, out, *method)
    assert first.exit_code in (0, 3), first.output
    results = out / "nbest-oracle" / "results-rec.jsonl"
    before = read_results(results)
    with caplog.at_level(logging.INFO, logger="k2dec.job"):
        again = _decode(s, rec, text, out, *method)
    assert again.exit_code == first.exit_code, again.output
    assert read_results(results) == before
    assert "rec nbest-oracle: 5 utterances, 0 to decode" in caplog.text
    caplog.clear()
    # two references changed: those two cuts are decoded again, the others resume
    lines = [f"utt{i} {TEXT[(i + 1) % 5] if i < 2 else TEXT[i]}\n" for i in range(5)]
    text.write_text("".join(lines))
    with caplog.at_level(logging.INFO, logger="k2dec.job"):
        changed = _decode(s, rec, text, out, *method)
    assert changed.exit_code == first.exit_code, changed.output
    assert "rec nbest-oracle: 5 utterances, 2 to decode" in caplog.text
    fresh = _decode(s, rec, text, tmp_path / "fresh", *method)
    assert fresh.exit_code == first.exit_code, fresh.output
    assert _hyps(results) == _hyps(tmp_path / "fresh" / "nbest-oracle" / "results-rec.jsonl")
    assert _rows(changed.output)["nbest-oracle"][3] == _rows(fresh.output)["nbest-oracle"][3]


def test_cut_digest_holds_the_text_only_when_asked(decode_setup):
    from lhotse.utils import fastcopy

    cut = next(iter(decode_setup["cuts"]))
    other = fastcopy(cut, supervisions=[fastcopy(cut.supervisions[0], text="SOMETHING ELSE")])
    assert cut_digest(cut) == cut_digest(other)
    assert cut_digest(cut, with_text=True) != cut_digest(other, with_text=True)
    assert cut_digest(cut, with_text=True) == cut_digest(fastcopy(cut), with_text=True)
