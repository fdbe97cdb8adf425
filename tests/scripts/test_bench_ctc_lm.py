"""``scripts/bench/ctc_lm.py``: the report is produced whether or not the peers (torchaudio,
pyctcdecode + kenlm) are installed, missing peers are reported rather than dropped, and the
comparison behind the target picks the right k2dec run."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from scripts.bench import ctc_lm as bench
from scripts.bench.peers.tokens import read_tokens

REPO = Path(__file__).resolve().parents[2]


def _peer_available(peer: str) -> bool:
    if peer == bench.TORCHAUDIO:
        if importlib.util.find_spec("torchaudio") is None:
            return False
        try:  # torchaudio >= 2.1 needs the flashlight-text package for it
            from torchaudio.models.decoder import ctc_decoder  # noqa: F401
        except (ImportError, RuntimeError):
            return False
        return True
    return all(importlib.util.find_spec(m) is not None for m in ("pyctcdecode", "kenlm"))


def _run(out: Path, env: dict | None = None) -> dict:
    proc = subprocess.run([sys.executable, "-m", "scripts.bench.ctc_lm", "--smoke", "--report",
                           str(out)], cwd=REPO, capture_output=True, text=True, timeout=200,
                          env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads((out / "ctc_lm.json").read_text())


def _systems(report: dict) -> list[str]:
    main = report["tables"][0]
    assert main["headers"] == bench.RUN_HEADERS
    return [row[0] for row in main["rows"]]


def test_smoke_report(tmp_path):
    report = _run(tmp_path)
    assert report["area"] == "ctc_lm"
    assert report["plots"] == ["ctc_lm.png"]
    assert (tmp_path / "ctc_lm.png").stat().st_size > 1000
    systems = _systems(report)
    # the lattice-free search right after the lattice search at each setting
    assert systems[:7] == [bench.K2_1BEST, bench.K2_FREE, bench.K2_1BEST_FAST,
                           bench.K2_FREE_FAST, bench.K2_1BEST_FASTER, bench.K2_1BEST_PARTIAL,
                           bench.K2_WLR]
    for row in report["tables"][0]["rows"]:
        wers = row[3:6]
        assert all(0.0 <= w <= 200.0 for w in wers), row
        assert row[6] > 0  # frames/s
    missing = {m["peer"] for m in report["missing"]}
    assert [t["target"] for t in report["targets"]] == [bench.TARGET_EQUAL_WER]
    (target,) = report["targets"]
    assert target["met"] is None  # never decided on 4 utterances
    for peer in bench.PEERS:
        if _peer_available(peer):
            assert peer not in missing
            assert peer in systems
            assert any(t["caption"].startswith(f"Equal WER, HLG 1best vs {peer}")
                       for t in report["tables"])
        else:
            assert peer in missing
            assert peer not in systems
    if _peer_available(bench.TORCHAUDIO):
        assert target["value"].startswith("k2dec/torchaudio speed at equal WER")
    assert str(REPO) not in json.dumps(report)


def test_missing_or_failing_peers_are_reported_not_dropped(tmp_path):
    # packages first on the path stand for a peer that is not installed (torchaudio) and one
    # that builds but fails while decoding (pyctcdecode)
    shadow = tmp_path / "shadow"
    (shadow / "torchaudio").mkdir(parents=True)
    (shadow / "torchaudio" / "__init__.py").write_text(
        "raise ImportError('torchaudio is not installed here')\n")
    (shadow / "pyctcdecode").mkdir(parents=True)
    (shadow / "pyctcdecode" / "__init__.py").write_text(
        "class _Broken:\n"
        "    def reset_params(self, **kwargs):\n"
        "        raise RuntimeError('broken decoder')\n"
        "def build_ctcdecoder(*args, **kwargs):\n"
        "    return _Broken()\n")
    env = dict(os.environ, PYTHONPATH=str(shadow))
    report = _run(tmp_path / "report", env)
    reasons = {m["peer"]: m["reason"] for m in report["missing"]}
    assert set(reasons) == set(bench.PEERS)
    assert "torchaudio is not installed here" in reasons[bench.TORCHAUDIO]
    assert "requirements/bench-ctc.txt" in reasons[bench.TORCHAUDIO]
    assert "failed while decoding (RuntimeError: broken decoder)" in reasons[bench.PYCTC]
    assert set(_systems(report)) == {bench.K2_1BEST, bench.K2_1BEST_FAST, bench.K2_FREE,
                                     bench.K2_FREE_FAST, bench.K2_1BEST_FASTER,
                                     bench.K2_1BEST_PARTIAL, bench.K2_WLR}
    assert [(t["target"], t["met"]) for t in report["targets"]] == [
        (bench.TARGET_EQUAL_WER, None)]
    assert all(row[0].startswith("k2dec") for row in report["tables"][-1]["rows"])  # tuning
    assert "ctc_lm.png" in report["plots"]


def _run_record(system: str, seconds: float, wer: float, setting: str = "s") -> object:
    return bench.Run(system, setting, "λ=1", seconds, 1000, {"all": wer}, None)


def test_equal_wer_takes_the_fastest_1best_run_not_less_accurate():
    peer = bench.TORCHAUDIO
    runs = [
        _run_record(bench.K2_1BEST, 1.0, 30.0, "exact"),
        _run_record(bench.K2_1BEST_FAST, 0.5, 31.0, "fast"),
        _run_record(bench.K2_WLR, 0.1, 20.0, "rescoring is not 1best"),
        _run_record(peer, 0.25, 32.0, "p-fast"),
        _run_record(peer, 2.0, 30.0, "p-mid"),
        _run_record(peer, 4.0, 29.0, "p-best"),
    ]
    rows, ratios = bench.equal_wer(runs, peer)
    assert [r[0] for r in rows] == ["p-best", "p-mid", "p-fast"]
    assert ratios == [None, 2.0, 0.5]
    assert rows[1][3].endswith(", exact") and rows[2][3].endswith(", fast")


def test_compare_takes_the_most_accurate_k2dec_run_that_is_not_slower():
    peer = bench.TORCHAUDIO
    runs = [
        _run_record(bench.K2_1BEST, 1.0, 30.0, "fast"),
        _run_record(bench.K2_1BEST, 3.0, 20.0, "slow"),
        _run_record(bench.K2_WLR, 2.0, 25.0, "mid"),
        _run_record(peer, 0.5, 40.0, "p-fast"),
        _run_record(peer, 2.5, 26.0, "p-best"),
    ]
    rows, target = bench.compare(runs, peer)
    assert [r[0] for r in rows] == ["p-fast", "p-best"]
    assert rows[0][3] == "none as fast"
    assert rows[1][3] == f"{bench.K2_WLR}, mid"
    assert rows[1][5] == pytest.approx(2.0 / 2.5)
    assert rows[1][6] == pytest.approx(25.0 - 26.0)
    assert target["met"] is True
    assert "p-best" in target["value"]
    assert f"No {peer} setting reaches k2dec's best WER (20.00%)" in target["value"]

    # the same k2dec runs against a faster or a more accurate peer
    _, target = bench.compare(runs[:3] + [_run_record(peer, 1.5, 24.0)], peer)
    assert target["met"] is False  # only the 30% run is as fast
    _, target = bench.compare(runs[:3] + [_run_record(peer, 0.1, 10.0)], peer)
    assert target["met"] is False
    assert "no k2dec setting is as fast" in target["value"]
    assert "At equal accuracy" in target["value"]
    assert "takes 30.00x the time of" in target["value"]  # k2dec's 20% run vs the peer's
    assert bench.compare(runs[:3], peer) == ([], None)


def test_every_grid_point_is_a_valid_search_setting():
    # the small points (max-active 10-30) need min_active_states below k2dec's default 30
    for sizes in bench.MODES.values():
        for beams in (sizes.k2_beams, sizes.k2_fast, sizes.k2_faster, sizes.rescore_beams,
                      sizes.nbest_beams, (sizes.k2_tune,)):
            for beam in beams:
                lattice = bench.K2System.config(beam)["lattice"]
                assert lattice.min_active_states < lattice.max_active_states == beam[2]
    assert bench.min_active(10) == 5 and bench.min_active(100) == 30


def test_tune_rescoring_reads_the_scale_from_the_result_key():
    data = bench.Data(log_probs=None, lengths=None, refs=[["A", "B"]], cut_ids=["c"],
                      test_sets=["t"])
    sweep = {"lm_scale_0.5": [["A"]], "lm_scale_0.2": [["A", "B"]],
             "ngram_lm_scale_0.1": [["A", "B"]]}
    assert bench.tune_rescoring(data, sweep) == (0.1, 0.0)  # ties: the smaller scale


def test_read_tokens(tmp_path):
    path = tmp_path / "tokens.txt"
    path.write_text("<blk> 0\n▁A 2\nB 1\n#0 3\n")
    assert read_tokens(path, 3) == ["<blk>", "B", "▁A"]
    with pytest.raises(ValueError, match="no symbols for ids"):
        read_tokens(path, 5)
