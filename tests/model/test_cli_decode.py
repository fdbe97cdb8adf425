"""`k2dec decode --model` with an icefall TorchScript export and a sherpa-onnx folder on a
folder of recordings: the same words as icefall's own recipe on the same features (the eager
modules, fbank with icefall's options), and --list-methods says what each model supports."""

from __future__ import annotations

import numpy as np
import pytest
import soundfile as sf
import torch
from click.testing import CliRunner

from k2dec.cli import main
from k2dec.data import FeatureConfig
from k2dec.results import read_results, token_ids_to_words
from k2dec.transducer import fast_beam_search, greedy_search, modified_beam_search
from tests.model import icefall_like as il

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

METHODS = ("greedy_search", "modified_beam_search", "fast_beam_search")


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    d = tmp_path_factory.mktemp("byom")
    rng = np.random.default_rng(1)
    audio = d / "wavs"
    audio.mkdir()
    for i, dur in enumerate([1.1, 0.7, 1.6]):
        x = (rng.standard_normal(int(16000 * dur)) * 0.1).astype("float32")
        sf.write(audio / f"rec{i}.wav", x, 16000)
    # an 8 kHz recording: resampled to the model's 16 kHz before the fbank
    sf.write(audio / "rec3.wav", (rng.standard_normal(8000) * 0.1).astype("float32"), 8000)
    eager = il.build_transducer(seed=2)
    exp = d / "exp"
    exp.mkdir()
    jit = il.save_jit(eager, exp / "jit_script.pt")
    il.write_tokens(exp / "tokens.txt", 12)
    onnx_dir = d / "sherpa"
    il.export_onnx(eager, onnx_dir)
    il.write_tokens(onnx_dir / "tokens.txt", 12)
    return {"dir": d, "audio": audio, "eager": eager, "jit": jit, "onnx": onnx_dir,
            "tokens": exp / "tokens.txt"}


def _decode(model, audio, out, methods=METHODS, extra=()):
    args = ["decode", "--model", str(model), "--audio-dir", str(audio), "--out-dir", str(out),
            "--max-duration", "2"]
    for m in methods:
        args += ["--method", m]
    r = CliRunner().invoke(main, args + list(extra))
    assert r.exit_code == 0, (r.output, r.exception)
    stems = [p.stem for p in audio.glob("*.wav")]
    out_hyps = {}
    for m in methods:
        records = read_results(out / m / f"results-{audio.name}.jsonl")
        # cut ids are derived from the file names (lhotse adds a suffix)
        out_hyps[m] = {s: records[k]["hyp"] for s in stems for k in records
                       if k == s or k.startswith(s + "-")}
    return out_hyps


def _icefall_reference(setup, compat: bool = False):
    """What icefall's recipe gives on the same recordings: fbank with icefall's options on
    each file, the eager modules, the searches (with ``compat``: configured as icefall's,
    :func:`k2dec.methods.icefall_compatible`), tokens.txt to words."""
    import k2
    from lhotse import Recording

    from k2dec.methods import get_method, icefall_compatible

    table = k2.SymbolTable.from_file(str(setup["tokens"]))
    cfg = FeatureConfig()
    extractor = cfg.extractor()
    feats, ids = [], []
    for path in sorted(setup["audio"].glob("*.wav")):
        rec = Recording.from_file(path).resample(cfg.sampling_rate)
        feats.append(torch.from_numpy(extractor.extract(rec.load_audio()[0],
                                                        cfg.sampling_rate)))
        ids.append(path.stem)
    lens = torch.tensor([f.size(0) for f in feats])
    x = torch.nn.utils.rnn.pad_sequence(feats, batch_first=True, padding_value=-23.0259)
    eager = setup["eager"]
    cfg = {m: (icefall_compatible(m) if compat else get_method(m).default_config())
           for m in METHODS}
    cfg = {m: getattr(c, "search", c) for m, c in cfg.items()}  # the search's own config
    with torch.no_grad():
        enc, enc_lens = eager.encoder(x, lens)
        hyps = {"greedy_search": greedy_search(eager, enc, enc_lens, cfg["greedy_search"]),
                "modified_beam_search": modified_beam_search(
                    eager, enc, enc_lens, cfg["modified_beam_search"]),
                "fast_beam_search": fast_beam_search(eager, enc, enc_lens, None,
                                                     cfg["fast_beam_search"]).hyps}
    return {m: dict(zip(ids, token_ids_to_words([h.tokens for h in hs], table)))
            for m, hs in hyps.items()}


def test_torchscript_and_onnx_decode_a_folder_like_icefall(setup, tmp_path):
    ref = _icefall_reference(setup)
    assert any(ref["greedy_search"].values())  # not vacuous
    got_jit = _decode(setup["jit"], setup["audio"], tmp_path / "jit")
    got_onnx = _decode(setup["onnx"], setup["audio"], tmp_path / "onnx")
    for m in METHODS:
        assert got_jit[m] == ref[m], m
        assert got_onnx[m] == ref[m], m


def test_icefall_compat_flag(setup, tmp_path):
    ref = _icefall_reference(setup, compat=True)
    got = _decode(setup["jit"], setup["audio"], tmp_path / "compat", extra=["--icefall-compat"])
    assert got == ref
    ours = _icefall_reference(setup)
    assert ref["fast_beam_search"] != ours["fast_beam_search"]  # the last frame matters here


def test_ctc_head_of_a_torchscript_export(setup, tmp_path):
    got = _decode(setup["jit"], setup["audio"], tmp_path / "ctc", ("ctc-greedy-search",))
    assert len(got["ctc-greedy-search"]) == 4


def test_list_methods_follows_the_model(setup, tmp_path):
    r = CliRunner().invoke(main, ["decode", "--list-methods", "--model", str(setup["jit"])])
    assert r.exit_code == 0, r.output
    listed = {line.split()[0] for line in r.output.splitlines()[2:] if not line.startswith(" ")}
    assert {"greedy_search", "fast_beam_search_nbest_LG", "ctc-greedy-search"} <= listed
    assert "attention-beam-search" not in listed
    r = CliRunner().invoke(main, ["decode", "--list-methods", "--model", str(setup["onnx"])])
    listed = {line.split()[0] for line in r.output.splitlines()[2:] if not line.startswith(" ")}
    assert "greedy_search" in listed and "ctc-greedy-search" not in listed


def test_unsupported_method_is_refused_before_decoding(setup, tmp_path):
    r = CliRunner().invoke(main, ["decode", "--model", str(setup["onnx"]), "--audio-dir",
                                  str(setup["audio"]), "--method", "attention-beam-search",
                                  "--out-dir", str(tmp_path)])
    assert r.exit_code != 0 and "not for this model" in r.output
    assert not (tmp_path / "features").exists()


def test_feature_overrides(setup, tmp_path):
    r = CliRunner().invoke(main, ["decode", "--list-methods", "--model", str(setup["jit"]),
                                  "--feature-num-mel-bins", "40",
                                  "--feature-sampling-rate", "8000"])
    assert r.exit_code == 0, r.output
    assert "40-bin fbank at 8000 Hz" in r.output
    r = CliRunner().invoke(main, ["decode", "--list-methods", "--model", str(setup["jit"]),
                                  "--feature-high-freq", "9000"])
    assert r.exit_code != 0 and "high_freq" in r.output
    # features of another size than the model's input: every cut fails with the reason
    got = CliRunner().invoke(main, [
        "decode", "--model", str(setup["jit"]), "--audio-dir", str(setup["audio"]),
        "--method", "greedy_search", "--out-dir", str(tmp_path / "o"),
        "--feature-num-mel-bins", "40"])
    # every cut of every method failed: exit status 4 (not 3, "some failed")
    assert got.exit_code == 4 and "wavs greedy_search: 4 of 4 cuts failed" in got.output, \
        got.output
    assert "no cut could be decoded" in got.output
    records = read_results(tmp_path / "o" / "greedy_search" / "results-wavs.jsonl")
    assert records and all(r["status"] == "error" for r in records.values())
