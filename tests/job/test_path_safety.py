"""Nothing outside ``--out-dir`` is written: for every input that names a path (the test-set
name, cut and supervision ids, files and folders planted inside the out dir), the out dir's
parent folder, hashed before and after, changes only inside the out dir."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from k2dec.cli import main
from k2dec.job import DecodeConfig, decode_cuts, load_assets

METHOD = "greedy_search"


def _tree(root: Path, skip: Path) -> dict[str, str]:
    """``{relative path: digest of its bytes, or where a symlink points}`` of everything
    under ``root`` except ``skip``."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        dirnames[:] = [d for d in dirnames if here / d != skip]
        for name in dirnames + filenames:
            p = here / name
            if p.is_symlink():
                out[str(p.relative_to(root))] = "-> " + os.readlink(p)
            elif p.is_file():
                out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest()
            else:
                out[str(p.relative_to(root))] = "dir"
    return out


@pytest.fixture
def world(decode_setup, tmp_path):
    """A parent folder with a victim file and folder beside the out dir, and a 2-cut manifest."""
    parent = tmp_path / "parent"
    (parent / "victim").mkdir(parents=True)
    (parent / "victim" / "keep.txt").write_text("precious\n")
    (parent / "results-escaped.jsonl").write_text("precious\n")
    cuts = tmp_path / "cuts.jsonl.gz"
    decode_setup["cuts"].subset(first=2).to_file(cuts)
    return {"parent": parent, "out": parent / "out", "cuts": cuts}


def _decode(s, w, *extra, cuts=None):
    return CliRunner().invoke(main, [
        "decode", "--cuts", str(cuts or w["cuts"]), "--model", str(s["model_path"]),
        "--lang-dir", str(s["lang_dir"]), "--method", METHOD, "--out-dir", str(w["out"]),
        "--max-duration", "3", *extra])


def _outside_unchanged(w, run):
    before = _tree(w["parent"], w["out"])
    r = run()
    assert _tree(w["parent"], w["out"]) == before, r.output
    assert "Traceback" not in r.output
    return r


@pytest.mark.parametrize("test_set", ["../../escaped", "..", ".", "/tmp/abs", "a/../../b",
                                      "a\\..\\b", "%2E%2E", "a b"])
def test_test_set_names_stay_inside(decode_setup, world, test_set):
    r = _outside_unchanged(world, lambda: _decode(decode_setup, world, "--test-set", test_set))
    assert r.exit_code == 0, (r.output, r.exception)
    written = [p for p in (world["out"] / METHOD).iterdir() if p.name.startswith("results-")]
    assert len(written) == 1 and "/" not in written[0].name


def test_a_test_set_name_over_255_bytes_is_a_usage_error(decode_setup, world):
    r = _outside_unchanged(world, lambda: _decode(decode_setup, world, "--test-set", "x" * 300))
    assert r.exit_code == 2, (r.output, r.exception)
    assert "--test-set" in r.output and "give a shorter one" in r.output


def test_api_names_are_refused_with_the_name_to_use(decode_setup, tmp_path):
    s = decode_setup
    assets = load_assets(s["model_path"], s["lang_dir"])
    cuts = s["cuts"].subset(first=1)
    out = tmp_path / "out"
    for bad in ("a\0b/..", "../x", "..", "a b", "a\\b"):
        with pytest.raises(ValueError, match="cannot be part of a file name.*use '"):
            decode_cuts(assets, cuts, METHOD, out, bad, config=DecodeConfig(3.0))
    with pytest.raises(ValueError, match="suffix '../s' cannot be part of a file name"):
        decode_cuts(assets, cuts, METHOD, out, "t", suffix="../s", config=DecodeConfig(3.0))
    assert not out.exists()
    summary = decode_cuts(assets, cuts, METHOD, out, "a%00b%2F..", config=DecodeConfig(3.0))
    assert summary.results_path == out / METHOD / "results-a%00b%2F...jsonl"
    with pytest.raises(ValueError, match="test_set 'yyy"):
        decode_cuts(assets, cuts, METHOD, out, "y" * 300, config=DecodeConfig(3.0))
    with pytest.raises(TypeError, match="test_set must be a str"):
        decode_cuts(assets, cuts, METHOD, out, Path("x"), config=DecodeConfig(3.0))


@pytest.mark.parametrize("bad_id", ["../../victim/keep", "/tmp/x", "a\\b", "..",
                                    "i" * 250])
def test_cut_ids_that_cannot_be_file_names_are_refused(decode_setup, world, tmp_path, bad_id):
    cuts = decode_setup["cuts"].subset(first=2)
    first = next(iter(cuts))
    cuts = cuts.modify_ids(lambda i: bad_id if i == first.id else i)
    path = tmp_path / "bad.jsonl.gz"
    cuts.to_file(path)
    r = _outside_unchanged(world, lambda: _decode(decode_setup, world, cuts=path))
    assert r.exit_code == 2, (r.output, r.exception)
    assert "cut id" in r.output and "CutSet.modify_ids" in r.output


def _plant(w, relative: str, target: Path) -> None:
    link = w["out"] / relative
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target)


@pytest.mark.parametrize("relative, target", [
    (f"{METHOD}/results-cuts.jsonl", "results-escaped.jsonl"),
    (f"{METHOD}/recogs-cuts-{METHOD}.txt", "results-escaped.jsonl"),
    (f"{METHOD}/wer-summary-cuts.txt", "results-escaped.jsonl"),
    (f"{METHOD}/job-cuts.json", "results-escaped.jsonl"),
    (".k2dec-decode.lock", "results-escaped.jsonl"),
    (METHOD, "victim"),
    ("features", "victim"),
])
def test_symlinks_planted_in_the_out_dir_are_not_followed(decode_setup, world, relative,
                                                           target):
    _plant(world, relative, world["parent"] / target)
    r = _outside_unchanged(world, lambda: _decode(decode_setup, world, "--test-set", "cuts"))
    if r.exit_code != 0:  # refused: one line naming the link and what to do
        assert r.exit_code == 1, (r.output, r.exception)
        assert "symlink" in r.output and "remove it" in r.output, r.output


def test_a_manifest_without_features_keeps_its_features_inside(decode_setup, world, tmp_path):
    """Features computed for a manifest of recordings go under out/features/<test set>."""
    cuts = decode_setup["cuts"].subset(first=2).drop_features()
    path = tmp_path / "recordings.jsonl.gz"
    cuts.to_file(path)
    r = _outside_unchanged(world, lambda: _decode(decode_setup, world, "--test-set", "../up",
                                                  cuts=path))
    assert r.exit_code == 0, (r.output, r.exception)


def test_a_job_record_naming_files_outside_moves_nothing_outside(decode_setup, world):
    s = decode_setup
    r = _decode(s, world, "--test-set", "cuts")
    assert r.exit_code == 0, r.output
    record = world["out"] / METHOD / "job-cuts.json"
    text = record.read_text()
    record.write_text(text.replace('"files": [', '"files": ["../../results-escaped.jsonl", '))
    # another setting changes the key: the old results are moved aside, outside names ignored
    r = _outside_unchanged(world, lambda: _decode(s, world, "--test-set", "cuts",
                                                  "--set", "blank_penalty=0.5"))
    assert r.exit_code == 0, (r.output, r.exception)
    assert (world["out"] / METHOD / "replaced" / "cuts" / "results-cuts.jsonl").is_file()


@pytest.mark.parametrize("make, expected", [
    ("results_dir", "is a folder"),
    ("method_file", "a file is in the way"),
    ("dangling", "does not exist"),
])
def test_out_dir_problems_are_one_line(decode_setup, world, make, expected):
    out = world["out"]
    if make == "results_dir":
        (out / METHOD / "results-cuts.jsonl").mkdir(parents=True)
    elif make == "method_file":
        out.mkdir()
        (out / METHOD).write_text("x")
    else:
        out.symlink_to(world["parent"] / "nowhere")
    r = _outside_unchanged(world, lambda: _decode(decode_setup, world, "--test-set", "cuts"))
    assert r.exit_code == 1, (r.output, r.exception)
    assert expected in r.output and "Traceback" not in r.output
    assert len(r.output.strip().splitlines()) == 1, r.output


@pytest.mark.parametrize("file_name", ["..wav", "...wav", "%2F.wav"])
def test_audio_file_names_stay_inside(decode_setup, world, tmp_path, file_name):
    """Utterance ids from file names: features and results stay inside the out dir."""
    import shutil

    audio = tmp_path / "audio"
    audio.mkdir()
    src = decode_setup["dir"] / "utt0.wav"
    shutil.copy(src, audio / file_name)
    shutil.copy(src, audio / "plain.wav")
    r = _outside_unchanged(world, lambda: CliRunner().invoke(main, [
        "decode", "--audio-dir", str(audio), "--model", str(decode_setup["model_path"]),
        "--lang-dir", str(decode_setup["lang_dir"]), "--method", METHOD, "--out-dir",
        str(world["out"]), "--max-duration", "3"]))
    assert r.exit_code in (0, 2), (r.output, r.exception)
