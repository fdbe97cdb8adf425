"""What a decode job needs besides the cuts: the model, the lang dir, the BPE model, graphs,
neural LMs, loaded once and shared by every method."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ..graph import GraphType
from ..lang import LangDir
from ..methods import Resources

__all__ = ["GRAPH_FILES", "DecodeAssets", "load_assets", "need_hint"]

#: The file each graph of :class:`~k2dec.methods.Resources` is loaded from, in the graph dir
#: or the lang dir (H is built from tokens.txt).
GRAPH_FILES = {t.value: t.file_name for t in (GraphType.HLG, GraphType.LG, GraphType.G)}


@dataclass
class DecodeAssets:
    """What decoding needs besides the cuts.

    Attributes:
      model: the acoustic model (``JointModel``: encoder, CTC head, transducer, attention).
      lang: the lang dir (tokens.txt/words.txt, graphs); ``None`` for token-only methods.
      sp: the sentencepiece model turning token ids into words.
      resources: graphs / LMs / attention decoder for the methods.
    """

    model: torch.nn.Module
    lang: LangDir | None
    sp: Any
    resources: Resources = field(default_factory=Resources)


def load_assets(
    model_path: str | Path,
    lang_dir: str | Path | None = None,
    bpe_model: str | Path | None = None,
    lm_paths: dict[str, str | Path] | None = None,
    device: torch.device | str = "cpu",
    graph_dir: str | Path | None = None,
) -> DecodeAssets:
    """Load a model, the graphs of its lang dir (:data:`GRAPH_FILES` from ``graph_dir``, else
    from the lang dir; H built from tokens.txt), the BPE model and neural LMs, all on
    ``device``. The lang dir is only read (a shipped one works as it is with ``graph_dir``).

    Raises:
      ValueError: a ``graph_dir`` without a lang dir, or one that is not a directory.
    """
    from ..graph import build_ctc_topo, load_graph
    from ..lang import bpe_word_start_mask, load_bpe_model
    from ..model import load_model

    device = torch.device(device)
    if graph_dir is not None and lang_dir is None:
        raise ValueError("graph_dir needs the lang dir its graphs were compiled for")
    if graph_dir is not None and not Path(graph_dir).is_dir():
        raise ValueError(f"graph dir {graph_dir} is not a directory")
    model = load_model(model_path, device)
    lang = LangDir(Path(lang_dir)) if lang_dir is not None else None
    if bpe_model is None and lang is not None and (lang.path / "bpe.model").is_file():
        bpe_model = lang.path / "bpe.model"
    sp = load_bpe_model(bpe_model) if bpe_model is not None else None
    res = Resources(attention_decoder=getattr(model, "attention_decoder", None))
    if lang is not None:
        res.graphs["H"] = build_ctc_topo(lang.max_token_id, device=device)
        word_start = bpe_word_start_mask(lang.token_table)
        if bool(word_start.any()):
            res.word_start = word_start.to(device)
        dirs = [Path(graph_dir)] if graph_dir is not None else []
        for name, file in GRAPH_FILES.items():
            path = next((d / file for d in (*dirs, lang.path) if (d / file).is_file()), None)
            if path is not None:
                res.graphs[name] = load_graph(path, lang.token_table, lang.word_table, device)
    if lm_paths:
        from ..lm.train import load_lm

        for name, path in lm_paths.items():
            res.lms[name] = load_lm(path).to(device).eval()
    return DecodeAssets(model=model, lang=lang, sp=sp, resources=res)


def need_hint(need: str) -> str:
    """How a user supplies a :attr:`~k2dec.methods.Method.requires` entry to the job."""
    if need == "H":
        return "the H graph (give --lang-dir: it is built from tokens.txt)"
    if need in GRAPH_FILES:
        what = "the rescoring G" if need == "G" else f"the {need} graph"
        lm = "a 4-gram" if need == "G" else "an n-gram"
        return (f"{what} ({GRAPH_FILES[need]} in --graph-dir or the lang dir; k2dec "
                f"compile-graph --type {need} --arpa {lm} ARPA)")
    if need == "lm":
        return "a neural LM (--rnn-lm FILE, from k2dec train-lm / export-lm)"
    if need == "attention_decoder":
        return "a model with an attention decoder"
    return need
