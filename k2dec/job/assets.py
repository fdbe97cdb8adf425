"""What a decode job needs besides the cuts: the model, the lang dir, the BPE model, graphs,
neural LMs, loaded once and shared by every method."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ..lang import LangDir
from ..methods import Resources

__all__ = ["GRAPH_FILES", "DecodeAssets", "load_assets", "model_vocab_size", "need_hint"]

#: The lang-dir file each graph of :class:`~k2dec.methods.Resources` is loaded from (H is
#: built from tokens.txt).
GRAPH_FILES = {"HLG": "HLG.pt", "LG": "LG.pt", "G": "G_4_gram.pt"}


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
) -> DecodeAssets:
    """Load a model, its lang dir graphs (:data:`GRAPH_FILES`, and H built from tokens.txt),
    the BPE model and neural LMs, all on ``device``."""
    from ..graph import build_ctc_topo, load_graph
    from ..lang import bpe_word_start_mask, check_vocab_size, load_bpe_model
    from ..model import load_model

    device = torch.device(device)
    model = load_model(model_path, device)
    lang = LangDir(Path(lang_dir)) if lang_dir is not None else None
    if bpe_model is None and lang is not None and (lang.path / "bpe.model").is_file():
        bpe_model = lang.path / "bpe.model"
    sp = load_bpe_model(bpe_model) if bpe_model is not None else None
    res = Resources(attention_decoder=getattr(model, "attention_decoder", None))
    vocab = model_vocab_size(model)
    if lang is not None:
        if vocab is not None:
            check_vocab_size(lang.token_table, vocab, lang.path / "tokens.txt")
        res.graphs["H"] = build_ctc_topo(lang.max_token_id, device=device)
        word_start = bpe_word_start_mask(lang.token_table)
        if bool(word_start.any()):
            res.word_start = word_start.to(device)
        for name, file in GRAPH_FILES.items():
            path = lang.path / file
            if path.is_file():
                res.graphs[name] = load_graph(path, lang.token_table, lang.word_table, device,
                                              vocab_size=vocab)
    if lm_paths:
        from ..lm.train import load_lm

        for name, path in lm_paths.items():
            res.lms[name] = load_lm(path).to(device).eval()
    return DecodeAssets(model=model, lang=lang, sp=sp, resources=res)


def model_vocab_size(model: torch.nn.Module) -> int | None:
    """The number of outputs (tokens) of an acoustic model: its ``vocab_size`` attribute or
    its config's; ``None`` when it does not say."""
    for owner in (model, getattr(model, "cfg", None)):
        value = getattr(owner, "vocab_size", None)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def need_hint(need: str) -> str:
    """How a user supplies a :attr:`~k2dec.methods.Method.requires` entry to the job."""
    if need == "H":
        return "the H graph (give --lang-dir: it is built from tokens.txt)"
    if need == "G":
        return f"the rescoring G ({GRAPH_FILES[need]} in the lang dir, from a 4-gram ARPA)"
    if need in GRAPH_FILES:
        return (f"the {need} graph ({GRAPH_FILES[need]} in the lang dir; k2dec compile-graph "
                f"--type {need})")
    if need == "lm":
        return "a neural LM (--rnn-lm FILE, from k2dec train-lm / export-lm)"
    if need == "attention_decoder":
        return "a model with an attention decoder"
    return need
