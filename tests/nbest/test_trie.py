"""``Nbest.intersect`` through one trie per utterance (the default) gives the alignments of the
path-by-path intersection (``trie=False``), arc for arc with every attribute; the tries hold
exactly the n-best's key sequences."""

from __future__ import annotations

import k2
import pytest
import torch

from k2dec.nbest import DedupKey, Nbest
from k2dec.nbest.trie import PATH_ATTR, build_tries
from k2dec.testing.lattices import make_lattices


def assert_same_fsas(a: k2.Fsa, b: k2.Fsa) -> None:
    assert torch.equal(a.arcs.values(), b.arcs.values())
    assert torch.equal(a.arcs.shape().row_splits(1), b.arcs.shape().row_splits(1))
    names_a = sorted(n for n, _ in a.named_tensor_attr())
    assert names_a == sorted(n for n, _ in b.named_tensor_attr())
    for name in names_a:
        x, y = getattr(a, name), getattr(b, name)
        if isinstance(x, torch.Tensor):
            assert torch.equal(x, y), name
        else:
            assert x.tolist() == y.tolist(), name


@pytest.mark.parametrize("key", [DedupKey.WORDS, DedupKey.TOKENS])
@pytest.mark.parametrize("num_utts", [1, 4])
def test_trie_equals_path_by_path(tiny_hlg, device, key, num_utts):
    lang, HLG, _ = tiny_hlg
    for seed in range(8):
        lattice = make_lattices(HLG, num_utts, 7, 50 + seed, device, lang.max_token_id + 1)
        nbest = Nbest.from_lattice(lattice, num_paths=40, nbest_scale=0.5, key=key)
        per_path = nbest.intersect(lattice, trie=False)
        # one chunk; one path per trie; tries of a few paths (an utterance's paths split)
        for max_arcs in (4_000_000, 1, 400):
            shared = nbest.intersect(lattice, max_arcs=max_arcs)
            assert_same_fsas(shared.fsa, per_path.fsa)
            assert torch.equal(shared.tot_scores().values, per_path.tot_scores().values)


def test_sequences_missing_from_the_lattice_fall_back(tiny_hlg):
    """Paths of one lattice intersected with another: some have no alignment there (empty
    FSAs, score -inf), exactly as path by path."""
    lang, HLG, _ = tiny_hlg
    cpu = torch.device("cpu")
    missing = 0
    for seed in range(6):
        a = make_lattices(HLG, 2, 6, 200 + seed, cpu, lang.max_token_id + 1)
        b = make_lattices(HLG, 2, 3, 300 + seed, cpu, lang.max_token_id + 1)
        nbest = Nbest.from_lattice(a, num_paths=30)
        shared, per_path = nbest.intersect(b), nbest.intersect(b, trie=False)
        assert_same_fsas(shared.fsa, per_path.fsa)
        missing += int(torch.isinf(per_path.tot_scores().values).sum())
    assert missing > 0


def _walk(trie: k2.Fsa, utt: int, seq: list[int]) -> int:
    """Follow ``seq`` from the root of FSA ``utt`` of ``trie``; the PATH_ATTR of the final arc
    reached (0 if none)."""
    fsa = trie[utt]
    arcs = fsa.arcs.values()[:, :3].tolist()
    path1 = getattr(fsa, PATH_ATTR).tolist()
    state = 0
    for sym in seq:
        nxt = [dst for (src, dst, lab) in arcs if src == state and lab == sym]
        assert len(nxt) <= 1, "a trie is deterministic"
        if not nxt:
            return 0
        state = nxt[0]
    finals = [p for (src, _, lab), p in zip(arcs, path1) if src == state and lab == -1]
    assert len(finals) <= 1
    return finals[0] if finals else 0


@pytest.mark.parametrize("rows, utts", [
    ([[1, 2, 3], [1, 2], [1, 4], [5], [2, 2, 2]], [0, 0, 0, 1, 1]),
    ([[7]], [2]),  # utterances 0 and 1 have no paths
    ([[3, 1], [3, 2], [3]], [0, 0, 0]),
])
def test_tries_hold_exactly_the_key_sequences(device, rows, utts):
    num_utts = max(utts) + 1
    key_seqs = k2.RaggedTensor(rows, dtype=torch.int32).to(device)
    trie = build_tries(key_seqs, torch.tensor(utts, device=device), num_utts)
    assert trie.shape[0] == num_utts
    for p, (seq, u) in enumerate(zip(rows, utts)):
        assert _walk(trie, u, seq) == p + 1
        assert _walk(trie, u, seq + [99]) == 0
    for u in range(num_utts):
        prefixes = {tuple(s[:i]) for s, w in zip(rows, utts) if w == u
                    for i in range(1, len(s) + 1)}
        assert trie[u].shape[0] == len(prefixes) + 2  # root, one state per prefix, final
        assert int((trie[u].labels > 0).sum()) == len(prefixes)
