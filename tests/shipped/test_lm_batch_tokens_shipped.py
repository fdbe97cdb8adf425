"""fast_beam_search_with_nbest_rnn_rescoring with the shipped model and RNN LM gives the same
records whatever its LM calls' token bound (``rescore.lm_batch_tokens``: one path per call,
the default, no bound): random shipped test utterances, a batch of one and a batch of several
with an utterance of no frames."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from k2dec.demo import ASSETS, SHIPPED_SETTINGS
from k2dec.job import plan_methods, read_settings
from k2dec.methods import TransducerInputs, get_method
from tests.shipped.conftest import encoded_test_clean

pytestmark = pytest.mark.skipif(not (ASSETS / "model.pt").is_file(),
                                reason="no shipped model in this checkout")

METHOD = "fast_beam_search_with_nbest_rnn_rescoring"


@pytest.fixture(scope="module")
def shipped(shipped_demo):
    """``(resources, model, encoder outputs)``: the shipped transducer, its resources (G,
    token words, RNN LM) and the encoder outputs ``[T, C]`` of three random test-clean
    utterances plus, second, one of no frames."""
    assets, encoded = encoded_test_clean(shipped_demo, 35, 3)
    outs = [o.encoder_out[0, : int(o.encoder_out_lens[0])] for o in encoded]
    outs.insert(1, outs[0][:0])
    return assets.resources, assets.model.transducer, outs


def _inputs(model, outs: list[torch.Tensor], rows: list[int]) -> TransducerInputs:
    enc = [outs[r] for r in rows]
    lens = torch.tensor([x.shape[0] for x in enc], dtype=torch.int64)
    return TransducerInputs(model, torch.nn.utils.rnn.pad_sequence(enc, batch_first=True), lens)


@pytest.mark.parametrize("rows", [[2], [0, 1, 2, 3]], ids=["one", "four-empty"])
def test_the_lm_token_bound_does_not_change_the_records(shipped, rows, monkeypatch):
    res, model, outs = shipped
    cfg = plan_methods([METHOD], settings=read_settings(SHIPPED_SETTINGS))[0].config
    assert cfg.rescore.lm_batch_tokens is not None  # the method reads the bound
    _, lm = res.neural_lm(METHOD)
    calls = []
    score = type(lm).score_sequences

    def spy(self, tokens, batch_size=None, max_tokens=None):
        calls.append(max_tokens)
        return score(self, tokens, batch_size, max_tokens)

    monkeypatch.setattr(type(lm), "score_sequences", spy)
    got = {}
    for bound in (1, None, 1 << 24):
        rescore = cfg.rescore if bound is None else replace(cfg.rescore, lm_batch_tokens=bound)
        with torch.no_grad():
            got[bound] = get_method(METHOD)(_inputs(model, outs, rows), res,
                                            replace(cfg, rescore=rescore))
    assert set(calls) <= {1, cfg.rescore.lm_tokens(), 1 << 24} and 1 in calls
    base = got[None]
    assert any(h.tokens for r in base for h in r.hyps)
    loose = dict(score=None, word_confidences=None, token_confidences=None)
    for bound in (1, 1 << 24):
        assert [r.key for r in got[bound]] == [r.key for r in base]
        for a, b in zip(got[bound], base, strict=True):
            assert [replace(h, **loose) for h in a.hyps] == [replace(h, **loose) for h in b.hyps]
            for x, y in zip(a.hyps, b.hyps, strict=True):
                assert (x.score is None) == (y.score is None)
                if x.score is not None:
                    assert x.score == pytest.approx(y.score, rel=1e-6, abs=1e-5)
                if x.token_confidences:
                    assert list(x.token_confidences) == pytest.approx(
                        list(y.token_confidences), rel=1e-5, abs=1e-5)
