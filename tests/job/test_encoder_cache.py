"""The job's network pass: a bounded cache lets several methods share one encoder pass per
utterance, with outputs identical to encoding again and RTFs still charged for it."""

from __future__ import annotations

import pytest
import torch

from k2dec.job import DecodeConfig, load_assets, plan_methods, run_decode
from k2dec.job.encoder import JobEncoder
from k2dec.results import read_results


def _batch(cuts, ids):
    feats = [torch.from_numpy(cuts[i].load_features()) for i in ids]
    lens = torch.tensor([f.shape[0] for f in feats])
    return torch.nn.utils.rnn.pad_sequence(feats, batch_first=True), lens


def _rows(out, i):
    n = int(out.encoder_out_lens[i])
    return (out.encoder_out[i, :n], out.ctc_log_probs[i, :n],
            out.memory[i, : int(out.memory_lens[i])])


def _same(a, i, b, j) -> bool:
    return all(torch.equal(x, y) for x, y in zip(_rows(a, i), _rows(b, j)))


@pytest.fixture(scope="module")
def model_and_cuts(decode_setup):
    s = decode_setup
    cuts = [c for c in s["cuts"] if c.id != "utt5"]  # utt5 is too short for the encoder
    return load_assets(s["model_path"], s["lang_dir"]).model, cuts


def test_cached_outputs_equal_a_new_pass_in_any_batch(model_and_cuts):
    model, cuts = model_and_cuts
    plain, cached = JobEncoder(), JobEncoder(cache_mb=64)
    feats, lens = _batch(cuts, [0, 1, 2, 3, 4])
    ref = plain(model, feats, lens)
    first = cached(model, feats, lens)
    assert (cached.hits, cached.misses) == (0, 5)
    assert cached.take_saved_seconds() == 0.0
    assert all(_same(ref, i, first, i) for i in range(5))
    # another batch composition and order: all hits, the same numbers
    feats2, lens2 = _batch(cuts, [3, 0])
    again = cached(model, feats2, lens2)
    assert (cached.hits, cached.misses) == (2, 5)
    assert _same(ref, 3, again, 0) and _same(ref, 0, again, 1)
    assert cached.take_saved_seconds() > 0.0
    assert cached.take_saved_seconds() == 0.0  # taken once
    # the batch handed out is a copy: changing it leaves the cache as it was
    again.encoder_out.zero_()
    assert _same(ref, 3, cached(model, feats2, lens2), 0)


def test_the_cache_is_bounded(model_and_cuts):
    model, cuts = model_and_cuts
    feats, lens = _batch(cuts, [0])
    one = JobEncoder(cache_mb=64)
    one(model, feats, lens)
    size_mb = one._used / 2**20
    small = JobEncoder(cache_mb=1.5 * size_mb)  # room for about one utterance
    feats, lens = _batch(cuts, [0, 1, 2, 3, 4])
    out = small(model, feats, lens)
    assert 0 < small._used <= small.cache_bytes and len(small._cache) < 5
    out2 = small(model, feats, lens)
    assert small.hits == len(small._cache) and small.misses == 5 + 5 - len(small._cache)
    assert all(_same(out, i, out2, i) for i in range(5))
    off = JobEncoder(cache_mb=0)
    off(model, feats, lens)
    off(model, feats, lens)
    assert (off.hits, off._used) == (0, 0)


def test_padded_batches_are_never_cached(model_and_cuts):
    model, cuts = model_and_cuts
    enc = JobEncoder(batch=True, cache_mb=64)
    feats, lens = _batch(cuts, [0, 1])
    enc(model, feats, lens)
    enc(model, feats, lens)
    assert (enc.hits, enc.misses, enc._used) == (0, 0, 0)


@pytest.mark.parametrize("bad", [-1.0, float("nan")])
def test_bad_cache_sizes_are_refused(bad):
    with pytest.raises(ValueError, match="encoder_cache_mb must be >= 0"):
        DecodeConfig(encoder_cache_mb=bad)
    with pytest.raises(ValueError, match="cache_mb must be >= 0"):
        JobEncoder(cache_mb=bad)


@pytest.mark.parametrize("cache_mb", [0.0, 64.0])
def test_run_decode_encodes_each_utterance_once(decode_setup, tmp_path, monkeypatch, cache_mb):
    s = decode_setup
    assets = load_assets(s["model_path"], s["lang_dir"])
    calls = []
    encode = assets.model.encode
    monkeypatch.setattr(assets.model, "encode", lambda f, n: calls.append(1) or encode(f, n))
    runs = plan_methods(["1best", "greedy_search", "ctc-greedy-search"])
    cfg = DecodeConfig(max_duration=3.0, num_buckets=2, encoder_cache_mb=cache_mb)
    rows = run_decode(assets, {"a": s["cuts"], "b": s["cuts"]}, runs, tmp_path / "r", cfg)
    decodable = len(s["cuts"]) - 1  # utt5 is too short: recorded as failed, never encoded
    # once per test set (the cache is emptied between them, although here they hold the same
    # features)
    assert len(calls) == (decodable * 2 if cache_mb else decodable * len(runs) * 2)
    assert all(r.rtf > 0 for r in rows)
    if cache_mb:  # the same results as without the cache (the other parametrization)
        monkeypatch.undo()
        plain = run_decode(load_assets(s["model_path"], s["lang_dir"]), {"a": s["cuts"]},
                           runs, tmp_path / "p",
                           DecodeConfig(max_duration=3.0, num_buckets=2, encoder_cache_mb=0))
        for r, p in zip(rows, plain):
            assert read_results(r.results_path) == read_results(p.results_path)


@pytest.mark.parametrize("bad", [-1.0, float("nan")])
def test_bad_lattice_cache_sizes_are_refused(bad):
    with pytest.raises(ValueError, match="lattice_cache_mb must be >= 0"):
        DecodeConfig(lattice_cache_mb=bad)


def test_run_decode_searches_each_lattice_once(decode_setup, tmp_path, monkeypatch):
    """HLG methods of one job share each batch's lattice search per graph (nbest and
    nbest-oracle the plain HLG; mbr the HLG with LM scores: 2 searches, not 3), results as
    without the cache, every method still charged the search."""
    import k2

    s = decode_setup
    calls = []
    intersect = k2.intersect_dense_pruned
    monkeypatch.setattr(k2, "intersect_dense_pruned",
                        lambda *a, **k: calls.append(1) or intersect(*a, **k))
    runs = plan_methods(["nbest", "nbest-oracle", "mbr", "ctc-greedy-search"])

    def decode(out: str, lattice_cache_mb: float):
        calls.clear()
        cfg = DecodeConfig(max_duration=3.0, num_buckets=2, lattice_cache_mb=lattice_cache_mb)
        rows = run_decode(load_assets(s["model_path"], s["lang_dir"]), {"a": s["cuts"]}, runs,
                          tmp_path / out, cfg)
        return rows, len(calls)

    rows, cached = decode("r", 64.0)
    plain_rows, plain = decode("p", 0.0)
    assert cached > 0 and 3 * cached == 2 * plain
    assert all(r.rtf > 0 for r in rows)
    for r, p in zip(rows, plain_rows):
        assert read_results(r.results_path) == read_results(p.results_path)


def test_tuning_encodes_each_utterance_once(decode_setup, tmp_path, monkeypatch):
    from k2dec.job import tune_methods

    s = decode_setup
    assets = load_assets(s["model_path"], s["lang_dir"])
    calls = []
    encode = assets.model.encode
    monkeypatch.setattr(assets.model, "encode", lambda f, n: calls.append(1) or encode(f, n))
    # (every tuned method must have the grid's field: ctc-greedy-search has no graph.scale)
    runs = plan_methods(["1best", "nbest"])
    tune_methods(assets, {"dev": s["cuts"]}, runs, tmp_path, ["graph.scale=0.3,0.6"],
                 DecodeConfig(max_duration=3.0, num_buckets=2))
    assert len(calls) == len(s["cuts"]) - 1  # four settings, one pass per utterance
