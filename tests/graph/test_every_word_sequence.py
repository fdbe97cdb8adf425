"""HLG, LG and HCLG keep every word sequence of L o G (issue 14: homophones were lost).

For random small lexicons (homophones, prefix words, words with two pronunciations, words
the LM lacks) and random backoff ARPA LMs, every word sequence up to length 3 is spelled
with every pronunciation, realised as CTC frames for HLG (every realisation with 1-2 frames
per token and optional blanks for up to 2 tokens, a few for longer ones), as plain tokens
for LG (the transducer's trivial topology) and as HMM state frames for HCLG; the graph must
output exactly the word sequences that the brute-force reference (lexicon segmentation +
the backoff LM's best path) gives for those tokens, with the same scores.
"""

from __future__ import annotations

import math
import random

import k2
import pytest
import torch

from k2dec.graph import (
    HmmTopology,
    build_ctc_topo,
    build_hmm_topo,
    build_rescoring_G,
    compile_HCLG,
    compile_HLG,
    compile_LG,
    graph_words,
    k2_to_openfst,
    load_kaldi_hclg,
    refresh_labels_version,
    write_openfst,
)
from tests.graph.random_lang import RandomCase, decoded_words, icefall_LG

from .exhaustive import best_intersection, linear_fsa
from .random_lang import ctc_realisations, word_sequences

SEEDS = range(8)






def _assert_same(got: dict, want: dict, what: str, offset: float = 0.0) -> None:
    assert set(got) == set(want), (
        f"{what}: missing {sorted(set(want) - set(got))}, extra {sorted(set(got) - set(want))}"
    )
    for words, score in want.items():
        assert got[words] == pytest.approx(score + offset, abs=2e-4), (what, words)


def _check_HLG(case: RandomCase, HLG: k2.Fsa) -> int:
    rng = random.Random(case.seed)
    checked = 0
    for tokens in sorted(case.token_sequences()):
        want = case.expected(tokens)
        frames = ctc_realisations(case.token_ids(tokens), rng)
        for f, got in zip(frames, decoded_words(frames, HLG, case.lang.word_table)):
            _assert_same(got, want, f"seed {case.seed} tokens {tokens} frames {f}")
            checked += 1
    return checked


@pytest.mark.parametrize("seed", SEEDS)
def test_HLG_outputs_every_word_sequence_of_L_o_G(seed, tmp_path):
    case = RandomCase(seed, tmp_path)
    H = build_ctc_topo(case.lang.max_token_id)
    HLG = compile_HLG(H, case.L, case.G, *case.ids)
    assert _check_HLG(case, HLG) > 100
    # every word G can score is output somewhere, alone after <s> at least
    for word, pron in case.spec.lexicon:
        if word in case.spec.unscored:
            continue
        frames = ctc_realisations(case.token_ids(pron), random.Random(0), exhaustive_up_to=0)
        assert (word,) in decoded_words(frames[:1], HLG, case.lang.word_table)[0], word
    assert graph_words(HLG, case.lang.word_table) == set(case.spec.words) - set(
        case.spec.unscored)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("pushing", [False, True])
def test_LG_outputs_every_word_sequence_of_L_o_G(seed, pushing, tmp_path):
    """LG read through the transducer's trivial topology: plain token sequences. With log
    weight pushing (as ``compile_graph`` builds LG for fast_beam_search) every path's score
    moves by the same constant (minus the log of G's total)."""
    case = RandomCase(seed, tmp_path)
    LG = compile_LG(case.L, case.G, *case.ids, log_weight_pushing=pushing)
    assert not bool((LG.labels == 0).any()), "LG must be epsilon-free"
    seqs = sorted(case.token_sequences())
    decoded = decoded_words([case.token_ids(t) for t in seqs], LG, case.lang.word_table)
    offset = None
    for tokens, got in zip(seqs, decoded):
        want = case.expected(tokens)
        if offset is None and want:
            w = next(iter(want))
            offset = got.get(w, math.nan) - want[w] if pushing else 0.0
        _assert_same(got, want, f"seed {seed} tokens {tokens}", offset or 0.0)
    assert offset is not None


@pytest.mark.parametrize("seed", SEEDS[:4])
def test_HCLG_outputs_every_word_sequence_of_L_o_G(seed, tmp_path):
    case = RandomCase(seed, tmp_path)
    topo = HmmTopology(num_phones=case.lang.first_token_disambig_id - 1, num_states=2)
    HCLG = compile_HCLG(topo, case.L, case.G, *case.ids)
    rng = random.Random(seed)
    seqs = [t for t in sorted(case.token_sequences()) if t]  # zero frames: nothing to read
    frames = []
    for tokens in seqs:
        frames.append([topo.pdf(p, s) for p in case.token_ids(tokens)
                       for s in range(topo.num_states) for _ in range(rng.randint(1, 2))])
    for tokens, f, got in zip(seqs, frames, decoded_words(frames, HCLG, case.lang.word_table)):
        _assert_same(got, case.expected(tokens), f"seed {seed} tokens {tokens} frames {f}")






def _kaldi_style_HCLG(case: RandomCase, topo: HmmTopology) -> k2.Fsa:
    """HCLG the way Kaldi builds it, as a k2 graph with labels ``pdf + 1``: H has a
    self-loop per disambiguation symbol on its loop state, H o det(L o G) keeps the
    symbols, then they become input epsilons (Kaldi's ``fstrmsymbols``) and stay there,
    some with words on them (Kaldi's decoders follow such arcs without a frame)."""
    Ha = build_hmm_topo(topo)
    arcs = [tuple(a) + (w, sc) for a, w, sc in zip(Ha.arcs.values()[:, :3].tolist(),
                                                  Ha.aux_labels.tolist(), Ha.scores.tolist())]
    num_tokens = max(case.lang.token_table.ids) + 1
    arcs += [(0, 0, 0, d, 0.0) for d in range(case.ids[0], num_tokens)]
    arcs.sort(key=lambda a: a[0])
    final = Ha.shape[0] - 1
    Ha = k2.Fsa.from_str("\n".join(" ".join(map(str, a)) for a in arcs) + f"\n{final}",
                         acceptor=False)
    LG = k2.connect(k2.determinize(k2.connect(k2.compose(k2.arc_sort(case.L),
                                                         k2.arc_sort(case.G)))))
    raw = k2.connect(k2.compose(k2.arc_sort(Ha), k2.arc_sort(LG)))
    values = raw.aux_labels.values.clone()
    values[values >= case.ids[1]] = 0
    return k2.Fsa(raw.arcs, aux_labels=k2.RaggedTensor(raw.aux_labels.shape, values))


@pytest.mark.parametrize("seed", SEEDS[:4])
def test_loaded_kaldi_HCLG_with_words_on_epsilon_arcs(seed, tmp_path):
    """load_kaldi_hclg removes the input epsilons of a Kaldi-style HCLG.fst without losing
    any word sequence (k2.remove_epsilon alone loses some: checked on the same graph)."""
    case = RandomCase(seed, tmp_path)
    topo = HmmTopology(num_phones=case.lang.first_token_disambig_id - 1, num_states=2)
    raw = _kaldi_style_HCLG(case, topo)
    lengths = raw.aux_labels.shape.row_splits(1)[1:] - raw.aux_labels.shape.row_splits(1)[:-1]
    assert bool(((raw.labels == 0) & (lengths > 0)).any()), "no eps:word arc to test"
    fst_path = tmp_path / "HCLG.fst"
    write_openfst(k2_to_openfst(raw), fst_path)
    table = tmp_path / "tid2pdf.txt"
    table.write_text("".join(f"{p + 1} {p}\n" for p in range(topo.num_pdfs)))
    HCLG = load_kaldi_hclg(fst_path, table)
    plain = refresh_labels_version(k2.connect(refresh_labels_version(k2.remove_epsilon(
        k2.Fsa(raw.arcs, aux_labels=raw.aux_labels)))))
    plain.labels = torch.where(plain.labels > 0, plain.labels - 1, plain.labels)
    rng = random.Random(seed)
    seqs = [t for t in sorted(case.token_sequences()) if t]
    frames = [[topo.pdf(p, s) for p in case.token_ids(t) for s in range(topo.num_states)
               for _ in range(rng.randint(1, 2))] for t in seqs]
    lost = 0
    for tokens, got, old in zip(seqs, decoded_words(frames, HCLG, case.lang.word_table),
                                decoded_words(frames, k2.arc_sort(plain), case.lang.word_table)):
        want = case.expected(tokens)
        _assert_same(got, want, f"seed {seed} tokens {tokens}")
        lost += len(set(want) - set(old))
    assert lost > 0


def test_the_check_catches_the_old_epsilon_removal(tmp_path):
    """The same check fails on icefall's recipe: it loses word sequences (homophones)."""
    lost = 0
    for seed in SEEDS:
        case = RandomCase(seed, tmp_path / str(seed))
        LG = icefall_LG(case)
        seqs = sorted(case.token_sequences())
        for tokens, got in zip(seqs, decoded_words([case.token_ids(t) for t in seqs], LG,
                                              case.lang.word_table)):
            lost += len(set(case.expected(tokens)) - set(got))
    assert lost > 0


@pytest.mark.parametrize("seed", SEEDS)
def test_reference_G_scores_match_kaldilm(seed, tmp_path):
    """The reference's best-path scores are G's (kaldilm) on every word sequence, and the
    random LMs do exercise backoff paths that beat an n-gram's own arc."""
    case = RandomCase(seed, tmp_path)
    G = build_rescoring_G(case.arpa, case.lang.word_table)  # #0 -> epsilon
    wt = case.lang.word_table
    beaten = 0
    for seq in word_sequences(case.spec.words, 3):
        got, _ = best_intersection(linear_fsa([wt.get(w) for w in seq]), G, eps=True)
        want = case.lm.best_path_logprob(seq)
        if math.isinf(want):
            assert math.isinf(got), seq
            continue
        assert got == pytest.approx(want, abs=1e-4), seq
        beaten += want > case.lm.sentence_logprob(seq) + 1e-6
    if seed in (0, 1):
        assert beaten > 0
