"""End to end with graphs compiled by k2dec.graph (HLG from H, L, G; monophone HCLG): 1best
agrees with kaldi-decoder's FasterDecoder, and whole-lattice rescoring runs on the ragged word
labels these graphs have."""

from __future__ import annotations

import k2
import numpy as np
import pytest
import torch

from k2dec.graph import (
    HmmTopology,
    build_ctc_topo,
    build_G,
    build_L,
    build_rescoring_G,
    compile_HCLG,
    compile_HLG,
    k2_to_kaldi_decoder_fst,
)
from k2dec.lang import write_lang_dir
from k2dec.lattice import (
    LatticeConfig,
    LatticeStatus,
    get_lattice,
    hypotheses_from_lattice,
    rescore_with_whole_lattice,
)
from k2dec.lattice.rescore import RescoreConfig, RescoreStatus
from k2dec.testing.graphs import peaked_log_probs

kd = pytest.importorskip("kaldi_decoder")

LEXICON = [
    ("GO", ["g", "o"]),
    ("GOOD", ["g", "o", "d"]),
    ("DOG", ["d", "o", "g"]),
    ("DO", ["d", "o"]),
    ("OD", ["o", "d"]),
    ("TO", ["t", "o"]),
    ("TWO", ["t", "o"]),
]

ARPA = """\\data\\
ngram 1=9
ngram 2=5

\\1-grams:
-1.0 </s>
-99 <s> -0.5
-0.8 GO -0.3
-0.9 GOOD -0.2
-1.0 DOG -0.3
-0.7 DO -0.3
-1.3 OD -0.4
-0.9 TO -0.2
-1.1 TWO -0.25

\\2-grams:
-0.2 <s> GO
-0.1 GO TO
-0.3 DOG </s>
-0.4 TWO DOG
-0.5 DO GOOD

\\end\\
"""

WIDE = LatticeConfig(search_beam=40.0, output_beam=8.0, min_active_states=0,
                     max_active_states=100000)


@pytest.fixture(scope="module")
def lang(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("lang")
    lang = write_lang_dir(tmp / "lang", LEXICON)
    arpa = tmp / "lm.arpa"
    arpa.write_text(ARPA)
    G = build_G(arpa, lang.word_table)
    L = build_L(lang.lexicon_disambig, lang.token_table, lang.word_table,
                disambig_self_loops=True)
    return lang, arpa, L, G


def _kaldi(fst, log_probs: np.ndarray):
    import kaldifst

    decoder = kd.FasterDecoder(fst, kd.FasterDecoderOptions(beam=40.0, max_active=100000,
                                                             min_active=0))
    decoder.decode(kd.DecodableCtc(log_probs))
    ok, lattice = decoder.get_best_path()
    ok2, _, words, weight = kaldifst.get_linear_symbol_sequence(lattice)
    assert ok and ok2
    return list(words), -(weight.value1 + weight.value2)


def _agree(graph: k2.Fsa, log_probs, lengths) -> int:
    result = get_lattice(log_probs, lengths, graph, WIDE)
    hyps = hypotheses_from_lattice(result)
    fst = k2_to_kaldi_decoder_fst(graph)
    multi = 0
    for i, h in enumerate(hyps):
        words, score = _kaldi(fst, log_probs[i, : lengths[i]].numpy())
        assert h.status is LatticeStatus.OK
        assert list(h.words) == words, i
        assert h.score == pytest.approx(score, rel=1e-5, abs=1e-3), i
        multi += len(words) > 1
    return multi


def test_compiled_hlg_agrees_with_kaldi_decoder(lang):
    lang, _, L, G = lang
    H = build_ctc_topo(lang.max_token_id)
    HLG = compile_HLG(H, L, G, lang.first_token_disambig_id, lang.first_word_disambig_id)
    assert isinstance(HLG.aux_labels, k2.RaggedTensor)
    rng = np.random.default_rng(0)
    lengths = torch.from_numpy(rng.integers(3, 30, size=20))
    log_probs = peaked_log_probs(rng, 20, int(lengths.max()), lang.max_token_id + 1, scale=3.0)
    assert _agree(HLG, log_probs, lengths) > 5


def test_compiled_hclg_agrees_with_kaldi_decoder(lang):
    lang, _, L, G = lang
    topo = HmmTopology(num_phones=lang.first_token_disambig_id - 1, num_states=2,
                       self_loop_prob=0.6)
    HCLG = compile_HCLG(topo, L, G, lang.first_token_disambig_id, lang.first_word_disambig_id)
    rng = np.random.default_rng(1)
    lengths = torch.from_numpy(rng.integers(4, 40, size=20))
    log_probs = peaked_log_probs(rng, 20, int(lengths.max()), topo.num_pdfs, scale=3.0)
    assert _agree(HCLG, log_probs, lengths) > 5


def test_whole_lattice_rescoring_on_compiled_hlg(lang):
    lang, arpa, L, G = lang
    H = build_ctc_topo(lang.max_token_id)
    HLG = compile_HLG(H, L, G, lang.first_token_disambig_id, lang.first_word_disambig_id)
    HLG.lm_scores = HLG.scores.clone()
    rng = np.random.default_rng(2)
    lengths = torch.from_numpy(rng.integers(3, 30, size=8))
    log_probs = peaked_log_probs(rng, 8, int(lengths.max()), lang.max_token_id + 1, scale=3.0)
    result = get_lattice(log_probs, lengths, HLG)
    G_rescore = build_rescoring_G(arpa, lang.word_table)
    res = rescore_with_whole_lattice(result, G_rescore, RescoreConfig(lm_scales=(0.5, 1.0)))
    assert res.status is RescoreStatus.OK
    one_best = hypotheses_from_lattice(result)
    for sr in res.per_scale:
        for h in sr.hypotheses:
            assert h.status is LatticeStatus.OK and h.words
            assert list(h.word_frames) == sorted(h.word_frames)
            assert all(f < int(lengths.max()) for f in h.token_frames)
    # at lm_scale 1 the rescoring LM is the decoding LM: the 1best words mostly stay
    same = sum(h.words == b.words for h, b in zip(res.per_scale[1].hypotheses, one_best))
    assert same >= 6
