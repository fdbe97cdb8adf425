"""Results files that survive what happens to real jobs: corrupt lines, a second writer, a
writer killed while holding the lock, a full disk."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from k2dec.results import LockedError, ResultWriter, lock_out_dir, read_results
from tests.full_disk import tmpfs_usable

REPO = Path(__file__).resolve().parents[2]


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(REPO))


def test_corrupt_lines_anywhere_are_skipped_and_their_cuts_redone(tmp_path, caplog):
    path = tmp_path / "r.jsonl"
    ok = '{"cut_id": "%s", "status": "ok", "hyp": ["%s"], "ref": null}'
    path.write_bytes("\n".join([
        ok % ("c1", "A"),
        "not json",
        "[1, 2]",
        # a writer killed mid-line, then another writer's line appended to it
        '{"cut_id": "c2", "sta' + ok % ("c3", "C"),
        ok % ("c4", "D"),
        '{"cut_id": 5, "status": "ok"}',
        '{"cut_id": "c6", "status": "weird"}',
        '{"cut_id": "c7"}',
    ]).encode() + b"\n\xff\xfe\n" + (ok % ("c5", "E")).encode() + b"\n")
    with caplog.at_level("WARNING", logger="k2dec.results.jsonl"):
        assert sorted(read_results(path)) == ["c1", "c4", "c5"]
    skipped = [r.getMessage() for r in caplog.records if "corrupt line" in r.getMessage()]
    assert [m.split(":")[1] for m in skipped] == ["2", "3", "4", "6", "7", "8", "9"]
    with ResultWriter(path) as out:
        todo = [c for c in ("c1", "c2", "c3", "c4", "c5", "c6", "c7") if c not in out]
        assert todo == ["c2", "c3", "c6", "c7"]
        for c in todo:
            out.write(c, hyp=[c.upper()])
    assert sorted(read_results(path)) == ["c1", "c2", "c3", "c4", "c5", "c6", "c7"]
    assert read_results(path)["c3"]["hyp"] == ["C3"]


_HOLD = textwrap.dedent("""
    import sys, time
    from k2dec.results import ResultWriter, lock_out_dir
    kind, path = sys.argv[1], sys.argv[2]
    ctx = ResultWriter(path) if kind == "writer" else lock_out_dir(path)
    with ctx:
        print("ready", flush=True)
        time.sleep(60)
""")


@pytest.mark.parametrize("kind", ["writer", "out_dir"])
def test_a_second_writer_is_refused_and_a_killed_one_leaves_no_lock(tmp_path, kind):
    target = tmp_path / ("r.jsonl" if kind == "writer" else "out")
    script = tmp_path / "hold.py"
    script.write_text(_HOLD)
    holder = subprocess.Popen([sys.executable, str(script), kind, str(target)],
                              stdout=subprocess.PIPE, text=True, env=_env())
    try:
        assert holder.stdout.readline().strip() == "ready"

        def take():
            return ResultWriter(target) if kind == "writer" else lock_out_dir(target)

        what = "results file" if kind == "writer" else "out dir"
        pid = "" if kind == "writer" else rf" \(pid {holder.pid}\)"
        with pytest.raises(LockedError, match=rf"{what} {target} is in use by another "
                                              rf"process{pid}.*even if it is killed"):
            with take():
                pass
        if kind == "out_dir":
            with lock_out_dir(target, rank=1):  # another rank of the same torchrun job
                pass
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    with take() as first:  # the kernel dropped the killed holder's lock
        if kind == "writer":
            first.write("c1", hyp=["A"])
            with pytest.raises(LockedError):  # a second writer in this process too
                ResultWriter(target)
        else:
            with lock_out_dir(target):  # re-entrant in the process that holds it
                pass
    if kind == "writer":
        assert list(read_results(target)) == ["c1"]


_WRITE = textwrap.dedent("""
    import resource, signal, sys
    from k2dec.results import ResultWriter
    path, n, limit = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    if limit:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a failing write, not a dead process
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    try:
        with ResultWriter(path) as out:
            for i in range(n):
                if f"cut-{i:03d}" not in out:
                    out.write(f"cut-{i:03d}", hyp=["WORD"] * (i % 13), ref=["WORD"] * 5)
    except OSError as e:
        print(f"{e.errno} {e}")
        sys.exit(3)
""")




@pytest.mark.parametrize("full", ["tmpfs", "rlimit"])
def test_a_full_disk_is_a_clear_error_and_the_rerun_finishes_identical(tmp_path, full):
    script = tmp_path / "write.py"
    script.write_text(_WRITE)
    py, n = sys.executable, 300
    want = tmp_path / "want.jsonl"
    subprocess.run([py, str(script), str(want), str(n), "0"], check=True, env=_env())
    got = tmp_path / "got.jsonl"
    inner = None
    if full == "rlimit":  # a file-size limit: EFBIG
        first = subprocess.run([py, str(script), str(got), str(n), "9000"], env=_env(),
                               capture_output=True, text=True)
        code = errno.EFBIG
    else:  # a real full disk: ENOSPC on a 64 KiB tmpfs of which a filler takes 56 KiB
        mnt = tmp_path / "mnt"
        if not tmpfs_usable(mnt):
            pytest.skip("cannot mount a tmpfs in a user namespace here (unshare -Urm)")
        inner = mnt / "r.jsonl"
        first = subprocess.run(["unshare", "-Urm", "sh", "-c", f"""
            mount -t tmpfs -o size=64k tmpfs {mnt} || exit 9
            head -c 57344 /dev/zero > {mnt}/filler
            {py} {script} {inner} {n} 0
            echo "rc=$?"
            cp {inner} {got}.partial
            rm {mnt}/filler
            {py} {script} {inner} {n} 0 && cp {inner} {got}
        """], env=_env(), capture_output=True, text=True)
        code = errno.ENOSPC
        assert first.returncode == 0, first.stderr
        assert "rc=3" in first.stdout, (first.stdout, first.stderr)
    assert first.stdout.startswith(f"{code} "), (first.stdout, first.stderr)
    written = got if full == "rlimit" else inner
    assert f"cannot write {written}: " in first.stdout
    assert "run the same command again" in first.stdout
    partial = Path(f"{got}.partial") if full == "tmpfs" else got
    lines = partial.read_bytes().split(b"\n")
    assert lines[-1] == b"", "no unfinished line is left behind"
    done = [json.loads(x)["cut_id"] for x in lines[:-1]]
    assert 10 < len(done) < n, "the disk filled up in the middle of the job"
    if full == "rlimit":  # space freed: the limit is gone
        subprocess.run([py, str(script), str(got), str(n), "0"], check=True, env=_env())
    assert got.read_bytes() == want.read_bytes()
