"""Bad inputs raise clear errors before k2 sees them; empty lattices are reported, not lost."""

from __future__ import annotations

import k2
import pytest
import torch

from k2dec.lattice import (
    LatticeConfig,
    LatticeStatus,
    check_vocab,
    ctc_decoding,
    ctc_greedy_search,
    get_lattice,
    make_dense_fsa_vec,
    one_best_decoding,
)


def _lp(n=2, t=4, v=3, device="cpu"):
    return torch.randn(n, t, v, device=device).log_softmax(-1)


def _H(v, device):
    return k2.arc_sort(k2.ctc_topo(v - 1, device=device))


def test_dense_order_is_sorted_and_remembered(device):
    lp = _lp(4, 6, 3, device)
    dense = make_dense_fsa_vec(lp, torch.tensor([3, 6, 3, 5]))
    assert dense.order.tolist() == [1, 3, 0, 2]  # decreasing frames, stable on ties
    assert dense.inverse_order.tolist() == [2, 0, 3, 1]
    assert dense.num_frames.tolist() == [3, 6, 3, 5]
    assert dense.dense_fsa_vec.dim0() == 4


def test_subsampling_and_truncate(device):
    lp = _lp(2, 5, 3, device)
    dense = make_dense_fsa_vec(lp, torch.tensor([20, 22]), subsampling_factor=4, allow_truncate=1)
    assert dense.num_frames.tolist() == [5, 5]
    with pytest.raises(ValueError,
                       match=r"log_probs_lens\[1\]=22 gives 5 frames|log_probs_lens\[1\]=26"):
        make_dense_fsa_vec(lp, torch.tensor([20, 26]), subsampling_factor=4)
    with pytest.raises(ValueError,
                       match=r"log_probs_lens\[1\]=24 gives 6 frames but log_probs has only"):
        make_dense_fsa_vec(lp, torch.tensor([20, 24]), subsampling_factor=4)


@pytest.mark.parametrize(
    "log_probs, lengths, exc, match",
    [
        (torch.zeros(1, 3, 2, dtype=torch.float64), torch.tensor([3]), TypeError, "float32"),
        ([[[0.0]]], torch.tensor([1]), TypeError, "torch.Tensor"),
        (torch.zeros(3, 2), torch.tensor([3]), ValueError, r"shape \(N, T, V\)"),
        (torch.zeros(0, 3, 2), torch.tensor([], dtype=torch.int64), ValueError, "non-empty"),
        (torch.zeros(2, 3, 2), torch.tensor([3]), ValueError, r"log_probs_lens must have shape"),
        (torch.zeros(1, 3, 2), torch.tensor([3.0]), TypeError, "integer dtype"),
        (torch.zeros(1, 3, 2), [3], TypeError, "log_probs_lens must be a torch.Tensor"),
        (torch.zeros(1, 3, 2), torch.tensor([4]), ValueError, r"log_probs_lens\[0\]=4.*T=3"),
        (torch.zeros(2, 3, 2), torch.tensor([3, 0]), ValueError,
         r"log_probs_lens\[1\]=0.*at least 1"),
        (torch.zeros(1, 3, 2), torch.tensor([-1]), ValueError, r"log_probs_lens\[0\]=-1"),
    ],
)
def test_bad_inputs(log_probs, lengths, exc, match):
    with pytest.raises(exc, match=match):
        make_dense_fsa_vec(log_probs, lengths)
    with pytest.raises(exc, match=match):
        ctc_greedy_search(log_probs, lengths)


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_nan_inf_in_valid_frames(device, bad):
    lp = _lp(2, 4, 3, device)
    lp[1, 2, 1] = bad
    with pytest.raises(ValueError, match="utterance 1, frame 2"):
        make_dense_fsa_vec(lp, torch.tensor([4, 4]))
    with pytest.raises(ValueError, match="NaN or \\+inf"):
        get_lattice(lp, torch.tensor([4, 4]), _H(3, device))
    # beyond the utterance's length it is padding and ignored; -inf is a valid log-prob
    lp[1, 0, 0] = -float("inf")
    make_dense_fsa_vec(lp, torch.tensor([4, 2]))


def test_bad_subsampling_args(device):
    lp = _lp(1, 4, 3, device)
    with pytest.raises(ValueError, match="subsampling_factor must be >= 1, got 0"):
        make_dense_fsa_vec(lp, torch.tensor([4]), subsampling_factor=0)
    with pytest.raises(TypeError, match="subsampling_factor must be an int"):
        make_dense_fsa_vec(lp, torch.tensor([4]), subsampling_factor=2.0)
    with pytest.raises(ValueError, match="allow_truncate must be >= 0, got -1"):
        make_dense_fsa_vec(lp, torch.tensor([4]), allow_truncate=-1)


def test_vocab_mismatch(device):
    H = _H(5, device)  # token ids up to 4
    with pytest.raises(ValueError, match=r"token id 4 but log_probs has only V=3"):
        check_vocab(H, 3)
    with pytest.raises(ValueError, match=r"token id 4 but log_probs has only V=3"):
        get_lattice(_lp(1, 4, 3, device), torch.tensor([4]), H)
    check_vocab(H, 5)
    with pytest.raises(TypeError, match="graph must be a k2.Fsa"):
        check_vocab("HLG", 5)


def test_bad_graph_and_config(device):
    lp = _lp(2, 4, 3, device)
    H = _H(3, device)
    with pytest.raises(ValueError, match="FsaVec of 3 FSAs; need 1 or N=2"):
        get_lattice(lp, torch.tensor([4, 4]), k2.create_fsa_vec([H, H, H]))
    with pytest.raises(TypeError, match="config must be a LatticeConfig"):
        get_lattice(lp, torch.tensor([4, 4]), H, {"search_beam": 20})
    with pytest.raises(ValueError,
                       match=r"LatticeConfig.search_beam must be a number in \(0, 100000\], got 0"):
        LatticeConfig(search_beam=0)
    with pytest.raises(ValueError, match="LatticeConfig.output_beam must be a number in"):
        LatticeConfig(output_beam=-1)
    with pytest.raises(ValueError, match=r"LatticeConfig.min_active_states must be an int in "
                                         r"\[0, 9\], got 100"):
        LatticeConfig(min_active_states=100, max_active_states=10)
    # equal limits would reach k2's fatal check (max_active > min_active) in C++
    with pytest.raises(ValueError, match=r"LatticeConfig.min_active_states must be an int in "
                                         r"\[0, 9\], got 10"):
        LatticeConfig(min_active_states=10, max_active_states=10)
    LatticeConfig(min_active_states=9, max_active_states=10)
    LatticeConfig(min_active_states=0, max_active_states=1)
    with pytest.raises(ValueError, match="retry_scales must all be finite numbers > 1"):
        LatticeConfig(retry_scales=(0.5,))


# a graph that accepts exactly the token sequence "1 2 3", one frame each (no self-loops)
LINEAR = "0 1 1 1 0\n1 2 2 0 0\n2 3 3 0 0\n3 4 -1 -1 0\n4"


def test_graph_with_no_path_is_reported(device):
    g = k2.Fsa.from_str(LINEAR, acceptor=False).to(device)
    lp = _lp(3, 5, 4, device)
    hyps = one_best_decoding(lp, torch.tensor([2, 3, 5]), g)
    assert [h.status for h in hyps] == [LatticeStatus.EMPTY, LatticeStatus.OK, LatticeStatus.EMPTY]
    assert hyps[1].tokens == (1, 2, 3) and hyps[1].words == (1,)
    assert hyps[1].score == pytest.approx(float(lp[1, 0, 1] + lp[1, 1, 2] + lp[1, 2, 3]), abs=1e-5)
    for h in (hyps[0], hyps[2]):
        assert h.tokens == () and h.words == () and h.score == -float("inf")
        assert "no path survived" in h.reason
    assert "2 frames" in hyps[0].reason and "5 frames" in hyps[2].reason


def test_pruned_utterance_is_retried_with_wider_beams(device):
    # state 1 is a dead end the input favours; the only complete path goes through state 2
    text = "0 1 1 0 0\n0 2 2 0 0\n1 1 1 0 0\n2 2 2 0 0\n2 3 -1 -1 0\n3"
    g = k2.Fsa.from_str(text, acceptor=False).to(device)
    t = 6
    lp = torch.full((2, t, 3), -10.0)
    lp[:, :, 1] = 0.0
    lp[:, :, 2] = -3.0
    lp[1, :, 2] = 0.0  # utterance 1 prefers the good branch: no retry needed
    lp[1, :, 1] = -3.0
    narrow = dict(search_beam=1.0, output_beam=1.0, min_active_states=0)
    res = get_lattice(lp.to(device), torch.tensor([t, t]), g, LatticeConfig(**narrow))
    assert [r.status for r in res.reports] == [LatticeStatus.RETRIED, LatticeStatus.OK]
    assert res.reports[0].search_beam == 8.0 and "found at search_beam=8" in res.reports[0].reason
    assert res.lattice.shape[0] == 2 and res.lattice[0].num_arcs > 0
    res = get_lattice(
        lp.to(device), torch.tensor([t, t]), g, LatticeConfig(**narrow, retry_scales=())
    )
    assert [r.status for r in res.reports] == [LatticeStatus.EMPTY, LatticeStatus.OK]
    assert res.empty_indices == [0]


def test_graph_on_another_device(device):
    if device.type == "cpu":
        pytest.skip("needs a second device (runs on the cuda parametrization)")
    lp = _lp(1, 4, 3, device)
    with pytest.raises(ValueError, match="graph is on cpu but log_probs is on cuda"):
        get_lattice(lp, torch.tensor([4]), _H(3, "cpu"))


def test_the_configs_subsampling_factor_is_used(device):
    """``get_lattice`` / ``one_best_decoding`` / ``ctc_decoding`` take
    ``LatticeConfig.subsampling_factor`` when no argument is given; a disagreeing pair is
    refused (neither is silently ignored)."""
    lp, lens, H = _lp(2, 5, 3, device), torch.tensor([20, 17]), _H(3, device)
    by_arg = get_lattice(lp, lens, H, LatticeConfig(), 4)
    by_config = get_lattice(lp, lens, H, LatticeConfig(subsampling_factor=4))
    assert by_config.lattice.num_arcs == by_arg.lattice.num_arcs
    assert torch.equal(by_config.lattice.scores, by_arg.lattice.scores)
    with pytest.raises(ValueError, match="log_probs_lens"):  # 20 frames do not fit 5 at 1
        get_lattice(lp, lens, H, LatticeConfig())
    same = get_lattice(lp, lens, H, LatticeConfig(subsampling_factor=4), 4)
    assert torch.equal(same.lattice.scores, by_arg.lattice.scores)
    with pytest.raises(ValueError, match="disagrees with LatticeConfig.subsampling_factor=4"):
        get_lattice(lp, lens, H, LatticeConfig(subsampling_factor=4), 2)
    hyps = ctc_decoding(lp, lens, config=LatticeConfig(subsampling_factor=4))
    assert [h.tokens for h in hyps] == [h.tokens for h in ctc_decoding(lp, lens, None,
                                                                        LatticeConfig(),
                                                                        subsampling_factor=4)]
