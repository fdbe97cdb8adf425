"""A second ``k2dec demo`` into the same work dir resumes: the same table and plot, in
seconds, with the RTFs recorded when the methods decoded (issue 30: the rerun exited 2 on a
log-scaled plot of NaN RTFs and wrote a table of ``nan``)."""

from __future__ import annotations

import shutil
import time

from k2dec.demo import plot_wer_vs_rtf, run_demo
from k2dec.job import DecodeSummary

METHODS = ("ctc-greedy-search", "1best", "greedy_search", "nbest-rescoring")


def test_a_second_demo_gives_the_same_table_and_plot_in_seconds(shipped_demo, tmp_path):
    _, _, graphs, _ = shipped_demo
    work = tmp_path / "demo"
    shutil.copytree(graphs.parent, work)  # the compiled graphs and features of the session
    first = run_demo(work, methods=METHODS, max_cuts=3)
    table = (work / "RESULTS.md").read_text()
    plot = (work / "wer_vs_rtf.png").read_bytes()
    assert len(first) == 2 * len(METHODS) and "nan" not in table
    start = time.perf_counter()
    second = run_demo(work, methods=METHODS, max_cuts=3)
    seconds = time.perf_counter() - start
    assert [(r.method, r.rtf, r.wers) for r in second] == \
        [(r.method, r.rtf, r.wers) for r in first]
    assert (work / "RESULTS.md").read_text() == table
    assert (work / "wer_vs_rtf.png").read_bytes() == plot
    assert seconds < 30, f"the rerun took {seconds:.1f} s"


def test_the_plot_leaves_out_rows_without_a_wer_or_an_rtf(tmp_path):
    rows = [DecodeSummary("a", "test-clean", {"a": 10.0}, float("nan"), 3, [], tmp_path),
            DecodeSummary("b", "test-clean", {}, 0.5, 3, ["x"], tmp_path),
            DecodeSummary("c", "test-other", {"c": 20.0}, 0.0, 3, [], tmp_path)]
    assert plot_wer_vs_rtf(rows, tmp_path / "none.png").is_file()
    rows.append(DecodeSummary("d", "test-other", {"d": 5.0}, 0.01, 3, [], tmp_path))
    assert plot_wer_vs_rtf(rows, tmp_path / "one.png").is_file()
