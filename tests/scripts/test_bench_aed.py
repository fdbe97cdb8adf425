"""``scripts/bench/aed.py``: the report is produced (with or without ESPnet), a missing ESPnet is
reported as missing, and (when ESPnet is installed) the ESPnet adapters solve the same search
problem as k2dec's beam search."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from k2dec.aed import TransformerDecoder
from scripts.bench import aed as bench_aed
from scripts.bench.peers import espnet_search

REPO = Path(__file__).resolve().parents[2]


ESPNET, ESPNET_REASON = espnet_search.import_espnet()
needs_espnet = pytest.mark.skipif(ESPNET is None, reason=f"ESPnet missing: {ESPNET_REASON}")


def _run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "scripts.bench.aed", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=150, env=env)


def test_smoke_report(tmp_path):
    proc = _run("--smoke", "--report", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    report = json.loads((tmp_path / "aed.json").read_text())
    assert report["area"] == "aed"
    assert report["plots"] == ["aed.png"]
    assert (tmp_path / "aed.png").stat().st_size > 1000
    real, synthetic = report["tables"]
    systems = [row[2] for row in real["rows"]]
    assert systems[0] == "k2dec"
    assert [row[-1] for row in synthetic["rows"]] == ["yes"] * len(synthetic["rows"])
    (target,) = report["targets"]
    assert target["target"] == bench_aed.TARGET
    assert target["met"] is None  # never evaluated on smoke sizes
    if ESPNET is None:
        assert [m["peer"] for m in report["missing"]] == [espnet_search.PEER]
        assert systems == ["k2dec"]
    else:
        assert report["missing"] == []
        assert systems == ["k2dec", "espnet"]
        assert "smoke" in target["value"]
    assert str(REPO) not in json.dumps(report)


def test_missing_espnet_is_reported_not_dropped(tmp_path):
    # a broken `espnet` package first on the path stands for "not installed"
    fake = tmp_path / "shadow" / "espnet"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('espnet is not installed here')\n")
    env = dict(os.environ, PYTHONPATH=str(fake.parent))
    out = tmp_path / "report"
    proc = _run("--smoke", "--skip-synthetic", "--report", str(out), env=env)
    assert proc.returncode == 0, proc.stderr
    report = json.loads((out / "aed.json").read_text())
    (missing,) = report["missing"]
    assert missing["peer"] == espnet_search.PEER
    assert "espnet is not installed here" in missing["reason"]
    assert "requirements/bench-espnet.txt" in missing["reason"]
    (table,) = report["tables"]
    assert [row[2] for row in table["rows"]] == ["k2dec"]
    (target,) = report["targets"]
    assert target["met"] is None and "missing" in target["value"]
    assert f"missing peer {espnet_search.PEER}" in proc.stdout


@pytest.mark.parametrize("bad", [["--beams", "0"], ["--ctc-weight", "1.5"], ["--repeats", "0"]])
def test_bad_arguments_are_rejected(bad):
    with pytest.raises(SystemExit, match=bad[0].lstrip("-").split("-")[0]):
        bench_aed.parse_args(["--smoke", *bad])


def _random_problem(seed: int, n: int, frames: int = 12, vocab: int = 12):
    """A small random decoder (eos = sos = vocab - 1, the CTC blank 0 never proposed, as by a
    trained decoder) with random memory, lengths and CTC log-probs."""
    torch.manual_seed(seed)
    dec = TransformerDecoder(vocab, 16, d_model=16, nhead=2, num_layers=2, dim_feedforward=32,
                             dropout=0.0, sos_id=vocab - 1, eos_id=vocab - 1).eval()
    with torch.no_grad():
        dec.output.weight.mul_(3.0)
        dec.output.bias[dec.eos_id] += 1.0
        dec.output.bias[0] -= 30.0
    g = torch.Generator().manual_seed(seed)
    memory = torch.randn(n, frames, 16, generator=g)
    lens = torch.randint(frames // 2, frames + 1, (n,), generator=g)
    lens[0] = frames
    ctc = torch.randn(n, frames, vocab, generator=g).mul(4).log_softmax(-1)
    return dec, memory, lens, ctc


@needs_espnet
def test_espnet_decoder_scorer_matches_teacher_forcing():
    dec, memory, _, _ = _random_problem(0, 1)
    scorer = espnet_search.decoder_scorer(ESPNET, dec)
    x = memory[0]
    ys = torch.tensor([[dec.sos_id]])
    lp, states = scorer.batch_score(ys, [None], x.unsqueeze(0))
    # three different continuations, states picked per hypothesis as BatchBeamSearch does
    ys = torch.tensor([[dec.sos_id, 2], [dec.sos_id, 5], [dec.sos_id, 2]])
    states = [scorer.select_state(states, 0)] * 3
    for step in range(3):
        lp, states = scorer.batch_score(ys, states, x.expand(ys.size(0), -1, -1))
        mask = torch.zeros(ys.size(0), x.size(0), dtype=torch.bool)
        with torch.no_grad():
            want = dec(ys, x.expand(ys.size(0), -1, -1), mask)[:, -1]
        torch.testing.assert_close(lp, want, rtol=1e-5, atol=1e-5)
        order = [2, 0, 1]  # reorder like a beam does
        states = [scorer.select_state(states, i) for i in order]
        ys = torch.cat([ys[order], torch.tensor([[3 + step], [1], [4]])], dim=1)


def _batch(dec, memory, lens, ctc) -> SimpleNamespace:
    """The attributes of shipped.ShippedBatch that run_k2dec / run_espnet read."""
    return SimpleNamespace(assets=SimpleNamespace(model=SimpleNamespace(attention_decoder=dec)),
                           encoder_out=memory, encoder_lens=lens, ctc_log_probs=ctc)


@needs_espnet
@pytest.mark.parametrize("always_score_eos", [True, False])
@pytest.mark.parametrize(
    ("seed", "n", "beam", "ctc_weight", "end_detect"),
    [(0, 1, 3, 0.4, True), (0, 6, 1, 0.4, True), (0, 6, 3, 0.4, True), (1, 6, 3, 0.4, False),
     (2, 6, 4, 0.4, True), (0, 6, 3, 0.0, True)],
)
def test_k2dec_and_espnet_solve_the_same_search(seed, n, beam, ctc_weight, end_detect,
                                                always_score_eos):
    """With the same eos rule (stock ESPnet and k2dec's default score eos on every hypothesis;
    the pre-beamed variants only when pre-selected), ESPnet finds the same 1-best with the same
    score on every utterance whose 1-best stays below the maximum length (where the two differ
    by design)."""
    dec, memory, lens, ctc = _random_problem(seed, n)
    batch = _batch(dec, memory, lens, ctc)
    ours = bench_aed.run_k2dec(batch, beam, ctc_weight, repeats=1, end_detect=end_detect,
                               always_score_eos=always_score_eos)
    theirs = bench_aed.run_espnet(ESPNET, batch, beam, ctc_weight, repeats=1,
                                  eos_prebeamed=ctc_weight > 0 and not always_score_eos,
                                  end_detect=end_detect)
    max_lens = lens.tolist()
    below = sum(len(t) < m for t, m in zip(ours.tokens, max_lens))
    assert below >= (n + 1) // 2, ours.tokens
    cmp = bench_aed.compare(ours, theirs, max_lens)
    assert cmp.identical_short == 1.0, (ours.tokens, theirs.tokens)
    assert cmp.score_diff is not None and cmp.score_diff < 1e-4
    if ctc_weight > 0:  # not a trivial search: some 1-best has tokens
        assert max(len(t) for t in ours.tokens) > 0


@needs_espnet
def test_the_eos_rule_matters_and_matches_on_both_sides():
    """On this case the eos rule changes some 1-bests; each k2dec setting agrees with the
    ESPnet variant that has the same rule and differs from the other."""
    dec, memory, lens, ctc = _random_problem(1, 6)
    batch = _batch(dec, memory, lens, ctc)
    ours = bench_aed.run_k2dec(batch, 3, 0.4, repeats=1)
    ours_pre = bench_aed.run_k2dec(batch, 3, 0.4, repeats=1, always_score_eos=False)
    stock = bench_aed.run_espnet(ESPNET, batch, 3, 0.4, repeats=1)
    pre = bench_aed.run_espnet(ESPNET, batch, 3, 0.4, repeats=1, eos_prebeamed=True)
    max_lens = lens.tolist()
    assert ours_pre.system == "k2dec, eos pre-beamed"
    assert bench_aed.compare(ours, ours_pre, max_lens).identical_short < 1.0
    assert bench_aed.compare(ours, stock, max_lens).identical_short == 1.0
    assert bench_aed.compare(ours_pre, pre, max_lens).identical_short == 1.0
    assert bench_aed.compare(ours, pre, max_lens).identical_short < 1.0
