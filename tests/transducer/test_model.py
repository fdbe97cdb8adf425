from __future__ import annotations

import pytest
import torch

from k2dec.testing.transducer import random_batch, random_model
from k2dec.transducer import (
    FastBeamSearchConfig,
    Joiner,
    StatelessDecoder,
    TransducerNet,
    fast_beam_search,
    greedy_search,
    modified_beam_search,
)
from tests.transducer.helpers import assert_same_hyps


def test_decoder_shapes_and_negative_ids():
    dec = StatelessDecoder(vocab_size=5, decoder_dim=8, blank_id=0, context_size=3)
    y = torch.tensor([[1, 2, 3, 4], [0, 0, 1, 2]])
    assert dec(y, need_pad=True).shape == (2, 4, 8)
    assert dec(y[:, 1:], need_pad=False).shape == (2, 1, 8)
    # need_pad=True equals need_pad=False on the padded windows (-1 embeds to zero)
    padded = torch.cat([torch.full((2, 2), -1), y], dim=1)
    windows = torch.stack([dec(padded[:, u : u + 3], need_pad=False)[:, 0] for u in range(4)], 1)
    torch.testing.assert_close(dec(y, need_pad=True), windows)
    # an all-negative context gives relu(conv(0)) = 0 (no bias)
    assert dec(torch.full((1, 3), -1), need_pad=False).abs().sum() == 0
    with pytest.raises(ValueError, match="context_size=3 columns"):
        dec(y[:, :2], need_pad=False)


def test_decoder_context_size_one_and_validation():
    dec = StatelessDecoder(vocab_size=4, decoder_dim=6, blank_id=0, context_size=1)
    out = dec(torch.tensor([[2], [-1]]), need_pad=False)
    assert out.shape == (2, 1, 6)
    assert out[1].abs().sum() == 0
    torch.testing.assert_close(out[0, 0], torch.relu(dec.embedding.weight[2]))
    with pytest.raises(ValueError, match="blank_id"):
        StatelessDecoder(4, 8, blank_id=4)
    with pytest.raises(ValueError, match="conv_groups"):
        StatelessDecoder(4, 8, conv_groups=3)


def test_joiner_project_input_switch():
    j = Joiner(encoder_dim=3, decoder_dim=5, joiner_dim=7, vocab_size=4)
    e, d = torch.randn(2, 6, 1, 3), torch.randn(2, 1, 4, 5)
    out = j(e, d)
    assert out.shape == (2, 6, 4, 4)
    torch.testing.assert_close(out, j(j.encoder_proj(e), j.decoder_proj(d), project_input=False))


def test_scripted_model_saved_and_loaded_decodes_identically(tmp_path, device):
    model = random_model(vocab_size=6, context_size=2, seed=4, device=device)
    path = tmp_path / "jit.pt"
    torch.jit.script(model).save(str(path))
    loaded = torch.jit.load(str(path), map_location=device)
    assert int(loaded.decoder.context_size) == 2 and int(loaded.decoder.vocab_size) == 6
    x = torch.randn(3, 10, 8, device=device)
    x_lens = torch.tensor([10, 4, 7], device=device)
    enc, enc_lens = loaded(x, x_lens)
    torch.testing.assert_close(enc, model(x, x_lens)[0])
    assert_same_hyps(greedy_search(loaded, enc, enc_lens), greedy_search(model, enc, enc_lens))
    assert_same_hyps(
        modified_beam_search(loaded, enc, enc_lens), modified_beam_search(model, enc, enc_lens)
    )
    config = FastBeamSearchConfig(beam=4.0)
    a = fast_beam_search(loaded, enc, enc_lens, config=config)
    b = fast_beam_search(model, enc, enc_lens, config=config)
    assert_same_hyps(a.hyps, b.hyps)
    assert any(h.tokens for h in a.hyps)


def test_model_without_projections(device):
    """A joiner without encoder_proj/decoder_proj is called on raw inputs."""

    class PlainJoiner(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.out = torch.nn.Linear(8, 5)

        def forward(self, e, d):
            return self.out(torch.tanh(e + d))

    model = random_model(vocab_size=5, seed=6, device=device)
    model.joiner = PlainJoiner().to(device)
    enc, lens = random_batch([5, 3], seed=6, device=device)
    hyps = greedy_search(model, enc, lens)
    manual = []
    ctx = [-1, 0]
    for t in range(5):
        d = model.decoder(torch.tensor([ctx], device=device), need_pad=False)[0, 0]
        k = int(model.joiner(enc[0, t], d).argmax())
        if k != 0:
            manual.append(k)
            ctx = [ctx[1], k]
    assert hyps[0].tokens == manual


@pytest.mark.parametrize("project", [True, False])
def test_window_logits_equal_row_logits(device, project):
    """TransducerNet.window_logits (n rows x w frames sharing a decoder output; icefall-style
    joiners broadcast) equals logits on the repeated rows, exactly."""
    model = random_model(vocab_size=7, seed=3, device=device)
    if not project:
        del model.joiner.encoder_proj, model.joiner.decoder_proj
        model.joiner.forward = lambda e, d: model.joiner.output_linear(torch.tanh(e + d))
    net = TransducerNet(model)
    assert net.project == project
    g = torch.Generator().manual_seed(3)
    n, w = 5, 3
    dim = net.decoder_out(net.initial_context(1, device)).size(1)
    enc = torch.randn(n, w, dim, generator=g).to(device)
    dec = torch.randn(n, dim, generator=g).to(device)
    out = net.window_logits(enc, dec)
    assert out.shape == (n * w, 7)
    expected = net.logits(enc.reshape(n * w, dim), dec.repeat_interleave(w, dim=0))
    assert torch.equal(out, expected)
    assert not torch.equal(out[:w], out[w : 2 * w])  # rows differ: the test can fail


@pytest.mark.parametrize("project", [True, False])
@pytest.mark.parametrize("a,b", [(1, 4), (3, 1), (2, 3)])
def test_grid_logits_equal_row_logits(device, project, a, b):
    """TransducerNet.grid_logits pairs every encoder row of a group with every decoder row of
    it (row (i * a + p) * b + q), equal to logits on the repeated rows, exactly."""
    model = random_model(vocab_size=7, seed=4, device=device)
    if not project:
        del model.joiner.encoder_proj, model.joiner.decoder_proj
        model.joiner.forward = lambda e, d: model.joiner.output_linear(torch.tanh(e + d))
    net = TransducerNet(model)
    g = torch.Generator().manual_seed(4)
    n = 3
    dim = net.decoder_out(net.initial_context(1, device)).size(1)
    enc = torch.randn(n, a, dim, generator=g).to(device)
    dec = torch.randn(n, b, dim, generator=g).to(device)
    out = net.grid_logits(enc, dec)
    assert out.shape == (n * a * b, 7)
    rows_e = enc.unsqueeze(2).expand(n, a, b, dim).reshape(-1, dim)
    rows_d = dec.unsqueeze(1).expand(n, a, b, dim).reshape(-1, dim)
    assert torch.equal(out, net.logits(rows_e, rows_d))
    # the layout: group 1, p = a - 1, q = b - 1 (one-row GEMMs round differently: close)
    last = net.logits(enc[1, a - 1 :], dec[1, b - 1 :])[0]
    assert torch.allclose(out[(a + a - 1) * b + b - 1], last, atol=1e-5)
    assert not torch.allclose(out[a * b], last, atol=1e-5) or a * b == 1
    assert net.joiner_rows == n * a * b + n * a * b + 1
