"""Batch scoring of ragged sequences == step-by-step incremental scoring (with select_state
reordering) == the per-prefix reference, for both LMs; padding does not change scores."""

from __future__ import annotations

import random

import k2
import pytest
import torch

from k2dec.lm import NeuralLM, RnnLmState, TransformerLmState
from k2dec.lm.base import length_batches
from k2dec.testing.lm import CONFIGS, VOCAB, make_lm, random_seqs
from tests.reference.lm_reference import score_sequence_by_prefixes

NAMES = sorted(CONFIGS)


def _ragged(seqs, device):
    return k2.RaggedTensor(seqs, dtype=torch.int32).to(device)


def _incremental(lm: NeuralLM, seqs: list[list[int]], rng: random.Random, device):
    """Score every sequence by ``step``, reordering/duplicating/dropping rows with
    ``select_state`` after every step. Returns ``{(seq, position): [log-probs seen]}``."""
    rows = list(range(len(seqs))) + [rng.randrange(len(seqs)) for _ in range(2)]
    rng.shuffle(rows)
    seen: dict[tuple[int, int], list[float]] = {}
    state = None
    t = 0
    with torch.no_grad():
        while rows:
            prefix = torch.tensor([[lm.sos_id] + seqs[r][:t] for r in rows], device=device)
            log_probs, state = lm.step(prefix, state)
            assert log_probs.shape == (len(rows), VOCAB)
            torch.testing.assert_close(
                log_probs.exp().sum(1), torch.ones(len(rows), dtype=log_probs.dtype,
                                                   device=device))
            if rng.random() < 0.5:  # protocol: from scratch == incremental
                fresh, _ = lm.step(prefix, None)
                torch.testing.assert_close(fresh, log_probs)
            for k, r in enumerate(rows):
                target = seqs[r][t] if t < len(seqs[r]) else lm.eos_id
                seen.setdefault((r, t), []).append(float(log_probs[k, target]))
            alive = [k for k, r in enumerate(rows) if len(seqs[r]) > t]
            index = alive + [rng.choice(alive) for _ in range(min(len(alive), 2))]
            rng.shuffle(index)
            if index:
                state = lm.select_state(state, torch.tensor(index, dtype=torch.int64,
                                                            device=device))
            rows = [rows[k] for k in index]
            t += 1
    return seen


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("num_seqs", [1, 2, 9])
def test_batch_equals_incremental_and_reference(name, num_seqs, device):
    lm = make_lm(name, device, seed=num_seqs)
    for trial in range(3):
        rng = random.Random(100 * num_seqs + trial)
        seqs = random_seqs(rng, num_seqs)
        with torch.no_grad():
            scores = lm.score_sequences(_ragged(seqs, device))
        got = scores.token_log_probs.tolist()
        assert scores.token_log_probs.dtype == torch.float64
        assert scores.totals.shape == (num_seqs,) and scores.totals.device == device
        assert [len(x) for x in got] == [len(s) + 1 for s in seqs]
        torch.testing.assert_close(
            scores.totals, torch.tensor([sum(x) for x in got], dtype=torch.float64,
                                        device=device))
        seen = _incremental(lm, seqs, rng, device)
        assert {r for r, _ in seen} == set(range(num_seqs)) or num_seqs == 1
        for (r, t), values in seen.items():
            for v in values:
                assert v == pytest.approx(got[r][t], abs=1e-9), (r, t)
        with torch.no_grad():
            for r, seq in enumerate(seqs):
                ref = score_sequence_by_prefixes(lm, seq)
                assert got[r] == pytest.approx(ref, abs=1e-9)


@pytest.mark.parametrize("name", NAMES)
def test_float32_batch_equals_reference(name, device):
    lm = make_lm(name, device, seed=7, dtype=torch.float32)
    seqs = random_seqs(random.Random(7), 6)
    with torch.no_grad():
        scores = lm.score_sequences(_ragged(seqs, device))
        assert scores.totals.dtype == torch.float32
        for r, seq in enumerate(seqs):
            assert scores.token_log_probs.tolist()[r] == pytest.approx(
                score_sequence_by_prefixes(lm, seq), abs=1e-4)


@pytest.mark.parametrize("name", NAMES)
def test_padding_does_not_change_scores(name, device):
    lm = make_lm(name, device, seed=3)
    rng = random.Random(3)
    seqs = random_seqs(rng, 5, max_len=4) + [[rng.randrange(VOCAB) for _ in range(15)]]
    with torch.no_grad():
        batch = lm.score_sequences(_ragged(seqs, device))
        for r, seq in enumerate(seqs):
            alone = lm.score_sequences(_ragged([seq], device))
            assert batch.token_log_probs.tolist()[r] == pytest.approx(
                alone.token_log_probs.tolist()[0], abs=1e-9)
            assert float(batch.totals[r]) == pytest.approx(float(alone.totals[0]), abs=1e-9)


@pytest.mark.parametrize("name", NAMES)
def test_empty_batch_and_empty_sequences(name, device):
    lm = make_lm(name, device)
    with torch.no_grad():
        empty = lm.score_sequences(k2.RaggedTensor([[]], dtype=torch.int32).to(device))
        eos_only, _ = lm.step(torch.tensor([[lm.sos_id]], device=device), None)
        assert empty.token_log_probs.tolist()[0] == pytest.approx([float(eos_only[0, 1])])
        shape = k2.ragged.create_ragged_shape2(torch.zeros(1, dtype=torch.int32), None, 0)
        none = lm.score_sequences(k2.RaggedTensor(shape, torch.zeros(0, dtype=torch.int32)))
        assert none.totals.shape == (0,) and none.token_log_probs.dim0 == 0


def test_is_the_one_lm_protocol():
    from k2dec.lm import NeuralLM

    for name in NAMES:
        lm = make_lm(name, torch.device("cpu"))
        assert isinstance(lm, NeuralLM)
        assert lm.vocab_size == VOCAB and lm.sos_id == 1 and lm.eos_id == 1


@pytest.mark.parametrize("name", NAMES)
def test_state_types_and_consumed(name, device):
    lm = make_lm(name, device)
    tokens = torch.tensor([[1, 4, 5], [1, 6, 7]], device=device)
    with torch.no_grad():
        _, state = lm.step(tokens, None)
    assert isinstance(state, RnnLmState | TransformerLmState)
    assert lm.num_consumed(state) == 3
    picked = lm.select_state(state, torch.tensor([1, 1, 0], device=device))
    assert lm.num_consumed(picked) == 3


@pytest.mark.parametrize("name", NAMES)
def test_eval_mode_is_deterministic_and_train_mode_uses_dropout(name, device):
    lm = make_lm(name, device)
    seqs = _ragged([[3, 4, 5, 6]], device)
    with torch.no_grad():
        a = lm.score_sequences(seqs).totals
        b = lm.score_sequences(seqs).totals
        torch.testing.assert_close(a, b)
        if lm.config.dropout > 0:
            lm.train()
            c = lm.score_sequences(seqs).totals
            assert not torch.equal(a, c)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("batch_size", [1, 2, 4, 100])
def test_chunked_scoring_equals_one_pass(name, batch_size, device):
    lm = make_lm(name, device, seed=batch_size)
    seqs = random_seqs(random.Random(batch_size), 11)
    with torch.no_grad():
        one = lm.score_sequences(_ragged(seqs, device))
        chunked = lm.score_sequences(_ragged(seqs, device), batch_size=batch_size)
    for a, b in zip(chunked.token_log_probs.tolist(), one.token_log_probs.tolist(), strict=True):
        assert a == pytest.approx(b, abs=1e-9)
    torch.testing.assert_close(chunked.totals, one.totals)
    with pytest.raises(ValueError, match="batch_size must be a positive int or None, got 0"):
        lm.score_sequences(_ragged(seqs, device), batch_size=0)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("batch_size,max_tokens", [(None, 1), (None, 9), (3, 20), (4, 10**6),
                                                   (None, None)])
def test_token_bounded_scoring_equals_one_pass(name, batch_size, max_tokens, device,
                                               monkeypatch):
    """``max_tokens`` bounds each pass's sequences times its longest ``len + 1`` (one
    sequence at least), with ``batch_size`` too; the scores are those of one pass."""
    lm = make_lm(name, device, seed=7)
    seqs = random_seqs(random.Random(max_tokens or 0), 23, max_len=12)
    with torch.no_grad():
        one = lm.score_sequences(_ragged(seqs, device))
        passes = []
        score_padded = type(lm)._score_padded

        def spy(self, tokens):
            passes.append(tokens.tolist())
            return score_padded(self, tokens)

        monkeypatch.setattr(type(lm), "_score_padded", spy)
        got = lm.score_sequences(_ragged(seqs, device), batch_size=batch_size,
                                 max_tokens=max_tokens)
    for a, b in zip(got.token_log_probs.tolist(), one.token_log_probs.tolist(), strict=True):
        assert a == pytest.approx(b, abs=1e-5)
    torch.testing.assert_close(got.totals, one.totals, rtol=1e-5, atol=1e-5)
    assert sorted(s for p in passes for s in p) == sorted(seqs)  # every sequence once
    for p in passes:
        assert len(p) <= (batch_size or len(seqs))
        if max_tokens is not None and len(p) > 1:
            assert len(p) * (max(map(len, p)) + 1) <= max_tokens
    if max_tokens == 1:
        assert len(passes) == len(seqs)
    with pytest.raises(ValueError, match="max_tokens must be a positive int or None, got 0"):
        lm.score_sequences(_ragged(seqs, device), max_tokens=0)


@pytest.mark.parametrize("seed", range(20))
def test_length_batches_are_the_largest_that_fit(seed):
    """Each range is as long as the count and token bounds allow (brute force), in order."""
    rng = random.Random(seed)
    lens = sorted((rng.randint(0, 30) for _ in range(rng.randint(0, 40))), reverse=True)
    max_count, max_tokens = rng.randint(1, 10), rng.choice([None, 1, 17, 64, 400])
    got = length_batches(torch.tensor(lens, dtype=torch.int64), max_count, max_tokens)
    start = 0
    for a, b in got:
        assert a == start
        size = 1
        while start + size < len(lens) and size < max_count and (
                max_tokens is None or (size + 1) * (lens[start] + 1) <= max_tokens):
            size += 1
        assert b - a == size, (lens, max_count, max_tokens, got)
        start = b
    assert start == len(lens)


@pytest.mark.parametrize("name", NAMES)
def test_step_with_no_rows(name, device):
    lm = make_lm(name, device)
    with torch.no_grad():
        _, state = lm.step(torch.tensor([[1, 3], [1, 4]], device=device), None)
        state = lm.select_state(state, torch.zeros(0, dtype=torch.int64, device=device))
        log_probs, state = lm.step(torch.zeros(0, 3, dtype=torch.int64, device=device), state)
    assert log_probs.shape == (0, VOCAB) and lm.num_consumed(state) == 3


def test_package_docstring_example_runs():
    import doctest

    import k2dec.lm

    result = doctest.testmod(k2dec.lm, verbose=False)
    assert result.attempted > 0 and result.failed == 0
