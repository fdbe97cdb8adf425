"""The searches run k2dec's own decoder as per-token tables (:class:`DecoderTables`): its
output equals the module's up to float rounding for every context, the tables follow weight
updates, other decoders (subclasses, icefall's) run as modules, and every search gives the
same hypotheses either way."""

from __future__ import annotations

import itertools

import pytest
import torch

from k2dec.testing.transducer import random_batch, random_model
from k2dec.transducer import (
    FastBeamSearch,
    FastBeamSearchConfig,
    ModifiedBeamSearchConfig,
    StatelessDecoder,
    TransducerNet,
    fast_beam_search,
    greedy_search,
    modified_beam_search,
)
from k2dec.transducer.network import DecoderTables, decode_by_tables


def _every_context(vocab: int, c: int) -> torch.Tensor:
    ids = list(range(-1, vocab))
    return torch.tensor(list(itertools.product(ids, repeat=c)), dtype=torch.int64)


@pytest.mark.parametrize("context_size", [1, 2, 3])
def test_tables_give_the_modules_output_for_every_context(context_size):
    model = random_model(vocab_size=6, context_size=context_size, dim=8, seed=context_size)
    ctx = _every_context(6, context_size)
    tables = DecoderTables()
    assert DecoderTables.applies(model.decoder)
    with torch.no_grad():
        want = model.decoder(ctx, need_pad=False).squeeze(1)
        got = decode_by_tables(tables.get(model.decoder), ctx)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    first = tables.get(model.decoder)
    assert tables.get(model.decoder) is first  # kept while the weights stay
    with torch.no_grad():  # an optimizer step: in place
        model.decoder.embedding.weight.mul_(0.5)
        want = model.decoder(ctx, need_pad=False).squeeze(1)
    assert tables.get(model.decoder) is not first
    torch.testing.assert_close(decode_by_tables(tables.get(model.decoder), ctx), want,
                               rtol=1e-5, atol=1e-6)


def test_other_decoders_run_as_modules():
    class Mine(StatelessDecoder):
        def forward(self, y, need_pad=True):
            return super().forward(y, need_pad) + 1.0

    model = random_model(vocab_size=5)
    assert TransducerNet(model).tables is not None
    mine = Mine(5, 8)
    assert not DecoderTables.applies(mine) and not DecoderTables.applies(torch.nn.Identity())
    model.decoder = mine
    net = TransducerNet(model)
    assert net.tables is None
    ctx = _every_context(5, 2)
    with torch.no_grad():
        assert torch.equal(net.decoder_out(ctx), model.joiner.decoder_proj(
            mine(ctx, need_pad=False).squeeze(1)))
    big = StatelessDecoder(70000, 256)  # 2 x 70001 x 256 entries: over the bound
    assert not DecoderTables.applies(big)


def test_with_gradients_the_module_runs():
    model = random_model(vocab_size=5)
    net = TransducerNet(model)
    ctx = _every_context(5, 2)
    out = net.decoder_out(ctx)  # autograd on: the module, so gradients reach the decoder
    out.sum().backward()
    assert model.decoder.embedding.weight.grad is not None


@pytest.mark.parametrize("seed", range(6))
def test_searches_give_the_same_hypotheses_with_and_without_tables(seed, monkeypatch):
    model = random_model(vocab_size=7, seed=seed)
    enc, lens = random_batch([9, 1, 6, 4], seed=seed)

    def run():
        with torch.no_grad():
            return ([h.tokens for h in greedy_search(model, enc, lens)],
                    [h.tokens for h in modified_beam_search(
                        model, enc, lens, ModifiedBeamSearchConfig(beam_size=3))],
                    [h.tokens for h in fast_beam_search(
                        model, enc, lens, None, FastBeamSearchConfig()).hyps])

    with_tables = run()
    monkeypatch.setattr(DecoderTables, "applies", staticmethod(lambda decoder: False))
    assert run() == with_tables


def test_fast_beam_search_can_run_the_module_bit_for_bit():
    """``decoder_tables=False`` (``--icefall-compat``): the lattice's scores are the module's
    to the bit, as icefall's (k2.random_paths follows last-bit changes)."""
    model = random_model(vocab_size=7, seed=3)
    assert FastBeamSearch(model).net.tables is not None
    assert FastBeamSearch(model, config=FastBeamSearchConfig(decoder_tables=False)
                          ).net.tables is None
    enc, lens = random_batch([9, 6], seed=3)
    cfg = FastBeamSearchConfig(decoder_tables=False)
    with torch.no_grad():
        plain = fast_beam_search(model, enc, lens, None, cfg).lattice
    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setattr(DecoderTables, "applies", staticmethod(lambda decoder: False))
    try:
        with torch.no_grad():
            module = fast_beam_search(model, enc, lens, None, FastBeamSearchConfig()).lattice
    finally:
        monkeypatch.undo()
    assert torch.equal(plain.scores, module.scores)
    with pytest.raises(TypeError, match="decoder_tables must be a bool"):
        FastBeamSearchConfig(decoder_tables=1)
