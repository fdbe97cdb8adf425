"""The decoders see every homophone of the compiled graphs (issue 14), on every device:
HLG through ``k2.intersect_dense_pruned`` and LG through transducer ``fast_beam_search``
(``k2.RnntDecodingStreams``), both of which read label 0 as blank, not as epsilon."""

from __future__ import annotations

import k2
import pytest
import torch

from k2dec.graph import build_ctc_topo, build_G, build_L, compile_HLG, compile_LG
from k2dec.lang import write_lang_dir
from k2dec.lattice import LatticeConfig, get_lattice
from k2dec.testing.transducer import random_batch, random_model
from k2dec.transducer import FastBeamSearchConfig, fast_beam_search
from tests.reference.lattice_paths import enumerate_paths, to_cpu_single
from tests.reference.ngram import ArpaScorer, lexicon_lm_word_sequences

from .random_lang import icefall_LG

LEXICON = [("READ", ["R", "IY", "D"]), ("REED", ["R", "IY", "D"]), ("RED", ["R", "EH", "D"]),
           ("RE", ["R", "IY"])]

ARPA = """\\data\\
ngram 1=6
ngram 2=4

\\1-grams:
-1.0 </s>
-99 <s> -0.5
-0.7 READ -0.3
-0.8 REED -0.2
-0.9 RED -0.3
-1.1 RE -0.4

\\2-grams:
-0.2 <s> READ
-0.1 READ RED
-0.3 <s> REED
-0.4 RE RED

\\end\\
"""


class Lang:
    def __init__(self, tmp_path):
        self.lang = write_lang_dir(tmp_path / "lang", LEXICON)
        arpa = tmp_path / "lm.arpa"
        arpa.write_text(ARPA)
        self.lm = ArpaScorer(arpa)
        self.G = build_G(arpa, self.lang.word_table)
        self.L = build_L(self.lang.lexicon_disambig, self.lang.token_table,
                         self.lang.word_table, disambig_self_loops=True)
        self.ids = (self.lang.first_token_disambig_id, self.lang.first_word_disambig_id)

    def words(self, ids) -> tuple[str, ...]:
        return tuple(self.lang.word_table.get(i) for i in ids)

    def tokens(self, ids) -> tuple[str, ...]:
        return tuple(self.lang.token_table.get(i) for i in ids)

    def expected(self, tokens: tuple[str, ...]) -> dict[tuple[str, ...], float]:
        return lexicon_lm_word_sequences(tokens, LEXICON, self.lm)


def _peaked(frames: list[int], vocab: int, device) -> torch.Tensor:
    logits = torch.zeros(len(frames), vocab)
    logits[torch.arange(len(frames)), torch.tensor(frames)] = 8.0
    return logits.log_softmax(-1).unsqueeze(0).to(device)


def test_HLG_lattice_has_both_homophones_with_their_lm_scores(device, tmp_path):
    lang = Lang(tmp_path)
    tt = lang.lang.token_table
    HLG = compile_HLG(build_ctc_topo(lang.lang.max_token_id), lang.L, lang.G, *lang.ids)
    frames = [0, tt.get("R"), tt.get("IY"), 0, tt.get("D"), 0]
    log_probs = _peaked(frames, lang.lang.max_token_id + 1, device)
    lengths = torch.tensor([len(frames)], device=device)
    config = LatticeConfig(search_beam=50, output_beam=50)
    lattice = get_lattice(log_probs, lengths, HLG.to(device), config).lattice
    best: dict[tuple[str, ...], float] = {}
    for p in enumerate_paths(to_cpu_single(lattice, 0)):
        if lang.tokens(p.tokens) == ("R", "IY", "D"):
            w = lang.words(p.words)
            best[w] = max(best.get(w, -float("inf")), p.score)
    want = lang.expected(("R", "IY", "D"))
    assert set(want) == {("READ",), ("REED",)}
    assert set(best) == set(want)
    # same frames and alignment: the scores differ by the LM scores only
    assert best[("READ",)] - best[("REED",)] == pytest.approx(
        want[("READ",)] - want[("REED",)], abs=1e-3)


def _lattice_words(lattice: k2.Fsa, lang: Lang) -> dict[tuple[str, ...], set]:
    out: dict[tuple[str, ...], set] = {}
    for p in enumerate_paths(to_cpu_single(lattice, 0)):
        out.setdefault(lang.tokens(p.tokens), set()).add(lang.words(p.words))
    return out


def test_fast_beam_search_with_LG_outputs_every_word_sequence(device, tmp_path):
    """Unpruned fast_beam_search over LG: for every token sequence in the lattice, exactly
    the word sequences L o G gives it; icefall's LG lacks REED."""
    lang = Lang(tmp_path)
    LG = compile_LG(lang.L, lang.G, *lang.ids, log_weight_pushing=True)
    vocab = lang.lang.max_token_id + 1
    model = random_model(vocab_size=vocab, context_size=2, seed=3, device=device)
    enc, enc_lens = random_batch([4], seed=3, device=device)
    config = FastBeamSearchConfig(beam=1e5, max_contexts=256, max_states=4096)
    seen = _lattice_words(fast_beam_search(model, enc, enc_lens, LG.to(device),
                                           config).lattice, lang)
    assert ("R", "IY", "D") in seen
    for tokens, words in seen.items():
        assert words == set(lang.expected(tokens)), tokens
    old_LG = icefall_LG(lang).to(device)
    old = _lattice_words(fast_beam_search(model, enc, enc_lens, old_LG, config).lattice, lang)
    assert ("REED",) not in old[("R", "IY", "D")]
