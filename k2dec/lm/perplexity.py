"""Perplexity of a neural LM on ragged token batches or on a text file."""

from __future__ import annotations

import argparse
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import k2
import torch
from tqdm import tqdm

from k2dec.lang import bpe_model_path, load_bpe_model

from .base import NeuralLM
from .checkpoint import load_lm
from .data import encode_text_file, length_sorted_batches

__all__ = ["PerplexityResult", "compute_perplexity", "compute_text_perplexity"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PerplexityResult:
    """Corpus log-likelihood of an LM.

    Attributes:
      total_log_prob: sum over sentences of ``log p(sentence)`` (natural log, ``eos``
        included).
      num_tokens: number of predicted tokens: sentence tokens plus one ``eos`` per sentence.
      num_sentences: number of sentences.
    """

    total_log_prob: float
    num_tokens: int
    num_sentences: int

    @property
    def perplexity(self) -> float:
        """``exp(-total_log_prob / num_tokens)``."""
        if self.num_tokens == 0:
            return float("nan")
        return math.exp(-self.total_log_prob / self.num_tokens)


def compute_perplexity(
    lm: NeuralLM, tokens: k2.RaggedTensor, batch_size: int = 50, progress: bool = False
) -> PerplexityResult:
    """Perplexity of ``lm`` on token sequences.

    The model is run as it is (call ``lm.eval()`` first); gradients are not tracked.

    Args:
      lm: an :class:`~k2dec.lm.RnnLM` or :class:`~k2dec.lm.TransformerLM`.
      tokens: int32 ragged ``[seq][token]`` without ``sos``/``eos``, ids in ``[0, V)``.
      batch_size: sequences per forward pass (sequences are length-sorted into batches).
      progress: show a tqdm bar over batches.

    Returns:
      :class:`PerplexityResult`.
    """
    if not isinstance(lm, NeuralLM):
        raise TypeError(f"lm must be a k2dec.lm NeuralLM, got {type(lm).__name__}")
    if not isinstance(tokens, k2.RaggedTensor):
        raise TypeError(f"tokens must be a k2.RaggedTensor, got {type(tokens).__name__}")
    if tokens.num_axes != 2:
        raise ValueError(f"tokens must have 2 axes [seq][token], got {tokens.num_axes} axes")
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    total = torch.zeros((), dtype=torch.float64, device=lm.device)
    num_batches = math.ceil(tokens.dim0 / batch_size)
    with torch.no_grad():
        for batch in tqdm(
            length_sorted_batches(tokens, batch_size),
            total=num_batches,
            desc="perplexity",
            disable=not progress,
        ):
            total += lm.score_sequences(batch).totals.sum().to(torch.float64)
    result = PerplexityResult(
        total_log_prob=float(total),
        num_tokens=int(tokens.numel()) + tokens.dim0,
        num_sentences=tokens.dim0,
    )
    logger.info(
        "perplexity %.3f over %d sentences, %d tokens (with eos)",
        result.perplexity, result.num_sentences, result.num_tokens,
    )
    return result


def compute_text_perplexity(
    lm: NeuralLM, text: str | Path, bpe_model: str | Path, batch_size: int = 50,
    progress: bool = True,
) -> PerplexityResult:
    """Perplexity of ``lm`` on a text file (one sentence per line) encoded with a BPE model.

    Args:
      lm: the LM; its ``vocab_size`` must equal the BPE model's vocabulary size.
      text: UTF-8 text file; blank lines are skipped.
      bpe_model: sentencepiece model path (icefall layout: ``<blk>`` 0, ``<sos/eos>`` 1,
        ``<unk>`` 2).
      batch_size, progress: see :func:`compute_perplexity`.
    """
    sp = load_bpe_model(bpe_model)
    if sp.get_piece_size() != lm.vocab_size:
        raise ValueError(
            f"bpe_model {str(bpe_model)!r} has {sp.get_piece_size()} tokens but "
            f"lm.vocab_size is {lm.vocab_size}"
        )
    return compute_perplexity(lm, encode_text_file(text, sp), batch_size, progress)


def _device(name: str) -> torch.device:
    """``--device`` as a torch device (``ValueError`` naming it when torch does not know it
    or this machine lacks it)."""
    try:
        device = torch.device(name)
    except RuntimeError:
        raise ValueError(f"--device {name!r} is not a torch device (e.g. cpu, cuda, cuda:1)"
                         ) from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"--device {name!r}: CUDA is not available on this machine")
    return device


def main(argv: Sequence[str] | None = None) -> PerplexityResult:
    """Command-line entry point (``k2dec lm-perplexity``): perplexity of a :func:`train_lm`
    checkpoint or ``export-lm`` file (``--rnn-lm``, as ``k2dec decode`` names it) on a text
    file spelled by a lang dir's ``bpe.model`` (``--lang-dir``) or a sentencepiece model
    (``--bpe-model``), as ``k2dec train-token-lm`` takes them."""
    p = argparse.ArgumentParser(
        prog="k2dec lm-perplexity",
        description="Perplexity of a k2dec neural LM on a text file (BPE tokens).",
    )
    p.add_argument("--rnn-lm", type=Path, required=True,
                   help="A neural LM: a train-lm checkpoint or an export-lm file (as in "
                        "k2dec decode --rnn-lm).")
    p.add_argument("--text", type=Path, required=True, help="Text, one sentence a line.")
    p.add_argument("--lang-dir", type=Path, help="A BPE lang dir: its bpe.model spells the text.")
    p.add_argument("--bpe-model", type=Path, help="Or the sentencepiece model itself.")
    p.add_argument("--batch-size", type=int, default=50, help="Sentences per forward pass.")
    p.add_argument("--device", default="cpu")
    p.add_argument("--no-progress", action="store_true", help="No tqdm progress bar.")
    p.add_argument("--checkpoint", type=Path, help=argparse.SUPPRESS)  # the old spelling
    args = p.parse_args(argv)
    if args.checkpoint is not None:
        p.error("--checkpoint is now --rnn-lm (as in k2dec decode)")
    if args.batch_size < 1:
        p.error(f"--batch-size must be >= 1, got {args.batch_size}")
    try:
        bpe_model = bpe_model_path(args.lang_dir, args.bpe_model)
        device = _device(args.device)
        lm = load_lm(args.rnn_lm, device=device)
        result = compute_text_perplexity(lm, args.text, bpe_model, args.batch_size,
                                         progress=not args.no_progress)
    except ValueError as e:
        p.error(str(e))
    logger.info("%s on %s: perplexity %.3f", args.rnn_lm, args.text, result.perplexity)
    return result

