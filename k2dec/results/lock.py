"""Exclusive locks on output directories and result files, and clear disk-full errors.

A lock is an OS file lock (``fcntl.flock``) on a lock file: the kernel releases it when the
process that holds it ends, however it ends (a ``kill -9`` included), so a killed job never
leaves a stale lock behind. The lock file itself stays (empty but for the holder's pid) and
means nothing while unlocked.

Locks are re-entrant within one process: a decode job that locks its output directory can call
code that locks it again (the second ``with`` only counts).
"""

from __future__ import annotations

import errno
import fcntl
import os
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

__all__ = ["DISK_FULL_ERRNOS", "DiskFullError", "LockedError", "UnusableDirError",
           "disk_full_error", "exclusive_lock", "flock_or_raise", "lock_out_dir"]

#: ``errno`` values of a write that found no room: no space left on the device, a disk quota
#: exceeded, or a file-size limit (``ulimit -f``) reached.
DISK_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


class LockedError(RuntimeError):
    """Another process holds the lock (another job writes the same output)."""


class DiskFullError(OSError):
    """A write found no room (:data:`DISK_FULL_ERRNOS`); the message says where and what to
    do. ``errno`` is the original one."""


class UnusableDirError(OSError):
    """The folder of a lock (a job's out dir) cannot be created or written: a file is in the
    way, or it is read-only; the message names it and says what to do. ``errno`` is the
    original one."""


def _unusable(err: OSError, what: str, folder: Path) -> OSError:
    """The error for a lock whose ``folder`` cannot be created or written."""
    if err.errno in DISK_FULL_ERRNOS:
        return disk_full_error(err, folder)
    blocker = next((p for p in (folder, *folder.parents) if p.exists() and not p.is_dir()),
                   None)
    dangling = next((p for p in (folder, *folder.parents) if p.is_symlink() and not p.exists()),
                    None)
    if dangling is not None:
        why = (f"{dangling} is a symlink to {os.readlink(dangling)}, which does not exist; "
               "create that folder or remove the link")
    elif err.errno == errno.ELOOP:
        why = f"its lock file in {folder} is a symlink, which k2dec does not follow; remove it"
    elif blocker is not None:
        why = f"{blocker} is a file, not a folder"
    elif err.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        why = f"{folder} is not writable ({err.strerror})"
    else:
        why = f"{folder}: {err.strerror or err}"
    out = UnusableDirError(f"cannot use {what}: {why}; choose a folder you can write to")
    out.errno = err.errno
    return out


_held: dict[Path, list[int]] = {}  # lock file -> [fd, depth] held by this process
_guard = threading.Lock()


@contextmanager
def exclusive_lock(path: str | Path, what: str) -> Iterator[Path]:
    """Hold an exclusive lock on the file ``path`` (created if missing) for the ``with`` block.

    Args:
      path: the lock file.
      what: what the lock protects, for the error message (e.g. ``"out dir exp/decode"``).

    Yields:
      the lock file's path.

    Raises:
      LockedError: another process holds the lock; the message names ``what``, the lock file
        and the holder's pid.
      UnusableDirError: the lock's folder cannot be created or written (a file in the way,
        read-only); :class:`DiskFullError` when the disk is full.
    """
    path = Path(path).absolute()
    with _guard:
        if path in _held:
            _held[path][1] += 1
            fd = None
        else:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
            except OSError as e:
                raise _unusable(e, what, path.parent) from None
            try:
                flock_or_raise(fd, path, what, holder=_read_pid(fd))
            except LockedError:
                os.close(fd)
                raise
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
            _held[path] = [fd, 1]
    try:
        yield path
    finally:
        with _guard:
            entry = _held[path]
            entry[1] -= 1
            if entry[1] == 0:
                del _held[path]
                os.close(entry[0])  # closing the only descriptor releases the flock


def flock_or_raise(fd: int, path: str | Path, what: str, holder: str = "") -> None:
    """Take an exclusive ``flock`` on the open descriptor ``fd`` of ``path`` without waiting.

    Raises:
      LockedError: another process holds it (``holder``: e.g. ``" (pid 123)"``).
    """
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise LockedError(
            f"{what} is in use by another process{holder} (it holds the lock on {path}); "
            "wait for it to finish or write elsewhere. The lock goes away with that process, "
            "even if it is killed.") from None


def _read_pid(fd: int) -> str:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return ""
    return f" (pid {text})" if text.isdigit() else ""


def lock_out_dir(out_dir: str | Path, rank: int = 0) -> AbstractContextManager[Path]:
    """The lock of a decode job's output directory: ``out_dir/.k2dec-decode.lock`` (rank 0 and
    single-process jobs), ``out_dir/.k2dec-decode.rank{r}.lock`` for rank ``r > 0`` of a
    ``torchrun`` job (its ranks share the directory; each writes its own shard file, rank 0
    merges them), so a second job on the same directory is refused by its rank 0.

    Raises:
      LockedError: on entering, if another process holds it.
      UnusableDirError: on entering, if ``out_dir`` cannot be created or written.
    """
    name = ".k2dec-decode.lock" if rank == 0 else f".k2dec-decode.rank{rank}.lock"
    return exclusive_lock(Path(out_dir) / name, f"out dir {out_dir}")


def disk_full_error(err: OSError, path: str | Path) -> OSError:
    """For a write error in :data:`DISK_FULL_ERRNOS`: a :class:`DiskFullError` with the same
    errno whose message names ``path`` and says how to go on. Other errors, and errors already
    converted, are returned unchanged."""
    if err.errno not in DISK_FULL_ERRNOS or isinstance(err, DiskFullError):
        return err
    why = {errno.ENOSPC: "no space left on the device", errno.EDQUOT: "disk quota exceeded",
           errno.EFBIG: "the file-size limit (ulimit -f) was reached"}[err.errno]
    return DiskFullError(err.errno, f"cannot write {path}: {why}. Free some space and run the same "
                              "command again: it resumes where it stopped")
