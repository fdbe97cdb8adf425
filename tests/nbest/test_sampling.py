"""sample_paths: valid paths drawn with the lattice's path posteriors (against brute-force
enumeration), a function of each FSA alone (any batch composition or order), and stable under
the tiny score changes another batch composition gives upstream (where k2.random_paths is
not)."""

from __future__ import annotations

import collections
import math

import k2
import pytest
import torch

from k2dec.nbest import Nbest, sample_paths
from k2dec.nbest.sampling import uniform_hash
from k2dec.testing.lattices import make_lattices
from tests.reference.lattice_paths import enumerate_paths


def _per_fsa(fsas: k2.Fsa, paths: k2.RaggedTensor) -> list[list[tuple[int, ...]]]:
    """Sampled paths as arc indexes within their own FSA: ``[fsa][path] -> arcs``."""
    shape = fsas.arcs.shape()
    first_arc = shape.row_splits(2)[shape.row_splits(1).to(torch.int64)].tolist()
    return [[tuple(a - first_arc[i] for a in p) for p in utt]
            for i, utt in enumerate(paths.tolist())]


def test_uniform_hash_is_uniform_and_a_function_of_its_arguments():
    path = torch.arange(200_000)
    u = uniform_hash(7, path, torch.full_like(path, 3))
    assert u.dtype == torch.float64 and bool((u >= 0).all()) and bool((u < 1).all())
    assert abs(float(u.mean()) - 0.5) < 0.005
    hist = torch.histc(u.float(), bins=10, min=0, max=1) / u.numel()
    assert float((hist - 0.1).abs().max()) < 0.005
    again = uniform_hash(7, path.flip(0), torch.full_like(path, 3))
    assert torch.equal(again, u.flip(0))
    assert not torch.equal(uniform_hash(8, path, torch.full_like(path, 3)), u)
    assert not torch.equal(uniform_hash(7, path, torch.full_like(path, 4)), u)


@pytest.mark.parametrize("seed", range(3))
def test_paths_are_valid_and_drawn_with_their_posteriors(tiny_hlg, device, seed):
    lang, HLG, _ = tiny_hlg
    lattice = make_lattices(HLG, 3, 4, seed, device, lang.max_token_id + 1)
    num_paths = 4000
    paths = sample_paths(lattice, num_paths, seed=seed)
    assert paths.dtype == torch.int32 and paths.num_axes == 3
    assert paths.dim0 == 3
    arcs = lattice.arcs.values()[:, :2].tolist()
    for u, sampled in enumerate(_per_fsa(lattice, paths)):
        ref = enumerate_paths(lattice[u])
        assert len(sampled) == num_paths
        utt_arcs = lattice[u].arcs.values()[:, :2].tolist()
        final = lattice[u].shape[0] - 1
        for p in sampled[:50]:
            state = 0
            for a in p:  # each arc leaves the state the previous one entered
                assert utt_arcs[a][0] == state
                state = utt_arcs[a][1]
            assert state == final
        tot = torch.logsumexp(torch.tensor([r.score for r in ref], dtype=torch.float64), 0)
        expected = {r.arcs: math.exp(r.score - float(tot)) for r in ref}
        counts = collections.Counter(sampled)
        assert set(counts) <= set(expected)
        tv = 0.5 * sum(abs(counts.get(p, 0) / num_paths - q) for p, q in expected.items())
        # E|freq - q| <= sqrt(q (1 - q) / n) for independent draws: allow 1.5 times that
        noise = 0.5 * sum(math.sqrt(q * (1 - q) / num_paths) for q in expected.values())
        assert tv < 1.5 * noise, f"utterance {u}: total variation {tv:.3f} (noise {noise:.3f})"
        # and the paths' mean log-posterior matches its expectation
        mean_lp = sum(math.log(expected[p]) for p in sampled) / num_paths
        want = sum(q * math.log(q) for q in expected.values() if q > 0)
        assert mean_lp == pytest.approx(want, abs=0.15)
    assert len(arcs) == lattice.num_arcs


def test_samples_do_not_depend_on_the_batch(tiny_hlg, device):
    lang, HLG, _ = tiny_hlg
    lattice = make_lattices(HLG, 5, 6, 3, device, lang.max_token_id + 1)
    fsas = [lattice[i] for i in range(5)]
    whole = _per_fsa(lattice, sample_paths(lattice, 25))
    order = [3, 0, 4, 2, 1]
    shuffled = k2.create_fsa_vec([fsas[i] for i in order])
    again = _per_fsa(shuffled, sample_paths(shuffled, 25))
    for j, i in enumerate(order):
        assert again[j] == whole[i]
    for i in range(5):
        alone = k2.create_fsa_vec([fsas[i]])
        assert _per_fsa(alone, sample_paths(alone, 25))[0] == whole[i]
    assert _per_fsa(lattice, sample_paths(lattice, 25, seed=1)) != whole


def test_samples_survive_tiny_score_changes(tiny_hlg, device):
    """Another batch composition changes a transducer lattice's scores by ~1e-6: the paths
    drawn must stay (almost all) the same. k2.random_paths rescales one number through the
    whole path and changes most of them on long lattices."""
    lang, HLG, _ = tiny_hlg
    lattice = make_lattices(HLG, 4, 30, 5, device, lang.max_token_id + 1, scale=1.0)
    g = torch.Generator().manual_seed(0)
    noisy = lattice.clone()
    noisy.scores = lattice.scores + (torch.rand(lattice.num_arcs, generator=g) - 0.5).to(
        lattice.device) * 2e-6
    ours = sample_paths(lattice, 50).tolist(), sample_paths(noisy, 50).tolist()
    theirs = (k2.random_paths(lattice, True, 50).tolist(),
              k2.random_paths(noisy, True, 50).tolist())

    def changed(a, b) -> float:
        pairs = [(p, q) for ua, ub in zip(a, b) for p, q in zip(ua, ub)]
        return sum(p != q for p, q in pairs) / len(pairs)

    assert changed(*ours) <= 0.02
    assert changed(*theirs) > 0.2  # the failure the sampler exists for


def test_empty_and_impossible_lattices_get_no_paths(tiny_hlg, device):
    lang, HLG, _ = tiny_hlg
    lattice = k2.Fsa(make_lattices(HLG, 2, 4, 1, device, lang.max_token_id + 1).arcs)
    dead = k2.Fsa.from_str("0 1 1 0.5\n1 2 -1 0\n2")
    dead.scores = torch.tensor([float("-inf"), 0.0])
    other = k2.Fsa.from_str("0 1 2 0.5\n1 2 -1 0\n2")
    # k2.intersect with epsilons treated specially runs on CPU only
    empty = k2.connect(k2.intersect(k2.create_fsa_vec([dead]), k2.create_fsa_vec([other])))[0]
    dead, empty = dead.to(device), empty.to(device)
    assert empty.shape[0] == 0
    vec = k2.create_fsa_vec([lattice[0], empty, dead, lattice[1]])
    paths = sample_paths(vec, 3)
    counts = [len(p) for p in paths.tolist()]
    assert counts == [3, 0, 0, 3]
    nothing = sample_paths(k2.create_fsa_vec([empty]), 2)
    assert nothing.tolist() == [[]]
    one = sample_paths(k2.create_fsa_vec([lattice[0]]), 1)
    assert len(one.tolist()[0]) == 1
    with pytest.raises(ValueError, match="num_paths must be an int >= 1"):
        sample_paths(vec, 0)
    with pytest.raises(ValueError, match="FsaVec"):
        sample_paths(lattice[0], 2)


def test_nbest_does_not_depend_on_the_batch(tiny_hlg, device):
    lang, HLG, _ = tiny_hlg
    lattice = make_lattices(HLG, 4, 8, 9, device, lang.max_token_id + 1)
    whole = Nbest.from_lattice(lattice, 40).intersect(lattice)
    keys, tots = whole.key_lists(), whole.tot_scores().tolist()
    for i in range(4):
        alone = k2.create_fsa_vec([lattice[i]])
        nb = Nbest.from_lattice(alone, 40).intersect(alone, chunk_size=3)
        assert nb.key_lists()[0] == keys[i]
        assert nb.tot_scores().tolist()[0] == pytest.approx(tots[i], abs=1e-9)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("num_paths", [1, 7, 40])
def test_sample_paths_equals_the_per_path_reference(tiny_hlg, device, seed, num_paths):
    from tests.reference.sampling import sample_paths_reference

    lang, HLG, _ = tiny_hlg
    lattice = make_lattices(HLG, 3, 7, seed + 10, device, lang.max_token_id + 1)
    got = _per_fsa(lattice, sample_paths(lattice, num_paths, seed=seed))
    for u in range(3):
        want = sample_paths_reference(lattice[u], num_paths, seed=seed)
        assert [list(p) for p in got[u]] == want


@pytest.mark.parametrize("seed", range(3))
def test_k2_sampler_draws_exactly_k2_random_paths(tiny_hlg, device, seed):
    """``sampler="k2"`` (icefall's sampler, the icefall-compatibility switch) keeps exactly
    the distinct word sequences of ``k2.random_paths`` on the same scaled lattice."""
    lang, HLG, _ = tiny_hlg
    lattice = make_lattices(HLG, 3, 4, seed, device, lang.max_token_id + 1)
    nbest = Nbest.from_lattice(lattice, 20, 0.5, sampler="k2")
    keyed = k2.invert(lattice.clone())  # labels = words, as from_lattice samples them
    scaled = keyed.clone()
    scaled.scores = keyed.scores * 0.5
    paths = k2.random_paths(scaled, use_double_scores=True, num_paths=20)
    words = k2.ragged.index(keyed.labels.contiguous(), paths).remove_values_leq(0)
    expected = [sorted(set(tuple(w) for w in utt)) for utt in words.tolist()]
    got = [[] for _ in range(nbest.num_utts)]
    for utt, seq in zip(nbest.path_to_utt().tolist(), nbest.key_seqs.tolist()):
        got[utt].append(tuple(seq))
    assert [sorted(g) for g in got] == expected
    with pytest.raises(ValueError, match="sampler"):
        Nbest.from_lattice(lattice, 20, 0.5, sampler="uniform")


def test_k2_random_paths_gives_no_paths_where_there_is_none():
    """icefall's sampler (k2.random_paths) aborts on an FSA without arcs (an utterance with
    no frames) or without a successful path; those get no paths, the others k2's own."""
    from k2dec.nbest.sampling import k2_random_paths

    lats = make_lattices(k2.ctc_topo(3), 3, 6, seed=5, device=torch.device("cpu"), vocab=4)
    one_state = k2.Fsa.from_str("0\n")
    dead = k2.Fsa.from_str("0 1 2 0\n1 2 -1 0\n2")
    dead.scores = torch.tensor([float("-inf"), 0.0])
    pieces = [k2.index_fsa(lats, torch.tensor([i], dtype=torch.int32)) for i in range(3)]
    mixed = k2.cat([pieces[0], k2.create_fsa_vec([one_state]), pieces[1],
                    k2.create_fsa_vec([dead]), pieces[2]])
    got = _per_fsa(mixed, k2_random_paths(mixed, 5))
    want = _per_fsa(lats, k2.random_paths(lats, use_double_scores=True, num_paths=5))
    assert got == [want[0], [], want[1], [], want[2]]
    assert _per_fsa(lats, k2_random_paths(lats, 5)) == want
    empty = k2.create_fsa_vec([one_state, dead])
    assert k2_random_paths(empty, 5).tolist() == [[], []]
