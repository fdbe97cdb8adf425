"""Same answer however the job was batched (issue 13): the shipped model decodes a handful of
shipped test cuts with every registered method its assets can run, at three batch sizes
(``max_duration``), and once more in a job killed with SIGKILL at a random point and resumed at
yet another batch size; every method's result files must be the same bytes in all four output
directories (float noise allowed only where a method evaluates a network on whole batches).

The killed job dies by its own SIGKILL when it is about to write its k-th results line (k at
random, half the time after writing part of that line); k comes from a seed shown in the
failure message: set ``K2DEC_KILL_SEED`` to replay it.
"""

from __future__ import annotations

import json
import math
import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from lhotse import CutSet

from k2dec.demo import SHIPPED_SETTINGS
from k2dec.job import (
    DecodeConfig,
    MethodRun,
    load_assets,
    plan_methods,
    read_settings,
    run_decode,
    split_available,
)
from k2dec.methods import list_methods

REPO = Path(__file__).resolve().parents[2]
NUM_CUTS = 4
MAX_CUT_SECONDS = 3.5
#: one cut per batch (two short ones may share), two or three per batch, all in one
BATCHINGS = (MAX_CUT_SECONDS, 6.0, 100.0)
TEST_SET = "tc"

#: (The fast_beam_search n-best methods sample lattices whose scores carry the joiner's
#: batch-dependent float noise, ~5e-7: ``k2.random_paths`` turned that into other samples;
#: k2dec's default sampler, ``NbestConfig.sampler="hashed"``, does not.)
#: Methods whose scores go through a network evaluated on the whole batch (transducer joiner,
#: attention decoder steps, RNN-LM path scoring): BLAS sums in another order for another batch
#: shape, so their scores and confidences differ in the last float32 digits (<= 1.3e-5
#: measured) while their hypotheses, frames and everything else must be identical.
FLOAT_NOISE = {"greedy_search", "modified_beam_search", "beam_search", "fast_beam_search",
               "fast_beam_search_LG", "fast_beam_search_nbest", "fast_beam_search_nbest_LG",
               "fast_beam_search_nbest_oracle", "fast_beam_search_with_nbest_rescoring",
               "fast_beam_search_with_nbest_rnn_rescoring", "fast_beam_search_mbr",
               "fast_beam_search_mbr_LG", "modified_beam_search_lm_rescore",
               "modified_beam_search_lm_shallow_fusion", "modified_beam_search_LODR",
               "modified_beam_search_lm_rescore_LODR", "attention-beam-search", "rnn-lm",
               "multi-pass", "ctc-prefix-beam-search-attention-decoder-rescoring",
               "ctc-prefix-beam-search-shallow-fussion", "attention-decoder",
               "attention-decoder-rescoring-no-ngram"}


def _runs(assets) -> tuple[list[MethodRun], dict[str, tuple[str, ...]]]:
    """Every registered method the shipped assets can run, with the demo's settings (the
    defaults and the shipped settings file); and what the others lack."""
    ok, lacking = split_available(list_methods(), assets.resources)
    settings = read_settings(SHIPPED_SETTINGS) if SHIPPED_SETTINGS.is_file() else None
    return plan_methods(ok, settings=settings), lacking


def decode(assets_dir: Path, lang: Path, graphs: Path, cuts: CutSet, out_dir: Path,
           max_duration: float) -> dict[str, tuple[str, ...]]:
    """The job under test: every method the shipped assets can run. Returns what the other
    methods lack."""
    assets = load_assets(assets_dir / "model.pt", lang, graph_dir=graphs,
                         lm_paths={"rnn_lm": assets_dir / "lm" / "rnn_lm.pt"},
                         lodr_arpa=assets_dir / "lm" / "token_2gram.arpa.gz")
    runs, lacking = _runs(assets)
    run_decode(assets, {TEST_SET: cuts}, runs, out_dir,
               DecodeConfig(max_duration=max_duration, num_buckets=2))
    return lacking


_KILLED = """
import json, os, signal, sys, torch
from pathlib import Path
from lhotse import CutSet
from k2dec.results import ResultWriter
from tests.job.test_same_bytes import decode
torch.set_num_threads(1)
a, lang, graphs, cuts, out = map(Path, sys.argv[1:6])
kill_at, mid_line = int(sys.argv[7]), sys.argv[8] == "1"
written = 0
append = ResultWriter._append


def append_then_die(self, record):
    # SIGKILL when the job is about to write its kill_at-th results line, maybe half-way in
    global written
    written += 1
    if written == kill_at:
        if mid_line:
            with open(self.path, "ab") as f:
                f.write(json.dumps(record).encode()[:30])
        os.kill(os.getpid(), signal.SIGKILL)
    append(self, record)


ResultWriter._append = append_then_die
decode(a, lang, graphs, CutSet.from_file(cuts), out, float(sys.argv[6]))
"""


def _lines(out_dir: Path) -> int:
    """Complete results lines under ``out_dir``, all methods together."""
    return sum(p.read_bytes().count(b"\n") for p in out_dir.glob(f"*/results-{TEST_SET}.jsonl"))


@pytest.fixture(scope="module")
def outputs(shipped_demo, tmp_path_factory):
    """``({name: out_dir}, kill note, {method: what the shipped assets lack})``: the same cuts
    decoded at each batch size and by a job killed at a random point, then resumed."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # module fixtures run before the autouse one that does this
    try:
        yield _decode_four_ways(shipped_demo, tmp_path_factory.mktemp("same-answer"))
    finally:
        torch.set_num_threads(threads)


def _decode_four_ways(shipped_demo, work: Path
                      ) -> tuple[dict[str, Path], str, dict[str, tuple[str, ...]]]:
    assets_dir, lang, graphs, cut_paths = shipped_demo
    cuts = [c for c in sorted(CutSet.from_file(cut_paths["test-clean"]), key=lambda c: c.id)
            if c.duration < MAX_CUT_SECONDS][:NUM_CUTS]
    cuts = CutSet.from_cuts(cuts)
    cuts_path = work / "cuts.jsonl.gz"
    cuts.to_file(cuts_path)
    dirs = {}
    for md in BATCHINGS:
        dirs[f"max_duration={md:g}"] = work / f"md{md:g}"
        lacking = decode(assets_dir, lang, graphs, cuts, dirs[f"max_duration={md:g}"], md)

    seed = int(os.environ.get("K2DEC_KILL_SEED", random.randrange(1 << 30)))
    total = (len(list_methods()) - len(lacking)) * NUM_CUTS
    rng = random.Random(seed)
    kill_at, mid_line = rng.randint(1, total), rng.random() < 0.5
    killed = work / "killed"
    proc = subprocess.run(
        [sys.executable, "-c", _KILLED, str(assets_dir), str(lang), str(graphs), str(cuts_path),
         str(killed), f"{MAX_CUT_SECONDS}", str(kill_at), str(int(mid_line))],
        env=dict(os.environ, PYTHONPATH=str(REPO)), capture_output=True, text=True)
    note = (f"killed at result line {kill_at} of {total}{', half-way in' if mid_line else ''} "
            f"(K2DEC_KILL_SEED={seed})")
    assert proc.returncode == -signal.SIGKILL, (note, proc.stderr[-3000:])
    assert _lines(killed) == kill_at - 1, note
    decode(assets_dir, lang, graphs, cuts, killed, 6.0)  # resumed at another batch size
    dirs["killed, resumed"] = killed
    return dirs, note, lacking


_SUMMARY = "confidence-summary-"
#: how far NCE and ECE of a confidence summary may move under float noise (see _same)
SUMMARY_TOLERANCE = 0.05


def _close(a, b) -> bool:
    """``a == b``, floats (at any depth) equal within float32 noise (and one unit of the 4th
    decimal, where files print 4: noise crossing a rounding boundary)."""
    if isinstance(a, float) or isinstance(b, float):
        return (isinstance(a, int | float) and isinstance(b, int | float)
                and math.isclose(a, b, rel_tol=1e-6, abs_tol=1.5e-4))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b))
    return a == b


def _same(name: str, a: bytes, b: bytes, loose_floats: bool) -> None:
    if not loose_floats or a == b:
        assert a == b, f"{name} differs"
        return
    la, lb = a.splitlines(), b.splitlines()
    assert len(la) == len(lb), f"{name}: {len(la)} vs {len(lb)} lines"
    for x, y in zip(la, lb):
        if name.split(" ")[0].endswith(".jsonl"):
            x, y = json.loads(x), json.loads(y)
        else:  # CTM, confidence summaries: numbers among words
            x, y = map(_numbers, (x.split(), y.split()))
        if name.startswith(_SUMMARY, name.index("/") + 1) and len(x) == len(y) == 9 \
                and isinstance(x[1], float):
            assert x[:3] == y[:3] and _close(x[3], y[3]) and x[7] == y[7], f"{name} differs"
            # NCE (calibrated and raw) and ECE within SUMMARY_TOLERANCE; AUC not compared: it
            # ranks words whose n-best posteriors are nearly tied (most are within 1e-6 of 1)
            # and float noise reorders them (measured: AUC 0.44 vs 0.51 over 28 words)
            nce_ece = (x[4], x[6], x[8]), (y[4], y[6], y[8])
            assert all(abs(a - b) <= SUMMARY_TOLERANCE for a, b in zip(*nce_ece)), \
                f"{name} differs beyond float noise: {x} vs {y}"
            continue
        assert _close(x, y), f"{name} differs beyond float noise"


def _numbers(tokens: list[bytes]) -> list:
    out = []
    for t in tokens:
        try:
            out.append(float(t))
        except ValueError:
            out.append(t)
    return out


@pytest.mark.parametrize("method", sorted(m.name for m in list_methods()))
def test_same_result_files_at_any_batch_size_and_after_a_kill(outputs, method):
    dirs, note, lacking = outputs
    if method in lacking:
        pytest.skip(f"the shipped assets lack {', '.join(lacking[method])}")
    (first_name, first), *others = dirs.items()
    want = _method_files(first / method)
    assert f"results-{TEST_SET}.jsonl" in want and any(n.startswith("recogs-") for n in want)
    records = [json.loads(x) for x in want[f"results-{TEST_SET}.jsonl"].splitlines()]
    assert len(records) == NUM_CUTS and all(r["status"] == "ok" for r in records)
    for name, d in others:
        got = _method_files(d / method)
        assert sorted(got) == sorted(want), (name, note)
        for fname, data in want.items():
            _same(f"{method}/{fname} ({name} vs {first_name}; {note})", data, got[fname],
                  loose_floats=method in FLOAT_NOISE and not fname.startswith(
                      ("recogs-", "errs-", "wer-summary-")))


def _method_files(d: Path) -> dict[str, bytes]:
    """A method's files by name; of the job record (its time and ``max_duration`` differ by
    run) the inputs and the files it lists."""
    out = {p.name: p.read_bytes() for p in sorted(d.iterdir()) if not p.name.startswith("job-")}
    for p in d.glob("job-*.json"):
        record = json.loads(p.read_text())
        out[p.name] = json.dumps([record["inputs"], record["files"]]).encode()
    return out
