"""Same answer however the job was batched: every method gives byte-identical icefall result
files and the same per-cut records at three batch sizes, and after a SIGKILL at a random point
and a resume."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

import pytest
import torch

from k2dec.graph import build_rescoring_G, graph_metadata, save_graph
from k2dec.job import DecodeConfig, decode_cuts, load_assets
from k2dec.lang import LangDir
from k2dec.lm import RnnLM, RnnLmConfig
from k2dec.methods import list_methods, override_config
from k2dec.results import read_results

REPO = Path(__file__).resolve().parents[2]
#: batch sizes (seconds of audio per batch): one cut, two or three, all six
MAX_DURATIONS = (1.6, 3.0, 100.0)
#: methods whose defaults take minutes on CPU even for these cuts: smaller settings
SETTINGS = ["num_paths=20", "top_k=10", "attention_scales=0.5"]
#: and for the methods that have them (the CLI run below refuses settings no method has)
METHOD_SETTINGS = ["ngram_lm_scales=0.5,1.0", "lm_scales=0.5,1.0"]


@pytest.fixture(scope="module")
def full_setup(decode_setup, tmp_path_factory):
    """decode_setup plus a rescoring G_4_gram.pt, a small RNN LM and LODR's token bigram:
    every method runs."""
    d = tmp_path_factory.mktemp("same_answer")
    lang_dir = d / "lang"
    shutil.copytree(decode_setup["lang_dir"], lang_dir)
    lang = LangDir(lang_dir)
    arpa = decode_setup["dir"] / "lm.arpa"
    save_graph(build_rescoring_G(arpa, lang.word_table), lang_dir / "G_4_gram.pt",
               graph_metadata("G_4_gram", lang.token_table, lang.word_table))
    torch.manual_seed(0)
    cfg = RnnLmConfig(vocab_size=24, embedding_dim=8, hidden_dim=8, num_layers=1)
    lm_path = d / "rnn_lm.pt"
    torch.save({"model_type": "rnn", "model_config": asdict(cfg),
                "model": RnnLM(cfg).state_dict()}, lm_path)
    from k2dec.scorers import train_token_arpa

    lodr = train_token_arpa(decode_setup["dir"] / "text.txt", lang_dir / "bpe.model",
                            d / "lodr.arpa", order=2)
    return {**decode_setup, "lang_dir": lang_dir, "lm_path": lm_path, "lodr": lodr}


def _config(method):
    default = method.default_config()
    return override_config(default, [s for s in SETTINGS + METHOD_SETTINGS if _has(default, s)])


def _has(config, setting: str) -> bool:
    from k2dec.methods import config_field_path

    try:
        return config_field_path(config, setting.split("=")[0]) is not None
    except ValueError:
        return False


def _files(out: Path) -> dict[str, bytes]:
    """The icefall result files (recogs, errs, wer-summary) by name."""
    return {p.name: p.read_bytes() for p in sorted(out.glob("*.txt"))}


def _records(path: Path) -> dict:
    """Per cut: status, error, and per setting the text, tokens and words (scores may differ
    in the last float digits between batchings; hypotheses may not)."""
    out = {}
    for cut_id, r in read_results(path).items():
        hyps = {k: {f: v.get(f) for f in ("text", "tokens", "words", "error", "notes")}
                for k, v in r.get("hyps", {}).items()}
        out[cut_id] = (r["status"], r.get("error"), r.get("hyp"), hyps)
    return out


@pytest.mark.parametrize("method", [m.name for m in list_methods()])
def test_every_method_gives_the_same_files_at_three_batch_sizes(full_setup, tmp_path, method):
    s = full_setup
    assets = load_assets(s["model_path"], s["lang_dir"], lm_paths={"rnn_lm": s["lm_path"]},
                         lodr_arpa=s["lodr"])
    m = [x for x in list_methods() if x.name == method][0]
    cfg = _config(m)
    runs = []
    for max_duration in MAX_DURATIONS:
        out = tmp_path / f"md{max_duration}"
        summary = decode_cuts(assets, s["cuts"], m, out, "tiny", cfg,
                              config=DecodeConfig(max_duration=max_duration, num_buckets=2))
        runs.append((_files(out / method), _records(summary.results_path), summary.wers))
    first = runs[0]
    assert first[0], "no result files: the test checks nothing"
    for files, records, wers in runs[1:]:
        assert files == first[0]
        assert records == first[1]
        assert wers == first[2]


def _cli(out: Path, s, methods: list[str], max_duration: float) -> list[str]:
    cmd = [sys.executable, "-m", "k2dec.cli", "decode", "--cuts", str(s["cuts_path"]),
           "--model", str(s["model_path"]), "--lang-dir", str(s["lang_dir"]),
           "--rnn-lm", str(s["lm_path"]), "--out-dir", str(out), "--test-set", "tiny",
           "--max-duration", str(max_duration), "--threads", "1"]
    for m in methods:
        cmd += ["--method", m]
    # the CLI refuses a key none of its methods has: only the settings some method reads
    configs = [m.default_config() for m in list_methods() if m.name in methods]
    for setting in SETTINGS:
        if any(_has(c, setting) for c in configs):
            cmd += ["--set", setting]
    return cmd


def test_a_sigkill_at_a_random_point_then_resume_gives_the_same_files(full_setup, tmp_path):
    s = full_setup
    methods = ["nbest-rescoring", "fast_beam_search_nbest", "rnn-lm", "1best"]
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(REPO))
    whole = subprocess.run(_cli(tmp_path / "whole", s, methods, 3.0), cwd=REPO, env=env,
                           capture_output=True, text=True, timeout=600)
    assert whole.returncode == 3, whole.stderr[-3000:]  # the too short cut failed
    # kill the second run once a random number of cuts of a random method is written
    rng = random.Random(1234)
    victim = rng.choice(methods)
    after = rng.randint(1, len(s["cuts"]) - 1)
    out = tmp_path / "killed"
    results = out / victim / "results-tiny.jsonl"
    proc = subprocess.Popen(_cli(out, s, methods, 1.6), cwd=REPO, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    killed = False
    while proc.poll() is None and time.monotonic() < deadline:
        if results.is_file() and len(results.read_text().splitlines()) >= after:
            os.kill(proc.pid, signal.SIGKILL)
            killed = True
            break
        time.sleep(0.005)
    proc.wait()
    assert killed, "the run ended before the kill point: the test checks nothing"
    resumed = subprocess.run(_cli(out, s, methods, 100.0), cwd=REPO, env=env,
                             capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 3, resumed.stderr[-3000:]
    for m in methods:
        assert _files(out / m) == _files(tmp_path / "whole" / m), m
        assert _records(out / m / "results-tiny.jsonl") == \
            _records(tmp_path / "whole" / m / "results-tiny.jsonl"), m
    lines = [json.loads(x)["cut_id"] for x in results.read_text().splitlines() if x.strip()]
    assert len(lines) == len(set(lines)) == len(s["cuts"])
