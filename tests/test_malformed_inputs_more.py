"""More malformed inputs, as an attacker and a careless user would give them (issue 36): model
and LM files of the wrong kind, truncated or carrying code, checkpoints with integer weights,
ARPA files with repeated n-grams / positive log-probs / Windows line ends, lexicons and symbol
tables with odd bytes and huge ids, audio files that are empty, one sample, NaN, inf, far too
loud or not audio at all, settings files that are JSON of the wrong shape, numeric CLI options
that are NaN, inf, negative or zero, reference files that are not UTF-8, and encoder outputs
of the wrong dtype or width given to the searches.

Every case asserts its outcome class: a clear error (``ValueError``/``TypeError`` naming the
input, or a CLI exit status with a one-line message naming it and no traceback), or a
documented success (checked for being right, not only for not failing). None may kill the
process (kaldilm and k2 abort on some inputs).

All cases run in one child process (``python -m tests.test_malformed_inputs_more DIR``) that
prints a JSON line before and after each case; the CLI cases run in processes forked from it
(the libraries already imported, so each costs a fraction of a second), each with a timeout.
"""

from __future__ import annotations

import gzip
import json
import os
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from k2dec.testing.cli import child_outcomes
from k2dec.testing.lang import TINY_ARPA, TINY_LEXICON

REPO = Path(__file__).resolve().parents[1]
ASSETS = REPO / "assets" / "librispeech-synth"
CLI_TIMEOUT = 120.0

#: the outcome classes
ERROR = "error"  # a ValueError/TypeError whose message contains ``expect``
OK = "ok"  # returns, and ``check(result)`` holds
CLI_ERROR = "cli-error"  # exit status 1 or 2, ``expect`` in the output, no traceback
CLI_OK = "cli-ok"  # exit status ``status``, ``expect`` in the output, no traceback


@dataclass(frozen=True)
class Case:
    """One malformed input: ``run(ctx)`` does the call (API) or gives the CLI arguments."""

    id: str
    outcome: str
    expect: str
    run: Callable[[Any], Any]
    check: Callable[[Any, Any], bool] | None = None
    status: int = 0


def _write(path: Path, data: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_bytes(data.encode("utf-8"))
    return path


class Evil:
    """Unpickling this runs ``touch <marker>``: a checkpoint carrying code."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


class Ctx:
    """The shared inputs of every case, built once in the child."""

    def __init__(self, d: Path) -> None:
        import torch

        from k2dec.lang import write_lang_dir

        self.d = d
        self.marker = d / "code-ran"
        self.lang = write_lang_dir(d / "lang", TINY_LEXICON)
        self.model = ASSETS / "model.pt"
        self.lm = ASSETS / "lm" / "rnn_lm.pt"
        self.tokens = ASSETS / "lang"
        self.state = torch.load(self.model, map_location="cpu", weights_only=False)
        self.wavs = self._wavs()
        self.arpa = _write(d / "lm.arpa", TINY_ARPA)
        self.runs = 0

    def _wavs(self) -> Path:
        import numpy as np
        import soundfile as sf

        wavs = self.d / "wavs"
        wavs.mkdir(parents=True, exist_ok=True)
        x = (np.random.default_rng(0).standard_normal(16000) * 0.1).astype("float32")
        sf.write(wavs / "a.wav", x, 16000)
        return wavs

    def file(self, name: str, data: str | bytes) -> Path:
        return _write(self.d / "files" / name, data)

    def saved(self, name: str, obj: Any) -> Path:
        import torch

        path = self.d / "files" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save(obj, path)
        return path

    def checkpoint(self, name: str, change: Callable[[dict], None]) -> Path:
        """The shipped model's checkpoint with ``change`` applied to a copy of its dict."""
        ckpt = dict(self.state)
        ckpt["model"] = dict(ckpt["model"])
        change(ckpt)
        return self.saved(name, ckpt)

    def half_of(self, path: Path, name: str) -> Path:
        data = path.read_bytes()
        return self.file(name, data[: len(data) // 2])

    def settings(self, name: str, text: str) -> Path:
        return self.file(name, text)

    def decode_args(self, *extra: str, method: str = "greedy_search", wavs: Path | None = None
                    ) -> list[str]:
        self.runs += 1
        out = self.d / "out" / str(self.runs)
        return ["decode", "--model", str(self.model), "--lang-dir", str(self.tokens),
                "--audio-dir", str(wavs or self.wavs), "--out-dir", str(out),
                "--method", method, *extra]


# -- model and LM files -------------------------------------------------------------------

def _no_code_ran(ctx: Ctx, load: Callable[[], Any]) -> Any:
    """``load()``, then fail loudly if the file's code ran."""
    try:
        return load()
    finally:
        if ctx.marker.exists():
            raise AssertionError(f"loading ran the file's code ({ctx.marker} was created)")


def _as_dtype(dtype_name: str, only: str | None = None) -> Callable[[dict], None]:
    def change(ckpt: dict) -> None:
        import torch

        dtype = getattr(torch, dtype_name)
        for k, v in list(ckpt["model"].items()):
            if v.is_floating_point() and (only is None or k == only):
                ckpt["model"][k] = v.to(dtype)
    return change


def _model_cases() -> list[Case]:
    from k2dec.lm import export_lm, load_lm
    from k2dec.model import load_model

    first = "encoder.subsampling.conv.0.weight"

    def evil_model(ctx: Ctx) -> Any:
        path = ctx.checkpoint("evil_model.pt", lambda c: c.update(extra=Evil(ctx.marker)))
        return _no_code_ran(ctx, lambda: load_model(path))

    def evil_weight(ctx: Ctx) -> Any:
        path = ctx.checkpoint("evil_weight.pt",
                              lambda c: c["model"].update({first: Evil(ctx.marker)}))
        return _no_code_ran(ctx, lambda: load_model(path))

    def evil_lm(ctx: Ctx) -> Any:
        path = ctx.saved("evil_lm.pt", {"model_type": "rnn", "x": Evil(ctx.marker)})
        return _no_code_ran(ctx, lambda: load_lm(path))

    def evil_export(ctx: Ctx) -> Any:
        path = ctx.saved("evil_export.pt", {"model_type": "rnn", "x": Evil(ctx.marker)})
        return _no_code_ran(ctx, lambda: export_lm([path], ctx.d / "avg.pt"))

    def eval_builtin(ctx: Ctx) -> Any:
        class EvalPayload:
            def __reduce__(self):
                return (eval, (f"open({str(ctx.marker)!r}, 'w')",))
        path = ctx.saved("eval.pt", {"model_config": {}, "model": {}, "x": EvalPayload()})
        return _no_code_ran(ctx, lambda: load_model(path))

    def jit_as_lm(ctx: Ctx) -> Any:
        import torch

        path = ctx.d / "files" / "jit_lm.pt"
        torch.jit.save(torch.jit.script(torch.nn.Linear(2, 2)), str(path))
        return load_lm(path)

    def legacy(ctx: Ctx) -> Any:
        import torch

        path = ctx.d / "files" / "legacy.pt"
        torch.save(ctx.state, path, _use_new_zipfile_serialization=False)
        return load_model(path)

    def lm_int(ctx: Ctx) -> Any:
        import torch

        ckpt = torch.load(ctx.lm, map_location="cpu", weights_only=False)
        ckpt["model"] = {k: v.to(torch.int32) if v.is_floating_point() else v
                         for k, v in ckpt["model"].items()}
        return load_lm(ctx.saved("lm_int32.pt", ckpt))

    return [
        Case("model: checkpoint carrying os.system", ERROR, "posix.system", evil_model),
        Case("model: a weight that is a code object", ERROR, "evil_weight.pt", evil_weight),
        Case("model: checkpoint carrying eval", ERROR, "eval.pt", eval_builtin),
        Case("LM: checkpoint carrying os.system", ERROR, "evil_lm.pt", evil_lm),
        Case("export-lm: checkpoint carrying os.system", ERROR, "evil_export.pt", evil_export),
        Case("model: int32 weights", ERROR, f"weight '{first}' has dtype torch.int32",
             lambda c: load_model(c.checkpoint("int32.pt", _as_dtype("int32")))),
        Case("model: int64 weights", ERROR, "has dtype torch.int64",
             lambda c: load_model(c.checkpoint("int64.pt", _as_dtype("int64")))),
        Case("model: bool weights", ERROR, "has dtype torch.bool",
             lambda c: load_model(c.checkpoint("bool.pt", _as_dtype("bool")))),
        Case("model: complex weights", ERROR, "has dtype torch.complex64",
             lambda c: load_model(c.checkpoint("complex.pt", _as_dtype("complex64")))),
        Case("model: one int8 tensor among float ones", ERROR,
             "weight 'joiner.output_linear.weight' has dtype torch.int8",
             lambda c: load_model(c.checkpoint("one_int8.pt", _as_dtype(
                 "int8", "joiner.output_linear.weight")))),
        Case("model: float64 weights (documented: cast to float32)", OK, "",
             lambda c: load_model(c.checkpoint("f64.pt", _as_dtype("float64"))),
             check=lambda c, m: next(m.parameters()).dtype.is_floating_point),
        Case("model: truncated file", ERROR, "truncated or corrupt",
             lambda c: load_model(c.half_of(c.model, "half_model.pt"))),
        Case("model: first 100 bytes only", ERROR, "short_model.pt",
             lambda c: load_model(c.file("short_model.pt", c.model.read_bytes()[:100]))),
        Case("model: legacy (non-zip) torch file", ERROR, "legacy.pt", legacy),
        Case("model: an LM checkpoint", ERROR, "rnn_lm.pt", lambda c: load_model(c.lm)),
        Case("model: model_config a list", ERROR, "model_config is a list",
             lambda c: load_model(c.checkpoint("cfg_list.pt",
                                               lambda k: k.update(model_config=[1, 2])))),
        Case("model: weights a list", ERROR, "not a dict of tensors",
             lambda c: load_model(c.checkpoint("w_list.pt", lambda k: k.update(model=[1])))),
        Case("model: a random-bytes file", ERROR, "random.pt",
             lambda c: load_model(c.file("random.pt", os.urandom(4096)))),
        Case("model: tokens= a folder", ERROR, "tokens file",
             lambda c: load_model(c.model, tokens=c.d)),
        Case("LM: truncated export", ERROR, "truncated or corrupt",
             lambda c: load_lm(c.half_of(c.lm, "half_lm.pt"))),
        Case("LM: a TorchScript archive", ERROR, "TorchScript archive", jit_as_lm),
        Case("LM: the acoustic model", ERROR, "model.pt", lambda c: load_lm(c.model)),
        Case("LM: int32 weights", ERROR, "has dtype torch.int32", lm_int),
        Case("export-lm: truncated checkpoint", ERROR, "truncated or corrupt",
             lambda c: export_lm([c.half_of(c.lm, "half_lm2.pt")], c.d / "avg.pt")),
        Case("export-lm: the acoustic model", ERROR, "model.pt",
             lambda c: export_lm([c.model], c.d / "avg.pt")),
    ]


# -- ARPA files ----------------------------------------------------------------------------

def _arpa(replace: list[tuple[str, str]]) -> str:
    text = TINY_ARPA
    for a, b in replace:
        assert a in text, a
        text = text.replace(a, b)
    return text


def _same_G_as_lf(ctx: Ctx, G: Any) -> bool:
    import k2

    from k2dec.graph import build_G

    ref = build_G(ctx.arpa, ctx.lang.word_table)
    return bool(k2.is_rand_equivalent(G, ref, log_semiring=True, treat_epsilons_specially=False)
                and G.num_arcs == ref.num_arcs)


def _arpa_cases() -> list[Case]:
    from k2dec.graph import build_G
    from k2dec.scorers import read_arpa

    def G(name: str, text: str | bytes) -> Callable[[Ctx], Any]:
        return lambda c: build_G(c.file(name, text), c.lang.word_table)

    dup2 = _arpa([("ngram 2=6", "ngram 2=7"), ("-0.1 A B\n", "-0.1 A B\n-0.3 A B\n")])
    return [
        Case("ARPA: repeated bigram", ERROR, "dup2.arpa:19: the n-gram 'A B' appears again",
             G("dup2.arpa", dup2)),
        Case("ARPA: repeated unigram (one with backoff)", ERROR, "dup1.arpa:9",
             G("dup1.arpa", _arpa([("ngram 1=9", "ngram 1=10"),
                                   ("-0.7 A -0.3\n", "-0.7 A -0.3\n-0.5 A\n")]))),
        Case("ARPA: repeated n-gram in a token LM (read_arpa)", ERROR, "dup_tok.arpa:19",
             lambda c: read_arpa(c.file("dup_tok.arpa", dup2))),
        Case("ARPA: positive unigram log-prob", ERROR, "pos1.arpa:8: log10 probability 0.7",
             G("pos1.arpa", _arpa([("-0.7 A -0.3", "0.7 A -0.3")]))),
        Case("ARPA: positive bigram log-prob", ERROR, "pos2.arpa:18",
             G("pos2.arpa", _arpa([("-0.1 A B", "1e3 A B")]))),
        Case("ARPA: positive backoff (allowed)", OK, "",
             G("pos_bow.arpa", _arpa([("-0.7 A -0.3", "-0.7 A 0.3")])),
             check=lambda c, g: g.num_arcs > 0),
        Case("ARPA: CRLF line ends (accepted, same G)", OK, "",
             G("crlf.arpa", TINY_ARPA.replace("\n", "\r\n")), check=_same_G_as_lf),
        Case("ARPA: gzipped CRLF", OK, "",
             G("crlf.arpa.gz", gzip.compress(TINY_ARPA.replace("\n", "\r\n").encode())),
             check=_same_G_as_lf),
        Case("ARPA: UTF-8 byte-order mark (accepted)", OK, "",
             G("bom.arpa", "\ufeff" + TINY_ARPA), check=_same_G_as_lf),
        Case("ARPA: count larger than the n-grams", ERROR, "says ngram 1=10 but found 9",
             G("more.arpa", _arpa([("ngram 1=9", "ngram 1=10")]))),
        Case("ARPA: count smaller than the n-grams", ERROR, "says ngram 2=1 but found 6",
             G("fewer.arpa", _arpa([("ngram 2=6", "ngram 2=1")]))),
        Case("ARPA: count of 10^20", ERROR, "huge_count.arpa",
             G("huge_count.arpa", _arpa([("ngram 2=6", "ngram 2=100000000000000000000")]))),
        Case("ARPA: negative count", ERROR, "neg_count.arpa:3",
             G("neg_count.arpa", _arpa([("ngram 2=6", "ngram 2=-6")]))),
        Case("ARPA: cut inside the bigrams", ERROR, "missing \\end\\",
             G("cut.arpa", TINY_ARPA[: TINY_ARPA.index("-0.4 C D")])),
        Case("ARPA: text after \\end\\", ERROR, "after_end.arpa:25: text after",
             G("after_end.arpa", TINY_ARPA + "-0.1 A B\n")),
        Case("ARPA: backoff on the highest order", ERROR, "bow_top.arpa:18",
             G("bow_top.arpa", _arpa([("-0.1 A B\n", "-0.1 A B -0.5\n")]))),
        Case("ARPA: bigrams before unigrams", ERROR, "order.arpa",
             G("order.arpa", _arpa([("\\1-grams:", "\\2-grams:")]))),
        Case("ARPA: NUL byte in a word", ERROR, "nul.arpa:18",
             G("nul.arpa", _arpa([("-0.1 A B", "-0.1 A B\x00")]))),
        Case("ARPA: Latin-1 word", ERROR, "latin1.arpa:18",
             G("latin1.arpa", _arpa([("-0.1 A B", "-0.1 A \xc9")]).encode("latin-1"))),
        Case("ARPA: empty file", ERROR, "empty.arpa", G("empty.arpa", "")),
    ]


# -- lexicons and symbol tables --------------------------------------------------------------

def _lang_cases() -> list[Case]:
    from k2dec.lang import read_lexicon, read_symbol_table

    def table(name: str, text: str | bytes) -> Callable[[Ctx], Any]:
        return lambda c: read_symbol_table(c.file(name, text))

    def lexicon(name: str, text: str | bytes) -> Callable[[Ctx], Any]:
        return lambda c: read_lexicon(c.file(name, text))

    return [
        Case("symbols: id 2^63", ERROR, "id63.txt",
             table("id63.txt", "<eps> 0\na 9223372036854775808\n")),
        Case("symbols: id 1e3", ERROR, "id_float.txt", table("id_float.txt", "<eps> 0\na 1e3\n")),
        Case("symbols: two symbols, one id", ERROR, "same_id.txt",
             table("same_id.txt", "<eps> 0\na 1\nb 1\n")),
        Case("symbols: NUL in a symbol", ERROR, "nul_sym.txt",
             table("nul_sym.txt", "<eps> 0\na\x00 1\n")),
        Case("symbols: Latin-1 symbol", ERROR, "latin_sym.txt",
             table("latin_sym.txt", "<eps> 0\n\xe9 1\n".encode("latin-1"))),
        Case("symbols: random bytes", ERROR, "rand_sym.txt",
             table("rand_sym.txt", bytes(range(256)) * 8)),
        Case("symbols: UTF-16", ERROR, "utf16_sym.txt",
             table("utf16_sym.txt", "<eps> 0\na 1\n".encode("utf-16"))),
        Case("symbols: BOM (dropped)", OK, "", table("bom_sym.txt", "\ufeff<eps> 0\na 1\n"),
             check=lambda c, t: t["<eps>"] == 0 and t["a"] == 1),
        Case("lexicon: BOM (dropped)", OK, "", lexicon("bom_lex.txt", "\ufeffA a\nB b\n"),
             check=lambda c, lex: [w for w, _ in lex] == ["A", "B"]),
        Case("lexicon: NUL byte", ERROR, "nul_lex.txt", lexicon("nul_lex.txt", "A a\nB b\x00\n")),
        Case("lexicon: UTF-16", ERROR, "utf16_lex.txt",
             lexicon("utf16_lex.txt", "A a\nB b\n".encode("utf-16"))),
        Case("lexicon: only blank lines", ERROR, "blank_lex.txt",
             lexicon("blank_lex.txt", "\n \n\t\n")),
    ]


# -- searches given encoder outputs of another dtype or width ---------------------------------

def _search_cases() -> list[Case]:
    import torch

    from k2dec.aed import beam_search as aed_beam_search
    from k2dec.aed.transformer import TransformerDecoder
    from k2dec.testing.transducer import random_batch, random_model
    from k2dec.transducer import (
        beam_search,
        fast_beam_search,
        greedy_search,
        modified_beam_search,
    )

    model = random_model(vocab_size=5, dim=8)
    enc, lens = random_batch([4, 3], dim=8)
    searches = {"greedy_search": greedy_search, "modified_beam_search": modified_beam_search,
                "fast_beam_search": fast_beam_search, "beam_search": beam_search}
    out: list[Case] = []
    for name, fn in searches.items():
        out += [
            Case(f"{name}: float64 encoder_out", ERROR,
                 "encoder_out has dtype torch.float64, but the model's joiner computes in "
                 "torch.float32", lambda c, f=fn: f(model, enc.double(), lens)),
            Case(f"{name}: float16 encoder_out", ERROR, "encoder_out has dtype torch.float16",
                 lambda c, f=fn: f(model, enc.half(), lens)),
            Case(f"{name}: encoder_out of width 6 for a width-8 joiner", ERROR,
                 "encoder_out must have shape [N, T, C] with C = 8",
                 lambda c, f=fn: f(model, torch.randn(2, 4, 6), lens)),
        ]
    decoder = TransformerDecoder(vocab_size=7, memory_dim=12, d_model=8, nhead=2,
                                 num_layers=1, dim_feedforward=16).eval()
    mlens = torch.tensor([5, 4])
    out += [
        Case("attention beam search: float64 memory", ERROR, "memory has dtype torch.float64",
             lambda c: aed_beam_search(decoder, torch.randn(2, 5, 12).double(), mlens)),
        Case("attention beam search: memory of width 9 for 12", ERROR,
             "memory must have shape [N, T, C] with C = 12",
             lambda c: aed_beam_search(decoder, torch.randn(2, 5, 9), mlens)),
    ]
    return out


def api_cases() -> list[Case]:
    return _model_cases() + _arpa_cases() + _lang_cases() + _search_cases()


# -- CLI: settings files, numeric options, references, model files, ARPA ----------------------

def _cli_cases() -> list[Case]:
    def dec(*extra: str, method: str = "greedy_search") -> Callable[[Ctx], list[str]]:
        return lambda c: c.decode_args(*extra, method=method)

    def cfg(name: str, text: str) -> Callable[[Ctx], list[str]]:
        return lambda c: c.decode_args("--config", str(c.settings(name, text)))

    def text(name: str, data: str | bytes) -> Callable[[Ctx], list[str]]:
        return lambda c: c.decode_args("--text", str(c.file(name, data)))

    def model(make: Callable[[Ctx], Path]) -> Callable[[Ctx], list[str]]:
        def args(c: Ctx) -> list[str]:
            a = c.decode_args()
            a[a.index("--model") + 1] = str(make(c))
            return a
        return args

    def graph(name: str, arpa: str) -> Callable[[Ctx], list[str]]:
        return lambda c: ["compile-graph", "--lang-dir", str(c.lang.path), "--type", "LG",
                          "--arpa", str(c.file(name, arpa)), "--out",
                          str(c.d / "graphs" / f"{name}.pt")]

    def mbs(setting: str) -> Callable[[Ctx], list[str]]:
        return dec("--set", setting, method="modified_beam_search")

    dup = _arpa([("ngram 2=6", "ngram 2=7"), ("-0.1 A B\n", "-0.1 A B\n-0.3 A B\n")])
    return [
        Case("--config: a JSON list", CLI_ERROR, "cfg_list.json: expected a JSON object",
             cfg("cfg_list.json", "[1, 2]")),
        Case("--config: JSON null", CLI_ERROR, "cfg_null.json", cfg("cfg_null.json", "null")),
        Case("--config: a JSON string", CLI_ERROR, "cfg_str.json", cfg("cfg_str.json", '"x"')),
        Case("--config: truncated JSON", CLI_ERROR, "cfg_cut.json: not a readable JSON",
             cfg("cfg_cut.json", '{"set": ["beam=4"')),
        Case("--config: nested 100000 deep", CLI_ERROR, "cfg_deep.json",
             cfg("cfg_deep.json", "[" * 100000 + "]" * 100000)),
        Case("--config: set is a string", CLI_ERROR, "cfg_set_str.json",
             cfg("cfg_set_str.json", '{"set": "beam=4"}')),
        Case("--config: methods is a list", CLI_ERROR, "cfg_methods_list.json",
             cfg("cfg_methods_list.json", '{"methods": ["greedy_search"]}')),
        Case("--config: a method's settings a number", CLI_ERROR, "cfg_method_num.json",
             cfg("cfg_method_num.json", '{"methods": {"greedy_search": 4}}')),
        Case("--config: set holds a number", CLI_ERROR, "cfg_set_num.json",
             cfg("cfg_set_num.json", '{"set": [4]}')),
        Case("--config: unknown method", CLI_ERROR, "no_such_method",
             cfg("cfg_unknown.json", '{"methods": {"no_such_method": []}}')),
        Case("--config: Latin-1 file", CLI_ERROR, "cfg_latin.json",
             lambda c: c.decode_args("--config", str(c.file(
                 "cfg_latin.json", '{"set": ["x=\xe9"]}'.encode("latin-1"))))),
        Case("--max-duration nan", CLI_ERROR, "'--max-duration': 'nan' is not a finite",
             dec("--max-duration", "nan")),
        Case("--max-duration inf", CLI_ERROR, "--max-duration", dec("--max-duration", "inf")),
        Case("--max-duration -1", CLI_ERROR, "--max-duration", dec("--max-duration", "-1")),
        Case("--max-duration 0", CLI_ERROR, "--max-duration", dec("--max-duration", "0")),
        Case("--threads 0", CLI_ERROR, "--threads", dec("--threads", "0")),
        Case("--threads nan", CLI_ERROR, "--threads", dec("--threads", "nan")),
        Case("--set beam_size=nan", CLI_ERROR, "beam_size", mbs("beam_size=nan")),
        Case("--set beam_size=inf", CLI_ERROR, "beam_size", mbs("beam_size=inf")),
        Case("--set beam_size=-1", CLI_ERROR, "beam_size", mbs("beam_size=-1")),
        Case("--set beam_size=0", CLI_ERROR, "beam_size", mbs("beam_size=0")),
        Case("--set beam_size=10^30", CLI_ERROR, "beam_size",
             mbs("beam_size=1000000000000000000000000000000")),
        Case("--set temperature=nan", CLI_ERROR, "temperature", mbs("temperature=nan")),
        Case("--set temperature=0", CLI_ERROR, "temperature", mbs("temperature=0")),
        Case("--set blank_penalty=inf", CLI_ERROR, "blank_penalty", mbs("blank_penalty=inf")),
        Case("--feature-num-mel-bins 0", CLI_ERROR, "num_mel_bins",
             dec("--feature-num-mel-bins", "0")),
        Case("--feature-sampling-rate -16000", CLI_ERROR, "sampling_rate",
             dec("--feature-sampling-rate", "-16000")),
        Case("prepare-lang --sil-prob nan", CLI_ERROR, "--sil-prob",
             lambda c: ["prepare-lang", "--lang-dir", str(c.d / "sil_nan"), "--lexicon",
                        str(c.lang.path / "lexicon.txt"), "--sil-token", "SIL",
                        "--sil-prob", "nan"]),
        Case("compile-graph --max-order 0", CLI_ERROR, "max_order",
             lambda c: ["compile-graph", "--lang-dir", str(c.lang.path), "--type", "LG",
                        "--arpa", str(c.arpa), "--max-order", "0", "--out",
                        str(c.d / "graphs" / "order0.pt")]),
        Case("compile-graph: repeated n-gram", CLI_ERROR, "dup.arpa:19", graph("dup.arpa", dup)),
        Case("compile-graph: positive log-prob", CLI_ERROR, "pos.arpa:18",
             graph("pos.arpa", _arpa([("-0.1 A B", "0.1 A B")]))),
        Case("compile-graph: CRLF ARPA (accepted)", CLI_OK, "all 7 lexicon words are on some arc",
             graph("crlf.arpa", TINY_ARPA.replace("\n", "\r\n"))),
        Case("--text: Latin-1", CLI_ERROR, "text_latin:2: references file is not UTF-8",
             text("text_latin", "a HELLO\nb CAF\xc9\n".encode("latin-1"))),
        Case("--text: binary", CLI_ERROR, "the encoding must be UTF-8",
             text("text_bin", b"a HELLO\n\xff\xfe\x00\x01\n")),
        Case("--text: UTF-16", CLI_ERROR, "text_utf16", text("text_utf16",
                                                             "a HELLO\n".encode("utf-16"))),
        Case("--text: empty", CLI_ERROR, "text_empty is empty", text("text_empty", "")),
        Case("--text: blank lines only", CLI_ERROR, "text_blank is empty",
             text("text_blank", "\n  \n")),
        Case("--text: UTF-8 BOM (dropped: the first id matches)", CLI_OK, "| 100.00 |",
             text("text_bom", "\ufeffa HELLO WORLD\n")),
        Case("--model: checkpoint carrying os.system", CLI_ERROR, "posix.system",
             model(lambda c: c.checkpoint("cli_evil.pt",
                                          lambda k: k.update(x=Evil(c.marker))))),
        Case("--model: int32 weights", CLI_ERROR, "has dtype torch.int32",
             model(lambda c: c.checkpoint("cli_int32.pt", _as_dtype("int32")))),
        Case("--model: truncated", CLI_ERROR, "truncated or corrupt",
             model(lambda c: c.half_of(c.model, "cli_half.pt"))),
        Case("--model: an ARPA file", CLI_ERROR, "lm.arpa", model(lambda c: c.arpa)),
        Case("--rnn-lm: truncated export", CLI_ERROR, "truncated or corrupt",
             lambda c: c.decode_args("--rnn-lm", str(c.half_of(c.lm, "cli_half_lm.pt")),
                                     method="modified_beam_search")),
        Case("--rnn-lm: the acoustic model", CLI_ERROR, "is not a k2dec LM checkpoint",
             lambda c: c.decode_args("--rnn-lm", str(c.model),
                                     method="modified_beam_search")),
    ]


# -- audio files (one CLI run over a folder of them) ---------------------------------------------

def _audio_files(wavs: Path) -> None:
    import struct

    import numpy as np
    import soundfile as sf

    rng = np.random.default_rng(0)
    x = (rng.standard_normal(16000) * 0.1).astype("float32")
    sf.write(wavs / "good.wav", x, 16000)
    (wavs / "empty.wav").write_bytes(b"")
    sf.write(wavs / "nosamples.wav", np.zeros(0, dtype="float32"), 16000)
    sf.write(wavs / "onesample.wav", np.zeros(1, dtype="float32"), 16000)
    for name, value in (("nan", np.nan), ("inf", np.inf), ("minusinf", -np.inf)):
        y = x.copy()
        y[100] = value
        sf.write(wavs / f"{name}.wav", y, 16000, subtype="FLOAT")
    sf.write(wavs / "loud.wav", x * 1e6, 16000, subtype="FLOAT")
    for name, size in (("short_data", 2**30), ("streamed", 0xFFFFFFFF)):
        # a header declaring 2^29 samples; a streaming writer's placeholder size
        sf.write(wavs / f"{name}.wav", x, 16000, subtype="PCM_16")
        data = bytearray((wavs / f"{name}.wav").read_bytes())
        i = data.index(b"data")
        data[i + 4 : i + 8] = struct.pack("<I", size)
        (wavs / f"{name}.wav").write_bytes(bytes(data))
    (wavs / "text.wav").write_text("not audio\n")
    (wavs / "folder.wav").mkdir()
    os.symlink("loop.wav", wavs / "loop.wav")
    os.symlink("/nonexistent/x.wav", wavs / "dangling.wav")
    os.mkfifo(wavs / "fifo.wav")
    sf.write(wavs / "rate1.wav", x[:100], 1)
    sf.write(wavs / "three_channels.wav", np.stack([x, x, x], 1), 16000)
    sf.write(wavs / "u8.wav", x, 16000, subtype="PCM_U8")
    (wavs / "random.wav").write_bytes(rng.integers(0, 256, 5000, dtype=np.uint8).tobytes())
    (wavs / "riff_only.wav").write_bytes(b"RIFF\x24\x00\x00\x00WAVEfmt ")


def _row(name: str) -> Callable[[Ctx], Any]:
    return lambda c: c.audio_rows().get(name)


def _audio_cases() -> list[Case]:
    def failed(name: str, why: str) -> Case:
        return Case(f"audio file: {name}", OK, "", _row(name),
                    check=lambda c, r: r is not None and r["status"] == "error"
                    and f"{name}.wav" in r["error"] and why in r["error"])

    def decoded(name: str, desc: str) -> Case:
        return Case(f"audio file: {name} ({desc})", OK, "", _row(name),
                    check=lambda c, r: r is not None and r["status"] == "ok")

    return [
        failed("empty", "empty file"),
        failed("nosamples", "too short: 0 samples"),
        failed("onesample", "too short: 1 samples"),
        failed("nan", "NaN or infinite"),
        failed("inf", "NaN or infinite"),
        failed("minusinf", "NaN or infinite"),
        failed("short_data", "truncated"),
        failed("text", "not audio"),
        failed("loop", "symlink loop"),
        failed("dangling", "dangling.wav"),
        failed("fifo", "not a regular file"),
        failed("rate1", "sampling rate 1 Hz"),
        failed("random", "not audio"),
        failed("riff_only", "not audio"),
        decoded("good", "the control"),
        decoded("three_channels", "documented: channels averaged"),
        decoded("u8", "documented: 8-bit PCM"),
        decoded("streamed", "documented: a placeholder data size, what is there decodes"),
        decoded("loud", "documented: decoded with a warning"),
        Case("audio folder: the run's status says some failed", OK, "",
             lambda c: c.audio_run, check=lambda c, r: r[0] == 3 and "Traceback" not in r[1]),
        Case("audio folder: far too loud file warned on the CLI", OK, "",
             lambda c: c.audio_run, check=lambda c, r: "loud.wav: samples reach 4.0" in r[1]),
        Case("audio folder: a folder named .wav is not a file", OK, "",
             lambda c: c.audio_run, check=lambda c, r: "folder.wav" not in json.dumps(
                 [x.get("error") for x in c.audio_rows().values()
                  if "folder" not in x["cut_id"]])),
    ]


def all_cases() -> list[Case]:
    return api_cases() + _cli_cases() + _audio_cases()


# -- running ----------------------------------------------------------------------------------

def run_cli(args: list[str], timeout: float = CLI_TIMEOUT) -> tuple[int, str]:
    """``k2dec ARGS`` in a forked process (:func:`k2dec.testing.cli.run_cli`)."""
    from k2dec.testing.cli import run_cli as forked

    return forked(args, timeout)


class ChildCtx(Ctx):
    """:class:`Ctx` with the audio-folder run (once, when a case first asks)."""

    _audio: tuple[int, str] | None = None

    @property
    def audio_run(self) -> tuple[int, str]:
        if self._audio is None:
            wavs = self.d / "bad_wavs"
            wavs.mkdir()
            _audio_files(wavs)
            args = self.decode_args(wavs=wavs)
            self._audio_out = Path(args[args.index("--out-dir") + 1])
            self._audio = run_cli(args)
        return self._audio

    def audio_rows(self) -> dict[str, dict]:
        _ = self.audio_run
        path = self._audio_out / "greedy_search" / "results-bad_wavs.jsonl"
        rows = [json.loads(x) for x in path.read_text().splitlines()] if path.is_file() else []
        return {r["cut_id"]: r for r in rows}


def _outcome(case: Case, ctx: ChildCtx) -> dict:
    """Run one case; the record the parent judges."""
    if case.outcome in (CLI_ERROR, CLI_OK):
        status, output = run_cli(case.run(ctx))
        return {"status": status, "message": output[-3000:]}
    try:
        value = case.run(ctx)
    except Exception as e:  # noqa: BLE001 (recorded and judged by the test)
        return {"raised": type(e).__name__, "message": str(e)[:2000],
                "clear": isinstance(e, ValueError | TypeError),
                "traceback": traceback.format_exc()[-2000:]}
    checked = case.check(ctx, value) if case.check is not None else True
    return {"raised": None, "message": "", "checked": bool(checked)}


def run(work: str) -> None:
    """The child: every case, printing ``{"start": id}`` then the outcome as JSON lines."""
    import logging

    import torch

    logging.disable(logging.WARNING)
    torch.set_num_threads(1)
    ctx = ChildCtx(Path(work))
    for case in all_cases():
        print(json.dumps({"start": case.id}), flush=True)
        try:
            record = _outcome(case, ctx)
        except Exception as e:  # noqa: BLE001 (a check that failed: judged by the test)
            record = {"raised": type(e).__name__, "message": str(e)[:2000], "checked": False}
        print(json.dumps({"done": case.id, **record}), flush=True)


# -- the tests ---------------------------------------------------------------------------------

pytestmark = pytest.mark.skipif(not (ASSETS / "model.pt").is_file(),
                                reason="no shipped model in this checkout")

CASES = {c.id: c for c in all_cases()}


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory) -> dict[str, dict]:
    work = tmp_path_factory.mktemp("malformed-more")
    done = child_outcomes("tests.test_malformed_inputs_more", work, REPO)
    assert not (work / "code-ran").exists(), "a file's code ran while it was loaded"
    return done


def test_the_suite_is_large():
    assert len(CASES) >= 100


@pytest.mark.parametrize("case_id", list(CASES))
def test_outcome(outcomes, case_id):
    case = CASES[case_id]
    got = outcomes.get(case_id)
    assert got is not None, f"{case_id}: the child did not finish it"
    if case.outcome == ERROR:
        assert got.get("clear") and case.expect in got["message"], (
            f"{case_id}: expected a ValueError/TypeError naming {case.expect!r}, got "
            f"{got.get('raised')}: {got['message'][:500]}\n{got.get('traceback', '')}")
    elif case.outcome == OK:
        assert got.get("raised") is None and got.get("checked"), (
            f"{case_id}: expected a documented success, got {got.get('raised')}: "
            f"{got['message'][:500]}\n{got.get('traceback', '')}")
    else:
        want = (1, 2) if case.outcome == CLI_ERROR else (case.status,)
        assert got["status"] in want and case.expect in got["message"], (
            f"{case_id}: expected exit status {want} and {case.expect!r} in the output, got "
            f"{got['status']}:\n{got['message'][-1500:]}")
        assert "Traceback" not in got["message"], f"{case_id}: a traceback\n{got['message']}"


if __name__ == "__main__":
    run(sys.argv[1])
