"""Result files checked line by line against hand-written icefall-format expectations."""

import io

import pytest

from k2dec.results import save_results, write_error_stats, write_recogs, write_wer_summary

from .results_sample import RESULTS

ERRS = """\
%WER = 57.14
Errors: 1 insertions, 2 deletions, 1 substitutions, over 7 reference words (4 correct)
Search below for sections starting with PER-UTT DETAILS:, SUBSTITUTIONS:, DELETIONS:, \
INSERTIONS:, PER-WORD STATS:

PER-UTT DETAILS: corr or (ref->hyp)  
a:\tA (B->X) C D (*->E)
b:\tA (B C->*)
c:\t

SUBSTITUTIONS: count ref -> hyp
1   B -> X

DELETIONS: count ref
1   C
1   B

INSERTIONS: count hyp
1   E

PER-WORD STATS: word  corr tot_errs count_in_ref count_in_hyp
B   0 2 2 0
X   0 1 0 1
E   0 1 0 1
C   1 1 2 1
D   1 0 1 1
A   2 0 2 2
"""  # noqa: W291 (icefall's header line ends with two spaces)


def test_write_error_stats():
    f = io.StringIO()
    wer = write_error_stats(f, "test", RESULTS)
    assert wer == 57.14
    assert f.getvalue().splitlines() == ERRS.splitlines()


def test_write_recogs_sorted_by_cut_id(tmp_path):
    path = tmp_path / "r.txt"
    write_recogs(path, [("b", ["DON'T"], []), ("a", ("A", "B"), ["A"])])
    assert path.read_text().splitlines() == [
        "a:\tref=['A', 'B']",
        "a:\thyp=['A']",
        "b:\tref=[\"DON'T\"]",
        "b:\thyp=[]",
    ]


def test_write_wer_summary(tmp_path):
    path = tmp_path / "s.txt"
    # the given order (a method's configured setting first), never sorted by WER
    write_wer_summary(path, {"greedy": 5.0, "beam_8": 4.25, "beam_4": 4.25})
    assert path.read_text() == ("settings\tWER\tfailed cuts\ngreedy\t5.0\t0\n"
                                "beam_8\t4.25\t0\nbeam_4\t4.25\t0\n")
    write_wer_summary(path, {"b": 7.5, "a": 1.0}, num_failed=2, num_cuts=30)
    assert path.read_text() == "settings\tWER\tfailed cuts\nb\t7.5\t2 of 30\na\t1.0\t2 of 30\n"


def test_failed_cuts_are_counted_beside_the_wer(tmp_path):
    wers = save_results(tmp_path, "t", {"k": RESULTS}, failed=["zz", "aa"])
    summary = (tmp_path / "wer-summary-t.txt").read_text().splitlines()
    assert summary == ["settings\tWER\tfailed cuts", f"k\t{wers['k']}\t2 of {len(RESULTS) + 2}"]
    errs = (tmp_path / "errs-t-k.txt").read_text().splitlines()
    assert errs[2] == f"Failed cuts, not in the WER: 2 of {len(RESULTS) + 2} (aa, zz)"


def test_save_results(tmp_path):
    perfect = [(c, r, list(r)) for c, r, _ in RESULTS]
    wers = save_results(tmp_path, "test-clean", {"greedy_search": RESULTS[::-1],
                                                 "oracle": perfect}, suffix="epoch-1")
    assert wers == {"greedy_search": 57.14, "oracle": 0.0}
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "errs-test-clean-greedy_search-epoch-1.txt",
        "errs-test-clean-oracle-epoch-1.txt",
        "recogs-test-clean-greedy_search-epoch-1.txt",
        "recogs-test-clean-oracle-epoch-1.txt",
        "wer-summary-test-clean-epoch-1.txt",
    ]
    # Results are sorted by cut id before writing, whatever order they came in.
    errs = (tmp_path / "errs-test-clean-greedy_search-epoch-1.txt").read_text()
    assert errs.splitlines() == ERRS.splitlines()
    assert (tmp_path / "wer-summary-test-clean-epoch-1.txt").read_text().splitlines() == [
        "settings\tWER\tfailed cuts", "greedy_search\t57.14\t0 of 3", "oracle\t0.0\t0 of 3"]
    recogs = (tmp_path / "recogs-test-clean-greedy_search-epoch-1.txt").read_text().splitlines()
    assert recogs[:2] == ["a:\tref=['A', 'B', 'C', 'D']", "a:\thyp=['A', 'X', 'C', 'D', 'E']"]
    assert len(recogs) == 6
    save_results(tmp_path / "plain", "dev", {"k": RESULTS})
    assert (tmp_path / "plain" / "wer-summary-dev.txt").is_file()
    assert (tmp_path / "plain" / "recogs-dev-k.txt").is_file()


def test_save_results_bad_names(tmp_path):
    with pytest.raises(ValueError, match="test_set 'a/b' cannot be part of a file name"):
        save_results(tmp_path, "a/b", {"k": RESULTS})
    with pytest.raises(ValueError, match="key must not be empty"):
        save_results(tmp_path, "t", {"": RESULTS})
    with pytest.raises(ValueError, match="results is empty"):
        save_results(tmp_path, "t", {})
