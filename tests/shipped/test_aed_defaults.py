"""attention-beam-search at its defaults (no settings file) does not degenerate on the shipped
model: joint CTC/attention scoring keeps it near the recorded WER, while the attention decoder
alone (ctc_weight=0, the old default) ends too early and loops ("STES STES STES ...")."""

from __future__ import annotations

from pathlib import Path

import pytest
import soundfile as sf
from lhotse import CutSet

from k2dec.demo import ASSETS
from k2dec.job import DecodeConfig, load_assets, plan_methods, run_decode
from k2dec.results import is_degenerate, read_results

pytestmark = pytest.mark.skipif(not (ASSETS / "model.pt").is_file(),
                                reason="no shipped model in this checkout")

#: WER % of the first 30 cuts of test-clean at the method's defaults, recorded from a real run
#: (RESULTS.md "Attention beam search defaults"), plus 3 points for float differences
DEFAULT_WER = 55.49 + 3.0


def test_defaults_do_not_degenerate(shipped_demo, tmp_path):
    _, lang, graphs, cut_paths = shipped_demo
    cuts = CutSet.from_cuts(sorted(CutSet.from_file(cut_paths["test-clean"]),
                                   key=lambda c: c.id)[:30])
    assets = load_assets(ASSETS / "model.pt", lang, graph_dir=graphs)
    wer, longest = {}, {}
    for name, sets in (("default", ()), ("attention only", ("ctc_weight=0",))):
        run, = plan_methods(["attention-beam-search"], sets)
        row, = run_decode(assets, {"test-clean": cuts}, [run], tmp_path / name,
                          DecodeConfig(max_duration=100.0))
        assert row.failed == []
        wer[name] = row.headline[1]
        records = read_results(row.results_path).values()
        longest[name] = max(len(r["hyp"]) / max(1, len(r["ref"])) for r in records)
    assert wer["default"] <= DEFAULT_WER, wer
    assert longest["default"] < 1.5, longest  # no hypothesis runs on in a loop
    assert wer["attention only"] > wer["default"] + 30, wer  # what the default guards against


#: Real human speech Debian's codec2-examples ships (radio / telephone recordings) on which
#: attention-beam-search looped before its repetition guard (ctc_weight 0.3: the first four;
#: the shipped decode.json's 0.5: cross and kristoff); raw files are 8 kHz 16-bit mono.
CODEC2 = Path("/usr/share/codec2")
LOOPED = ["raw/hts2.raw", "raw/kristoff.raw", "raw/ve9qrp_10s.raw", "wav/vk5qi.wav",
          "wav/cross.wav"]


@pytest.fixture(scope="module")
def real_speech(tmp_path_factory) -> Path:
    if not all((CODEC2 / name).is_file() for name in LOOPED):
        pytest.skip("no real speech to decode (Debian package codec2-examples)")
    d = tmp_path_factory.mktemp("codec2")
    for name in LOOPED:
        src = CODEC2 / name
        if src.suffix == ".raw":
            samples, rate = sf.read(src, format="RAW", subtype="PCM_16", samplerate=8000,
                                    channels=1, dtype="int16")
        else:
            samples, rate = sf.read(src, dtype="int16")
        sf.write(d / f"{src.stem}.wav", samples, rate)
    return d


@pytest.mark.parametrize("settings", ["defaults", "shipped decode.json"])
def test_real_speech_gives_no_degenerate_hypothesis(real_speech, tmp_path, settings):
    """At the method's defaults and with the shipped settings file (ctc_weight 0.5), no
    hypothesis of these recordings holds a word or token (or an n-gram of them) repeated 4
    times in a row, and the results table's degenerate column says so; without
    the repetition guard and length penalty (the earlier defaults) some do, so this can fail."""
    from click.testing import CliRunner

    from k2dec.cli import main

    base = ["decode", "--audio-dir", str(real_speech), "--model", str(ASSETS / "model.pt"),
            "--lang-dir", str(ASSETS / "lang"), "--method", "attention-beam-search"]
    if settings == "defaults":
        base.append("--no-model-settings")
    counts = {}
    for name, extra in (("now", []), ("unguarded", ["--set", "search.max_repeats=none",
                                                    "--set", "search.gnmt_alpha=0"])):
        out = tmp_path / name
        r = CliRunner().invoke(main, [*base, *extra, "--out-dir", str(out)])
        assert r.exit_code == 0, r.output
        path, = (out / "attention-beam-search").glob("results-*.jsonl")
        records = read_results(path)
        assert len(records) == len(LOOPED)
        hyps = [next(iter(rec["hyps"].values())) for rec in records.values()]
        counts[name] = sum(is_degenerate(h["text"]) or is_degenerate(h["tokens"])
                           for h in hyps)
        assert f"| {len(LOOPED)} of" not in r.output  # none failed
        row, = [x for x in r.output.splitlines() if "| attention-beam-search |" in x]
        assert row.endswith(f" | {counts[name]} |"), row  # the table says
    assert counts["now"] == 0, counts
    assert counts["unguarded"] > 0, counts
