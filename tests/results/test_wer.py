import random

import kaldialign
import pytest

from k2dec.results import ALIGN_MAX_CELLS, EPS, align_words, combine_error_runs, compute_wer
from tests.results.results_sample import RESULTS


def test_align_words_hand_worked():
    assert align_words(["A", "B", "C", "D"], ["A", "X", "C", "D", "E"]) == [
        ("A", "A"), ("B", "X"), ("C", "C"), ("D", "D"), (EPS, "E")]
    assert align_words(["A", "B", "C"], ["A"]) == [("A", "A"), ("B", EPS), ("C", EPS)]
    assert align_words([], ["A"]) == [(EPS, "A")]
    assert align_words([], []) == []


def test_compute_wer_hand_worked():
    s = compute_wer(RESULTS)
    assert (s.num_ref_words, s.num_corr, s.num_sub, s.num_ins, s.num_del) == (7, 4, 1, 1, 2)
    assert s.num_errors == 4
    assert s.wer == pytest.approx(400 / 7)
    assert dict(s.subs) == {("B", "X"): 1}
    assert dict(s.dels) == {"B": 1, "C": 1}
    assert dict(s.ins) == {"E": 1}
    assert s.words == {"A": [2, 0, 0, 0, 0], "B": [0, 1, 0, 0, 1], "X": [0, 0, 1, 0, 0],
                       "C": [1, 0, 0, 0, 1], "D": [1, 0, 0, 0, 0], "E": [0, 0, 0, 1, 0]}


def test_combine_error_runs():
    ali = [("A", "A"), ("B", "X"), (EPS, "Y"), ("C", "C"), ("D", EPS), ("E", EPS)]
    assert combine_error_runs(ali) == [("A", "A"), ("B", "X Y"), ("C", "C"), ("D E", EPS)]
    assert combine_error_runs([(EPS, "Y")]) == [(EPS, "Y")]
    assert combine_error_runs([("A", "A")]) == [("A", "A")]
    assert combine_error_runs([]) == []


@pytest.mark.parametrize("seed", range(5))
def test_totals_agree_with_kaldialign_edit_distance(seed):
    rng = random.Random(seed)
    vocab = ["A", "B", "C", "D"]
    results = []
    ref_len = errors = 0
    for i in range(30):
        ref = [rng.choice(vocab) for _ in range(rng.randint(1, 8))]
        hyp = [rng.choice(vocab) for _ in range(rng.randint(0, 8))]
        results.append((f"u{i}", ref, hyp))
        d = kaldialign.edit_distance(ref, hyp)
        ref_len += d["ref_len"]
        errors += d["total"]
    s = compute_wer(results)
    assert s.num_ref_words == ref_len and s.num_errors == errors
    assert s.num_corr + s.num_sub + s.num_del == ref_len
    assert s.num_corr + s.num_sub + s.num_ins == sum(len(h) for _, _, h in results)
    assert sum(v[0] for v in s.words.values()) == s.num_corr


def test_wer_bad_inputs():
    with pytest.raises(ValueError, match="results is empty"):
        compute_wer([])
    with pytest.raises(ValueError, match="no reference words"):
        compute_wer([("a", [], ["X"])])
    with pytest.raises(ValueError, match="twice"):
        compute_wer([("a", ["A"], ["A"]), ("a", ["B"], ["B"])])
    with pytest.raises(TypeError, match="ref must be a sequence of words"):
        align_words("A B", ["A"])
    with pytest.raises(TypeError, match="hyp must hold str words"):
        align_words(["A"], [1])
    with pytest.raises(ValueError, match="contains"):
        align_words(["A", EPS], ["A"])


@pytest.mark.parametrize("seed", range(6))
def test_blockwise_alignment_is_kaldialigns(seed):
    """Above ``max_cells`` the alignment is computed in blocks of rows: the same pairs as
    kaldialign's own on random pairs (small vocabularies: many ties), empty and length-1
    sides included, at the smallest bound, one between, and the default."""
    rng = random.Random(seed)
    vocab = ["A", "B", "C", "D", "E", "F"][: rng.choice([1, 2, 3, 6])]
    pairs = [([], []), (["A"], []), ([], ["A"]), (["A"], ["B"]), (["A"], ["A"])]
    for _ in range(150):
        pairs.append(([rng.choice(vocab) for _ in range(rng.randint(0, 30))],
                      [rng.choice(vocab) for _ in range(rng.randint(0, 30))]))
    for ref, hyp in pairs:
        want = [tuple(p) for p in kaldialign.align(ref, hyp, EPS)]
        for max_cells in (1, 40, ALIGN_MAX_CELLS):
            assert align_words(ref, hyp, max_cells=max_cells) == want, (ref, hyp, max_cells)


def test_pairs_above_the_bound_skip_kaldialigns_table(monkeypatch):
    """A pair above ``max_cells`` never reaches kaldialign (its whole table), one within
    does; the blocks keep about ``2 * sqrt(len(ref)) * len(hyp)`` cells, not the table."""
    import tracemalloc

    from k2dec.results import wer

    calls = []
    real = kaldialign.align
    monkeypatch.setattr(wer.kaldialign, "align",
                        lambda r, h, e: calls.append(len(r)) or real(r, h, e))
    rng = random.Random(0)
    ref = [rng.choice("ABCDEFGH") for _ in range(2000)]
    hyp = [w if rng.random() < 0.8 else "X" for w in ref if rng.random() < 0.95]
    align_words(ref[:10], hyp[:10], max_cells=121)
    assert calls == [10]
    tracemalloc.start()
    try:
        got = align_words(ref, hyp, max_cells=2001 * len(hyp))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert calls == [10]  # the long pair went block by block
    assert peak < 3 * 2**20  # the whole int32 table: 15 MB
    monkeypatch.setattr(wer.kaldialign, "align", real)
    assert got == align_words(ref, hyp, max_cells=ALIGN_MAX_CELLS)


@pytest.mark.parametrize("bad", [0, -1, True, 2.5, "100", None])
def test_align_words_bad_max_cells(bad):
    with pytest.raises(ValueError, match=f"max_cells must be an int >= 1, got {bad!r}"):
        align_words(["A"], ["A"], max_cells=bad)
