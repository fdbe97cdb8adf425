"""BPE (sentencepiece unigram) models and lexicons, icefall style.

icefall trains its unigram models with ``<blk>`` = 0 and ``<sos/eos>`` = 1 as user
symbols and ``<unk>`` = 2, so CTC/transducer blank is token 0.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import k2
import torch

from .lexicon import Lexicon
from .symbols import make_symbol_table

__all__ = ["train_bpe_model", "load_bpe_model", "bpe_model_path", "bpe_token_table",
           "bpe_lexicon", "bpe_word_start_mask"]

WORD_START = "\u2581"
"""sentencepiece's word-start marker ("▁") at the beginning of a piece."""


def train_bpe_model(
    text: str | Path, model_dir: str | Path, vocab_size: int, model_type: str = "unigram"
) -> Path:
    """Train ``model_dir/bpe.model`` on a text file (one sentence per line).

    Idempotent: an existing model is kept. Returns the model path.
    """
    import sentencepiece as spm

    text, model_dir = Path(text), Path(model_dir)
    if not text.is_file():
        raise ValueError(f"BPE training text {text} does not exist")
    if vocab_size < 4:
        raise ValueError(f"vocab_size must be >= 4, got {vocab_size}")
    model_dir.mkdir(parents=True, exist_ok=True)
    model = model_dir / "bpe.model"
    if model.is_file():
        return model
    spm.SentencePieceTrainer.train(
        input=str(text),
        model_prefix=str(model_dir / "bpe"),
        model_type=model_type,
        vocab_size=vocab_size,
        character_coverage=1.0,
        input_sentence_size=100_000_000,
        user_defined_symbols=["<blk>", "<sos/eos>"],
        unk_id=2,
        bos_id=-1,
        eos_id=-1,
        minloglevel=2,
    )
    return model


def bpe_model_path(lang_dir: Path | None, bpe_model: Path | None) -> Path:
    """The sentencepiece model a command was given: ``bpe_model`` itself, or a BPE lang dir's
    ``bpe.model`` (the ``--lang-dir`` / ``--bpe-model`` pair of ``k2dec train-token-lm`` and
    ``k2dec lm-perplexity``).

    Raises:
      ValueError: neither or both given; a lang dir without ``bpe.model``.
    """
    if (lang_dir is None) == (bpe_model is None):
        raise ValueError("give exactly one of --lang-dir and --bpe-model")
    if bpe_model is not None:
        return Path(bpe_model)
    path = Path(lang_dir) / "bpe.model"
    if not path.is_file():
        raise ValueError(f"{lang_dir} has no bpe.model (give --bpe-model)")
    return path


def load_bpe_model(path: str | Path):
    """Load a sentencepiece model and check icefall's special ids.

    Raises:
      ValueError: naming the file when it is missing, not a sentencepiece model, or its
        ids 0, 1, 2 are not ``<blk>``, ``<sos/eos>``, ``<unk>``.
    """
    import sentencepiece as spm

    path = Path(path)
    if not path.is_file():
        raise ValueError(f"BPE model {path} does not exist")
    sp = spm.SentencePieceProcessor()
    try:
        sp.load(str(path))
    except (RuntimeError, OSError) as e:
        raise ValueError(f"BPE model {path} cannot be read (not a sentencepiece model?): "
                         f"{str(e).strip()[:200]}") from None
    expected = {0: "<blk>", 1: "<sos/eos>", 2: "<unk>"}
    for idx, piece in expected.items():
        if sp.get_piece_size() <= idx or sp.id_to_piece(idx) != piece:
            raise ValueError(
                f"{path}: token {idx} must be {piece!r} (train with "
                "user_defined_symbols=['<blk>', '<sos/eos>'], unk_id=2)"
            )
    return sp


def bpe_token_table(sp) -> k2.SymbolTable:
    """``tokens.txt`` of a sentencepiece model: piece ``i`` has id ``i``."""
    return make_symbol_table((sp.id_to_piece(i), i) for i in range(sp.get_piece_size()))


def bpe_lexicon(sp, words: Iterable[str]) -> Lexicon:
    """Spell each word with the model's pieces; ``<UNK>`` is spelled ``<unk>``."""
    lexicon: Lexicon = [("<UNK>", ["<unk>"])]
    for word in words:
        if word in ("<UNK>", "<eps>", "#0", "<s>", "</s>"):
            continue
        pieces = sp.encode(word, out_type=str)
        if not pieces:
            raise ValueError(f"BPE model spells word {word!r} with no pieces")
        lexicon.append((word, pieces))
    return lexicon


def bpe_word_start_mask(token_table: k2.SymbolTable) -> torch.Tensor:
    """bool ``(max_id + 1,)``: which tokens of a BPE ``tokens.txt`` begin a word: pieces that
    start with ``▁``, and ``<unk>`` (the spelling of ``<UNK>``, see :func:`bpe_lexicon`).
    Token ids not in the table are False."""
    if not isinstance(token_table, k2.SymbolTable):
        raise TypeError(f"token_table must be a k2.SymbolTable, got {type(token_table).__name__}")
    ids = token_table.ids
    mask = torch.zeros(max(ids) + 1 if ids else 0, dtype=torch.bool)
    for i in ids:
        piece = token_table.get(i)
        mask[i] = piece.startswith(WORD_START) or piece == "<unk>"
    return mask
