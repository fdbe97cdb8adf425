"""``check_vocab`` remembers a graph's largest label (one pass over a large HLG costs a third of a
one-utterance decode) and still refuses every graph whose labels were changed since."""

from __future__ import annotations

import k2
import numpy as np
import pytest
import torch

from k2dec.lattice import check_vocab, one_best_decoding
from k2dec.lattice.dense import _MAX_LABELS
from k2dec.testing.graphs import peaked_log_probs
from tests.lattice.graphs import to_k2
from tests.reference.viterbi import random_graph


def _brute_max(fsa: k2.Fsa) -> int:
    return max(int(x) for x in fsa.labels.tolist())


def test_agrees_with_a_loop_over_the_labels(device):
    """Every (graph, V) gives what a Python loop over the labels says, on the first call and on
    the remembered second one."""
    for seed in range(30):
        rng = np.random.default_rng(seed)
        vocab = int(rng.integers(2, 8))
        fsa = to_k2(random_graph(rng, int(rng.integers(1, 6)), vocab), device)
        if fsa.num_arcs == 0:
            check_vocab(fsa, 1)  # nothing to index
            continue
        top = _brute_max(fsa)
        for v in (top, top + 1, top + 5):
            for _ in range(2):
                if top >= v:
                    with pytest.raises(ValueError, match=f"token id {top} .* V={v}"):
                        check_vocab(fsa, v)
                else:
                    check_vocab(fsa, v)


def test_remembers_the_graph():
    fsa = k2.arc_sort(k2.ctc_topo(5))
    check_vocab(fsa, 6)
    assert _MAX_LABELS[fsa][2] == 5


def test_in_place_label_edit_is_checked_again(device):
    fsa = k2.arc_sort(k2.ctc_topo(5, device=device))
    check_vocab(fsa, 6)
    fsa.labels[2] = 9
    with pytest.raises(ValueError, match="token id 9 but log_probs has only V=6"):
        check_vocab(fsa, 6)


def test_label_setter_is_checked_again(device):
    """k2's ``fsa.labels = t`` writes through another view (no torch version bump)."""
    fsa = k2.arc_sort(k2.ctc_topo(5, device=device))
    check_vocab(fsa, 6)
    labels = fsa.labels.clone()
    labels[labels == 3] = 7
    fsa.labels = labels
    with pytest.raises(ValueError, match="token id 7 but log_probs has only V=6"):
        check_vocab(fsa, 6)


def test_decode_refuses_a_graph_edited_after_a_decode(device):
    """The check before k2 sees the graph: the second decode refuses the edited graph."""
    rng = np.random.default_rng(0)
    fsa = k2.arc_sort(k2.ctc_topo(3, device=device))
    log_probs = peaked_log_probs(rng, 2, 5, 4).to(device)
    lens = torch.tensor([5, 3])
    assert len(one_best_decoding(log_probs, lens, fsa)) == 2
    fsa.labels[1] = 4
    with pytest.raises(ValueError, match="token id 4 but log_probs has only V=4"):
        one_best_decoding(log_probs, lens, fsa)
