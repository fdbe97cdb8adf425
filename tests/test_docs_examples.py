"""The code blocks of README.md and the user guide (docs/index.md, docs/guide/*.md) run.

Every ```` ```python ```` and ```` ```console ```` block runs, a page's blocks in order in one
fresh folder that holds what the text assumes: ``assets/`` (the shipped model, lang dir and
LMs), ``my_recordings/`` (three shipped test recordings as ``a.flac``, ``b.flac``, ``c.flac``
and their Kaldi ``text``), ``a.wav`` / ``b.wav`` and ``lm_text.txt`` (the recordings'
transcripts). Console commands are the lines after ``$ `` (with their ``\\`` continuations);
the other lines of a console block are output and are not checked. ``k2dec`` is this
checkout's. A block that needs what the tests lack (a network, an icefall export, hours)
is marked on the line before it with ``<!-- test: skip REASON -->``; commands go in console
blocks (a ``bash`` / ``sh`` block would never run, so none may exist).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ASSETS = ROOT / "assets" / "librispeech-synth"
PAGES = [ROOT / "README.md", ROOT / "docs" / "index.md",
         *sorted((ROOT / "docs" / "guide").glob("*.md"))]
RUN = ("python", "console")
#: Languages shown but not run (data and output).
SHOWN = ("text", "json", "")
#: Seconds one block may take (a decode job on three recordings, a graph compilation).
BLOCK_SECONDS = 300
SKIP = re.compile(r"<!--\s*test:\s*skip\s+(.+?)\s*-->")
FENCE = re.compile(r"^(\s*)```(\S*)")


@dataclass(frozen=True)
class Block:
    path: Path
    line: int
    lang: str
    code: str
    skip: str | None

    def __str__(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line} ({self.lang})"


def code_blocks(path: Path) -> list[Block]:
    """The fenced blocks of a Markdown file (MyST directive fences ```` ```{name} ```` are
    not code and are left out), each with the skip reason marked on the line before it."""
    lines = path.read_text().splitlines()
    blocks, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if m is None:
            i += 1
            continue
        indent, lang = m.group(1), m.group(2)
        end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "```")
        if not lang.startswith("{"):
            before = lines[i - 1] if i > 0 else ""
            skip = SKIP.search(before)
            body = [line[len(indent):] if line.startswith(indent) else line
                    for line in lines[i + 1:end]]
            blocks.append(Block(path, i + 1, lang, "\n".join(body) + "\n",
                                skip.group(1) if skip else None))
        i = end + 1
    return blocks


def console_commands(code: str) -> list[str]:
    """The commands of a console block: each ``$ `` line with the lines it continues onto
    (a trailing ``\\``, or an open single quote)."""
    commands: list[str] = []
    open_cmd = False
    for line in code.splitlines():
        if open_cmd:
            commands[-1] += "\n" + line
        elif line.startswith("$ "):
            commands.append(line[2:])
        else:
            continue
        open_cmd = commands[-1].endswith("\\") or commands[-1].count("'") % 2 == 1
    return commands


def test_console_commands_are_parsed():
    code = ("$ k2dec decode --a \\\n    --b   # c\nsome output\n$ python -c 'x\ny' > f\n"
            "output\n$ echo done\n")
    assert console_commands(code) == ["k2dec decode --a \\\n    --b   # c",
                                      "python -c 'x\ny' > f", "echo done"]


def test_blocks_and_skip_marks_are_found(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# t\n\n```python\nprint(1)\n```\n<!-- test: skip needs a GPU -->\n"
                    "  ```console\n  $ nvidia-smi\n  ```\n```{k2dec-methods-table}\n```\n")
    blocks = code_blocks(page)
    assert [(b.line, b.lang, b.code, b.skip) for b in blocks] == [
        (3, "python", "print(1)\n", None), (7, "console", "$ nvidia-smi\n", "needs a GPU")]


def test_every_block_is_run_or_says_why_not():
    blocks = [b for p in PAGES for b in code_blocks(p)]
    assert blocks, "no code blocks found"
    unknown = [str(b) for b in blocks if b.lang not in RUN + SHOWN]
    assert not unknown, f"use ```console (run) or ```text (shown) instead of: {unknown}"
    runnable = [b for b in blocks if b.lang in RUN and b.skip is None]
    assert len(runnable) >= 8, [str(b) for b in runnable]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    """A folder with what the docs' examples assume (see the module docstring)."""
    sf = pytest.importorskip("soundfile")
    if not (ASSETS / "model.pt").is_file():
        pytest.skip(f"the shipped assets are not in this checkout ({ASSETS})")
    base = tmp_path_factory.mktemp("docs-examples")
    corpus = ASSETS / "corpus" / "test-clean" / "108" / "3000"
    refs = dict(line.split(" ", 1) for line in (corpus / "108-3000.trans.txt").read_text(
        ).splitlines() if line.strip())
    (base / "my_recordings").mkdir()
    text = []
    for name, utt in zip("abc", sorted(refs)[:3]):
        shutil.copy(corpus / f"{utt}.flac", base / "my_recordings" / f"{name}.flac")
        text.append(f"{name} {refs[utt].strip()}")
        if name != "c":
            audio, rate = sf.read(corpus / f"{utt}.flac")
            sf.write(base / f"{name}.wav", audio, rate)
    (base / "my_recordings" / "text").write_text("\n".join(text) + "\n")
    (base / "lm_text.txt").write_text("\n".join(r.strip() for r in refs.values()) + "\n")
    (base / "bin").mkdir()
    k2dec = base / "bin" / "k2dec"
    k2dec.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m k2dec.cli "$@"\n')
    k2dec.chmod(0o755)
    return base


def _run_block(block: Block, cwd: Path, env: dict[str, str]) -> None:
    if block.lang == "python":
        script = cwd / f"block_{block.line}.py"
        script.write_text(block.code)
        runs = [[sys.executable, str(script)]]
    else:
        runs = [["bash", "-e", "-o", "pipefail", "-c", c] for c in console_commands(block.code)]
    for argv in runs:
        start = time.monotonic()
        try:
            run = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True,
                                 timeout=BLOCK_SECONDS)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{block}: ran past {BLOCK_SECONDS} s: {argv[-1]}")
        assert run.returncode == 0, (
            f"{block} failed (exit {run.returncode}, {time.monotonic() - start:.0f} s): "
            f"{argv[-1]}\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}")


@pytest.mark.parametrize("page", [p for p in PAGES if any(
    b.lang in RUN and b.skip is None for b in code_blocks(p))], ids=lambda p: p.name)
def test_page_examples_run(page, workdir, tmp_path):
    cwd = tmp_path / "work"
    shutil.copytree(workdir, cwd, symlinks=True)
    (cwd / "assets").symlink_to(ROOT / "assets")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PATH": f"{cwd / 'bin'}:{os.environ['PATH']}",
           "OMP_NUM_THREADS": "1"}
    for block in code_blocks(page):
        if block.lang in RUN and block.skip is None:
            _run_block(block, cwd, env)
