"""Install the wheel of ``NAME==VERSION`` built for the running interpreter, chosen by file name.

Why this exists: k2 1.23.4's Linux wheels are named ``k2-1.23.4-py3.10-none-any.whl``,
``...-py3.9-none-any.whl`` and so on. pip splits the tag ``py3.10`` at the dot into the tags
``py3`` and ``10``, so every one of them matches any Python 3 and ``pip install k2==1.23.4``
takes whichever the index happens to list first (a build whose ``_k2.cpython-39`` extension
cannot load in Python 3.10). This script asks pip's own finder (so the user's index, extra
indexes and find-links settings all apply) for every candidate file of the pinned version,
keeps those whose file name names this interpreter (``py3.10`` / ``cp310`` / ``py310``), and
installs that one file, by URL with its hash, without dependencies. It then imports the module
in a fresh interpreter and says clearly what went wrong if that fails.

Usage (with the virtualenv's Python)::

    python scripts/install_wheel_for_python.py k2==1.23.4 --import-name k2

Exit status 0 on success (or when the right build is already installed), 1 with a message
otherwise.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys


def _fail(msg: str) -> None:
    print(f"error: {msg}", file=sys.stderr)
    raise SystemExit(1)


def _python_tags() -> set[str]:
    major, minor = sys.version_info[:2]
    impl = "cp" if sys.implementation.name == "cpython" else sys.implementation.name[:2]
    return {f"py{major}.{minor}", f"py{major}{minor}", f"{impl}{major}{minor}"}


def wheel_python_tags(filename: str) -> set[str]:
    """The python-tag field of a wheel file name, NOT split at dots (unlike pip).

    ``k2-1.23.4-py3.10-none-any.whl`` -> {"py3.10"}; ``x-1-cp310.cp311-cp310-linux.whl``
    -> {"cp310", "cp311"} (a dotted compressed tag set is split only when each part looks like
    a whole tag, i.e. starts with letters).
    """
    parts = filename[: -len(".whl")].split("-")
    if len(parts) not in (5, 6):
        return set()
    field = parts[-3]
    pieces = field.split(".")
    if all(re.match(r"^[a-z]+\d", p) for p in pieces):
        return set(pieces)
    return {field}


def find_candidates(requirement: str) -> list[tuple[str, str]]:
    """(file name, URL with hash fragment) of every candidate pip's finder sees for ``NAME==V``."""
    name, _, version = requirement.partition("==")
    if not name or not version:
        _fail(f"expected NAME==VERSION, got {requirement!r}")
    try:
        from pip._internal.commands import create_command
    except ImportError as e:  # pragma: no cover - pip always present in a venv
        _fail(f"pip is not importable in {sys.executable}: {e}")
    cmd = create_command("download")
    options, _ = cmd.parse_args(["--no-deps", requirement])
    out = []
    with cmd.main_context():
        session = cmd.get_default_session(options)
        finder = cmd._build_package_finder(options=options, session=session)
        for cand in finder.find_all_candidates(name):
            if str(cand.version) != version or not cand.link.filename.endswith(".whl"):
                continue
            url = cand.link.url
            if cand.link.hash_name and cand.link.hash and "#" not in url:
                url = f"{url}#{cand.link.hash_name}={cand.link.hash}"
            out.append((cand.link.filename, url))
    return out


def choose(requirement: str, candidates: list[tuple[str, str]]) -> tuple[str, str]:
    """The one candidate whose file name names this interpreter, or a clear error."""
    want = _python_tags()
    here = f"Python {sys.version_info[0]}.{sys.version_info[1]}"
    if not candidates:
        _fail(
            f"no wheel of {requirement} is visible to pip from this machine "
            f"(check your index / proxy settings: `pip download --no-deps {requirement}`)"
        )
    matching = [c for c in candidates if wheel_python_tags(c[0]) & want]
    if len(matching) == 1:
        return matching[0]
    names = ", ".join(sorted(c[0] for c in candidates))
    if not matching:
        _fail(
            f"none of the wheels of {requirement} is built for {here} ({sys.executable}); "
            f"available: {names}. Use the Python version one of them names."
        )
    # Several files name this Python (e.g. manylinux variants): let pip choose among those only.
    return sorted(matching)[0]


def check_import(module: str) -> str | None:
    """Import ``module`` in a fresh interpreter; the error text, or None when it works."""
    proc = subprocess.run(
        [sys.executable, "-c", f"import {module}"], capture_output=True, text=True
    )
    if proc.returncode == 0:
        return None
    lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else f"exit status {proc.returncode}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("requirement", help="NAME==VERSION, e.g. k2==1.23.4")
    p.add_argument("--import-name", help="module to import afterwards (default: NAME)")
    args = p.parse_args(argv)
    name = args.requirement.partition("==")[0]
    module = args.import_name or name
    if check_import(module) is None:
        print(f"{name}: the installed build imports in {sys.executable}; nothing to do")
        return 0
    filename, url = choose(args.requirement, find_candidates(args.requirement))
    print(f"{name}: installing {filename} (the build for Python {sys.version.split()[0]})")
    cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--force-reinstall", url]
    if subprocess.run(cmd).returncode != 0:
        _fail(f"pip could not install {filename}")
    err = check_import(module)
    if err is not None:
        _fail(
            f"`import {module}` fails after installing {filename}: {err}\n"
            f"  {name} needs its pinned dependencies first (torch 1.13.1 for k2 1.23.4); "
            f"if they are installed, this build does not match {sys.executable}."
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
