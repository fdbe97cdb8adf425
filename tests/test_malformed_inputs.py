"""Fuzz-style test: malformed lexicons, symbol tables, ARPA files, graphs, checkpoints,
manifests, tensors and settings each get a clear ``ValueError``/``TypeError`` that names the
input, and none aborts the process.

kaldilm and k2 abort the whole process (SIGABRT) on some malformed inputs, so every case runs
in one child process (``python -m tests.test_malformed_inputs DIR``) that prints a JSON line
before and after each case; a child killed by a signal shows which case it was running.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

from k2dec.testing.lang import TINY_ARPA, TINY_LEXICON

REPO = Path(__file__).resolve().parents[1]

def _write(path: Path, data: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data)
    return path


def cases(d: Path) -> list[tuple[str, str, str, Callable[[], object]]]:
    """``(category, case, expected substring of the message, thunk)``: the thunk must raise
    ValueError or TypeError whose message contains the substring (the input's name)."""
    import k2
    import torch

    from k2dec.data import load_cuts
    from k2dec.graph import build_G, check_arpa, compile_graph, load_graph
    from k2dec.lang import read_lexicon, read_symbol_table, write_lang_dir
    from k2dec.lattice import LatticeConfig, get_lattice, prune_lattice
    from k2dec.lm import load_lm
    from k2dec.methods import get_method, override_config
    from k2dec.model import JointConfig, JointModel, load_model
    from k2dec.nbest import Nbest, rescore_with_attention_decoder, sample_paths
    from k2dec.transducer import fast_beam_search

    out: list[tuple[str, str, str, Callable[[], object]]] = []

    def add(category: str, case: str, expect: str, thunk: Callable[[], object]) -> None:
        out.append((category, case, expect, thunk))

    # -- lexicons -------------------------------------------------------------------------
    lang = write_lang_dir(d / "lang", TINY_LEXICON)
    table = lang.token_table
    lexicon_text = "".join(f"{w} {' '.join(t)}\n" for w, t in TINY_LEXICON)
    lex = d / "lex"
    for name, data in [
        ("empty", ""),
        ("no pronunciation", "A a\nB\n"),
        ("epsilon token", "A a\nSIL <eps>\n"),
        ("reserved word <s>", "<s> a\n"),
        ("disambiguation word", "#2 a b\n"),
        ("kaldi lexiconp", "A 1.0 a\nB 0.5 b\n"),
        ("latin-1", "A a\nCAF\xc9 c a\n".encode("latin-1")),
        ("truncated gzip", gzip.compress(lexicon_text.encode())[:12]),
        ("binary", b"A a\n\x00\x01\x02\n"),
    ]:
        path = _write(lex / f"{name.replace(' ', '_')}.txt", data)
        add("lexicon", name, path.name, lambda p=path: read_lexicon(p))
    unknown = _write(lex / "unknown_token.txt", "A a\nF f\n")
    add("lexicon", "token not in tokens.txt", "unknown_token.txt",
        lambda: read_lexicon(unknown, table))
    blank = _write(lex / "blank_token.txt", "A a\nB <eps> b\n")
    add("lexicon", "id-0 token", "blank_token.txt", lambda: read_lexicon(blank, table))
    add("lexicon", "missing file", "nope.txt", lambda: read_lexicon(lex / "nope.txt"))
    add("lexicon", "a directory", "lex", lambda: read_lexicon(lex))

    # -- symbol tables --------------------------------------------------------------------
    for name, data in [
        ("non-integer id", "<eps> 0\na one\n"),
        ("duplicate symbol", "<eps> 0\na 1\na 2\n"),
        ("negative id", "<eps> 0\na -1\n"),
        ("three fields", "<eps> 0\na 1 2\n"),
        ("empty", "\n\n"),
        ("id beyond int32", "<eps> 0\na 4294967296\n"),
    ]:
        path = _write(d / "symbols" / f"{name.replace(' ', '_')}.txt", data)
        add("symbol table", name, path.name, lambda p=path: read_symbol_table(p))

    # -- ARPA files (kaldilm aborts on some: each goes through build_G) --------------------
    for name, data in [
        ("-inf log-prob", TINY_ARPA.replace("-0.8 AB -0.2", "-inf AB -0.2")),
        ("-inf backoff", TINY_ARPA.replace("-0.8 AB -0.2", "-0.8 AB -inf")),
        ("no <s>", TINY_ARPA.replace("ngram 1=9", "ngram 1=8").replace("-99 <s> -0.5\n", "")
         .replace("-0.2 <s> A", "-0.2 B A").replace("-0.6 <s> C", "-0.6 A C")),
        ("no </s>", TINY_ARPA.replace("ngram 1=9", "ngram 1=8").replace("-1.0 </s>\n", "")
         .replace("-0.3 B </s>", "-0.3 B A")),
        ("no \\end\\", TINY_ARPA.replace("\\end\\\n", "")),
        ("counts mismatch", TINY_ARPA.replace("ngram 2=6", "ngram 2=7")),
        ("OOV word", TINY_ARPA.replace("-0.1 A B", "-0.1 A ZEBRA")),
        ("no \\data\\", "just some text\n"),
        ("nan", TINY_ARPA.replace("-0.7 A -0.3", "nan A -0.3")),
        ("gzipped garbage", gzip.compress(b"not an ARPA file\n")),
        ("utf-16", TINY_ARPA.encode("utf-16")),
    ]:
        path = _write(d / "arpa" / f"{name.replace(' ', '_').replace(chr(92), '')}.arpa", data)
        add("ARPA", name, path.name, lambda p=path: build_G(p, lang.word_table))
    add("ARPA", "missing file", "nope.arpa", lambda: check_arpa(d / "nope.arpa"))

    # -- graphs ---------------------------------------------------------------------------
    arpa = _write(d / "lm.arpa", TINY_ARPA)
    HLG, hlg_path = compile_graph(lang.path, "HLG", arpa=arpa)
    LG, lg_path = compile_graph(lang.path, "LG", arpa=arpa)
    gdir = d / "graphs"

    def saved(name: str, obj) -> Path:
        gdir.mkdir(parents=True, exist_ok=True)
        torch.save(obj, gdir / name)
        return gdir / name

    as_hlg = _write(gdir / "lg_as" / "HLG.pt", lg_path.read_bytes())
    add("graph", "LG saved as HLG.pt", "HLG.pt",
        lambda: load_graph(as_hlg, lang.token_table, lang.word_table))
    add("graph", "phone graph for a 256-token model", "HLG.pt",
        lambda: load_graph(hlg_path, lang.token_table, lang.word_table, vocab_size=256))
    bare_lg = LG.as_dict()
    bare_lg.pop("k2dec_meta", None)
    icefall_hlg = saved("HLG.pt", bare_lg)  # an LG without metadata, named HLG
    add("graph", "icefall file without metadata, wrong kind", "HLG.pt",
        lambda: load_graph(icefall_hlg, lang.token_table, lang.word_table))
    for name, data in [("empty", b""), ("text", b"HLG\n"),
                       ("gzip", gzip.compress(b"HLG\n"))]:
        path = _write(gdir / name / "HLG.pt", data)
        add("graph", f"{name} file", "HLG.pt", lambda p=path: load_graph(p))
    listed = saved("list.pt", [1, 2, 3])
    add("graph", "a pickled list", "list.pt", lambda: load_graph(listed))
    d64 = HLG.as_dict()
    d64["arcs"] = d64["arcs"].to(torch.int64)
    wide = saved("int64.pt", d64)
    add("graph", "int64 arcs", "int64.pt", lambda: load_graph(wide))
    cut = HLG.as_dict()
    cut["arcs"] = cut["arcs"][:-2].clone()
    truncated = saved("truncated.pt", cut)
    add("graph", "arcs cut short", "truncated.pt", lambda: load_graph(truncated))
    nan = HLG.clone()
    scores = nan.scores.clone()
    scores[3] = math.nan
    nan.scores = scores
    nan_path = saved("nan.pt", nan.as_dict())
    add("graph", "NaN scores", "nan.pt", lambda: load_graph(nan_path))

    # -- checkpoints ----------------------------------------------------------------------
    cdir = d / "checkpoints"
    model = JointModel(JointConfig(vocab_size=6))
    good = {"model_config": asdict(JointConfig(vocab_size=6)), "model": model.state_dict()}
    for name, data in [("empty", b""), ("text", b"model\n"),
                       ("gzip", gzip.compress(b"model\n"))]:
        path = _write(cdir / f"{name}.pt", data)
        add("checkpoint", f"{name} model file", path.name, lambda p=path: load_model(p))

    def ckpt(name: str, obj) -> Path:
        cdir.mkdir(parents=True, exist_ok=True)
        torch.save(obj, cdir / name)
        return cdir / name

    no_keys = ckpt("no_keys.pt", {"weights": 1})
    add("checkpoint", "dict without model_config", "no_keys.pt", lambda: load_model(no_keys))
    bad_cfg = ckpt("bad_config.pt", {"model_config": {"vocab_size": 6, "colour": "red"},
                                     "model": good["model"]})
    add("checkpoint", "unknown config field", "bad_config.pt", lambda: load_model(bad_cfg))
    other = ckpt("other_vocab.pt", {"model_config": asdict(JointConfig(vocab_size=9)),
                                    "model": good["model"]})
    add("checkpoint", "weights of another shape", "other_vocab.pt", lambda: load_model(other))
    nan_w = {k: v.clone() for k, v in good["model"].items()}
    first = next(k for k, v in nan_w.items() if v.is_floating_point())
    nan_w[first].fill_(math.nan)
    nan_ckpt = ckpt("nan_weights.pt", {"model_config": good["model_config"], "model": nan_w})
    add("checkpoint", "NaN weights", "nan_weights.pt", lambda: load_model(nan_ckpt))
    lm_text = _write(cdir / "lm.pt", b"an LM\n")
    add("checkpoint", "text as LM", "lm.pt", lambda: load_lm(lm_text))
    lm_type = ckpt("lm_type.pt", {"model_type": "gpt", "model_config": {}, "model": {}})
    add("checkpoint", "unknown LM type", "lm_type.pt", lambda: load_lm(lm_type))

    # -- manifests ------------------------------------------------------------------------
    mdir = d / "manifests"
    for name, data in [
        ("empty.jsonl", ""),
        ("not_json.jsonl", '{"id": "a"}\nnot json\n'),
        ("a_list.jsonl", "[1, 2]\n"),
        ("truncated.jsonl.gz", gzip.compress(b'{"id": "a"}\n' * 50)[:30]),
        ("latin1.jsonl", '{"id": "caf\xe9"}\n'.encode("latin-1")),
        ("no_cut.jsonl", '{"id": "a", "colour": "red"}\n'),
    ]:
        path = _write(mdir / name, data)
        add("manifest", name, name, lambda p=path: load_cuts(p))
    add("manifest", "missing", "nope.jsonl.gz", lambda: load_cuts(mdir / "nope.jsonl.gz"))

    # -- tensors and settings ---------------------------------------------------------------
    V = lang.max_token_id + 1
    lp = torch.randn(2, 6, V).log_softmax(-1)
    lens = torch.tensor([6, 4])
    nan_lp = lp.clone()
    nan_lp[0, 2, 1] = math.nan
    add("tensor", "NaN log_probs", "log_probs", lambda: get_lattice(nan_lp, lens, HLG))
    add("tensor", "2-D log_probs", "log_probs", lambda: get_lattice(lp[0], lens, HLG))
    add("tensor", "float64 log_probs", "log_probs",
        lambda: get_lattice(lp.double(), lens, HLG))
    add("tensor", "lengths beyond T", "log_probs_lens",
        lambda: get_lattice(lp, torch.tensor([7, 4]), HLG))
    add("tensor", "float lengths", "log_probs_lens", lambda: get_lattice(lp, lens.float(), HLG))
    add("tensor", "graph for more tokens than log_probs", "log_probs",
        lambda: get_lattice(lp[:, :, :3].contiguous(), lens, HLG))
    lattice = get_lattice(lp, lens, HLG, LatticeConfig()).lattice
    add("tensor", "Nbest from a tensor", "lattice", lambda: Nbest.from_lattice(lp, 5))
    add("tensor", "num_paths 0", "num_paths", lambda: Nbest.from_lattice(lattice, 0))
    add("tensor", "nbest_scale -1", "nbest_scale",
        lambda: Nbest.from_lattice(lattice, 5, nbest_scale=-1.0))
    add("tensor", "oracle with one ref for two utterances", "references",
        lambda: Nbest.from_lattice(lattice, 5).oracle([[1]]))
    add("tensor", "sample_paths of one FSA", "FsaVec", lambda: sample_paths(lattice[0], 3))
    add("tensor", "prune_lattice max_arcs 0", "max_arcs", lambda: prune_lattice(lattice, 0))
    add("tensor", "attention memory of another batch", "memory",
        lambda: rescore_with_attention_decoder(
            Nbest.from_lattice(lattice, 5), None, torch.zeros(3, 6, 4), lens))
    tmodel = JointModel(JointConfig(vocab_size=6)).eval()
    add("tensor", "2-D encoder_out", "encoder_out",
        lambda: fast_beam_search(tmodel, torch.zeros(2, 5), torch.tensor([5, 5])))
    add("tensor", "k2 FSA where a tensor belongs", "log_probs",
        lambda: get_lattice(k2.Fsa.from_str("0 1 1 0\n1 2 -1 0\n2"), lens, HLG))
    cfg = get_method("nbest").default_config()
    add("setting", "lm_scales=", "lm_scales", lambda: override_config(cfg, ["lm_scales="]))
    add("setting", "num_paths=abc", "num_paths", lambda: override_config(cfg, ["num_paths=abc"]))
    add("setting", "num_paths=0", "num_paths", lambda: override_config(cfg, ["num_paths=0"]))
    add("setting", "max_lattice_arcs=0", "max_lattice_arcs",
        lambda: override_config(cfg, ["max_lattice_arcs=0"]))
    add("setting", "whole_lattice.max_rescored_arcs=0", "max_rescored_arcs",
        lambda: override_config(cfg, ["whole_lattice.max_rescored_arcs=0"]))
    add("setting", "no such field", "colour", lambda: override_config(cfg, ["colour=red"]))
    add("setting", "output_beam=-1", "output_beam",
        lambda: override_config(cfg, ["lattice.output_beam=-1"]))
    return out


def run(work: str) -> None:
    """The child: run every case, printing ``{"start": i}`` then the outcome as JSON lines."""
    import logging

    import torch

    logging.disable(logging.WARNING)
    torch.set_num_threads(1)
    for i, (category, case, expect, thunk) in enumerate(cases(Path(work))):
        print(json.dumps({"start": i, "category": category, "case": case}), flush=True)
        try:
            thunk()
            outcome = {"raised": None, "message": ""}
        except Exception as e:  # noqa: BLE001 (recorded and judged by the test)
            outcome = {"raised": type(e).__name__, "message": str(e)}
        print(json.dumps({"done": i, "category": category, "case": case, "expect": expect,
                          **outcome}), flush=True)


def test_every_malformed_input_is_a_clear_error(tmp_path):
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, "-m", "tests.test_malformed_inputs", str(tmp_path)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    lines = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
    started = [x for x in lines if "start" in x]
    done = [x for x in lines if "done" in x]
    assert proc.returncode == 0, (
        f"the child exited with {proc.returncode} while running case "
        f"{started[-1] if started else None}:\n{proc.stderr[-3000:]}")
    assert len(done) == len(started) >= 40
    bad = [x for x in done if x["raised"] not in ("ValueError", "TypeError")
           or x["expect"] not in x["message"]]
    assert not bad, "\n".join(
        f"{x['category']} / {x['case']}: {x['raised']}: {x['message'][:300]!r} "
        f"(expected a ValueError/TypeError naming {x['expect']!r})" for x in bad)
    categories = {x["category"] for x in done}
    assert {"lexicon", "ARPA", "graph", "checkpoint", "manifest", "tensor"} <= categories


if __name__ == "__main__":
    run(sys.argv[1])
