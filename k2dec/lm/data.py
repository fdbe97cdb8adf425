"""Text -> BPE token ids -> ragged batches, for LM training and perplexity evaluation."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import k2
import torch

from ..lang import bpe_case, match_case
from ..primitives.files import text_lines

__all__ = ["encode_text_file", "length_sorted_batches"]


def encode_text_file(text: str | Path, sp) -> k2.RaggedTensor:
    """Encode a text file (one sentence per line; blank lines skipped) with a sentencepiece
    model, in the case of its pieces when they have one (:func:`k2dec.lang.bpe_case`:
    lower-case text and an upper-case model give the pieces of the upper-case text).

    Args:
      text: path of a UTF-8 text file (optionally gzipped).
      sp: a loaded ``sentencepiece.SentencePieceProcessor`` (see
        :func:`k2dec.lang.load_bpe_model`).

    Returns:
      int32 ``k2.RaggedTensor`` ``[sentence][token]`` on the CPU, without ``sos``/``eos``.

    Raises:
      ValueError: naming the file (and line): missing, not UTF-8 text, no sentence.
    """
    text = Path(text)
    if not text.is_file():
        raise ValueError(f"text file {str(text)!r} does not exist")
    lines = [line.strip() for _, line in text_lines(text, "text file")]
    lines = [line for line in lines if line]
    if not lines:
        raise ValueError(f"text file {str(text)!r} has no non-empty lines")

    case = bpe_case(sp)
    return k2.RaggedTensor(sp.encode([match_case(line, case) for line in lines]),
                           dtype=torch.int32)


def length_sorted_batches(
    tokens: k2.RaggedTensor, batch_size: int, order: torch.Tensor | None = None
) -> Iterator[k2.RaggedTensor]:
    """Split a ragged ``[seq][token]`` tensor into batches of at most ``batch_size`` sequences.

    Args:
      tokens: 2-axis ragged tensor.
      batch_size: sequences per batch (>= 1).
      order: optional int64 ``[num_seqs]`` permutation giving the sequence order; by default
        sequences are sorted by length (longest first) so that batches need little padding.

    Yields:
      2-axis ragged tensors ``[seq][token]`` on ``tokens.device``.
    """
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    if order is None:
        splits = tokens.shape.row_splits(1).to(torch.int64)
        order = torch.argsort(splits[1:] - splits[:-1], descending=True)
    order = order.to(device=tokens.device, dtype=torch.int32)
    for start in range(0, tokens.dim0, batch_size):
        batch, _ = tokens.index(order[start : start + batch_size], axis=0)
        yield batch
