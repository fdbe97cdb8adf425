"""Where the full-disk tests can make a real full disk: a tiny tmpfs mounted in a user +
mount namespace (shared by tests/results and tests/job)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path


def tmpfs_usable(d: Path) -> bool:
    """True if a tmpfs can be mounted here in a user + mount namespace (no root needed where
    unprivileged user namespaces are allowed)."""
    if shutil.which("unshare") is None:
        return False
    d.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(["unshare", "-Urm", "sh", "-c", f"mount -t tmpfs -o size=8k tmpfs {d}"],
                       capture_output=True)
    return r.returncode == 0
