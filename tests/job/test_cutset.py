"""The decode job: every cut accounted for, resumable, sharded runs equal one run."""

from __future__ import annotations

import json
import os
import socket

import pytest
import torch
import torch.multiprocessing as mp
from click.testing import CliRunner

from k2dec.cli import main
from k2dec.job import DecodeConfig, decode_cuts, load_assets
from k2dec.results import read_results

METHODS = ["greedy_search", "1best", "fast_beam_search_nbest_LG", "ctc-greedy-search",
           "attention-beam-search"]


@pytest.mark.parametrize("method", METHODS)
def test_every_cut_is_decoded_or_reported(decode_setup, tmp_path, method):
    s = decode_setup
    assets = load_assets(s["model_path"], s["lang_dir"])
    summary = decode_cuts(assets, s["cuts"], method, tmp_path, "tiny",
                          config=DecodeConfig(max_duration=3.0, num_buckets=2))
    records = read_results(summary.results_path)
    assert set(records) == {c.id for c in s["cuts"]}
    assert summary.failed == ["utt5"]
    assert "too short: 3 feature frames" in records["utt5"]["error"]
    assert summary.wers and all(v >= 0 for v in summary.wers.values())
    for key in summary.wers:
        assert (tmp_path / method / f"recogs-tiny-{key}.txt").is_file()
        assert (tmp_path / method / f"errs-tiny-{key}.txt").is_file()
    assert (tmp_path / method / "wer-summary-tiny.txt").is_file()
    assert summary.rtf > 0


def test_resume_after_a_kill_gives_the_same_results(decode_setup, tmp_path):
    s = decode_setup
    assets = load_assets(s["model_path"], s["lang_dir"])
    cfg = DecodeConfig(max_duration=3.0, num_buckets=2)
    full = decode_cuts(assets, s["cuts"], "1best", tmp_path / "a", "tiny", config=cfg)
    want = read_results(full.results_path)
    # a killed run: two complete lines and half of a third
    path = tmp_path / "b" / "1best" / "results-tiny.jsonl"
    path.parent.mkdir(parents=True)
    lines = full.results_path.read_text().splitlines()
    path.write_text("\n".join(lines[:2]) + "\n" + lines[2][: len(lines[2]) // 2])
    again = decode_cuts(assets, s["cuts"], "1best", tmp_path / "b", "tiny", config=cfg)
    got = read_results(again.results_path)
    assert got == want
    ids = [json.loads(x)["cut_id"] for x in path.read_text().splitlines() if x.strip()]
    assert len(ids) == len(set(ids)) == len(want), "no duplicates, nothing lost"
    assert again.wers == full.wers


def test_cli_decode(decode_setup, tmp_path):
    s = decode_setup
    r = CliRunner().invoke(main, [
        "decode", "--cuts", str(s["cuts_path"]), "--model", str(s["model_path"]),
        "--lang-dir", str(s["lang_dir"]), "--method", "greedy_search", "--method",
        "modified_beam_search", "--set", "beam_size=2", "--out-dir", str(tmp_path),
        "--max-duration", "3"])
    assert r.exit_code == 3, (r.output, r.exception)  # utt5 is too short
    assert "greedy_search" in r.output and "modified_beam_search" in r.output
    assert (tmp_path / "modified_beam_search" / "results-cuts.jsonl").is_file()
    r = CliRunner().invoke(main, [
        "decode", "--cuts", str(s["cuts_path"]), "--model", str(s["model_path"]),
        "--method", "greedy_search", "--set", "nope=1", "--out-dir", str(tmp_path)])
    assert r.exit_code != 0 and "no given method has a field for nope=1" in r.output


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _rank_main(rank: int, world: int, port: int, setup: dict, out_dir: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE=str(world),
                      RANK=str(rank))
    torch.set_num_threads(1)
    torch.distributed.init_process_group("gloo", rank=rank, world_size=world)
    assets = load_assets(setup["model_path"], setup["lang_dir"])
    decode_cuts(assets, setup["cuts"], "1best", out_dir, "tiny",
                config=DecodeConfig(max_duration=3.0, num_buckets=2, world_size=world,
                                    rank=rank))
    torch.distributed.destroy_process_group()


def test_two_ranks_equal_one_process(decode_setup, tmp_path):
    s = decode_setup
    one = decode_cuts(load_assets(s["model_path"], s["lang_dir"]), s["cuts"], "1best",
                      tmp_path / "one", "tiny", config=DecodeConfig(max_duration=3.0,
                                                                    num_buckets=2))
    mp.spawn(_rank_main, args=(2, _free_port(), s, str(tmp_path / "two")), nprocs=2, join=True)
    merged = tmp_path / "two" / "1best" / "results-tiny.jsonl"
    assert read_results(merged) == read_results(one.results_path)
    assert (tmp_path / "two" / "1best" / "results-tiny.rank1.jsonl").is_file()


def test_cli_decode_audio_dir_without_references(decode_setup, tmp_path):
    s = decode_setup
    audio = tmp_path / "audio"
    audio.mkdir()
    for f in sorted(s["dir"].glob("utt*.wav"))[:3]:
        (audio / f.name).write_bytes(f.read_bytes())
    r = CliRunner().invoke(main, [
        "decode", "--audio-dir", str(audio), "--model", str(s["model_path"]),
        "--lang-dir", str(s["lang_dir"]), "--method", "greedy_search",
        "--out-dir", str(tmp_path / "out"), "--max-duration", "3"])
    assert r.exit_code == 0, (r.output, r.exception)
    records = read_results(tmp_path / "out" / "greedy_search" / "results-audio.jsonl")
    assert len(records) == 3
    assert all(rec["ref"] is None and rec["status"] == "ok" for rec in records.values())
