"""The classic transducer beam_search against the per-utterance reference (icefall's
algorithm with dicts), with and without scorers."""

from __future__ import annotations

import pytest

from k2dec.testing.transducer import random_batch, random_model
from k2dec.transducer import TransducerBeamSearchConfig, beam_search
from tests.reference.transducer_reference import NetOracle, classic_beam_search_reference
from tests.scorers.factories import scorer_pairs


def _check(got, want):
    got = {tuple(h.tokens): (h.score, h.timestamps) for h in got}
    assert set(got) == set(want)
    for k, (score, times) in want.items():
        assert got[k][0] == pytest.approx(score, abs=1e-5), k
        assert got[k][1] == times, k


@pytest.mark.parametrize("seed", range(6))
def test_matches_reference(device, tmp_path, seed):
    vocab = [3, 5, 6][seed % 3]
    beam = [1, 2, 4][seed % 3]
    max_exp = [32, 2, 5][seed % 3]
    model = random_model(vocab_size=vocab, context_size=1 + seed % 2, seed=seed, device=device)
    lens = [6, 0, 1, 4, 6]
    enc, enc_lens = random_batch(lens, seed=seed, device=device)
    kinds = ["", "r", "nh"][seed % 3] if seed >= 3 else ""
    scorers, refs = scorer_pairs(kinds, vocab, len(lens), seed, device, tmp_path)
    config = TransducerBeamSearchConfig(beam_size=beam, max_expansions_per_frame=max_exp,
                                        length_norm=bool(seed % 2))
    got = beam_search(model, enc, enc_lens, config, scorers=scorers)
    for i, n in enumerate(lens):
        want = classic_beam_search_reference(NetOracle(model, enc[i]), n, beam, max_exp,
                                             refs, utt=i)
        _check(got[i], want)
        c = model.decoder.context_size if config.length_norm else None
        assert tuple(got[i][0].tokens) == max(want.items(), key=lambda kv, c=c: (
            kv[1][0] / (c + len(kv[0])) if c is not None else kv[1][0]))[0]


def test_several_symbols_per_frame(device):
    """Unlike modified beam search, the classic search may emit many tokens on one frame."""
    model = random_model(vocab_size=5, context_size=2, seed=11, scale=3.0, device=device)
    enc, enc_lens = random_batch([3, 3], seed=11, device=device)
    hyps = beam_search(model, enc, enc_lens, TransducerBeamSearchConfig(beam_size=4))
    times = [h.timestamps for hs in hyps for h in hs]
    assert any(len(t) > len(set(t)) for t in times)


def test_config_validation():
    with pytest.raises(ValueError, match="beam"):
        TransducerBeamSearchConfig(beam_size=0)
    with pytest.raises(ValueError, match="max_expansions_per_frame"):
        TransducerBeamSearchConfig(max_expansions_per_frame=0)
