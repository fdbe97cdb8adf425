"""Malformed inputs to the commands other than ``decode`` (prepare-lang, compile-graph,
draw-graph, tune, train-token-lm, lm-perplexity, export-lm) and the numeric options every
command shares, as a careless user and an attacker would give them: empty, binary, truncated
or incomplete files, files of the wrong kind, NaN / inf / zero / negative numbers, outputs that
are folders or one of the command's own inputs, huge pronunciations and tuning grids.

Every case asserts its outcome: an exit status (2 for a usage error found before any work,
0 where the input is fine after all), a one-line message naming the input, no traceback, no
killed process, and for outputs that would have destroyed an input, the input unchanged.
The cases run in one child process (``python -m tests.test_malformed_cli_commands DIR``) that
forks each command (:func:`k2dec.testing.cli.run_cli`) and prints one JSON line per case.
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from k2dec.testing.cli import child_outcomes
from k2dec.testing.lang import TINY_ARPA, TINY_LEXICON

REPO = Path(__file__).resolve().parents[1]
ASSETS = REPO / "assets" / "librispeech-synth"


@dataclass(frozen=True)
class Case:
    """``args(ctx)`` gives the command line; the outcome is exit ``status`` with ``expect``
    in the output; ``check(ctx, output)`` (optional) checks what the run left behind."""

    id: str
    args: Callable[[Any], list[str]]
    expect: str
    status: int = 2
    check: Callable[[Any, str], bool] | None = None


class Ctx:
    """The files the cases read, made once in ``d``."""

    def __init__(self, d: Path) -> None:
        import torch

        from k2dec.graph import write_lexicon_graphs
        from k2dec.lang import write_lang_dir
        from k2dec.lm import RnnLM, RnnLmConfig

        self.d = d
        self.lang = write_lang_dir(d / "lang", TINY_LEXICON)
        write_lexicon_graphs(self.lang.path)
        self.arpa = self.file("lm.arpa", TINY_ARPA)
        self.lexicon = self.lang.path / "lexicon.txt"
        self.text = self.file("text.txt", "THE CAT SAT ON THE MAT\nA DOG RAN\n")
        self.bpe = ASSETS / "lang" / "bpe.model"
        self.lm = ASSETS / "lm" / "rnn_lm.pt"
        cfg = RnnLmConfig(vocab_size=7, embedding_dim=4, hidden_dim=4, num_layers=1)
        self.config = dataclasses.asdict(cfg)
        self.state = RnnLM(cfg).state_dict()
        self.ckpt = self.checkpoint("ck.pt")
        self.torch_file = d / "not_fsa.pt"
        torch.save({"a": 1}, self.torch_file)

    def file(self, name: str, data: str | bytes) -> Path:
        path = self.d / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
        return path

    def checkpoint(self, name: str, change: Callable[[dict], None] | None = None) -> Path:
        import torch

        ckpt = {"model_type": "rnn", "model_config": dict(self.config),
                "model": dict(self.state)}
        if change is not None:
            change(ckpt)
        torch.save(ckpt, self.d / name)
        return self.d / name

    def prep(self, name: str, data: str | bytes, *extra: str) -> list[str]:
        return ["prepare-lang", "--lang-dir", str(self.d / f"lang_{name}"), "--lexicon",
                str(self.file(f"{name}.lex", data)), *extra]

    def compile(self, *extra: str, kind: str = "LG", lang: Path | None = None) -> list[str]:
        arpa = [] if kind in ("H", "L") else ["--arpa", str(self.arpa)]
        return ["compile-graph", "--lang-dir", str(lang or self.lang.path), "--type", kind,
                *arpa, *extra]

    def export(self, *paths: Path | str, out: Path | str | None = None) -> list[str]:
        return ["export-lm", *map(str, paths), "-o", str(out or self.d / "exported.pt")]

    def token_lm(self, text: Path | str, *extra: str, out: Path | None = None) -> list[str]:
        return ["train-token-lm", "--text", str(text), "--bpe-model", str(self.bpe), "-o",
                str(out or self.d / "token.arpa"), *extra]

    def ppl(self, *extra: str, lm: Path | None = None, text: Path | None = None) -> list[str]:
        return ["lm-perplexity", "--rnn-lm", str(lm or self.lm), "--text",
                str(text or self.text), "--bpe-model", str(self.bpe), "--no-progress", *extra]

    def tune(self, *extra: str) -> list[str]:  # every file exists; the grid is refused first
        return ["tune", "--cuts", str(self.text), "--model", str(self.ckpt), "--method",
                "1best", "--out", str(self.d / "tuned.json"), *extra]


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _unchanged(path_of: Callable[[Any], Path]) -> Callable[[Any, str], bool]:
    """A check that the file is as the context made it (its digest noted before the run)."""
    def check(ctx: Any, _output: str) -> bool:
        path = path_of(ctx)
        return path.is_file() and _digest(path) == ctx.digests[str(path)]
    return check


def _set(key: str, value: Any) -> Callable[[dict], None]:
    return lambda ckpt: ckpt.update({key: value})


def _drop(key: str) -> Callable[[dict], None]:
    return lambda ckpt: ckpt.pop(key)


def _nan_weight(ckpt: dict) -> None:
    name = next(iter(ckpt["model"]))
    ckpt["model"] = {**ckpt["model"], name: ckpt["model"][name] * float("nan")}


def _missing_weight(ckpt: dict) -> None:
    ckpt["model"] = dict(list(ckpt["model"].items())[1:])


def _prepare_lang_cases() -> list[Case]:
    huge = "LONG " + " ".join(["a", "b"] * 50_000) + "\n" + "".join(
        f"{w} {' '.join(p)}\n" for w, p in TINY_LEXICON)

    def huge_ok(ctx: Any, _output: str) -> bool:
        path = ctx.d / "lang_huge" / "lexicon_disambig.txt"
        lines = path.read_text().splitlines() if path.is_file() else []
        return any(x.startswith("LONG a b") and len(x.split()) == 100_001 for x in lines)

    return [
        Case("prepare-lang: empty lexicon", lambda c: c.prep("empty", ""), "empty.lex is empty"),
        Case("prepare-lang: blank lines only", lambda c: c.prep("blank", "\n \n"),
             "blank.lex is empty"),
        Case("prepare-lang: a word without tokens", lambda c: c.prep("notok", "A\nB b\n"),
             "notok.lex:1: word 'A' has an empty pronunciation"),
        Case("prepare-lang: binary lexicon", lambda c: c.prep("bin", b"\xff\xfe\x00A a\n"),
             "bin.lex"),
        Case("prepare-lang: Latin-1 lexicon",
             lambda c: c.prep("latin", "CAF\xc9 a\n".encode("latin-1")),
             "latin.lex:1: lexicon is not UTF-8"),
        Case("prepare-lang: Kaldi lexiconp.txt", lambda c: c.prep("lexp", "A 1.0 a\nB 0.5 b\n"),
             "looks like a Kaldi lexiconp.txt"),
        Case("prepare-lang: the reserved token #0", lambda c: c.prep("hash", "A #0\nB b\n"),
             "reserved token '#0'"),
        Case("prepare-lang: the word <eps>", lambda c: c.prep("eps", "<eps> a\nB b\n"),
             "'<eps>' is reserved"),
        Case("prepare-lang: the same line twice", lambda c: c.prep("dup", "A a\nB b\nA a\n"),
             "dup.lex:3: word 'A' with the pronunciation 'a' is already on line 1"),
        Case("prepare-lang: a 100,000-token pronunciation (was killed)",
             lambda c: c.prep("huge", huge), "wrote", status=0, check=huge_ok),
        Case("prepare-lang: --lang-dir is a file",
             lambda c: ["prepare-lang", "--lang-dir", str(c.text), "--lexicon",
                        str(c.lexicon)], "is a file, not a directory"),
        Case("prepare-lang: --sil-token not a token",
             lambda c: c.prep("sil", "A a\n", "--sil-token", "SIL"),
             "silence token 'SIL' is not in tokens.txt"),
        Case("prepare-lang: --sil-prob nan",
             lambda c: c.prep("silnan", "A a\n", "--sil-token", "a", "--sil-prob", "nan"),
             "'--sil-prob': 'nan' is not a finite number"),
        Case("prepare-lang: --bpe-model is not one",
             lambda c: c.prep("notbpe", "A a\n", "--bpe-model", str(c.arpa)),
             "not a sentencepiece model"),
        Case("prepare-lang: --words empty",
             lambda c: ["prepare-lang", "--lang-dir", str(c.d / "lang_w"), "--words",
                        str(c.file("words_empty", ""))], "words_empty has no words"),
    ]


def _graph_cases() -> list[Case]:
    def blank_only(c: Any) -> Path:
        lang = c.d / "blank_lang"
        lang.mkdir(exist_ok=True)
        (lang / "tokens.txt").write_text("<eps> 0\n")
        (lang / "words.txt").write_text("<eps> 0\nA 1\n")
        (lang / "lexicon.txt").write_text("A a\n")
        return lang

    def h_says_no_words(_c: Any, output: str) -> bool:
        return "lexicon words" not in output and " arcs" in output

    return [
        Case("compile-graph: --out is a folder",
             lambda c: c.compile("--out", str(c.d)), "'--out'"),
        Case("compile-graph: --out is the ARPA file",
             lambda c: c.compile("--out", str(c.arpa)), "is the input",
             check=_unchanged(lambda c: c.arpa)),
        Case("compile-graph: --out is the lang dir's words.txt",
             lambda c: c.compile("--out", str(c.lang.path / "words.txt")), "is the input",
             check=_unchanged(lambda c: c.lang.path / "words.txt")),
        Case("compile-graph: H names no lexicon words",
             lambda c: c.compile("--out", str(c.d / "H.pt"), kind="H"), "wrote", status=0,
             check=h_says_no_words),
        Case("compile-graph: tokens.txt with only the blank",
             lambda c: c.compile("--out", str(c.d / "L0.pt"), kind="L", lang=blank_only(c)),
             "has no token but the blank"),
        Case("compile-graph: --max-order -5",
             lambda c: c.compile("--max-order", "-5", "--out", str(c.d / "o5.pt")),
             "max_order must be -1 or >= 1, got -5"),
        Case("compile-graph: an empty ARPA file",
             lambda c: ["compile-graph", "--lang-dir", str(c.lang.path), "--type", "LG",
                        "--arpa", str(c.file("empty.arpa", "")), "--out",
                        str(c.d / "e.pt")], "empty.arpa: no \\data\\ header"),
        Case("compile-graph: a truncated .arpa.gz",
             lambda c: ["compile-graph", "--lang-dir", str(c.lang.path), "--type", "LG",
                        "--arpa", str(c.file("cut.arpa.gz",
                                             gzip.compress(TINY_ARPA.encode())[:40])),
                        "--out", str(c.d / "t.pt")], "cut.arpa.gz: cannot read ARPA file"),
        Case("compile-graph: an ARPA word not in words.txt",
             lambda c: ["compile-graph", "--lang-dir", str(c.lang.path), "--type", "G",
                        "--arpa", str(c.file("oov.arpa", TINY_ARPA.replace(" E -0.25",
                                                                           " ZZZ -0.25"))),
                        "--out", str(c.d / "g.pt")], "word 'ZZZ' is not in words.txt"),
        Case("draw-graph: --max-arcs 0",
             lambda c: ["draw-graph", str(c.lang.path / "L.pt"), "--out",
                        str(c.d / "a.svg"), "--max-arcs", "0"], "'--max-arcs'"),
        Case("draw-graph: --max-arcs -1",
             lambda c: ["draw-graph", str(c.lang.path / "L.pt"), "--out",
                        str(c.d / "b.svg"), "--max-arcs", "-1"], "'--max-arcs'"),
        Case("draw-graph: not a graph file",
             lambda c: ["draw-graph", str(c.arpa), "--out", str(c.d / "c.svg")],
             "lm.arpa cannot be read"),
        Case("draw-graph: a torch file that is no FSA",
             lambda c: ["draw-graph", str(c.torch_file), "--out", str(c.d / "d.svg")],
             "expected a dict with 'arcs'"),
        Case("draw-graph: an output that is no image",
             lambda c: ["draw-graph", str(c.lang.path / "L.pt"), "--out",
                        str(c.d / "e.txt")], "output must end in .svg, .png or .pdf"),
    ]


def _lm_cases() -> list[Case]:
    return [
        Case("export-lm: not a checkpoint", lambda c: c.export(c.text),
             "text.txt cannot be read"),
        Case("export-lm: an empty file", lambda c: c.export(c.file("empty.pt", b"")),
             "empty.pt is empty"),
        Case("export-lm: no weights",
             lambda c: c.export(c.checkpoint("noweights.pt", _drop("model"))),
             "noweights.pt' is not a k2dec LM checkpoint"),
        Case("export-lm: no config",
             lambda c: c.export(c.checkpoint("noconfig.pt", _drop("model_config"))),
             "noconfig.pt' is not a k2dec LM checkpoint"),
        Case("export-lm: an impossible config",
             lambda c: c.export(c.checkpoint("badconfig.pt",
                                             _set("model_config", {"vocab_size": -3}))),
             "badconfig.pt"),
        Case("export-lm: weights that are strings",
             lambda c: c.export(c.checkpoint("strings.pt", _set("model", {"x": "y"}))),
             "strings.pt: its weights are not a dict of tensors"),
        Case("export-lm: NaN weights (were exported)",
             lambda c: c.export(c.checkpoint("nan.pt", _nan_weight)),
             "nan.pt: weights ['embedding.weight'] are not finite"),
        Case("export-lm: a weight missing (was exported)",
             lambda c: c.export(c.checkpoint("missing.pt", _missing_weight)),
             "missing.pt: its weights do not fit the model"),
        Case("export-lm: the output is the checkpoint",
             lambda c: c.export(c.ckpt, out=c.ckpt), "is one of the checkpoints",
             check=_unchanged(lambda c: c.ckpt)),
        Case("export-lm: a checkpoint given twice", lambda c: c.export(c.ckpt, c.ckpt),
             "is given twice"),
        Case("export-lm: the output's folder is a file",
             lambda c: c.export(c.ckpt, out=f"{c.text}/x.pt"),
             "cannot create the folder of output"),
        Case("train-token-lm: empty text", lambda c: c.token_lm(c.file("empty_text", "")),
             "empty_text has no sentences"),
        Case("train-token-lm: the output is the text",
             lambda c: c.token_lm(c.text, out=c.text), "is the input",
             check=_unchanged(lambda c: c.text)),
        Case("train-token-lm: the output is the BPE model",
             lambda c: c.token_lm(c.text, out=c.bpe), "is the input",
             check=_unchanged(lambda c: c.bpe)),
        Case("train-token-lm: binary text",
             lambda c: c.token_lm(c.file("bin_text", b"\xff\xfe\x00\x01")),
             "bin_text:1: LM text is not UTF-8"),
        Case("train-token-lm: truncated gzip",
             lambda c: c.token_lm(c.file("cut.txt.gz",
                                         gzip.compress(b"THE CAT SAT\n" * 50)[:30])),
             "cut.txt.gz: cannot read LM text"),
        Case("train-token-lm: --order 0", lambda c: c.token_lm(c.text, "--order", "0"),
             "'--order'"),
        Case("lm-perplexity: not an LM", lambda c: c.ppl(lm=c.text), "text.txt cannot be read"),
        Case("lm-perplexity: another vocabulary", lambda c: c.ppl(lm=c.ckpt),
             "has 256 tokens but lm.vocab_size is 7"),
        Case("lm-perplexity: empty text", lambda c: c.ppl(text=c.file("empty_ppl", "")),
             "empty_ppl' has no non-empty lines"),
        Case("lm-perplexity: --batch-size 0", lambda c: c.ppl("--batch-size", "0"),
             "--batch-size must be >= 1, got 0"),
        Case("lm-perplexity: --device junk", lambda c: c.ppl("--device", "junk"),
             "--device 'junk' is not a torch device"),
        Case("lm-perplexity: a missing text", lambda c: c.ppl(text=c.d / "nope.txt"),
             "nope.txt' does not exist"),
        Case("lm-perplexity: NaN weights",
             lambda c: c.ppl(lm=c.checkpoint("nan_ppl.pt", _nan_weight)),
             "nan_ppl.pt: weights ['embedding.weight'] are not finite"),
        Case("lm-perplexity: a good run", lambda c: c.ppl(), "perplexity ", status=0),
    ]


def _numeric_cases() -> list[Case]:
    return [
        Case("tune: a grid item without values", lambda c: c.tune("--grid", "graph.scale"),
             "expected FIELD=V1,V2,... for a grid, got 'graph.scale'"),
        Case("tune: a grid of 1,000,000 combinations",
             lambda c: c.tune("--grid", "graph.scale=" + ",".join(map(str, range(1000))),
                              "--grid", "lattice.search_beam=" + ",".join(map(str,
                                                                             range(1000)))),
             "the grid has 1000000 combinations (1000 x 1000), more than 1000"),
        Case("tune: --max-duration nan", lambda c: c.tune("--max-duration", "nan"),
             "'--max-duration': 'nan' is not a finite number"),
        Case("decode: --max-duration nan",
             lambda c: ["decode", "--max-duration", "nan", "--method", "1best"],
             "'--max-duration': 'nan' is not a finite number"),
        Case("decode: --max-duration inf",
             lambda c: ["decode", "--max-duration", "inf", "--method", "1best"],
             "'--max-duration'"),
        Case("decode: --max-duration -1",
             lambda c: ["decode", "--max-duration", "-1", "--method", "1best"],
             "'--max-duration'"),
        Case("decode: --max-duration 0",
             lambda c: ["decode", "--max-duration", "0", "--method", "1best"],
             "'--max-duration'"),
        Case("decode: --silence-db nan", lambda c: ["decode", "--silence-db", "nan"],
             "'--silence-db': 'nan' is not a finite number"),
        Case("decode: --feature-dither nan", lambda c: ["decode", "--feature-dither", "nan"],
             "'--feature-dither': 'nan' is not a finite number"),
        Case("decode: --feature-dither -inf", lambda c: ["decode", "--feature-dither", "-inf"],
             "'--feature-dither': '-inf' is not a finite number"),
    ]


def all_cases() -> list[Case]:
    return _prepare_lang_cases() + _graph_cases() + _lm_cases() + _numeric_cases()


def run(work: str) -> None:
    """The child: every case, printing ``{"start": id}`` then its outcome as JSON lines."""
    import logging

    import torch

    from k2dec.testing.cli import run_cli

    logging.disable(logging.WARNING)
    torch.set_num_threads(1)
    ctx = Ctx(Path(work))
    ctx.digests = {str(p): _digest(p) for p in (ctx.arpa, ctx.text, ctx.ckpt, ctx.bpe,
                                                 ctx.lang.path / "words.txt")}
    for case in all_cases():
        print(json.dumps({"start": case.id}), flush=True)
        status, output = run_cli(case.args(ctx))
        checked = case.check(ctx, output) if case.check is not None else True
        print(json.dumps({"done": case.id, "status": status, "output": output[-3000:],
                          "checked": bool(checked)}), flush=True)


pytestmark = pytest.mark.skipif(not (ASSETS / "lm" / "rnn_lm.pt").is_file(),
                                reason="no shipped BPE model and LM in this checkout")

CASES = {c.id: c for c in all_cases()}


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory) -> dict[str, dict]:
    return child_outcomes("tests.test_malformed_cli_commands",
                          tmp_path_factory.mktemp("malformed-cli"), REPO)


def test_the_suite_is_large():
    assert len(CASES) >= 30


@pytest.mark.parametrize("case_id", list(CASES))
def test_outcome(outcomes, case_id):
    case = CASES[case_id]
    got = outcomes.get(case_id)
    assert got is not None, f"{case_id}: the child did not finish it"
    output = got["output"]
    assert "Traceback" not in output, f"{case_id}: a traceback:\n{output}"
    assert got["status"] == case.status, (f"{case_id}: exit status {got['status']}, not "
                                          f"{case.status}:\n{output}")
    assert case.expect in output, f"{case_id}: {case.expect!r} not in:\n{output}"
    if case.status != 0:  # one message, not a dump: its error line names the input
        errors = [x for x in output.splitlines() if "rror" in x]
        assert len(errors) == 1, f"{case_id}: {errors}"
    assert got["checked"], f"{case_id}: the check of what the run left failed:\n{output}"


if __name__ == "__main__":
    run(sys.argv[1])
