"""Nbest against brute-force enumeration of every path of small random lattices."""

from __future__ import annotations

import k2
import kaldialign
import pytest
import torch

from k2dec.nbest import DedupKey, Nbest
from k2dec.testing.lattices import make_lattices
from tests.reference.lattice_paths import best_by_key, enumerate_paths


def _lists(ragged: k2.RaggedTensor) -> list:
    return ragged.tolist()


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("num_utts", [1, 3])
def test_from_lattice_and_intersect_against_enumeration(tiny_hlg, device, seed, num_utts):
    lang, HLG, _ = tiny_hlg
    lattice = make_lattices(HLG, num_utts, 5, seed, device, lang.max_token_id + 1)
    before = lattice.scores.clone()
    nbest = Nbest.from_lattice(lattice, num_paths=50, nbest_scale=0.5, key="words")
    assert torch.equal(lattice.scores, before), "from_lattice must not modify the lattice"
    assert nbest.shape.dim0 == num_utts
    rescored = nbest.intersect(lattice, chunk_size=3)
    keys = nbest.key_lists()
    sampled_tot = _lists(nbest.tot_scores())
    best_tot = _lists(rescored.tot_scores())
    lm = _lists(rescored.lm_scores())
    am = _lists(rescored.am_scores())
    for u in range(num_utts):
        ref = enumerate_paths(lattice[u])
        best = best_by_key(ref, "words")
        all_scores = {round(p.score, 4) for p in ref}
        assert len(keys[u]) == len(set(map(tuple, keys[u]))), "dedup left duplicates"
        assert len(keys[u]) >= 1
        for j, key in enumerate(keys[u]):
            key = tuple(key)
            assert key in best, f"sampled a word sequence the lattice does not have: {key}"
            # before intersect: the score of one real path with that key
            assert round(sampled_tot[u][j], 4) in all_scores
            assert sampled_tot[u][j] <= best[key] + 1e-6
            # after intersect: the best path with that key
            assert best_tot[u][j] == pytest.approx(best[key], abs=1e-4)
            ref_lm = max((p for p in ref if p.words == key), key=lambda p: p.score).lm_score
            assert lm[u][j] == pytest.approx(ref_lm, abs=1e-4)
            assert am[u][j] == pytest.approx(best[key] - ref_lm, abs=1e-4)
        # with many samples the most likely word sequence is found
        assert max(best_tot[u]) == pytest.approx(max(best.values()), abs=1e-4)


def test_token_key_on_hlg_lattice(tiny_hlg, device):
    lang, HLG, _ = tiny_hlg
    lattice = make_lattices(HLG, 2, 5, 11, device, lang.max_token_id + 1)
    nbest = Nbest.from_lattice(lattice, num_paths=40, key=DedupKey.TOKENS).intersect(lattice)
    for u, (keys, tots) in enumerate(zip(nbest.key_lists(), _lists(nbest.tot_scores()))):
        best = best_by_key(enumerate_paths(lattice[u]), "tokens")
        assert len(keys) == len(set(map(tuple, keys)))
        for key, tot in zip(keys, tots):
            assert tot == pytest.approx(best[tuple(key)], abs=1e-4)


def test_token_key_on_lattice_without_aux_labels(tiny_hlg, device):
    """Transducer-style lattices: no aux_labels, key = non-blank labels."""
    lang, _, H = tiny_hlg
    lattice = make_lattices(H, 2, 4, 5, device, lang.max_token_id + 1)
    bare = k2.Fsa(lattice.arcs)  # labels + scores only
    nbest = Nbest.from_lattice(bare, num_paths=30, key="tokens").intersect(bare)
    for u, (keys, tots) in enumerate(zip(nbest.key_lists(), _lists(nbest.tot_scores()))):
        best = best_by_key(enumerate_paths(bare[u]), "tokens")
        for key, tot in zip(keys, tots):
            assert tot == pytest.approx(best[tuple(key)], abs=1e-4)
    with pytest.raises(ValueError, match="needs a lattice with aux_labels"):
        Nbest.from_lattice(bare, num_paths=3, key="words")


def test_top_k_order_and_padding(tiny_hlg, device):
    lang, HLG, _ = tiny_hlg
    lattice = make_lattices(HLG, 3, 5, 2, device, lang.max_token_id + 1)
    nbest = Nbest.from_lattice(lattice, num_paths=30).intersect(lattice)
    tots = _lists(nbest.tot_scores())
    counts = [len(t) for t in tots]
    k = max(counts) + 2
    top = nbest.top_k(k)
    assert top.nbest.shape.dim0 == 3 and top.nbest.num_paths == 3 * k
    got = _lists(top.nbest.tot_scores())
    for u in range(3):
        expected = sorted(tots[u], reverse=True)
        n = counts[u]
        assert got[u][:n] == pytest.approx(expected)
        assert got[u][n:] == pytest.approx([expected[-1]] * (k - n))
        assert top.padded[u].tolist() == [False] * n + [True] * (k - n)
    one = nbest.top_k(1)
    assert _lists(one.nbest.tot_scores()) == [[pytest.approx(max(t))] for t in tots]
    assert not one.padded.any()
    for bad in (0, -1, 1.5):
        with pytest.raises(ValueError, match="k must be"):
            nbest.top_k(bad)


def test_oracle_against_kaldialign(tiny_hlg, device):
    lang, HLG, _ = tiny_hlg
    lattice = make_lattices(HLG, 3, 6, 4, device, lang.max_token_id + 1)
    nbest = Nbest.from_lattice(lattice, num_paths=30)
    refs = [[1, 3], [5, 6, 7], []]
    best, dist = nbest.oracle(refs)
    for u, keys in enumerate(nbest.key_lists()):
        d = [kaldialign.edit_distance(refs[u], k)["total"] for k in keys]
        assert dist[u].item() == min(d)
        start = nbest.shape.row_splits(1)[u].item()
        assert best[u].item() - start == d.index(min(d))  # ties: the lowest index
    assert any(sorted(d).count(min(d)) > 1 for d in (
        [kaldialign.edit_distance(r, k)["total"] for k in keys]
        for r, keys in zip(refs, nbest.key_lists()))), "no tie: the tie rule is not checked"
    with pytest.raises(ValueError, match="need 3 references"):
        nbest.oracle(refs[:2])


def test_bad_inputs(tiny_hlg):
    lang, HLG, _ = tiny_hlg
    lattice = make_lattices(HLG, 2, 4, 0, torch.device("cpu"), lang.max_token_id + 1)
    with pytest.raises(ValueError, match="num_paths"):
        Nbest.from_lattice(lattice, num_paths=0)
    with pytest.raises(ValueError, match="nbest_scale"):
        Nbest.from_lattice(lattice, num_paths=3, nbest_scale=0.0)
    with pytest.raises(ValueError, match="FsaVec"):
        Nbest.from_lattice(lattice[0], num_paths=3)
    with pytest.raises(TypeError, match="k2.Fsa"):
        Nbest.from_lattice("lattice", num_paths=3)
    nbest = Nbest.from_lattice(lattice, num_paths=3)
    with pytest.raises(ValueError, match="lattice has 1 utterances"):
        nbest.intersect(k2.create_fsa_vec([lattice[0]]))
    bare = Nbest.from_lattice(k2.Fsa(lattice.arcs), num_paths=3, key="tokens")
    with pytest.raises(ValueError, match="no lm_scores"):
        bare.lm_scores()


def test_empty_lattice_gets_no_paths_and_top_k_says_so(tiny_hlg):
    lang, HLG, _ = tiny_hlg
    lattice = make_lattices(HLG, 2, 4, 0, torch.device("cpu"), lang.max_token_id + 1)
    # an FsaVec whose second lattice is empty (what intersect_dense_pruned gives when no
    # path survives)
    empty = k2.connect(k2.Fsa.from_str("0 0 1 0.0\n1", acceptor=True))
    assert empty.num_arcs == 0
    first = lattice[0]
    empty = k2.Fsa(empty.arcs, aux_labels=k2.RaggedTensor([[0]]).index(
        torch.zeros(0, dtype=torch.int32), axis=0)[0])
    for name in ("tokens", "lm_scores"):
        setattr(empty, name, torch.zeros(0, dtype=getattr(first, name).dtype))
    vec = k2.create_fsa_vec([first, empty])
    nbest = Nbest.from_lattice(vec, num_paths=5)
    counts = nbest.shape.row_splits(1).tolist()
    assert counts[2] - counts[1] == 0
    with pytest.raises(ValueError, match=r"utterances \[1\] have no paths"):
        nbest.top_k(2)


@pytest.mark.parametrize("log_semiring", [True, False])
def test_total_scores_in_sums_every_alignment(tiny_hlg, device, log_semiring):
    lang, HLG, _ = tiny_hlg
    lattice = make_lattices(HLG, 2, 5, 9, device, lang.max_token_id + 1)
    nbest = Nbest.from_lattice(lattice, num_paths=30)
    totals = nbest.total_scores_in(lattice, log_semiring=log_semiring, chunk_size=4).tolist()
    for u, keys in enumerate(nbest.key_lists()):
        ref = enumerate_paths(lattice[u])
        for key, got in zip(keys, totals[u]):
            scores = torch.tensor([p.score for p in ref if p.words == tuple(key)],
                                  dtype=torch.float64)
            want = torch.logsumexp(scores, 0) if log_semiring else scores.max()
            assert got == pytest.approx(want.item(), abs=1e-4)


def test_arc_budget_chunks_give_the_same_result(tiny_hlg):
    lang, HLG, _ = tiny_hlg
    lattice = make_lattices(HLG, 3, 6, 12, torch.device("cpu"), lang.max_token_id + 1)
    nbest = Nbest.from_lattice(lattice, num_paths=30)
    whole = nbest.intersect(lattice)
    tiny = nbest.intersect(lattice, max_arcs=1)  # one path per chunk
    assert torch.equal(whole.tot_scores().values, tiny.tot_scores().values)
    assert torch.allclose(nbest.total_scores_in(lattice, max_arcs=1).values,
                          nbest.total_scores_in(lattice).values)


@pytest.mark.parametrize("seed", range(3))
def test_edit_distances_match_kaldialign(device, seed):
    from k2dec.nbest import edit_distances

    g = torch.Generator().manual_seed(seed)
    refs = [[int(x) for x in torch.randint(1, 5, (int(n),), generator=g)]
            for n in torch.randint(0, 9, (5,), generator=g)] + [[], [3]]
    hyps, owner = [], []
    for _ in range(60):
        u = int(torch.randint(0, len(refs), (1,), generator=g))
        n = int(torch.randint(0, 10, (1,), generator=g))
        hyps.append([int(x) for x in torch.randint(1, 5, (n,), generator=g)])
        owner.append(u)
    hyps += [[], [1, 2, 3]]
    owner += [0, len(refs) - 2]
    got = edit_distances(k2.RaggedTensor(hyps, device=device), refs,
                         torch.tensor(owner, device=device))
    want = [kaldialign.edit_distance(refs[u], h)["total"] for h, u in zip(hyps, owner)]
    assert got.tolist() == want and got.device == device
