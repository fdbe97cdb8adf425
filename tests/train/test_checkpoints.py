"""The trainers' ``checkpoint-{step}.pt`` files: ordered by step (not by name), pruned to the
newest few."""

from __future__ import annotations

from k2dec.train.checkpoints import latest_checkpoint, prune_checkpoints, step_checkpoints


def test_the_newest_is_the_largest_step_and_pruning_keeps_the_newest(tmp_path):
    assert latest_checkpoint(tmp_path / "missing") is None
    assert latest_checkpoint(tmp_path) is None
    for name in ("checkpoint-9.pt", "checkpoint-10.pt", "checkpoint-100.pt", "epoch-3.pt",
                 "checkpoint-7.pt.tmp", "checkpoint-x.pt"):
        (tmp_path / name).write_bytes(b"")
    assert [s for s, _ in step_checkpoints(tmp_path)] == [9, 10, 100]
    assert latest_checkpoint(tmp_path) == tmp_path / "checkpoint-100.pt"
    prune_checkpoints(tmp_path, 0)
    assert len(step_checkpoints(tmp_path)) == 3
    prune_checkpoints(tmp_path, 2)
    assert [p.name for _, p in step_checkpoints(tmp_path)] == ["checkpoint-10.pt",
                                                               "checkpoint-100.pt"]
    assert (tmp_path / "epoch-3.pt").is_file() and (tmp_path / "checkpoint-x.pt").is_file()
