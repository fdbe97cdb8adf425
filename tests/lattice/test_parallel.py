"""The multi-process 1best decoder gives exactly the single-process hypotheses."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from k2dec.lattice import AuxLabels, LatticeConfig, ParallelOneBestDecoder, one_best_decoding
from k2dec.lattice.parallel import balance_by_frames
from k2dec.testing.graphs import peaked_log_probs
from tests.lattice.graphs import to_k2
from tests.reference.viterbi import random_graph


def test_balance_by_frames():
    groups = balance_by_frames([10, 1, 7, 3, 3], 2)
    assert sorted(i for g in groups for i in g) == [0, 1, 2, 3, 4]
    loads = sorted(sum([10, 1, 7, 3, 3][i] for i in g) for g in groups)
    assert loads == [11, 13]
    assert balance_by_frames([5], 4) == [[0]]


def test_parallel_decoder_equals_single_process():
    rng = np.random.default_rng(11)
    graph = random_graph(rng, 6, 5, num_words=8, arcs_per_state=4, ragged_aux=True)
    fsa = to_k2(graph, torch.device("cpu"), ragged=True)
    n = 9
    lengths = torch.from_numpy(rng.integers(1, 30, size=n))
    log_probs = peaked_log_probs(rng, n, int(lengths.max()), 5, scale=2.0)
    config = LatticeConfig(search_beam=6.0, output_beam=4.0, min_active_states=1,
                           max_active_states=3)
    expected = one_best_decoding(log_probs, lengths, fsa, config)
    singles = [one_best_decoding(log_probs[i : i + 1], lengths[i : i + 1], fsa, config)[0]
               for i in range(n)]
    assert singles == expected
    with ParallelOneBestDecoder(fsa, config, num_workers=1) as runner:
        assert runner.decode(log_probs, lengths) == expected
        one = runner.stats
    assert one.calls == 1 and 0 < one.busy_seconds <= one.wall_seconds
    assert 0 < one.utilization(1) <= 1
    with ParallelOneBestDecoder(fsa, config, num_workers=2) as runner:
        assert runner.decode(log_probs, lengths) == expected
        # a second batch reuses the same workers
        assert runner.decode(log_probs[:3], lengths[:3]) == expected[:3]
        with pytest.raises(ValueError, match=r"log_probs_lens\[0\]=0"):
            runner.decode(log_probs[:1], torch.tensor([0]))
        two = runner.stats
    # the failed call counts nothing; the workers' busy time is theirs, not the wall's
    assert two.calls == 2 and two.busy_seconds > 0 and two.wall_seconds > 0
    assert 0 < two.utilization(2) <= 1
    assert any(h.words for h in expected)


def test_parallel_decoder_bad_arguments():
    import k2

    H = k2.ctc_topo(3)
    with pytest.raises(ValueError, match="num_workers must be a positive int, got 0"):
        ParallelOneBestDecoder(H, num_workers=0)
    with pytest.raises(TypeError, match="aux_labels must be an AuxLabels"):
        ParallelOneBestDecoder(H, aux_labels="words", num_workers=1)
    with pytest.raises(ValueError, match="single graph"):
        ParallelOneBestDecoder(k2.create_fsa_vec([H]), num_workers=1)
    with ParallelOneBestDecoder(H, aux_labels=AuxLabels.TOKENS, num_workers=1) as runner:
        with pytest.raises(ValueError, match="token id 3 but log_probs has only V=2"):
            runner.decode(torch.zeros(1, 2, 2), torch.tensor([2]))
