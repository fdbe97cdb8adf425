"""TransformerDecoder: incremental decoding equals teacher forcing; padding is masked."""

from __future__ import annotations

import k2
import pytest
import torch

from k2dec.aed import AttentionDecoder, TransformerDecoder
from tests.aed.models import random_decoder


def _inputs(device, n=3, t=6, c=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    memory = torch.randn(n, t, c, generator=g, dtype=torch.float64).to(device)
    lens = torch.tensor([t, 1, 4][:n], device=device)
    mask = torch.arange(t, device=device).unsqueeze(0) >= lens.unsqueeze(1)
    return memory, lens, mask


def test_implements_protocol():
    assert isinstance(random_decoder(5, 3, seed=0), AttentionDecoder)


def test_incremental_equals_teacher_forcing(device):
    dec = random_decoder(7, 5, seed=1).to(device)
    memory, _, mask = _inputs(device)
    tokens = torch.randint(0, 7, (3, 5), generator=torch.Generator().manual_seed(2)).to(device)
    tokens[:, 0] = dec.sos_id
    with torch.no_grad():
        full = dec(tokens, memory, mask)
        state = None
        for u in range(1, 6):
            lp, att, state = dec.step(tokens[:, :u], memory, mask, state)
            torch.testing.assert_close(lp, full[:, u - 1])
            lp0, att0, _ = dec.step(tokens[:, :u], memory, mask, None)
            torch.testing.assert_close(lp, lp0)
            torch.testing.assert_close(att, att0)
            # attention: a distribution over the valid frames only
            torch.testing.assert_close(att.sum(1), torch.ones(3, dtype=att.dtype, device=device))
            assert bool((att[mask] == 0).all())
        assert torch.allclose(full.exp().sum(-1), torch.ones(3, 5, dtype=full.dtype, device=device))


def test_padding_does_not_change_scores(device):
    dec = random_decoder(7, 5, seed=3).to(device)
    memory, lens, mask = _inputs(device)
    garbage = memory.masked_fill(mask.unsqueeze(2), 1e3)
    tokens = torch.full((3, 1), dec.sos_id, device=device)
    with torch.no_grad():
        lp, _, _ = dec.step(tokens, garbage, mask, None)
        for i in range(3):
            t = int(lens[i])
            one, _, _ = dec.step(tokens[i : i + 1], memory[i : i + 1, :t],
                                 mask[i : i + 1, :t], None)
            torch.testing.assert_close(lp[i : i + 1], one)


def test_select_state_reorders(device):
    dec = random_decoder(7, 5, seed=4).to(device)
    memory, _, mask = _inputs(device)
    tokens = torch.tensor([[6, 1], [6, 2], [6, 3]], device=device)
    index = torch.tensor([2, 0, 0], device=device)
    with torch.no_grad():
        _, _, state = dec.step(tokens, memory, mask, None)
        state = dec.select_state(state, index)
        nxt = torch.cat([tokens.index_select(0, index), torch.tensor([[4], [5], [1]],
                                                                     device=device)], 1)
        mem, msk = memory.index_select(0, index), mask.index_select(0, index)
        lp, _, _ = dec.step(nxt, mem, msk, state)
        lp0, _, _ = dec.step(nxt, mem, msk, None)
    torch.testing.assert_close(lp, lp0)


def test_score_sequences_matches_steps(device):
    dec = random_decoder(7, 5, seed=5).to(device)
    memory, lens, mask = _inputs(device)
    seqs = [[1, 2, 3], [], [4], [5, 5]]
    seq_to_utt = torch.tensor([0, 1, 2, 0], device=device)
    ragged = k2.RaggedTensor(seqs)
    with torch.no_grad():
        out = dec.score_sequences(memory, lens, ragged, seq_to_utt)
    assert out.dim0 == 4
    got = out.tolist()
    for s, toks in enumerate(seqs):
        n = int(seq_to_utt[s])
        t = int(lens[n])
        prefix = [dec.sos_id]
        expected = []
        for tok in toks + [dec.eos_id]:
            with torch.no_grad():
                lp, _, _ = dec.step(torch.tensor([prefix], device=device),
                                    memory[n : n + 1, :t], mask[n : n + 1, :t], None)
            expected.append(float(lp[0, tok]))
            prefix.append(tok)
        assert len(got[s]) == len(toks) + 1
        assert got[s] == pytest.approx(expected, abs=1e-9)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(vocab_size=1, memory_dim=4), "vocab_size"),
        (dict(vocab_size=5, memory_dim=0), "memory_dim"),
        (dict(vocab_size=5, memory_dim=4, d_model=10, nhead=3), "divisible"),
        (dict(vocab_size=5, memory_dim=4, eos_id=5), "eos_id"),
        (dict(vocab_size=5, memory_dim=4, sos_id=-1), "sos_id"),
    ],
)
def test_bad_construction(kwargs, match):
    with pytest.raises(ValueError, match=match):
        TransformerDecoder(**kwargs)


def test_step_rejects_stale_state():
    dec = random_decoder(5, 3, seed=0)
    memory = torch.randn(1, 2, 3, dtype=torch.float64)
    mask = torch.zeros(1, 2, dtype=torch.bool)
    tokens = torch.tensor([[4, 1]])
    _, _, state = dec.step(tokens, memory, mask, None)
    with pytest.raises(ValueError, match="tokens has 2 positions"):
        dec.step(tokens, memory, mask, state)


def test_score_sequences_bad_seq_to_utt():
    dec = random_decoder(5, 3, seed=0)
    memory = torch.randn(1, 2, 3, dtype=torch.float64)
    with pytest.raises(ValueError, match="seq_to_utt"):
        dec.score_sequences(memory, torch.tensor([2]), k2.RaggedTensor([[1], [2]]),
                            torch.tensor([0]))
