"""The opt-in approximations of the lattice search (``LatticeConfig.token_top_k``,
``blank_skip_threshold``): ``prune_frames`` equals a per-utterance, per-frame Python reference,
and a search with the switches equals the default search on the reference's pruned inputs,
with frames mapped back to the caller's; off (the default) or at their no-op values they change
nothing."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch

from k2dec.lattice import (
    LatticeConfig,
    LatticeStatus,
    StreamingDecoder,
    get_lattice,
    one_best_decoding,
)
from k2dec.lattice.dense import prune_frames
from k2dec.testing.graphs import peaked_log_probs
from tests.lattice.graphs import HUGE, to_k2
from tests.reference.viterbi import random_graph

EXACT = dataclasses.replace(HUGE, retry_scales=())


def reference_prune(log_probs: torch.Tensor, lengths: list[int], top_k: int | None,
                    threshold: float | None, blank: int = 0):
    """Per utterance: (original indexes of the kept frames, their pruned log-probs)."""
    out = []
    for i, n in enumerate(lengths):
        frames = list(range(n))
        if threshold is not None:
            confident = [math.exp(float(log_probs[i, t, blank])) > threshold for t in range(n)]
            frames = [t for t in range(n) if not (t > 0 and confident[t] and confident[t - 1])]
        rows = []
        for t in frames:
            row = log_probs[i, t].clone()
            if top_k is not None:
                order = sorted(range(row.numel()), key=lambda v: -float(row[v]))
                for v in order[top_k:]:
                    row[v] = float("-inf")
            rows.append(row)
        out.append((frames, torch.stack(rows)))
    return out


def _case(seed: int, blank_heavy: bool = True):
    rng = np.random.default_rng(seed)
    vocab = int(rng.integers(3, 7))
    graph = random_graph(rng, int(rng.integers(2, 7)), vocab, num_words=6)
    n = int(rng.integers(1, 5))
    lengths = rng.integers(1, 12, size=n)
    log_probs = peaked_log_probs(rng, n, int(lengths.max()), vocab, scale=3.0)
    if blank_heavy:  # runs of confident blanks, as CTC models give
        blank = torch.from_numpy(rng.random((n, int(lengths.max()))) < 0.6)
        boosted = log_probs.clone()
        boosted[..., 0] += 8.0
        log_probs = torch.where(blank.unsqueeze(2), boosted.log_softmax(-1), log_probs)
    return graph, log_probs, torch.from_numpy(lengths)


SETTINGS = [(None, 0.9), (2, None), (2, 0.6), (1, 0.99)]


@pytest.mark.parametrize("top_k, threshold", SETTINGS)
def test_prune_frames_equals_reference(device, top_k, threshold):
    for seed in range(30):
        _, log_probs, lengths = _case(seed)
        pruned = prune_frames(log_probs.to(device), lengths, top_k, threshold, 0)
        ref = reference_prune(log_probs, lengths.tolist(), top_k, threshold)
        assert pruned.num_frames.tolist() == [len(f) for f, _ in ref]
        kept = pruned.kept.tolist() if pruned.kept is not None else [
            list(range(n)) for n in lengths.tolist()]
        for i, (frames, rows) in enumerate(ref):
            assert kept[i] == frames
            got = pruned.log_probs[i, : len(frames)].cpu()
            assert torch.equal(torch.isinf(got), torch.isinf(rows))
            assert torch.allclose(got[~torch.isinf(got)], rows[~torch.isinf(rows)])


@pytest.mark.parametrize("top_k, threshold", SETTINGS)
def test_search_equals_default_search_on_reference_inputs(device, top_k, threshold):
    """Batched search with the switches = per-utterance default search on the reference's
    pruned frames, token frames mapped back through the kept frame indexes."""
    compared = 0
    for seed in range(40):
        graph, log_probs, lengths = _case(100 + seed)
        fsa = to_k2(graph, device)
        config = dataclasses.replace(EXACT, token_top_k=top_k, blank_skip_threshold=threshold)
        got = one_best_decoding(log_probs.to(device), lengths, fsa, config)
        ref = reference_prune(log_probs, lengths.tolist(), top_k, threshold)
        for h, (frames, rows) in zip(got, ref):
            (want,) = one_best_decoding(rows.unsqueeze(0).to(device),
                                        torch.tensor([len(frames)]), fsa, EXACT)
            assert h.status is want.status
            assert h.words == want.words and h.tokens == want.tokens
            assert h.score == pytest.approx(want.score, abs=1e-4)
            assert h.token_frames == tuple(frames[f] for f in want.token_frames)
            assert h.word_frames == tuple(frames[f] if f < len(frames) else lengths.max()
                                          for f in want.word_frames)
            compared += want.status is LatticeStatus.OK
    assert compared > 40


def test_lattice_frames_are_original_frames(device):
    graph, log_probs, lengths = _case(7)
    fsa = to_k2(graph, device)
    config = dataclasses.replace(EXACT, blank_skip_threshold=0.9)
    lattice = get_lattice(log_probs.to(device), lengths, fsa, config).lattice
    ref = reference_prune(log_probs, lengths.tolist(), None, 0.9)
    shape = lattice.arcs.shape()
    utt = shape.row_ids(1)[shape.row_ids(2).long()].long().cpu()
    frames = lattice.frame.long().cpu()
    final = lattice.labels.cpu() == -1
    for a in range(lattice.num_arcs):
        kept = ref[int(utt[a])][0]
        if final[a]:
            assert frames[a] == lengths[utt[a]]
        else:
            assert int(frames[a]) in kept


@pytest.mark.parametrize("kw", [dict(token_top_k=6), dict(blank_skip_threshold=1.0),
                                dict(token_top_k=100, blank_skip_threshold=1.0)])
def test_no_op_values_change_nothing(device, kw):
    for seed in range(20):
        graph, log_probs, lengths = _case(300 + seed)
        fsa = to_k2(graph, device)
        base = one_best_decoding(log_probs.to(device), lengths, fsa, LatticeConfig())
        same = one_best_decoding(log_probs.to(device), lengths, fsa,
                                 dataclasses.replace(LatticeConfig(), **kw))
        assert same == base


def test_defaults_are_off():
    config = LatticeConfig()
    assert config.token_top_k is None and config.blank_skip_threshold is None
    assert not config.approximate
    assert dataclasses.replace(config, token_top_k=4).approximate
    assert not dataclasses.replace(config, token_top_k=4).scaled(2.0).approximate


def test_retry_searches_the_unpruned_outputs(device):
    """With one token per frame the graph accepts no path; the retry (wider beams, no
    approximation) finds the hypothesis of a default search at the retry's beams."""
    # graph: only the sequence blank, 1, blank ... with token 1 never the frame's best
    text = "0 0 0 0 0.0\n0 1 1 1 0.0\n1 1 0 0 0.0\n1 2 -1 -1 0.0\n2"
    import k2

    fsa = k2.Fsa.from_str(text, acceptor=False).to(device)
    log_probs = torch.tensor([[[0.0, -3.0, -1.0]] * 4]).log_softmax(-1).to(device)
    lengths = torch.tensor([4])
    config = LatticeConfig(token_top_k=1, retry_scales=(2.0,))
    (h,) = one_best_decoding(log_probs, lengths, fsa, config)
    assert h.status is LatticeStatus.RETRIED
    (want,) = one_best_decoding(log_probs, lengths, fsa, config.scaled(2.0))
    assert (h.words, h.tokens, h.token_frames, h.score) == (
        want.words, want.tokens, want.token_frames, want.score)


@pytest.mark.parametrize("kw, match", [
    (dict(token_top_k=0), "token_top_k"), (dict(token_top_k=2.5), "token_top_k"),
    (dict(token_top_k=True), "token_top_k"), (dict(blank_skip_threshold=0.0), "blank_skip"),
    (dict(blank_skip_threshold=1.5), "blank_skip"), (dict(blank_id=-1), "blank_id"),
])
def test_bad_settings(kw, match):
    with pytest.raises(ValueError, match=match):
        LatticeConfig(**kw)


def test_blank_id_outside_vocabulary_is_refused_before_k2(device):
    graph, log_probs, lengths = _case(3)
    fsa = to_k2(graph, device)
    config = LatticeConfig(blank_skip_threshold=0.9, blank_id=log_probs.shape[2])
    with pytest.raises(ValueError, match="blank_id"):
        one_best_decoding(log_probs.to(device), lengths, fsa, config)


def test_streaming_refuses_the_approximations(device):
    graph, _, _ = _case(3)
    with pytest.raises(ValueError, match="token_top_k"):
        StreamingDecoder(to_k2(graph, device), LatticeConfig(token_top_k=3))
