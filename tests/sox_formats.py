"""What the installed sox can write, for the tests that make audio variants with it: a variant
whose format this sox lacks is left out of those tests, and one test per such format skips
naming the Debian package that adds it (sox installed without ``libsox-fmt-mp3`` writes no
mp3; without this check the fixtures that make the variants crashed in setup)."""

from __future__ import annotations

import functools
import shutil
import subprocess

#: Debian packages that add a file format to sox.
FORMAT_PACKAGES = {"mp3": "libsox-fmt-mp3"}


@functools.cache
def sox_formats() -> frozenset[str]:
    """The file formats the installed sox reads and writes (``sox -h``'s "AUDIO FILE
    FORMATS" line); empty when sox is not installed."""
    if shutil.which("sox") is None:
        return frozenset()
    out = subprocess.run(["sox", "-h"], capture_output=True, text=True).stdout
    for line in out.splitlines():
        if line.startswith("AUDIO FILE FORMATS:"):
            return frozenset(line.split(":", 1)[1].split())
    return frozenset()


def sox_lacks(file_name: str) -> str | None:
    """Why sox cannot make a file of this name here (the skip reason; its format is its
    ending, any case: ``x.MP3``, ``.mp3``), or None when it can."""
    if shutil.which("sox") is None:
        return "sox is not installed (Debian package sox)"
    fmt = file_name.rsplit(".", 1)[-1].lower()
    if fmt in sox_formats():
        return None
    package = FORMAT_PACKAGES.get(fmt)
    return (f"this sox cannot write {fmt}" + (f" (Debian package {package})" if package else ""))
