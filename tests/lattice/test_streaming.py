"""Streaming decoding: partial results per chunk; the final result equals the offline decode."""

from __future__ import annotations

import k2
import numpy as np
import pytest
import torch

from k2dec.lattice import (
    AuxLabels,
    LatticeConfig,
    LatticeStatus,
    Stream,
    StreamingDecoder,
    ctc_decoding,
    one_best_decoding,
)
from k2dec.testing.graphs import peaked_log_probs
from tests.lattice.graphs import to_k2
from tests.reference.viterbi import random_graph, viterbi


@pytest.mark.parametrize(
    "config", [LatticeConfig(), LatticeConfig(output_beam=1.0)], ids=["default", "narrow_output"]
)
def test_streaming_final_equals_offline(device, config):
    rng = np.random.default_rng(21)
    for trial in range(6):
        graph = random_graph(rng, 6, 5, num_words=6, arcs_per_state=4,
                             ragged_aux=bool(trial % 2))
        fsa = to_k2(graph, device, ragged=bool(trial % 2))
        n = 3
        lengths = torch.from_numpy(rng.integers(1, 25, size=n))
        log_probs = peaked_log_probs(rng, n, int(lengths.max()), 5, scale=2.0).to(device)
        offline = one_best_decoding(log_probs, lengths, fsa, config)
        decoder = StreamingDecoder(fsa, config, max_streams=n)
        streams = [Stream() for _ in range(n)]
        final: list = [None] * n
        # streams advance with different chunk sizes, in changing subsets and orders
        pos = [0] * n
        step = 0
        while any(pos[i] < lengths[i] for i in range(n)):
            active = [i for i in range(n) if pos[i] < lengths[i]]
            if step % 2:
                active = active[::-1]
            if step % 3 == 2 and len(active) > 1:
                active = active[:-1]
            sizes = [min(int(rng.integers(1, 6)), int(lengths[i]) - pos[i]) for i in active]
            chunk = torch.zeros(len(active), max(sizes), 5, device=device)
            for r, (i, s) in enumerate(zip(active, sizes)):
                chunk[r, :s] = log_probs[i, pos[i] : pos[i] + s]
            last = [pos[i] + s == lengths[i] for i, s in zip(active, sizes)]
            hyps = decoder.decode_chunk(
                [streams[i] for i in active], chunk, torch.tensor(sizes), last=last
            )
            for i, s, h, is_last in zip(active, sizes, hyps, last):
                pos[i] += s
                assert streams[i].num_frames == pos[i]
                assert h.status is LatticeStatus.OK  # state 0 can always end
                assert all(f < pos[i] for f in h.token_frames + h.word_frames)
                if is_last:
                    final[i] = h
            step += 1
        for i in range(n):
            assert final[i] == offline[i], (trial, i)


def test_streaming_partial_results_are_best_prefix_paths(device):
    """With the CTC topology every prefix labelling is accepted, so the partial result after
    each chunk is the greedy decode of the frames so far; the last is the offline result."""
    rng = np.random.default_rng(5)
    log_probs = peaked_log_probs(rng, 1, 12, 4).to(device)
    H = k2.arc_sort(k2.ctc_topo(3, device=device))
    decoder = StreamingDecoder(H, aux_labels=AuxLabels.TOKENS)
    stream = Stream()
    for start in range(0, 12, 4):
        hyp = decoder.decode_chunk(
            [stream], log_probs[:, start : start + 4], torch.tensor([4]), last=[start == 8]
        )[0]
        prefix = ctc_decoding(log_probs[:, : start + 4], torch.tensor([start + 4]))[0]
        assert hyp.tokens == prefix.tokens and hyp.score == pytest.approx(prefix.score, abs=1e-4)
    assert hyp == ctc_decoding(log_probs, torch.tensor([12]))[0]


def test_streaming_matches_viterbi_of_whole_input(device):
    rng = np.random.default_rng(9)
    graph = random_graph(rng, 5, 4, num_words=3)
    fsa = to_k2(graph, device)
    lp = peaked_log_probs(rng, 1, 10, 4).to(device)
    decoder = StreamingDecoder(fsa)
    stream = Stream()
    for s in range(0, 10, 3):
        e = min(s + 3, 10)
        hyp = decoder.decode_chunk([stream], lp[:, s:e], torch.tensor([e - s]), last=[e == 10])[0]
    ref_score, _ = viterbi(graph, lp[0].cpu().numpy())
    assert hyp.score == pytest.approx(ref_score, abs=1e-4)


# accepts exactly the words 1 2 3, each token held for one or more frames: mid-word states have
# no final arc, which k2's online intersecter alone would drop at every chunk end
SELF_LOOPS = """0 1 1 1 0
1 1 1 0 0
1 2 2 2 0
2 2 2 0 0
2 3 3 3 0
3 3 3 0 0
3 4 -1 -1 0
4"""


@pytest.mark.parametrize("chunk", [1, 2, 3, 4, 7])
def test_streaming_mid_word_chunk_ends(device, chunk):
    g = k2.Fsa.from_str(SELF_LOOPS, acceptor=False).to(device)
    lp = torch.full((1, 7, 4), -3.0)
    for t, k in enumerate([1, 1, 2, 2, 2, 3, 3]):
        lp[0, t, k] = -0.1
    lp = lp.to(device)
    offline = one_best_decoding(lp, torch.tensor([7]), g)[0]
    assert offline.words == (1, 2, 3) and offline.score == pytest.approx(-0.7, abs=1e-5)
    decoder = StreamingDecoder(g)
    stream = Stream()
    for start in range(0, 7, chunk):
        end = min(start + chunk, 7)
        hyp = decoder.decode_chunk(
            [stream], lp[:, start:end], torch.tensor([end - start]), last=[end == 7]
        )[0]
        if end < 7:  # the best partial path, ending mid-word
            expected = tuple(w for w, t in ((1, 0), (2, 2), (3, 5)) if t < end)
            assert hyp.words == expected
            assert hyp.score == pytest.approx(-0.1 * end, abs=1e-5)
    assert hyp == offline
    assert stream.finished
    with pytest.raises(ValueError, match="stream is finished"):
        decoder.decode_chunk([stream], lp[:, :1], torch.tensor([1]))


def test_streaming_final_with_no_complete_path_is_empty(device):
    g = k2.Fsa.from_str(SELF_LOOPS, acceptor=False).to(device)
    lp = torch.zeros(1, 2, 4, device=device).log_softmax(-1)
    decoder = StreamingDecoder(g)
    stream = Stream()
    partial = decoder.decode_chunk([stream], lp[:, :1], torch.tensor([1]))[0]
    assert partial.status is LatticeStatus.OK and partial.words == (1,)
    final = decoder.decode_chunk([stream], lp[:, 1:], torch.tensor([1]), last=[True])[0]
    assert final.status is LatticeStatus.EMPTY and final.words == ()
    assert "no path survived the first 2 frames" in final.reason


def test_streaming_bad_arguments(device):
    H = k2.arc_sort(k2.ctc_topo(3, device=device))
    decoder = StreamingDecoder(H, max_streams=2)
    a = Stream()
    lp = torch.zeros(1, 2, 4, device=device)
    with pytest.raises(ValueError, match="streams must be distinct"):
        decoder.decode_chunk([a, a], torch.zeros(2, 2, 4, device=device), torch.tensor([2, 2]))
    with pytest.raises(ValueError, match="got 3 streams but max_streams=2"):
        decoder.decode_chunk([Stream(), Stream(), Stream()], lp, torch.tensor([2]))
    with pytest.raises(ValueError, match="log_probs has 1 rows but 2 streams"):
        decoder.decode_chunk([a, Stream()], lp, torch.tensor([2]))
    with pytest.raises(ValueError, match=r"log_probs_lens\[0\]=0"):
        decoder.decode_chunk([a], lp, torch.tensor([0]))
    with pytest.raises(ValueError, match="token id 3 but log_probs has only V=2"):
        decoder.decode_chunk([a], torch.zeros(1, 2, 2, device=device), torch.tensor([2]))
    with pytest.raises(TypeError, match="streams must be a list of Stream"):
        decoder.decode_chunk([None], lp, torch.tensor([2]))
    with pytest.raises(ValueError, match="last has 2 flags but 1 streams"):
        decoder.decode_chunk([a], lp, torch.tensor([2]), last=[True, False])
    with pytest.raises(ValueError, match="max_streams must be a positive int"):
        StreamingDecoder(H, max_streams=0)
    assert a.num_frames == 0  # failed calls do not advance the stream
