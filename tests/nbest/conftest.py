"""Small random lattices (tiny HLG x random peaked posteriors) for the n-best tests."""

from __future__ import annotations

import k2
import pytest
import torch

from k2dec.graph import build_ctc_topo, build_G, build_L, compile_HLG
from k2dec.lang import write_lang_dir
from tests.graph.conftest import TINY_ARPA, TINY_LEXICON


@pytest.fixture(scope="module")
def tiny_hlg(tmp_path_factory):
    d = tmp_path_factory.mktemp("nbest_lang")
    lang = write_lang_dir(d / "lang", TINY_LEXICON)
    (d / "lm.arpa").write_text(TINY_ARPA)
    G = build_G(d / "lm.arpa", lang.word_table)
    L = build_L(lang.lexicon_disambig, lang.token_table, lang.word_table,
                disambig_self_loops=True)
    H = build_ctc_topo(lang.max_token_id)
    HLG = compile_HLG(H, L, G, lang.first_token_disambig_id, lang.first_word_disambig_id)
    HLG.lm_scores = HLG.scores.clone()
    return lang, HLG, H


def make_lattices(graph: k2.Fsa, num_utts: int, max_frames: int, seed: int,
                  device: torch.device, vocab: int, scale: float = 1.5) -> k2.Fsa:
    """Lattices of ``num_utts`` random utterances (lengths 2..max_frames) with wide beams."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(2, max_frames + 1, (num_utts,), generator=g)
    lengths, _ = torch.sort(lengths, descending=True)
    log_probs = (torch.randn(num_utts, int(lengths.max()), vocab, generator=g) * scale)
    log_probs = log_probs.log_softmax(-1).to(device)
    sup = torch.stack([torch.arange(num_utts), torch.zeros(num_utts, dtype=torch.int64),
                       lengths], dim=1).to(torch.int32)
    dense = k2.DenseFsaVec(log_probs, sup)
    graphs = k2.create_fsa_vec([graph.to(device)] * num_utts)
    return k2.intersect_dense_pruned(graphs, dense, search_beam=100, output_beam=100,
                                     min_active_states=1, max_active_states=100000)
