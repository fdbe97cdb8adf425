"""Names from user input as file names, and writing inside an out dir without leaving it.

Every name that comes from a user and becomes part of a path (a test set's name, a method's
name, a setting key, an utterance or recording id) goes through :func:`path_component`: one
file-name component, never ``.`` or ``..``, with no ``/``, ``\\``, NUL, control character or
whitespace (those are percent-encoded, and ``%`` itself, so two names never share one), and
short enough for a file system (:data:`NAME_MAX` bytes).

Files are written by :func:`replace_file`: to a fresh temporary file in the same folder (created
with ``O_EXCL``, so a symlink planted under its name is never followed) that then replaces the
target name (``os.replace`` replaces a symlink, never writes through it). A folder the job
creates inside its out dir must not be a symlink (:func:`job_folder`).
"""

from __future__ import annotations

import errno
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO

from .lock import UnusableDirError, disk_full_error

__all__ = ["MAX_TEST_SET_BYTES", "NAME_MAX", "check_component", "job_folder", "path_component",
           "replace_file", "replace_text", "unusable_path"]

#: The longest file name (bytes of UTF-8) the common file systems allow (ext4, XFS, btrfs,
#: APFS, NTFS in characters).
NAME_MAX = 255


#: The longest test-set name (UTF-8 bytes, encoded): its files' names add a kind, a setting key
#: and an extension around it (``confidence-summary-<test set>-<suffix>.txt``,
#: ``recogs-<test set>-<setting>.txt``).
MAX_TEST_SET_BYTES = 100


def _encoded(c: str) -> str:
    return "".join(f"%{b:02X}" for b in c.encode("utf-8", "surrogateescape"))


def path_component(name: str, what: str, max_bytes: int = NAME_MAX) -> str:
    """``name`` as one safe file-name component, the same for the same name and different for
    different names (injective: undone by ``urllib.parse.unquote``).

    ``%``, ``/``, ``\\``, NUL and other control characters, and whitespace become ``%XX``
    (UTF-8 bytes); a name of dots only (``.``, ``..``) has its first dot encoded (``%2E``).

    Args:
      name: the user's name (a str).
      what: what it is, for the error message (e.g. ``"--test-set"``, ``"method name"``).
      max_bytes: the most UTF-8 bytes the encoded name may have, leaving room for what a file
        name adds around it (e.g. ``recogs-<test set>-<setting>.txt``).

    Returns:
      the encoded name (str).

    Raises:
      TypeError: ``name`` is not a str.
      ValueError: ``name`` is empty, or longer than ``max_bytes`` once encoded; the message
        names ``what`` and the value.
    """
    if not isinstance(name, str):
        raise TypeError(f"{what} must be a str, got {type(name).__name__} {name!r}")
    if not name:
        raise ValueError(f"{what} must not be empty")
    out = "".join(_encoded(c) if c in "%/\\" or c.isspace() or not c.isprintable()
                  or 0xD800 <= ord(c) <= 0xDFFF else c for c in name)
    if set(out) == {"."}:
        out = "%2E" + out[1:]
    size = len(out.encode("utf-8"))
    if size > max_bytes:
        shown = name if len(name) <= 60 else name[:57] + "..."
        raise ValueError(f"{what} {shown!r} is {size} bytes as a file name, over the "
                         f"{max_bytes} it may have: give a shorter one")
    return out


def check_component(value: str, what: str) -> None:
    """Refuse ``value`` unless it is a safe file-name component: what :func:`path_component`
    returns (``%`` allowed), or any name without what it encodes.

    Raises:
      TypeError, ValueError: naming ``what`` and the value, and the name to use instead.
    """
    path_component(value, what)  # type, emptiness, length
    if any(c in "/\\" or c.isspace() or not c.isprintable() for c in value) \
            or set(value) == {"."}:
        raise ValueError(f"{what} {value!r} cannot be part of a file name (no '/', '\\', "
                         "whitespace or control characters; not '.' or '..'): use "
                         f"{path_component(value, what)!r}")


def unusable_path(err: OSError, path: Path) -> OSError:
    """For an error creating or replacing ``path``: the error that names it and says what to
    do (:class:`~k2dec.results.UnusableDirError`; a full disk: :class:`DiskFullError`); other
    errors unchanged."""
    err = disk_full_error(err, path)
    if err.errno == errno.EISDIR or (err.errno in (errno.ENOTEMPTY, errno.EEXIST)
                                     and path.is_dir()):
        why = "it is a folder; move it away or choose another --out-dir"
    elif err.errno == errno.ENAMETOOLONG:
        why = "the name is too long for the file system; give a shorter name"
    elif err.errno == errno.ELOOP:
        why = "it is a symlink, which k2dec does not follow; remove it"
    elif err.errno in (errno.ENOTDIR, errno.EEXIST):
        why = "a file is in the way of a folder on its path; move it away"
    elif err.errno == errno.ENOENT and path.parent.is_symlink():
        why = f"{path.parent} is a dangling symlink; remove it or make it point to a folder"
    else:
        return err
    out = UnusableDirError(f"cannot write {path}: {why}")
    out.errno = err.errno
    return out


def replace_file(path: str | Path, write: Callable[[IO[str]], None]) -> None:
    """Write the text file ``path`` by ``write(f)`` on a temporary file in its folder, then
    put it in place at once (:func:`replace_saved`).

    Raises:
      UnusableDirError: ``path`` is a folder, or its name is too long (message: what to do).
      DiskFullError: the disk is full.
    """
    def save(tmp: Path) -> None:
        with open(tmp, "w", encoding="utf-8") as f:
            write(f)

    replace_saved(path, save)


def replace_saved(path: str | Path, save: Callable[[Path], None]) -> None:
    """Write ``path`` by ``save(tmp)`` (e.g. a library's own writer) on a temporary file in its
    folder with the same ending (``.srt``, ``.jsonl.gz``, ...), then put it in place at once:
    a kill leaves the old file or the new one, and a symlink at ``path`` is replaced, not
    written through.

    Raises:
      UnusableDirError: ``path`` is a folder, or its name is too long (message: what to do).
      DiskFullError: the disk is full.
    """
    path = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".k2dec-",
                                   suffix="".join(path.suffixes[-2:]) or ".tmp")
        os.close(fd)
    except OSError as e:
        raise unusable_path(e, path) from None
    try:
        save(Path(tmp))
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except OSError as e:
        Path(tmp).unlink(missing_ok=True)
        raise unusable_path(e, path) from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def replace_text(path: str | Path, text: str) -> None:
    """:func:`replace_file` with the text ``text``."""
    replace_file(path, lambda f: f.write(text))


def job_folder(path: str | Path) -> Path:
    """Create the folder ``path`` (and its parents) inside an out dir and return it; refuse a
    symlink or a file there (a symlink could lead the job's files out of the out dir).

    Raises:
      UnusableDirError: naming the path and what to do.
    """
    path = Path(path)
    if path.is_symlink():
        err = OSError(errno.ELOOP, "symlink", str(path))
        raise unusable_path(err, path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise unusable_path(e, path) from None
    return path
