"""TransformerDecoder: incremental decoding equals teacher forcing; padding is masked."""

from __future__ import annotations

import k2
import pytest
import torch

from k2dec.aed import AttentionDecoder, TransformerDecoder
from k2dec.testing.aed import random_decoder


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


def _storage_bytes(t: torch.Tensor) -> int:
    storage = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
    return storage.nbytes()


def _scratch(dec, tokens, memory, mask, mem_rows):
    """Log-probs and attention of a from-scratch step (no state) on each row's utterance."""
    lp, att, _ = dec.step(tokens, memory.index_select(0, mem_rows), mask.index_select(0, mem_rows),
                          None)
    return lp, att


def test_select_state_shares_memory_across_beams(device):
    dec = random_decoder(7, 5, seed=6).to(device)
    memory, _, mask = _inputs(device)
    n, beam = 3, 4
    with torch.no_grad():
        _, _, state = dec.step(torch.full((n, 1), dec.sos_id, device=device), memory, mask, None)
        # every utterance's row fanned out to `beam` hypotheses: the memory is kept as it is
        rows = torch.arange(n, device=device).repeat_interleave(beam)
        new = dec.select_state(state, rows)
        for (sk, _, mk, mv), (_, _, mk0, mv0) in zip(new, state):
            assert sk.size(0) == n * beam
            assert mk is mk0 and mv is mv0 and mk.size(0) == n
        tokens = torch.randint(0, 6, (n * beam, 1), generator=torch.Generator().manual_seed(0))
        tokens = torch.cat([torch.full((n * beam, 1), dec.sos_id), tokens], 1).to(device)
        lp, att, state = dec.step(tokens, memory.index_select(0, rows),
                                  mask.index_select(0, rows), new)
        want_lp, want_att = _scratch(dec, tokens, memory, mask, rows)
        torch.testing.assert_close(lp, want_lp)
        torch.testing.assert_close(att, want_att)
        # reorder within utterances and drop utterance 1: one memory row per kept utterance
        index = torch.tensor([3, 0, 0, 1, 9, 9, 8, 11], device=device)
        new = dec.select_state(state, index)
        rows = torch.tensor([0, 2], device=device).repeat_interleave(beam)
        for _, _, mk, mv in new:
            assert mk.size(0) == mv.size(0) == 2
            assert _storage_bytes(mk) == 2 * memory.size(1) * dec.d_model * mk.element_size()
        tokens = torch.cat([tokens.index_select(0, index), torch.arange(8, device=device)
                            .remainder(6).unsqueeze(1)], 1)
        lp, att, _ = dec.step(tokens, memory.index_select(0, rows), mask.index_select(0, rows),
                              new)
        want_lp, want_att = _scratch(dec, tokens, memory, mask, rows)
        torch.testing.assert_close(lp, want_lp)
        torch.testing.assert_close(att, want_att)


def test_select_state_any_index_matches_scratch(device):
    """Random indices (grouped like a beam, or arbitrary) over several steps: the state keeps
    G memory rows with G dividing the rows, and each step equals a from-scratch step."""
    dec = random_decoder(7, 5, seed=7).to(device)
    memory, _, mask = _inputs(device)
    gen = torch.Generator().manual_seed(1)
    for trial in range(12):
        mem_rows = torch.arange(3)
        tokens = torch.full((3, 1), dec.sos_id)
        state = None
        for step in range(4):
            with torch.no_grad():
                rows_d = mem_rows.to(device)
                lp, att, state = dec.step(tokens.to(device), memory.index_select(0, rows_d),
                                          mask.index_select(0, rows_d), state)
                want_lp, want_att = _scratch(dec, tokens.to(device), memory, mask,
                                             mem_rows.to(device))
            torch.testing.assert_close(lp, want_lp)
            torch.testing.assert_close(att, want_att)
            rows = tokens.size(0)
            if (trial + step) % 3 == 0:  # arbitrary rows, repeats allowed
                index = torch.randint(0, rows, (int(torch.randint(1, 9, (1,), generator=gen)),),
                                      generator=gen)
            else:  # beam-like: B slots per kept utterance, sources within the utterance
                utts = mem_rows.unique()
                keep = utts[torch.rand(utts.numel(), generator=gen) < 0.8]
                keep = utts[:1] if keep.numel() == 0 else keep
                beam = int(torch.randint(1, 4, (1,), generator=gen))
                index = torch.cat([
                    (mem_rows == u).nonzero().squeeze(1)[
                        torch.randint(0, int((mem_rows == u).sum()), (beam,), generator=gen)]
                    for u in keep.tolist()
                ])
            state = dec.select_state(state, index.to(device))
            mem_rows = mem_rows.index_select(0, index)
            for sk, _, mk, _ in state:
                assert sk.size(0) == index.numel() and index.numel() % mk.size(0) == 0
                assert mk.size(0) <= index.numel()
            new_tok = torch.randint(0, 6, (index.numel(), 1), generator=gen)
            tokens = torch.cat([tokens.index_select(0, index), new_tok], 1)


def test_step_rejects_state_of_other_rows():
    dec = random_decoder(5, 3, seed=0)
    memory = torch.randn(2, 2, 3, dtype=torch.float64)
    mask = torch.zeros(2, 2, dtype=torch.bool)
    _, _, state = dec.step(torch.tensor([[4], [4]]), memory, mask, None)
    with pytest.raises(ValueError, match="state has 2 rows"):
        dec.step(torch.tensor([[4, 1], [4, 2], [4, 3]]), memory[[0, 1, 1]], mask[[0, 1, 1]],
                 state)
    state = dec.select_state(state, torch.tensor([0, 0, 1, 1]))  # 2 memory groups, 4 rows
    bad = tuple((sk[:3], sv[:3], mk, mv) for sk, sv, mk, mv in state)  # 3 rows, 2 groups
    with pytest.raises(ValueError, match="memory groups must divide"):
        dec.step(torch.tensor([[4, 1], [4, 2], [4, 3]]), memory[[0, 1, 1]], mask[[0, 1, 1]], bad)
    with pytest.raises(ValueError, match="memory_padding_mask must have shape"):
        dec.step(torch.tensor([[4, 1], [4, 2]]), memory, mask[:1], None)


def _one_by_one(dec, memory, lens, seqs, seq_to_utt):
    """Each sequence's token log-probs (then eos) from ``forward`` on it alone, against its
    utterance's memory cut to its valid frames: the reference of ``score_sequences``."""
    out = []
    for toks, n in zip(seqs, seq_to_utt.tolist()):
        t = int(lens[n])
        inp = torch.tensor([[dec.sos_id] + toks], device=memory.device)
        mask = torch.zeros(1, t, dtype=torch.bool, device=memory.device)
        lp = dec.forward(inp, memory[n : n + 1, :t], mask)[0]
        out.append([float(lp[i, tok]) for i, tok in enumerate(toks + [dec.eos_id])])
    return out


@pytest.mark.parametrize("seed", range(12))
def test_score_sequences_of_many_utterances_in_any_order(device, seed):
    """The sequences of several utterances, interleaved in a random order (one utterance, a
    single sequence, empty sequences, utterances of 1 frame to the whole memory): each gets
    its scores against its own utterance's memory, as scored alone."""
    g = torch.Generator().manual_seed(seed)
    dec = random_decoder(9, 5, seed=seed, eos_bias=float(seed % 3)).to(device)
    n = 1 + seed % 4
    t = int(torch.randint(1, 9, (1,), generator=g))
    memory = torch.randn(n, t, 5, generator=g, dtype=torch.float64).to(device)
    lens = torch.randint(1, t + 1, (n,), generator=g)
    lens[int(torch.randint(0, n, (1,), generator=g))] = t
    num = [1, 2, 7, 13][seed % 4]
    seq_to_utt = torch.randint(0, n, (num,), generator=g)
    seqs = [torch.randint(1, 8, (int(torch.randint(0, 6, (1,), generator=g)),),
                          generator=g).tolist() for _ in range(num)]
    with torch.no_grad():
        tokens = k2.RaggedTensor(seqs, dtype=torch.int32).to(device)
        got = dec.score_sequences(memory, lens.to(device), tokens,
                                  seq_to_utt.to(device)).tolist()
        want = _one_by_one(dec, memory, lens, seqs, seq_to_utt)
    assert len(got) == num
    for a, b in zip(got, want):
        assert a == pytest.approx(b, abs=1e-9)


def test_score_sequences_of_no_sequence_and_bad_utterances():
    dec = random_decoder(5, 3, seed=0)
    memory = torch.randn(2, 4, 3, dtype=torch.float64)
    lens = torch.tensor([4, 2])
    none = k2.RaggedTensor(k2.ragged.create_ragged_shape2(torch.zeros(1, dtype=torch.int32),
                                                          None, 0),
                           torch.zeros(0, dtype=torch.int32))
    out = dec.score_sequences(memory, lens, none, torch.zeros(0, dtype=torch.int64))
    assert out.dim0 == 0
    for bad in ([0, 2], [-1, 0]):
        with pytest.raises(ValueError, match="seq_to_utt must be in"):
            dec.score_sequences(memory, lens, k2.RaggedTensor([[1], [2]]), torch.tensor(bad))
