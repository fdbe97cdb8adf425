"""CTM files and confidence summaries written by the decode job beside icefall's result files:
times and confidences are those of the JSONL records (the frames of the methods' outputs)."""

from __future__ import annotations

import pytest

from k2dec.job import DecodeConfig, decode_cuts, load_assets
from k2dec.methods import get_method, list_methods
from k2dec.results import read_ctm, read_results
from tests.job.quick_settings import quick_config


@pytest.mark.parametrize("method,keys", [
    ("mbr", ["mbr", "1best"]),
    ("fast_beam_search_mbr_LG", ["fast_beam_search_mbr_LG", "fast_beam_search_LG"]),
    ("fast_beam_search_mbr", ["fast_beam_search_mbr", "fast_beam_search"]),
    ("greedy_search", ["greedy_search"]),
    # joint CTC/attention scoring (the default ctc_weight): every hypothesis has a CTC
    # alignment, so token frames and a CTM
    ("attention-beam-search", ["attention-beam-search"]),
    ("1best", []),  # no confidences: no CTM
])
def test_ctm_files_match_the_records(decode_setup, tmp_path, method, keys):
    s = decode_setup
    assets = load_assets(s["model_path"], s["lang_dir"])
    assert assets.resources.word_start is not None
    summary = decode_cuts(assets, s["cuts"], method, tmp_path, "tiny",
                          config=DecodeConfig(max_duration=3.0, num_buckets=2))
    records = read_results(summary.results_path)
    out = tmp_path / method
    written = sorted(p.name for p in out.glob("ctm-*.ctm"))
    if method == "attention-beam-search":
        assert all("token_frames" in r["hyps"][method] for r in records.values()
                   if r["status"] == "ok")
    assert written == sorted(f"ctm-tiny-{k}.ctm" for k in keys)
    checked = 0
    for key in keys:
        ctm = read_ctm(out / f"ctm-tiny-{key}.ctm")
        for cut_id, rec in records.items():
            if rec["status"] != "ok":
                assert cut_id not in ctm
                continue
            hyp = rec["hyps"][key]
            words = ctm.get(cut_id, [])
            if "word_frames" in hyp:
                assert [w.word for w in words] == hyp["text"]
                for w, b, d, c in zip(words, hyp["word_frames"], hyp["word_durations"],
                                      hyp["word_confidences"]):
                    assert w.start == pytest.approx(b * 4 * 0.01, abs=1e-3)
                    assert w.duration == pytest.approx(d * 4 * 0.01, abs=1e-3)
                    assert w.confidence == pytest.approx(c, abs=1e-4)
                checked += len(words)
            elif "token_frames" in hyp:
                if words:  # token groups agree with the text's words
                    assert [w.word for w in words] == hyp["text"]
                    assert words[0].start == pytest.approx(hyp["token_frames"][0] * 0.04,
                                                           abs=1e-3)
                    assert min(w.confidence for w in words) == pytest.approx(
                        min(hyp["token_confidences"]), abs=1e-4)
                    checked += len(words)
    if keys:
        assert checked > 0
        summary_file = out / "confidence-summary-tiny.txt"
        rows = summary_file.read_text().splitlines()
        assert rows[0].startswith("setting\twords")
        assert sorted(r.split("\t")[0] for r in rows[1:]) == sorted(keys)
    else:
        assert not (out / "confidence-summary-tiny.txt").exists()


def test_ctm_settings_are_validated():
    with pytest.raises(ValueError, match="frame_shift"):
        DecodeConfig(frame_shift=0.0)
    with pytest.raises(ValueError, match="subsampling_factor"):
        DecodeConfig(subsampling_factor=0)


#: registered methods that write no confidences, and why (README, "Word times and
#: confidences"): lattice best paths without posteriors; the MBR methods give the same best
#: path with its posteriors at the cost of a forward-backward pass (``mbr``: key ``1best``,
#: ``--set rescore=true``: ``lm_scale_*`` for whole-lattice rescoring;
#: ``fast_beam_search_mbr(_LG)``: keys ``fast_beam_search(_LG)``), and ``ctc-decoding``'s best
#: path through H is ``ctc-greedy-search``'s, which has them.
NO_CONFIDENCES = {"1best", "whole-lattice-rescoring", "ctc-decoding", "fast_beam_search",
                  "fast_beam_search_LG"}
#: methods whose frames need an alignment the tiny random model cannot give (none: attention
#: beam search aligns its tokens to the CTC output, and with its default joint CTC scoring
#: every hypothesis has an alignment; without CTC: tests/methods/test_aed_methods.py)
NO_FRAMES_HERE: set[str] = set()


@pytest.mark.parametrize("method", [m.name for m in list_methods()])
def test_every_method_writes_times_and_confidences_or_is_listed_why(full_setup, tmp_path,
                                                                    method):
    s = full_setup
    assets = load_assets(s["model_path"], s["lang_dir"], lm_paths={"rnn_lm": s["lm_path"]},
                         lodr_arpa=s["lodr"])
    m = get_method(method)
    summary = decode_cuts(assets, s["cuts"], m, tmp_path, "tiny", quick_config(m),
                          config=DecodeConfig(max_duration=3.0, num_buckets=2))
    records = read_results(summary.results_path)
    keys = sorted({k for r in records.values() if r["status"] == "ok" for k in r["hyps"]})
    assert keys
    written = sorted(p.name for p in (tmp_path / method).glob("ctm-*.ctm"))
    has_conf = [k for k in keys if any(
        "word_confidences" in r["hyps"][k] or "token_confidences" in r["hyps"][k]
        for r in records.values() if r["status"] == "ok")]
    if method in NO_CONFIDENCES:
        assert has_conf == [] and written == []
        return
    assert has_conf == keys
    for r in records.values():
        if r["status"] != "ok":
            continue
        for key, hyp in r["hyps"].items():
            if hyp.get("error"):
                continue
            units = "words" if "word_confidences" in hyp else "tokens"
            frames = "word_frames" if units == "words" else "token_frames"
            assert len(hyp[f"{units[:-1]}_confidences"]) == len(hyp[units])
            if method not in NO_FRAMES_HERE:
                assert len(hyp[frames]) == len(hyp[units]), (key, hyp)
    if method not in NO_FRAMES_HERE:
        assert written == [f"ctm-tiny-{k}.ctm" for k in keys]
