"""Renamed length parameters: the new names say which frames they count; the old keywords
still work, with a DeprecationWarning, and give the same results."""

from __future__ import annotations

import k2
import pytest
import torch

from k2dec.lattice import ctc_decoding, ctc_greedy_search, get_lattice, make_dense_fsa_vec
from k2dec.lattice.ctc_prefix_beam_search import ctc_prefix_beam_search
from k2dec.methods import CtcInputs
from k2dec.model import subsampled_lengths
from k2dec.scorers import CtcPrefixScorer


def _inputs():
    g = torch.Generator().manual_seed(0)
    return torch.randn(2, 9, 5, generator=g).log_softmax(-1), torch.tensor([9, 6])


CALLS = [
    ("get_lattice", lambda lp, n, **kw: get_lattice(lp, graph=k2.arc_sort(k2.ctc_topo(4)), **kw)
     .lattice.num_arcs),
    ("ctc_decoding", lambda lp, n, **kw: [h.tokens for h in ctc_decoding(lp, **kw)]),
    ("ctc_greedy_search", lambda lp, n, **kw: [h.tokens for h in ctc_greedy_search(lp, **kw)]),
    ("make_dense_fsa_vec", lambda lp, n, **kw: make_dense_fsa_vec(lp, **kw).num_frames.tolist()),
    ("ctc_prefix_beam_search", lambda lp, n, **kw: [
        [h.tokens for h in hs] for hs in ctc_prefix_beam_search(lp, **kw)]),
]


@pytest.mark.parametrize("name, call", CALLS, ids=[c[0] for c in CALLS])
def test_old_lengths_keyword_is_a_deprecated_alias(name, call):
    lp, lens = _inputs()
    new = call(lp, lens, log_probs_lens=lens)
    with pytest.warns(DeprecationWarning, match=rf"{name}\(lengths=...\) is deprecated: the "
                                                r"parameter is now log_probs_lens"):
        old = call(lp, lens, lengths=lens)
    assert old == new
    with pytest.raises(TypeError, match="got both log_probs_lens= and its old name lengths="):
        call(lp, lens, lengths=lens, log_probs_lens=lens)


def test_other_renamed_parameters():
    lp, lens = _inputs()
    with pytest.warns(DeprecationWarning, match="now feature_lens"):
        assert subsampled_lengths(lengths=torch.tensor([40])).tolist() == [9]
    with pytest.warns(DeprecationWarning, match="now log_probs_lens"):
        scorer = CtcPrefixScorer(lp, lens=lens, blank_id=0, eos_id=4)
    assert scorer.lens.tolist() == [9, 6]
    with pytest.warns(DeprecationWarning, match="now log_probs_lens"):
        inputs = CtcInputs(lp, lengths=lens)
    assert inputs.log_probs_lens is lens
    with pytest.warns(DeprecationWarning, match="use CtcInputs.log_probs_lens"):
        assert inputs.lengths is lens
