"""minimize_graph: a minimized graph has the same paths (labels, words, tokens, scores) as its
input, so decoding gives the same best paths; it merges states with the same future only."""

from __future__ import annotations

import random

import k2
import numpy as np
import pytest
import torch

from k2dec.graph import build_ctc_topo, compile_HLG, compile_LG, minimize_graph
from k2dec.lattice import LatticeConfig, one_best_decoding
from k2dec.testing.graphs import peaked_log_probs
from tests.graph.random_lang import RandomCase, ctc_realisations, decoded_words

SEEDS = (0, 1, 5, 8, 12, 14, 16, 31)  # 7 of them with states to merge
#: a search wide enough to keep every path of these tiny graphs (the best path is exact)
WIDE = LatticeConfig(search_beam=50.0, output_beam=50.0, max_active_states=100000,
                     min_active_states=1, retry_scales=())


def _two_tails(second_score: float) -> k2.Fsa:
    """Two words ending in the same token tail: the tails merge when their scores agree."""
    s = f"""
    0 1 1 [10] -1.0
    0 2 2 [20] -2.0
    1 3 3 [] -0.5
    2 4 3 [] {second_score}
    3 5 4 [] 0.0
    4 5 4 [] 0.0
    5 6 -1 [] 0.0
    6
    """
    lines = []
    for line in s.strip().splitlines():
        f = line.split()
        if len(f) == 1:
            lines.append(f[0])
            continue
        lines.append(" ".join([f[0], f[1], f[2], f[4]]))
    fsa = k2.Fsa.from_str("\n".join(lines))
    aux = [[int(x) for x in line.split()[3].strip("[]").split(",") if x]
           for line in s.strip().splitlines() if len(line.split()) > 1]
    fsa.aux_labels = k2.RaggedTensor(aux)
    fsa.tokens = fsa.labels.clone()
    return fsa


def test_merges_equal_tails_and_keeps_different_ones():
    merged = minimize_graph(_two_tails(-0.5))
    # 3 and 4 have the same future, then so do 1 and 2: 7 -> 5 states and arcs
    assert (merged.shape[0], merged.num_arcs) == (5, 5)
    kept = minimize_graph(_two_tails(-0.25))  # 1 and 2 now differ in a score: only 3/4 merge
    assert (kept.shape[0], kept.num_arcs) == (6, 6)
    for g in (merged, kept):
        assert isinstance(g.aux_labels, k2.RaggedTensor)
        assert torch.equal(g.tokens, g.labels)


def test_merged_graph_keeps_every_path():
    for score in (-0.5, -0.25):
        fsa = _two_tails(score)
        small = minimize_graph(fsa)
        assert k2.is_rand_equivalent(fsa, small, log_semiring=False,
                                     treat_epsilons_specially=False)
        for frames in ([1, 3, 4], [2, 3, 4], [1, 4], [2, 3]):
            assert decoded_words([frames], small, _ids()) == decoded_words([frames], fsa, _ids())


def _ids() -> k2.SymbolTable:
    t = k2.SymbolTable()
    for i in (10, 20):
        t.add(f"w{i}", i)
    return t


def _graphs(seed: int, tmp_path) -> tuple[RandomCase, k2.Fsa, k2.Fsa, k2.Fsa, k2.Fsa]:
    case = RandomCase(seed, tmp_path)
    H = build_ctc_topo(case.lang.max_token_id)
    HLG = compile_HLG(H, case.L, case.G, *case.ids)
    LG = compile_LG(case.L, case.G, *case.ids)
    return case, HLG, minimize_graph(HLG), LG, minimize_graph(LG)


@pytest.mark.parametrize("seed", SEEDS)
def test_minimized_graphs_output_the_same_word_sequences(seed, tmp_path):
    """Every word sequence of every CTC frame sequence (and, for LG, token sequence) that
    spells up to 3 words, with its best score, over all paths (no pruning)."""
    case, HLG, HLG_min, LG, LG_min = _graphs(seed, tmp_path)
    assert HLG_min.shape[0] <= HLG.shape[0] and HLG_min.num_arcs <= HLG.num_arcs
    assert LG_min.shape[0] <= LG.shape[0] and LG_min.num_arcs <= LG.num_arcs
    rng = random.Random(seed)
    wt = case.lang.word_table
    for tokens in sorted(case.token_sequences())[:40]:
        ids = case.token_ids(tokens)
        frames = ctc_realisations(ids, rng, exhaustive_up_to=1)
        for got, want in zip(decoded_words(frames, HLG_min, wt), decoded_words(frames, HLG, wt)):
            assert got.keys() == want.keys(), (seed, tokens)
            for words, score in want.items():
                assert got[words] == pytest.approx(score, abs=1e-4)
        if ids:
            [got], [want] = decoded_words([ids], LG_min, wt), decoded_words([ids], LG, wt)
            assert got == pytest.approx(want, abs=1e-4), (seed, tokens)


def test_random_cases_have_states_to_merge(tmp_path):
    """The equivalence tests above see merges (else they would test nothing)."""
    merged = 0
    for seed in SEEDS:
        _, HLG, HLG_min, _, _ = _graphs(seed, tmp_path / str(seed))
        merged += HLG_min.shape[0] < HLG.shape[0]
    assert merged == len(SEEDS) - 1


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("lengths", [[1], [7], [9, 1, 4], [1, 1]])
def test_minimized_hlg_gives_the_same_one_best(seed, lengths, tmp_path):
    """1best on random log-probs (batch 1 and > 1, length-1 utterances): the same words,
    tokens and score."""
    case, HLG, HLG_min, _, _ = _graphs(seed, tmp_path)
    rng = np.random.default_rng(seed)
    vocab = case.lang.max_token_id + 1
    log_probs = peaked_log_probs(rng, len(lengths), max(lengths), vocab, scale=2.0)
    lens = torch.tensor(lengths, dtype=torch.int64)
    want = one_best_decoding(log_probs, lens, HLG, WIDE)
    got = one_best_decoding(log_probs, lens, HLG_min, WIDE)
    for g, w in zip(got, want):
        assert g.status == w.status
        assert g.words == w.words and g.tokens == w.tokens
        assert g.score == pytest.approx(w.score, abs=1e-4)


def test_empty_dead_and_bad_inputs():
    empty = k2.Fsa.from_str("")
    assert minimize_graph(empty).num_arcs == 0
    dead = k2.Fsa.from_str("0 1 1 0.5\n0 2 2 0.0\n1 3 -1 0.0\n3")  # state 2: a dead end
    small = minimize_graph(dead)
    assert (small.shape[0], small.num_arcs) == (3, 2)
    assert k2.is_rand_equivalent(dead, small, log_semiring=False)
    with pytest.raises(TypeError, match="fsa"):
        minimize_graph("HLG.pt")
    vec = k2.create_fsa_vec([_two_tails(-0.5)])
    with pytest.raises(ValueError, match="fsa"):
        minimize_graph(vec)


def test_compile_options_minimize(tiny_lang, tmp_path):
    """compile_HLG / compile_LG / compile_graph(minimize=True) (and ``k2dec compile-graph
    --minimize``) give the minimized graph, recorded in its metadata."""
    from click.testing import CliRunner

    from k2dec.cli import main
    from k2dec.graph import compile_graph, load_graph

    lang, arpa = tiny_lang
    for kind in ("HLG", "LG", "HL"):
        plain, _ = compile_graph(lang.path, kind, arpa=arpa, out=tmp_path / f"{kind}.pt")
        small, path = compile_graph(lang.path, kind, arpa=arpa, minimize=True,
                                    out=tmp_path / f"{kind}-min.pt")
        want = minimize_graph(plain)
        assert (small.shape[0], small.num_arcs) == (want.shape[0], want.num_arcs)
        assert torch.equal(small.arcs.values(), want.arcs.values())
        assert load_graph(path, kind=kind).k2dec_meta["minimized"] is True
        r = CliRunner().invoke(main, ["compile-graph", "--lang-dir", str(lang.path), "--type",
                                      kind, "--arpa", str(arpa), "--minimize", "--out",
                                      str(tmp_path / f"{kind}-cli.pt")])
        assert r.exit_code == 0, r.output
        cli = load_graph(tmp_path / f"{kind}-cli.pt", lang.token_table, lang.word_table)
        assert torch.equal(cli.arcs.values(), want.arcs.values())
        assert cli.k2dec_meta["minimized"] is True
    with pytest.raises(ValueError, match="minimize"):
        compile_graph(lang.path, "H", minimize=True, out=tmp_path / "H.pt")


@pytest.mark.parametrize("seed", SEEDS[:3])
def test_compile_functions_minimize(seed, tmp_path):
    case = RandomCase(seed, tmp_path)
    H = build_ctc_topo(case.lang.max_token_id)
    for got, want in (
        (compile_HLG(H, case.L, case.G, *case.ids, minimize=True),
         minimize_graph(compile_HLG(H, case.L, case.G, *case.ids))),
        (compile_LG(case.L, case.G, *case.ids, minimize=True),
         minimize_graph(compile_LG(case.L, case.G, *case.ids))),
    ):
        assert torch.equal(got.arcs.values(), want.arcs.values())


@pytest.mark.parametrize("seed", SEEDS[:4])
def test_minimized_hlg_on_blank_and_empty_inputs(seed, tmp_path):
    """All-blank frames (no words: the empty hypothesis) give the same score; an empty batch
    is refused the same way for both graphs."""
    case, HLG, HLG_min, _, _ = _graphs(seed, tmp_path)
    vocab = case.lang.max_token_id + 1
    log_probs = torch.full((2, 5, vocab), -8.0)
    log_probs[:, :, 0] = -0.01
    lens = torch.tensor([5, 1])
    want = one_best_decoding(log_probs, lens, HLG, WIDE)
    got = one_best_decoding(log_probs, lens, HLG_min, WIDE)
    for g, w in zip(got, want):
        assert g.words == w.words == ()
        assert g.score == pytest.approx(w.score, abs=1e-4)
    for graph in (HLG, HLG_min):
        with pytest.raises(ValueError, match="non-empty"):
            one_best_decoding(log_probs[:0], lens[:0], graph, WIDE)
