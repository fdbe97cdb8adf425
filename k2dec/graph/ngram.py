"""G: n-gram language models from ARPA files (through kaldilm's arpa2fst)."""

from __future__ import annotations

import contextlib
import logging
import math
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import k2
import torch

from ..lang.symbols import write_symbol_table
from ..primitives.files import plain_file, text_lines

__all__ = ["ArpaInfo", "check_arpa", "build_G", "build_rescoring_G", "train_arpa"]

logger = logging.getLogger(__name__)

_SENTENCE_MARKS = ("<s>", "</s>")
_UTF8_BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True)
class ArpaInfo:
    """What :func:`check_arpa` learned from an ARPA file."""

    order: int
    counts: tuple[int, ...]
    vocabulary: frozenset[str]
    #: the file has Windows line ends (CRLF): kaldilm gets a copy with plain newlines
    crlf: bool = False


def check_arpa(path: str | Path, word_table: k2.SymbolTable | None = None,
               visit: Callable[[tuple[str, ...], float, float | None], None] | None = None
               ) -> ArpaInfo:
    """Validate an ARPA file before handing it to kaldilm (whose errors abort).

    Checks the ``\\data\\`` header, every ``\\N-grams:`` section (a finite log10 prob
    that is not positive, N words, and an optional finite backoff weight below the highest
    order), that no n-gram appears twice, that the counts match, that the unigrams include
    ``<s>`` and ``</s>``, the closing ``\\end\\``, and, with ``word_table``, that every
    word is in it. CRLF line ends and a byte-order mark are accepted (kaldilm gets a copy
    without them). ``visit(words, log10 prob, log10 backoff or None)`` is called on every
    n-gram line once it is checked (a reader's one pass). kaldilm aborts the process on a
    ``-inf`` log-prob or backoff and on a missing ``<s>``, and builds a G that accepts
    nothing without ``</s>``. The file may be gzip-compressed.

    Raises:
      ValueError: naming file and line.
    """
    path = Path(path)
    counts: dict[int, int] = {}
    seen: dict[int, int] = {}
    section: int | None = None  # None: before \data\, 0: in \data\, N: in \N-grams:
    ended = crlf = False
    keys = _NgramKeys()
    for lineno, raw in text_lines(path, "ARPA file"):
        crlf = crlf or raw.endswith("\r\n")
        line = raw.strip()
        where = f"{path}:{lineno}"
        if not line:
            continue
        if ended:
            raise ValueError(f"{where}: text after \\end\\")
        if line == "\\data\\":
            if section is not None:
                raise ValueError(f"{where}: second \\data\\ header")
            section = 0
            continue
        if section is None:
            continue  # free text before \data\ is allowed by the format
        if line == "\\end\\":
            ended = True
            continue
        if line.startswith("\\") and line.endswith("-grams:"):
            section = _section_header(line, where, counts, section)
            seen[section] = 0
            continue
        if section == 0:
            _add_count(line, where, counts)
            continue
        fields = line.split()
        words = _check_ngram(fields, section, len(counts), where, line, word_table)
        keys.add(words, lineno)
        if visit is not None:
            visit(tuple(words), float(fields[0]),
                  float(fields[-1]) if len(fields) == section + 2 else None)
        seen[section] += 1
    _check_totals(path, section, counts, seen, ended, keys.unigrams)
    keys.check_unique(path)
    return ArpaInfo(len(counts), tuple(counts[n] for n in sorted(counts)),
                    frozenset(keys.vocabulary), crlf)


class _NgramKeys:
    """A 64-bit hash and the line of every n-gram read (16 bytes each, so a large LM's
    n-grams are not held as strings), the words and the unigrams; :meth:`check_unique`
    finds a repeated n-gram."""

    def __init__(self) -> None:
        from array import array

        self.hashes = array("q")
        self.lines = array("q")
        self.vocabulary: set[str] = set()
        self.unigrams: set[str] = set()

    def add(self, words: list[str], lineno: int) -> None:
        self.hashes.append(hash(tuple(words)))
        self.lines.append(lineno)
        self.vocabulary.update(words)
        if len(words) == 1:
            self.unigrams.add(words[0])

    def check_unique(self, path: Path) -> None:
        """Raise ``ValueError`` naming the second line of an n-gram that appears twice."""
        import numpy as np

        h = np.frombuffer(self.hashes, dtype=np.int64)
        order = np.argsort(h, kind="stable")
        same = np.flatnonzero(h[order][1:] == h[order][:-1])
        if same.size == 0:
            return
        lines = np.frombuffer(self.lines, dtype=np.int64)
        pairs = sorted((int(lines[order[i]]), int(lines[order[i + 1]])) for i in same)
        wanted = {n for pair in pairs for n in pair}
        words = _ngram_words(path, wanted)
        for first, second in pairs:
            if words[first] == words[second]:  # else two n-grams with the same 64-bit hash
                raise ValueError(f"{path}:{second}: the n-gram {' '.join(words[second])!r} "
                                 f"appears again (first on line {first}); an ARPA file lists "
                                 "each n-gram once")


def _ngram_words(path: Path, wanted: set[int]) -> dict[int, tuple[str, ...]]:
    """The words of the n-gram lines ``wanted`` of an ARPA file (already checked)."""
    out: dict[int, tuple[str, ...]] = {}
    order = 0
    for lineno, raw in text_lines(path, "ARPA file"):
        line = raw.strip()
        if line.startswith("\\") and line.endswith("-grams:"):
            order = int(line[1 : -len("-grams:")])
        elif lineno in wanted:
            out[lineno] = tuple(line.split()[1 : order + 1])
    return out


def _section_header(line: str, where: str, counts: dict[int, int], section: int) -> int:
    """The order N of a ``\\N-grams:`` header, checked against ``\\data\\`` and the order."""
    try:
        n = int(line[1 : -len("-grams:")])
    except ValueError:
        raise ValueError(f"{where}: bad section header {line!r}") from None
    if n not in counts:
        raise ValueError(f"{where}: section {line!r} not declared in \\data\\")
    expected = 1 if section == 0 else section + 1
    if n != expected:
        raise ValueError(f"{where}: expected \\{expected}-grams:, got {line!r}")
    return n


def _add_count(line: str, where: str, counts: dict[int, int]) -> None:
    """Parse one ``ngram N=count`` line of ``\\data\\`` into ``counts``."""
    fields = line.replace("=", " ").split()
    if len(fields) != 3 or fields[0] != "ngram":
        raise ValueError(f"{where}: expected 'ngram N=count', got {line!r}")
    try:
        n, c = int(fields[1]), int(fields[2])
    except ValueError:
        raise ValueError(f"{where}: expected 'ngram N=count', got {line!r}") from None
    if n != len(counts) + 1 or c < 0:
        raise ValueError(f"{where}: bad n-gram count line {line!r}")
    counts[n] = c


def _check_ngram(fields: list[str], section: int, order: int, where: str, line: str,
                 word_table: k2.SymbolTable | None) -> list[str]:
    """Check one N-gram line's field count, numbers and words; return its words."""
    if len(fields) not in (section + 1, section + 2) or (
        len(fields) == section + 2 and section == order
    ):
        raise ValueError(
            f"{where}: a {section}-gram line needs a log-prob, {section} words"
            f"{' and an optional backoff' if section < order else ''}; got {line!r}"
        )
    numbers = [fields[0]] + fields[section + 1 :]
    for x in numbers:
        try:
            v = float(x)
        except ValueError:
            raise ValueError(f"{where}: {x!r} is not a number") from None
        if not math.isfinite(v):
            raise ValueError(
                f"{where}: {x!r} is not a finite log10 value (an impossible n-gram "
                "is left out of the file, or given a large negative value such as "
                "-99)")
    if float(fields[0]) > 0:
        raise ValueError(f"{where}: log10 probability {fields[0]} is positive (a "
                         "probability above 1); the first field is log10 p <= 0")
    words = fields[1 : section + 1]
    for w in words:
        if word_table is not None and w not in _SENTENCE_MARKS and w not in word_table:
            raise ValueError(
                f"{where}: word {w!r} is not in words.txt (OOV); an ARPA LM for a lang "
                "dir may only use its words: train it on text whose other words are "
                "mapped to <UNK>, or add them to the lexicon (k2dec prepare-lang)")
    return words


def _check_totals(path: Path, section: int | None, counts: dict[int, int],
                  seen: dict[int, int], ended: bool, unigrams: set[str]) -> None:
    """The whole-file checks after the last line: header, counts, ``\\end\\``, marks."""
    if section is None:
        raise ValueError(f"{path}: no \\data\\ header (not an ARPA file?)")
    if not counts:
        raise ValueError(f"{path}: \\data\\ declares no n-gram counts")
    if not ended:
        raise ValueError(f"{path}: missing \\end\\ after its last line (truncated file?)")
    for n, c in counts.items():
        if seen.get(n, 0) != c:
            raise ValueError(f"{path}: \\data\\ says ngram {n}={c} but found {seen.get(n, 0)}")
    for mark in _SENTENCE_MARKS:
        if mark not in unigrams:
            raise ValueError(f"{path}: the 1-grams have no {mark}; an ARPA LM needs both <s> "
                             "and </s> (kaldilm aborts without <s>, and without </s> no "
                             "sentence can end)")


def _starts_with_bom(path: Path) -> bool:
    """Whether the plain text file ``path`` starts with a UTF-8 byte-order mark."""
    with open(path, "rb") as f:
        return f.read(len(_UTF8_BOM)) == _UTF8_BOM


def _with_newlines(src: Path, dst: Path) -> Path:
    """A copy of the plain text file ``src`` at ``dst`` with CRLF line ends turned into LF
    and no UTF-8 byte-order mark."""
    with open(src, "rb") as f, open(dst, "wb") as g:
        for n, line in enumerate(f):
            if n == 0 and line.startswith(_UTF8_BOM):
                line = line[len(_UTF8_BOM):]
            g.write(line[:-2] + b"\n" if line.endswith(b"\r\n") else line)
    return dst


def _arpa_to_fst_text(
    arpa: Path, word_table: k2.SymbolTable, max_order: int, disambig: bool, tmp_dir: Path,
    crlf: bool = False,
) -> str:
    import kaldilm

    words_txt = tmp_dir / "words.txt"
    write_symbol_table(word_table, words_txt)
    with plain_file(arpa, "ARPA file") as plain:  # kaldilm reads plain text only
        # kaldilm takes a "\r" for part of the last word, and aborts on a byte-order mark
        if crlf or _starts_with_bom(plain):
            plain = _with_newlines(plain, tmp_dir / "lf.arpa")
        with _native_stderr_to_log(tmp_dir / "kaldilm.log", f"kaldilm arpa2fst {arpa}"):
            return kaldilm.arpa2fst(
                input_arpa=str(plain),
                disambig_symbol="#0" if disambig else "",
                read_symbol_table=str(words_txt),
                max_order=max_order,
            )


@contextlib.contextmanager
def _native_stderr_to_log(capture: Path, what: str) -> Iterator[None]:
    """Send what C++ code writes to the process's stderr (file descriptor 2) to ``capture``
    while the block runs, then to the log: INFO (seen with ``k2dec -v``) when the block
    succeeds, WARNING with the error when it raises. kaldilm has no verbosity setting and
    logs ``[I] Reading \\data\\ section`` for every ARPA file it reads."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(capture, "wb") as f:
            os.dup2(f.fileno(), 2)
        failed = True
        try:
            yield
            failed = False
        finally:
            os.dup2(saved, 2)
            text = capture.read_text("utf-8", "replace").strip()
            if text:
                logger.log(logging.WARNING if failed else logging.INFO, "%s: %s", what,
                           " | ".join(text.splitlines()))
    finally:
        os.close(saved)


def build_G(
    arpa: str | Path, word_table: k2.SymbolTable, max_order: int = -1
) -> k2.Fsa:
    """G for decoding-graph compilation (LG/HLG): backoff arcs carry ``#0``.

    Args:
      arpa: the ARPA file (natural-log conversion is done by kaldilm: scores are
        ``ln 10 * log10 p``).
      word_table: words.txt (must contain ``#0``, ``<s>``, ``</s>``); ``<s>`` and
        ``</s>`` become epsilons, sentence end becomes the final weight.
      max_order: use n-grams up to this order (``-1``: all).

    Returns:
      a single ``k2.Fsa`` on CPU with ``labels`` = word ids (``#0`` on backoff arcs)
      and ``aux_labels`` = word ids (0 on backoff arcs), arc-sorted.
    """
    import tempfile

    arpa = Path(arpa)
    for sym in ("#0", "<s>", "</s>"):
        if sym not in word_table:
            raise ValueError(f"words.txt has no {sym!r}; it is needed to build G")
    info = check_arpa(arpa, word_table)
    if max_order != -1 and not 1 <= max_order:
        raise ValueError(f"max_order must be -1 or >= 1, got {max_order}")
    logger.info("building G from %s (order %d, max_order %d)", arpa, info.order, max_order)
    with tempfile.TemporaryDirectory() as tmp:
        text = _arpa_to_fst_text(arpa, word_table, max_order, True, Path(tmp), info.crlf)
    G = k2.Fsa.from_openfst(text, acceptor=False)
    return k2.arc_sort(G)


def build_rescoring_G(
    arpa: str | Path,
    word_table: k2.SymbolTable,
    max_order: int = -1,
    device: torch.device | str = "cpu",
) -> k2.Fsa:
    """G for lattice / n-best rescoring (icefall's ``G_4_gram.pt``).

    The backoff symbol becomes epsilon, ``aux_labels`` are dropped, epsilon
    self-loops are added (so it can be intersected with word lattices whose
    epsilons stand for non-word arcs), and the scores are copied to ``lm_scores``.

    Returns:
      a single acceptor ``k2.Fsa`` on ``device``, arc-sorted, with ``lm_scores``.
    """
    G = build_G(arpa, word_table, max_order)
    first_word_disambig = word_table.get("#0")
    labels = G.labels.clone()
    labels[labels >= first_word_disambig] = 0
    G = k2.Fsa(G.arcs)  # drop aux_labels
    G.labels = labels  # the setter re-validates and keeps labels_version in step
    G = k2.arc_sort(k2.add_epsilon_self_loops(k2.arc_sort(G)))
    G = G.to(torch.device(device))
    G.lm_scores = G.scores.clone()
    return G


def train_arpa(text: str | Path, arpa: str | Path, order: int = 3) -> Path:
    """Train a Kneser-Ney ARPA LM on ``text`` (one sentence per line) with kaldingram.

    Idempotent: an existing ``arpa`` is kept.
    """
    from kaldingram.train import main as kaldingram_train

    text, arpa = Path(text), Path(arpa)
    if not text.is_file():
        raise ValueError(f"LM training text {text} does not exist")
    if not 1 <= order <= 5:
        raise ValueError(f"n-gram order must be in 1..5 (kaldingram's range), got {order}")
    if arpa.is_file():
        return arpa
    arpa.parent.mkdir(parents=True, exist_ok=True)
    tmp = arpa.with_suffix(arpa.suffix + ".tmp")
    kaldingram_train(["--ngram-order", str(order), "--text", str(text), "--lm", str(tmp)])
    tmp.replace(arpa)
    return arpa
