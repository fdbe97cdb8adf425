"""Nothing dropped, nothing doubled (issue 13): cuts without or with several supervisions,
repeated ids, unreadable feature files, a second job on the same out dir, corrupt results
lines, a full disk."""

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
from lhotse import CutSet
from lhotse.utils import fastcopy

from k2dec.job import DecodeConfig, check_cuts, decode_cuts, load_assets, plan_methods, run_decode
from k2dec.results import DiskFullError, LockedError, lock_out_dir, read_results
from tests.full_disk import tmpfs_usable

REPO = Path(__file__).resolve().parents[2]
CFG = DecodeConfig(max_duration=10.0, num_buckets=2)  # every cut in one batch


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(REPO))


def _cuts(setup) -> list:
    return list(setup["cuts"])


def test_a_cut_without_supervisions_is_decoded_whole(decode_setup, tmp_path):
    s = decode_setup
    cuts = _cuts(s)
    cuts[1] = fastcopy(cuts[1], supervisions=[])
    assets = load_assets(s["model_path"], s["lang_dir"])
    summary = decode_cuts(assets, CutSet.from_cuts(cuts), "greedy_search", tmp_path, "t",
                          config=CFG)
    records = read_results(summary.results_path)
    assert set(records) == {c.id for c in cuts} and summary.failed == ["utt5"]
    assert records["utt1"]["status"] == "ok" and records["utt1"]["ref"] is None
    # the same hypothesis as with its supervision (which spans the whole cut)
    with_sup = decode_cuts(assets, s["cuts"], "greedy_search", tmp_path / "b", "t", config=CFG)
    assert records["utt1"]["hyps"] == read_results(with_sup.results_path)["utt1"]["hyps"]


def _two_supervisions(cut):
    half = round(cut.duration / 2, 2)
    sup = cut.supervisions[0]
    return fastcopy(cut, supervisions=[
        fastcopy(sup, id=f"{cut.id}-a", start=0.0, duration=half, text="THE CAT"),
        fastcopy(sup, id=f"{cut.id}-b", start=half, duration=cut.duration - half,
                 text="A DOG")])


@pytest.mark.parametrize("method", ["greedy_search", "1best"])
def test_each_supervision_of_a_cut_is_one_utterance(decode_setup, tmp_path, method):
    s = decode_setup
    cuts = _cuts(s)
    cuts[2] = _two_supervisions(cuts[2])  # 1.5 s
    assets = load_assets(s["model_path"], s["lang_dir"])
    summary = decode_cuts(assets, CutSet.from_cuts(cuts), method, tmp_path / "a", "t",
                          config=CFG)
    records = read_results(summary.results_path)
    assert set(records) == {"utt0", "utt1", "utt2-a", "utt2-b", "utt3", "utt4", "utt5"}
    assert records["utt2-a"]["ref"] == ["THE", "CAT"]
    assert records["utt2-b"]["ref"] == ["A", "DOG"]
    assert summary.num_cuts == 7
    # each is its segment's audio alone: as if the cut had been cut in two by hand
    a, b = cuts[2].supervisions
    by_hand = CutSet.from_cuts([
        fastcopy(cuts[2].truncate(offset=a.start, duration=a.duration), id=a.id,
                 supervisions=[fastcopy(a, start=0.0)]),
        fastcopy(cuts[2].truncate(offset=b.start, duration=b.duration), id=b.id,
                 supervisions=[fastcopy(b, start=0.0)])])
    alone = read_results(decode_cuts(assets, by_hand, method, tmp_path / "b", "t",
                                     config=CFG).results_path)
    for key in ("utt2-a", "utt2-b"):
        _assert_same_hyps(records[key]["hyps"], alone[key]["hyps"])
    # killed after the first segment: the resume decodes the second, and nothing twice
    resumed = tmp_path / "c" / method / "results-t.jsonl"
    resumed.parent.mkdir(parents=True)
    resumed.write_text(json.dumps(records["utt2-a"]) + "\n")
    again = decode_cuts(assets, CutSet.from_cuts(cuts), method, tmp_path / "c", "t",
                        config=CFG)
    lines = again.results_path.read_text().splitlines()
    assert [json.loads(x)["cut_id"] for x in lines] == sorted(records)
    if method == "1best":  # (transducer scores vary with the batch in the last digits)
        assert again.results_path.read_bytes() == summary.results_path.read_bytes()
    else:
        assert ({k: r.get("hyp") for k, r in read_results(again.results_path).items()}
                == {k: r.get("hyp") for k, r in records.items()})


def _assert_same_hyps(got: dict, want: dict) -> None:
    """The same hypotheses per method; scores up to float32 noise (a transducer's scores vary
    with the batch in the last digits: by 5e-9 relative with torch 2.11)."""
    assert got.keys() == want.keys()
    for method, hyp in got.items():
        other = dict(want[method])
        assert hyp.keys() == other.keys(), method
        score = other.pop("score", None)
        assert {k: v for k, v in hyp.items() if k != "score"} == other, method
        if score is None:
            assert hyp.get("score") is None, method
        else:
            assert hyp.get("score") == pytest.approx(score, rel=1e-6), method


def test_repeated_ids_are_refused_before_anything_is_decoded(decode_setup, tmp_path):
    s = decode_setup
    cuts = _cuts(s)
    twice = CutSet.from_cuts(cuts + [cuts[0]])
    with pytest.raises(ValueError, match=r"1 utterance ids occur more than once \('utt0' x2\)"):
        check_cuts(["greedy_search"], twice)
    # a supervision id that is another cut's id
    clash = fastcopy(_two_supervisions(cuts[2]), supervisions=[
        fastcopy(sup, id=sid) for sup, sid in zip(_two_supervisions(cuts[2]).supervisions,
                                                  ["utt2-a", "utt3"])])
    with pytest.raises(ValueError, match=r"'utt3' x2"):
        check_cuts(["greedy_search"], CutSet.from_cuts(cuts[:2] + [clash] + cuts[3:]))
    assets = load_assets(s["model_path"], s["lang_dir"])
    with pytest.raises(ValueError, match="more than once"):
        decode_cuts(assets, twice, "greedy_search", tmp_path, "t", config=CFG)
    with pytest.raises(ValueError, match=r"failed: ids \['utt1'\] are also ids of cuts"):
        decode_cuts(assets, s["cuts"], "greedy_search", tmp_path, "t", config=CFG,
                    failed={"utt1": "unreadable"})
    # the driver checks every test set first: the good one is not decoded either
    runs = plan_methods(["greedy_search"])
    with pytest.raises(ValueError, match="more than once"):
        run_decode(assets, {"good": s["cuts"], "bad": twice}, runs, tmp_path, CFG)
    assert not list(tmp_path.rglob("*.jsonl"))


def test_unreadable_feature_files_fail_their_cuts_only(decode_setup, tmp_path):
    s = decode_setup
    cuts = _cuts(s)
    garbage = tmp_path / "garbage.lca"
    garbage.write_bytes(os.urandom(4096))
    broken = {
        "utt0": fastcopy(cuts[0].features, storage_path=str(tmp_path / "missing.lca")),
        "utt2": fastcopy(cuts[2].features, storage_path=str(garbage)),
        "utt3": fastcopy(cuts[3].features, storage_type="no-such-storage"),
    }
    cuts = [fastcopy(c, features=broken[c.id]) if c.id in broken else c for c in cuts]
    cuts[4] = fastcopy(cuts[4], features=None)  # no features at all
    assets = load_assets(s["model_path"], s["lang_dir"])
    summary = decode_cuts(assets, CutSet.from_cuts(cuts), "greedy_search", tmp_path, "t",
                          config=CFG)
    records = read_results(summary.results_path)
    assert summary.failed == ["utt0", "utt2", "utt3", "utt4", "utt5"]
    assert records["utt1"]["status"] == "ok"
    assert "cannot read the features: FileNotFoundError" in records["utt0"]["error"]
    assert "missing.lca" in records["utt0"]["error"]
    assert "cannot read the features: ValueError: lilcom" in records["utt2"]["error"]
    assert "storage_type 'no-such-storage'" in records["utt3"]["error"]  # named up front
    assert "the cut has no features" in records["utt4"]["error"]
    assert all("[extra info]" not in r.get("error", "") for r in records.values())
    # cuts without any features: a usage error, up front
    bare = CutSet.from_cuts([fastcopy(c, features=None) for c in _cuts(s)])
    with pytest.raises(ValueError, match=r"cuts must have features .*compute_cut_features"):
        decode_cuts(assets, bare, "greedy_search", tmp_path / "bare", "t", config=CFG)


_HOLD = textwrap.dedent("""
    import sys, time
    from k2dec.results import lock_out_dir
    with lock_out_dir(sys.argv[1]):
        print("ready", flush=True)
        time.sleep(60)
""")


def test_a_second_job_on_the_same_out_dir_is_refused(decode_setup, tmp_path):
    s = decode_setup
    out = tmp_path / "out"
    holder = subprocess.Popen([sys.executable, "-c", _HOLD, str(out)], stdout=subprocess.PIPE,
                              text=True, env=_env())
    try:
        assert holder.stdout.readline().strip() == "ready"
        assets = load_assets(s["model_path"], s["lang_dir"])
        with pytest.raises(LockedError, match=rf"out dir {out} is in use by another process "
                                              rf"\(pid {holder.pid}\)"):
            decode_cuts(assets, s["cuts"], "greedy_search", out, "t", config=CFG)
        assert not list(out.rglob("*.jsonl"))
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    # the killed job left no lock behind
    decode_cuts(load_assets(s["model_path"], s["lang_dir"]), s["cuts"], "greedy_search", out,
                "t", config=CFG)
    with lock_out_dir(out):  # and the finished job none either
        pass


def test_corrupt_lines_are_redecoded_and_the_file_ends_as_a_clean_run(decode_setup, tmp_path,
                                                                     caplog):
    s = decode_setup
    assets = load_assets(s["model_path"], s["lang_dir"])
    clean = decode_cuts(assets, s["cuts"], "1best", tmp_path / "a", "t", config=CFG)
    lines = clean.results_path.read_text().splitlines()
    path = tmp_path / "b" / "1best" / "results-t.jsonl"
    path.parent.mkdir(parents=True)
    # a killed concurrent writer: half of utt1's line, then utt2's line glued to it
    path.write_text("\n".join([lines[0], lines[1][:40] + lines[2], lines[3], "{garbage",
                               lines[4]]) + "\n")
    # the job's record of its inputs (a job writes it before its first cut)
    job = clean.results_path.with_name("job-t.json")
    path.with_name(job.name).write_bytes(job.read_bytes())
    with caplog.at_level("WARNING", logger="k2dec.results.jsonl"):
        again = decode_cuts(assets, s["cuts"], "1best", tmp_path / "b", "t", config=CFG)
    assert sum("skipping a corrupt line" in r.getMessage() for r in caplog.records) == 2
    assert again.results_path.read_bytes() == clean.results_path.read_bytes()
    assert again.wers == clean.wers


_FULL_CFG = DecodeConfig(max_duration=3.0, num_buckets=2)
_DECODE = textwrap.dedent("""
    import resource, signal, sys
    import torch
    from lhotse import CutSet
    from k2dec.job import DecodeConfig, decode_cuts, load_assets
    torch.set_num_threads(1)  # as the tests (results depend on the thread count)
    model, lang, cuts, out, limit = sys.argv[1:6]
    if int(limit):
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a failing write, not a dead process
        resource.setrlimit(resource.RLIMIT_FSIZE, (int(limit), int(limit)))
    try:
        decode_cuts(load_assets(model, lang), CutSet.from_file(cuts), "1best", out, "t",
                    config=DecodeConfig(max_duration=3.0, num_buckets=2))
    except OSError as e:
        print(type(e).__name__, e.errno, e)
        sys.exit(3)
""")


@pytest.mark.parametrize("full", ["tmpfs", "rlimit"])
def test_a_full_disk_stops_the_job_clearly_and_the_rerun_finishes_identical(
        decode_setup, tmp_path, full):
    s = decode_setup
    # 24 utterances: more results than the 4 KiB page the tmpfs has left for them
    cuts = CutSet.from_cuts(fastcopy(c, id=f"{c.id}-{k}") for k in range(4) for c in s["cuts"])
    cuts_path = tmp_path / "cuts.jsonl.gz"
    cuts.to_file(cuts_path)
    decode_cuts(load_assets(s["model_path"], s["lang_dir"]), cuts, "1best",
                tmp_path / "want", "t", config=_FULL_CFG)
    want_files = _result_files(tmp_path / "want" / "1best")
    size = len(want_files["results-t.jsonl"])
    args = [sys.executable, "-c", _DECODE, str(s["model_path"]), str(s["lang_dir"]),
            str(cuts_path)]
    out = tmp_path / "got"
    if full == "rlimit":
        first = subprocess.run(args + [str(out), str(size // 2)], env=_env(),
                               capture_output=True, text=True)
        code, written = errno.EFBIG, out / "1best" / "results-t.jsonl"
    else:
        mnt = tmp_path / "mnt"
        if not tmpfs_usable(mnt):
            pytest.skip("cannot mount a tmpfs in a user namespace here (unshare -Urm)")
        # a 64 KiB tmpfs with three 4 KiB pages left after the filler: the out dir's lock
        # file takes one, the job's record of its inputs one, the results file gets the last
        q = " ".join(f"'{a}'" for a in args)
        first = subprocess.run(["unshare", "-Urm", "sh", "-c", f"""
            mount -t tmpfs -o size=64k tmpfs {mnt} || exit 9
            head -c {65536 - 3 * 4096} /dev/zero > {mnt}/filler
            {q} {mnt}/out 0
            echo "rc=$?"
            cp -r {mnt}/out {out}.partial
            rm {mnt}/filler
            {q} {mnt}/out 0 && cp -r {mnt}/out {out}
        """], env=_env(), capture_output=True, text=True)
        assert first.returncode == 0 and "rc=3" in first.stdout, (first.stdout, first.stderr)
        code, written = errno.ENOSPC, mnt / "out" / "1best" / "results-t.jsonl"
        assert size > 4096, "the results must not fit in the space left"
    assert first.stdout.startswith(f"DiskFullError {code} "), (first.stdout, first.stderr)
    assert f"cannot write {written}: " in first.stdout
    assert "Free some space and run the same command again" in first.stdout
    partial = Path(f"{out}.partial" if full == "tmpfs" else out) / "1best" / "results-t.jsonl"
    done = read_results(partial)
    assert 0 < len(done) < len(cuts), "the disk filled up in the middle of the job"
    assert partial.read_bytes().endswith(b"\n"), "no unfinished line is left behind"
    if full == "rlimit":  # space freed: resume without the limit, here
        decode_cuts(load_assets(s["model_path"], s["lang_dir"]), cuts, "1best", out, "t",
                    config=_FULL_CFG)
    assert _result_files(out / "1best") == want_files


def _result_files(d: Path) -> dict[str, bytes]:
    """A method's files by name; of the job record (its time differs from run to run) the
    inputs and the files it lists."""
    out = {p.name: p.read_bytes() for p in sorted(d.iterdir()) if not p.name.startswith("job-")}
    for p in d.glob("job-*.json"):
        record = json.loads(p.read_text())
        out[p.name] = json.dumps([record["inputs"], record["files"]]).encode()
    return out


def test_disk_full_error_keeps_errno():
    e = DiskFullError(errno.ENOSPC, "x")
    assert isinstance(e, OSError) and e.errno == errno.ENOSPC


def test_cli_says_why_it_refuses(decode_setup, tmp_path):
    from click.testing import CliRunner

    from k2dec.cli import main

    s = decode_setup
    out = tmp_path / "out"
    twice = tmp_path / "twice.jsonl.gz"
    CutSet.from_cuts(_cuts(s) + [_cuts(s)[0]]).to_file(twice)

    def decode(cuts_path):
        return CliRunner().invoke(main, [
            "decode", "--cuts", str(cuts_path), "--model", str(s["model_path"]),
            "--lang-dir", str(s["lang_dir"]), "--method", "greedy_search", "--out-dir",
            str(out), "--max-duration", "3"])

    r = decode(twice)
    assert r.exit_code == 2 and "('utt0' x2)" in r.output, r.output
    holder = subprocess.Popen([sys.executable, "-c", _HOLD, str(out)], stdout=subprocess.PIPE,
                              text=True, env=_env())
    try:
        assert holder.stdout.readline().strip() == "ready"
        r = decode(s["cuts_path"])
        assert r.exit_code == 1, (r.output, r.exception)
        assert f"Error: out dir {out} is in use by another process (pid {holder.pid})" in r.output
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    r = decode(s["cuts_path"])
    assert r.exit_code == 3, (r.output, r.exception)  # utt5 is too short
