"""What a decode job needs besides the cuts: the model, the lang dir, the BPE model, graphs,
neural LMs, loaded once and shared by every method."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ..graph import GraphType, build_ctc_topo, load_graph
from ..lang import (
    LangDir,
    TokenWords,
    bpe_case,
    bpe_token_table,
    bpe_word_start_mask,
    check_vocab_size,
    load_bpe_model,
    token_inventory_digest,
    vocabulary_case,
)
from ..lm.checkpoint import load_lm
from ..methods import MethodResult, Resources
from ..model import find_tokens, load_model
from ..results import bpe_ids_to_words, token_ids_to_words, word_ids_to_words
from ..scorers import (
    TokenNgramScorer,
    check_hotword_size,
    encode_hotword_words,
    encode_hotwords,
    read_hotwords,
)

__all__ = ["GRAPH_FILES", "DecodeAssets", "check_lm_tokens", "check_lm_vocab", "hypothesis_texts",
           "load_assets", "model_vocab_size", "need_hint", "out_of_vocabulary", "reference_case",
           "text_need"]

#: The file each graph of :class:`~k2dec.methods.Resources` is loaded from, in the graph dir
#: or the lang dir (H is built from tokens.txt).
GRAPH_FILES = {t.value: t.file_name for t in (GraphType.HLG, GraphType.LG, GraphType.G)}


@dataclass
class DecodeAssets:
    """What decoding needs besides the cuts.

    Attributes:
      model: the acoustic model (:class:`k2dec.model.AcousticModel`: k2dec's joint model, an
        icefall TorchScript export or an ONNX export); methods need what it has.
      lang: the lang dir (tokens.txt/words.txt, graphs); ``None`` for token-only methods.
      sp: the sentencepiece model turning token ids into words.
      resources: graphs / LMs / attention decoder for the methods.
      tokens: the token table turning token ids into words when there is no ``sp``
        (the lang dir's, else the one found beside the model).
    """

    model: Any
    lang: LangDir | None
    sp: Any
    resources: Resources = field(default_factory=Resources)
    tokens: Any = None


def hypothesis_texts(result: MethodResult, assets: DecodeAssets) -> list[list[str]]:
    """Each utterance's words (the one place hypotheses become words): word ids through
    words.txt, else token ids through the BPE model, else through the token table."""
    if result.words is not None:
        if assets.lang is None:
            raise ValueError("word hypotheses need the lang dir (words.txt)")
        return word_ids_to_words(result.words, assets.lang.word_table)
    if assets.sp is not None:
        return bpe_ids_to_words(result.tokens, assets.sp)
    tokens = assets.tokens if assets.tokens is not None else (
        assets.lang.token_table if assets.lang is not None else None)
    if tokens is None:
        raise ValueError("token hypotheses need a bpe.model or tokens.txt (--lang-dir, or "
                         "beside the model) to become words")
    return token_ids_to_words(result.tokens, tokens)


def load_assets(
    model_path: str | Path,
    lang_dir: str | Path | None = None,
    bpe_model: str | Path | None = None,
    lm_paths: dict[str, str | Path] | None = None,
    device: torch.device | str = "cpu",
    hotwords: str | Path | None = None,
    lodr_arpa: str | Path | None = None,
    feature_overrides: dict[str, Any] | None = None,
    graph_dir: str | Path | None = None,
) -> DecodeAssets:
    """Load a model (any :func:`k2dec.model.load_model` recognises), the graphs of its lang
    dir (:data:`GRAPH_FILES` from ``graph_dir``, else from the lang dir; H built from
    tokens.txt), the BPE model and neural LMs, all on ``device``; a hotwords file (one phrase
    per line, optionally ``PHRASE :SCORE``, encoded with the BPE model, and as word ids of
    the lang dir's words.txt for the HLG methods: phrases with other words are left out
    there, with a logged warning) and LODR's token
    n-gram ARPA (:func:`k2dec.scorers.train_token_arpa`) when given. The lang dir is only
    read (a shipped one works as it is with ``graph_dir``).

    Tokens: the lang dir's ``tokens.txt`` and ``bpe.model`` when given, else a
    ``tokens.txt`` / ``bpe.model`` beside the model. ``feature_overrides`` (FeatureConfig
    field names) change the features the model expects (default: icefall's, or what an ONNX
    export declares), for a model trained otherwise.

    Every vocabulary is checked against the model's number of outputs before anything is
    decoded: the lang dir's tokens.txt and graphs, the BPE model, each neural LM and the LODR
    n-gram.

    Raises:
      ValueError: a ``graph_dir`` without a lang dir, or one that is not a directory; a file
        that cannot be read or whose vocabulary is not the model's (naming it).
    """
    device = torch.device(device)
    lang = _open_lang(lang_dir, graph_dir)
    model = _load_model(model_path, lang, feature_overrides, device)
    if bpe_model is None:
        bpe_model = _bpe_model_beside(model_path, lang)
    sp = load_bpe_model(bpe_model) if bpe_model is not None else None
    res = Resources(attention_decoder=model.attention_decoder)
    vocab = model_vocab_size(model)
    if sp is not None and vocab is not None and sp.get_piece_size() != vocab:
        raise ValueError(f"{bpe_model} has {sp.get_piece_size()} pieces but the model has "
                         f"{vocab} outputs: give the bpe.model the model was trained with")
    if lang is not None:
        _load_lang_resources(res, lang, graph_dir, vocab, device)
    if lm_paths:
        _load_lms(res, lm_paths, _token_vocab(vocab, lang, sp), lang, sp, device)
    if hotwords is not None or lodr_arpa is not None:
        _load_scorer_inputs(res, sp, hotwords, lodr_arpa, device)
    if hotwords is not None and lang is not None and (lang.path / "words.txt").is_file():
        res.sources["hotword_words"] = tuple((tuple(w), s) for w, s in encode_hotword_words(
            read_hotwords(hotwords), lang.word_table))
    return DecodeAssets(model=model, lang=lang, sp=sp, resources=res, tokens=model.tokens)


def _open_lang(lang_dir: str | Path | None, graph_dir: str | Path | None) -> LangDir | None:
    """The lang dir (None without one), after checking that ``graph_dir`` can be used."""
    if graph_dir is not None and lang_dir is None:
        raise ValueError("graph_dir needs the lang dir its graphs were compiled for")
    if graph_dir is not None and not Path(graph_dir).is_dir():
        raise ValueError(f"graph dir {graph_dir} is not a directory")
    return LangDir(Path(lang_dir)) if lang_dir is not None else None


def _load_model(model_path: str | Path, lang: LangDir | None,
                feature_overrides: dict[str, Any] | None, device: torch.device) -> Any:
    """The acoustic model (with the lang dir's tokens.txt), its features overridden."""
    tokens = lang.path / "tokens.txt" if lang is not None and (
        lang.path / "tokens.txt").is_file() else None
    model = load_model(model_path, device, tokens=tokens)
    if feature_overrides:
        model.set_feature_config(model.feature_config.override(**feature_overrides))
    return model


def _bpe_model_beside(model_path: str | Path, lang: LangDir | None) -> Path | None:
    """The ``bpe.model`` of the lang dir, else one beside the model's tokens, else None."""
    beside = find_tokens(model_path)
    for folder in ([lang.path] if lang is not None else []) + (
            [beside.parent] if beside is not None else []):
        if (folder / "bpe.model").is_file():
            return folder / "bpe.model"
    return None


def _load_lang_resources(res: Resources, lang: LangDir, graph_dir: str | Path | None,
                         vocab: int | None, device: torch.device) -> None:
    """Into ``res``: H, the word-start mask and token words of ``lang``, and its graphs."""
    if vocab is not None:
        check_vocab_size(lang.token_table, vocab, lang.path / "tokens.txt")
    res.graphs["H"] = build_ctc_topo(lang.max_token_id, device=device)
    word_start = bpe_word_start_mask(lang.token_table)
    if bool(word_start.any()):
        res.word_start = word_start.to(device)
        if (lang.path / "lexicon.txt").is_file() and (lang.path / "words.txt").is_file() \
                and "<UNK>" in lang.word_table:
            res.token_words = TokenWords.from_lang_dir(lang)
    dirs = [Path(graph_dir)] if graph_dir is not None else []
    for name, file in GRAPH_FILES.items():
        path = next((d / file for d in (*dirs, lang.path) if (d / file).is_file()), None)
        if path is not None:
            res.graphs[name] = load_graph(path, lang.token_table, lang.word_table, device,
                                          vocab_size=vocab)


def _load_lms(res: Resources, lm_paths: dict[str, str | Path],
              token_vocab: tuple[int | None, str], lang: LangDir | None, sp: Any,
              device: torch.device) -> None:
    """Into ``res.sources`` (by the names of ``lm_paths``): each neural LM, checked against
    the token vocabulary."""
    for name, path in lm_paths.items():
        lm = load_lm(path).to(device).eval()
        check_lm_vocab(lm, path, *token_vocab)
        check_lm_tokens(lm, path, lang, sp)
        res.sources[name] = lm


def _token_vocab(vocab: int | None, lang: LangDir | None, sp: Any) -> tuple[int | None, str]:
    """The number of tokens an LM must have, and where that number comes from: the model,
    else the lang dir's tokens.txt, else the BPE model (None, "" when nothing says)."""
    if vocab is not None:
        return vocab, "the model has"
    if lang is not None:
        return lang.max_token_id + 1, f"{lang.path / 'tokens.txt'} has"
    if sp is not None:
        return sp.get_piece_size(), "the BPE model has"
    return None, ""


def check_lm_vocab(lm: Any, path: str | Path, vocab: int | None, owner: str = "the model has"
                   ) -> None:
    """Refuse a neural LM (``lm.vocab_size``) trained on another token inventory than the
    acoustic model's ``vocab`` tokens: scores of other tokens' ids would be added without any
    error (a 500-token LM with a 256-token model raised rnn-lm's WER from 31.7% to 40.0%).

    Raises:
      ValueError: naming ``path``, both sizes and what to do.
    """
    size = getattr(lm, "vocab_size", None)
    if vocab is not None and size != vocab:
        raise ValueError(
            f"neural LM {path} has {size} tokens but {owner} {vocab}: an LM must be trained "
            "on the model's tokens (k2dec train-lm --bpe-model with the model's bpe.model)")


def check_lm_tokens(lm: Any, path: str | Path, lang: LangDir | None, sp: Any) -> None:
    """Refuse a neural LM whose checkpoint says it was trained on other tokens than the lang
    dir's tokens.txt (else the BPE model) has under the same ids: e.g. an LM trained with
    another BPE model of the same size, which :func:`check_lm_vocab` cannot tell. Checkpoints
    without ``tokens_sha256`` (older ones, other trainers) are not checked.

    Raises:
      ValueError: naming ``path``, the token file and what to do.
    """
    stored = getattr(lm, "tokens_sha256", None)
    size = getattr(lm, "vocab_size", None)
    if not isinstance(stored, str) or not isinstance(size, int):
        return
    if lang is not None:
        table, source = lang.token_table, lang.path / "tokens.txt"
    elif sp is not None:
        table, source = bpe_token_table(sp), "the BPE model"
    else:
        return
    digest = token_inventory_digest(table, size)
    if digest is not None and digest != stored:
        raise ValueError(
            f"neural LM {path} was trained on other tokens than {source} has under the same "
            f"{size} ids (sha256 {stored[:12]}... vs {digest[:12]}...; another BPE model of "
            "the same size?): train it with the model's bpe.model (k2dec train-lm "
            "--bpe-model)")


def _load_scorer_inputs(res: Resources, sp: Any, hotwords: str | Path | None,
                        lodr_arpa: str | Path | None, device: torch.device) -> None:
    if sp is None:
        given = [f"{opt} {p}" for opt, p in (("--hotwords", hotwords),
                                               ("--lodr-arpa", lodr_arpa)) if p is not None]
        raise ValueError(f"{' and '.join(given)}: need the BPE model (bpe.model in --lang-dir "
                         "or beside the model)")
    if hotwords is not None:
        phrases = encode_hotwords(read_hotwords(hotwords), sp)
        try:  # refused before any cut, not when a method first builds its automaton
            check_hotword_size(phrases)
        except ValueError as e:
            raise ValueError(f"--hotwords {hotwords}: {e}") from None
        res.sources["hotwords"] = tuple((tuple(t), s) for t, s in phrases)
    if lodr_arpa is not None:
        pieces = {sp.id_to_piece(i): i for i in range(sp.get_piece_size())}
        res.sources["lodr"] = TokenNgramScorer.from_arpa(lodr_arpa, sp.get_piece_size(),
                                                         pieces, device=device)


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
    if need in GRAPH_FILES:
        what = "the rescoring G" if need == "G" else f"the {need} graph"
        lm = "a 4-gram" if need == "G" else "an n-gram"
        return (f"{what} ({GRAPH_FILES[need]} in --graph-dir or the lang dir; k2dec "
                f"compile-graph --type {need} --arpa {lm} ARPA)")
    if need == "lm":
        return "a neural LM (--rnn-lm FILE, from k2dec train-lm / export-lm)"
    if need == "attention_decoder":
        return "a model with an attention decoder"
    if need == "token_words":
        return ("a BPE lang dir (--lang-dir with tokens.txt pieces, lexicon.txt and <UNK> in "
                "words.txt) to read words off token sequences")
    if need == "lodr":
        return ("LODR's token n-gram (--lodr-arpa FILE: a token bigram made by k2dec "
                "train-token-lm --lang-dir LANG --text LM_TEXT -o 2gram.arpa, or icefall's "
                "lang_bpe_*/2gram.arpa)")
    return need


def text_need(assets: DecodeAssets, method: Any) -> str | None:
    """What turning ``method``'s hypotheses (a :class:`~k2dec.methods.Method`) into words
    needs that ``assets`` lack, in the words of the command line; ``None`` if nothing."""
    lang = assets.lang
    if method.outputs_words:
        if lang is None or not (lang.path / "words.txt").is_file():
            return "words.txt (in --lang-dir) to turn its word ids into words"
        return None
    if assets.sp is not None or assets.tokens is not None or (
            lang is not None and (lang.path / "tokens.txt").is_file()):
        return None
    return ("a bpe.model or tokens.txt (--lang-dir, or beside the model) to turn its token ids "
            "into words")


def _token_table(assets: DecodeAssets) -> Any:
    lang = assets.lang
    if assets.tokens is not None:
        return assets.tokens
    if lang is not None and (lang.path / "tokens.txt").is_file():
        return lang.token_table
    return None


def reference_case(assets: DecodeAssets) -> str | None:
    """The letter case of the vocabulary references are compared with
    (:func:`k2dec.lang.vocabulary_case`): words.txt's, else the BPE model's pieces', else
    the token table's; ``None`` for a vocabulary of mixed or no case."""
    lang = assets.lang
    if lang is not None and (lang.path / "words.txt").is_file():
        return vocabulary_case(lang.word_table.symbols)
    if assets.sp is not None:
        return bpe_case(assets.sp)
    tokens = _token_table(assets)
    return vocabulary_case(tokens.symbols) if tokens is not None else None


def out_of_vocabulary(assets: DecodeAssets, words: list[str]) -> tuple[list[str], str] | None:
    """The ``words`` outside the vocabulary and its name: words.txt's words, else the words
    the BPE model spells with its unknown piece; ``None`` without either."""
    lang = assets.lang
    if lang is not None and (lang.path / "words.txt").is_file():
        table = lang.word_table
        return [w for w in words if w not in table], str(lang.path / "words.txt")
    if assets.sp is not None:
        unk = assets.sp.unk_id()
        pieces = assets.sp.encode(words)
        return [w for w, p in zip(words, pieces) if unk in p], "the BPE model's pieces"
    return None
