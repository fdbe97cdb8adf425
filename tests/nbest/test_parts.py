"""The parts :class:`~k2dec.nbest.Nbest` is made of, each on its own (no Nbest built):
chunking, keyed lattices, intersection of arbitrary key sequences, per-path scores and orders,
oracles; against brute force."""

from __future__ import annotations

import k2
import kaldialign
import pytest
import torch

from k2dec.nbest.chunking import chunks
from k2dec.nbest.intersect import best_alignments, intersect_lattice, key_total_scores
from k2dec.nbest.keys import DedupKey, keyed_lattice, paths_to_fsa, restore_labels
from k2dec.nbest.oracle import oracle_paths
from k2dec.nbest.sampling import distinct_paths, sample_paths
from k2dec.nbest.scores import arcs_per_path, path_tot_scores, ragged_sort_desc, top_k_index
from k2dec.testing.lattices import make_lattices
from tests.reference.lattice_paths import best_by_key, enumerate_paths


@pytest.mark.parametrize("seed", range(20))
def test_chunks_cover_in_order_within_both_bounds(seed):
    g = torch.Generator().manual_seed(seed)
    n = int(torch.randint(0, 30, (1,), generator=g))
    cost = torch.randint(0, 10, (n,), generator=g)
    max_count = int(torch.randint(1, 8, (1,), generator=g))
    max_cost = None if seed % 3 == 0 else int(torch.randint(1, 25, (1,), generator=g))
    got = list(chunks(cost, max_count, max_cost))
    assert [s for s, _ in got] == [0] + [e for _, e in got][:-1]
    assert (got[-1][1] if got else 0) == n
    for start, end in got:
        assert 1 <= end - start <= max_count
        total = int(cost[start:end].sum())
        if max_cost is not None and end - start > 1:
            assert total <= max_cost
        # greedy: the next item would break a bound
        if end < n and (max_cost is None or total + int(cost[end]) <= max_cost):
            assert end - start == max_count


@pytest.mark.parametrize("key", [DedupKey.WORDS, DedupKey.TOKENS])
def test_keyed_lattice_paths_restore_to_the_lattice_alignments(tiny_hlg, device, key):
    """Paths read off a keyed lattice carry the key in ``labels``; restored, they are the
    lattice's own alignments (labels, scores, tokens, lm_scores, words)."""
    lang, HLG, _ = tiny_hlg
    lattice = make_lattices(HLG, 2, 5, 7, device, lang.max_token_id + 1)
    keyed = keyed_lattice(lattice, key)
    assert not hasattr(lattice, "frame_labels"), "the lattice itself is not changed"
    sampled = sample_paths(keyed, 6, seed=3)  # [utt][path][arc] into keyed
    path_utt = sampled.shape.row_ids(1).tolist()
    paths = paths_to_fsa(keyed, sampled.remove_axis(0))
    key_seqs = k2.RaggedTensor(paths.arcs.shape().remove_axis(1),
                               paths.labels.contiguous()).remove_values_leq(0).tolist()
    restored = restore_labels(paths, key)
    assert len(path_utt) == restored.shape[0] == 12
    for p, utt in enumerate(path_utt):
        path = restored[p].to("cpu")
        labels = tuple(x for x in path.labels.tolist() if x != 0)
        aux = path.aux_labels
        aux = aux.values if isinstance(aux, k2.RaggedTensor) else aux
        words = tuple(w for w in aux.tolist() if w > 0)
        score = float(path.scores.double().sum())
        match = [r for r in enumerate_paths(lattice[utt])
                 if tuple(x for x in r.labels if x != 0) == labels and r.words == words
                 and abs(r.score - score) < 1e-4]
        assert match, f"path {p} is no alignment of utterance {utt}"
        assert tuple(key_seqs[p]) == getattr(match[0], key.value)


def _key_seqs(lattice: k2.Fsa, key: str, missing: bool) -> tuple[list, list]:
    """Every distinct key sequence of every utterance (rows, utterance of each row), plus one
    the lattice does not have when ``missing``."""
    rows, utts = [], []
    for u in range(lattice.shape[0]):
        seqs = sorted(best_by_key(enumerate_paths(lattice[u]), key))
        if missing and u == 0:
            seqs.append((1, 1, 1, 1, 1, 1, 1, 1))
        rows += [list(s) for s in seqs]
        utts += [u] * len(seqs)
    return rows, utts


def _shape(utts: list[int], num_utts: int, device) -> k2.RaggedShape:
    counts = torch.bincount(torch.tensor(utts, dtype=torch.int64), minlength=num_utts)
    splits = torch.cat([torch.zeros(1, dtype=torch.int64), counts.cumsum(0)]).to(torch.int32)
    return k2.ragged.create_ragged_shape2(row_splits=splits.to(device),
                                          cached_tot_size=len(utts))


@pytest.mark.parametrize("num_utts", [1, 3])
@pytest.mark.parametrize("key", [DedupKey.WORDS, DedupKey.TOKENS])
@pytest.mark.parametrize("trie", [True, False])
def test_best_alignments_and_totals_of_every_key_sequence(tiny_hlg, device, num_utts, key,
                                                          trie):
    lang, HLG, _ = tiny_hlg
    lattice = make_lattices(HLG, num_utts, 4, 30 + num_utts, device, lang.max_token_id + 1)
    rows, utts = _key_seqs(lattice, key.value, missing=not trie)
    key_seqs = k2.RaggedTensor(rows, dtype=torch.int32).to(device)
    shape = _shape(utts, num_utts, device)
    fsa, status = best_alignments(lattice, key, key_seqs, shape, chunk_size=5, max_arcs=300,
                                  trie=trie)
    assert fsa.shape[0] == len(rows) and status.backoffs == 0
    tot = path_tot_scores(fsa, shape).values.tolist()
    totals = key_total_scores(lattice, key, key_seqs, shape, log_semiring=True,
                              chunk_size=4).tolist()
    for p, (seq, u) in enumerate(zip(rows, utts)):
        ref = [r for r in enumerate_paths(lattice[u]) if getattr(r, key.value) == tuple(seq)]
        if not ref:
            assert tot[p] == float("-inf") and arcs_per_path(fsa)[p] == 0
            continue
        assert tot[p] == pytest.approx(max(r.score for r in ref), abs=1e-4)
        want = torch.logsumexp(torch.tensor([r.score for r in ref], dtype=torch.float64), 0)
        assert totals[p] == pytest.approx(want.item(), abs=1e-4)


def test_an_utterance_without_paths_is_intersected_with_the_others(tiny_hlg):
    lang, HLG, _ = tiny_hlg
    lattice = make_lattices(HLG, 3, 4, 5, torch.device("cpu"), lang.max_token_id + 1)
    rows, utts = _key_seqs(lattice, "words", missing=False)
    keep = [i for i, u in enumerate(utts) if u != 1]
    rows, utts = [rows[i] for i in keep], [utts[i] for i in keep]
    shape = _shape(utts, 3, torch.device("cpu"))
    key_seqs = k2.RaggedTensor(rows, dtype=torch.int32)
    for trie in (True, False):
        fsa, _ = best_alignments(lattice, DedupKey.WORDS, key_seqs, shape, trie=trie)
        tot = path_tot_scores(fsa, shape)
        assert tot.tolist()[1] == []
        assert len(tot.tolist()[2]) == utts.count(2)


def test_intersect_lattice_says_what_is_wrong(tiny_hlg):
    lang, HLG, _ = tiny_hlg
    lattice = make_lattices(HLG, 2, 4, 0, torch.device("cpu"), lang.max_token_id + 1)
    assert intersect_lattice(None, lattice, 2) is lattice
    with pytest.raises(ValueError, match="does not keep the one it was sampled from"):
        intersect_lattice(None, None, 2)
    with pytest.raises(ValueError, match="lattice has 2 utterances, the n-best has 3"):
        intersect_lattice(lattice, None, 3)
    with pytest.raises(TypeError, match="k2.Fsa"):
        intersect_lattice("lattice", None, 2)
    empty = _shape([], 2, torch.device("cpu"))
    with pytest.raises(ValueError, match="no paths to intersect"):
        best_alignments(lattice, DedupKey.WORDS, k2.RaggedTensor([[]] * 0, dtype=torch.int32),
                        empty)


@pytest.mark.parametrize("seed", range(10))
def test_top_k_index_and_sort_against_python(device, seed):
    g = torch.Generator().manual_seed(seed)
    counts = torch.randint(1, 6, (int(torch.randint(1, 5, (1,), generator=g)),), generator=g)
    values = torch.randint(0, 4, (int(counts.sum()),), generator=g).to(torch.float64)  # ties
    shape = _shape(torch.repeat_interleave(torch.arange(len(counts)), counts).tolist(),
                   len(counts), device)
    scores = k2.RaggedTensor(shape, values.to(device))
    k = int(torch.randint(1, 7, (1,), generator=g))
    index, padded = top_k_index(scores, k)
    order = ragged_sort_desc(scores).tolist()
    start = 0
    for u, n in enumerate(counts.tolist()):
        want = sorted(range(start, start + n), key=lambda i: -values[i].item())  # stable
        assert order[start:start + n] == want
        assert index[u].tolist() == (want + [want[-1]] * k)[:k]
        assert padded[u].tolist() == [r >= n for r in range(k)]
        start += n
    assert index.device == device and padded.device == device


def test_top_k_index_rejects_bad_k_and_empty_utterances():
    scores = k2.RaggedTensor([[1.0, 2.0], []], dtype=torch.float64)
    with pytest.raises(ValueError, match=r"utterances \[1\] have no paths"):
        top_k_index(scores, 2)
    for bad in (0, -1, 1.5):
        with pytest.raises(ValueError, match="k must be"):
            top_k_index(scores, bad)


def test_path_tot_scores_of_an_empty_path_is_minus_inf():
    first, last = k2.linear_fsa([1, 2]), k2.linear_fsa([3])
    first.scores = torch.tensor([0.5, 0.25, 0.125])
    last.scores = torch.tensor([1.0, 2.0])
    empty = k2.connect(k2.Fsa.from_str("0 0 1 0.0\n1"))
    fsa = k2.create_fsa_vec([first, empty, last])
    shape = _shape([0, 0, 1], 2, torch.device("cpu"))
    assert path_tot_scores(fsa, shape).tolist() == [[0.875, float("-inf")], [3.0]]


@pytest.mark.parametrize("tie_break", ["first", "last"])
def test_oracle_paths_against_kaldialign(device, tie_break):
    g = torch.Generator().manual_seed(4)
    rows = [[int(x) for x in torch.randint(1, 4, (int(n),), generator=g)]
            for n in torch.randint(0, 6, (25,), generator=g)]
    utts = sorted(int(u) for u in torch.randint(0, 4, (25,), generator=g) if int(u) != 2)
    rows = rows[:len(utts)]
    refs = [[1, 2, 3], [2, 2], [1], []]
    best, dist = oracle_paths(k2.RaggedTensor(rows, dtype=torch.int32).to(device),
                              _shape(utts, 4, device), refs, tie_break)
    assert best[2].item() == -1 and dist[2].item() == -1  # no paths
    for u in (0, 1, 3):
        mine = [i for i, w in enumerate(utts) if w == u]
        d = {i: kaldialign.edit_distance(refs[u], rows[i])["total"] for i in mine}
        assert dist[u].item() == min(d.values())
        assert d[best[u].item()] == min(d.values())
        if tie_break == "first":
            assert best[u].item() == min(i for i in mine if d[i] == min(d.values()))
    with pytest.raises(ValueError, match="need 4 references"):
        oracle_paths(k2.RaggedTensor(rows, dtype=torch.int32), _shape(utts, 4, "cpu"),
                     refs[:3])


def test_distinct_paths_keeps_one_per_key_sequence(tiny_hlg, device):
    lang, HLG, _ = tiny_hlg
    lattice = make_lattices(HLG, 3, 5, 8, device, lang.max_token_id + 1)
    before = lattice.scores.clone()
    fsa, shape, key_seqs = distinct_paths(lattice, DedupKey.WORDS, 40, 0.5, seed=2)
    assert torch.equal(lattice.scores, before)
    assert fsa.shape[0] == shape.tot_size(1) == key_seqs.dim0
    tot = path_tot_scores(fsa, shape).values.tolist()
    splits = shape.row_splits(1).tolist()
    seqs = [tuple(s) for s in key_seqs.tolist()]
    for u in range(3):
        ref = enumerate_paths(lattice[u])
        mine = range(splits[u], splits[u + 1])
        assert len({seqs[p] for p in mine}) == len(mine) >= 1
        for p in mine:
            assert any(r.words == seqs[p] and abs(r.score - tot[p]) < 1e-4 for r in ref)
