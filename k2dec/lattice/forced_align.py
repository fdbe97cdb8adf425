"""Forced alignment of words to CTC log-probs: the frames of each token and word of a known
transcript, and how well the audio supports each word.

Each utterance's words are given as their token sequences (BPE pieces: every word spells,
through ``<unk>`` at worst, so words outside a lexicon align too). The best CTC path (standard
topology, blank 0) through the tokens is found by :func:`k2dec.lattice.ctc_forced_alignment`
(``k2.ctc_graph`` + ``k2.intersect_dense`` + ``k2.shortest_path``, batched); a word covers the
frames from its first token's first frame to its last token's last frame.

A word's **confidence** is read off that path as CTC segmentation does: on every frame of the
word, the log-prob of the path's label (the word's token, or blank between its tokens) minus
the best log-prob of any label on that frame; the word's confidence is ``exp`` of their mean,
in ``(0, 1]``. A word the audio says scores near 1 (the path follows the network's own
choice); a word the audio lacks is squeezed into frames the network gives to something else
and scores near 0. Words are never dropped or invented: every word of the transcript gets
frames (at least one per token) when the utterance has enough frames, and nothing else does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import k2
import torch

from k2dec.lattice.align import ctc_forced_alignment
from k2dec.primitives.ragged import ragged_from_row_ids

__all__ = ["WordAlignment", "align_words", "frame_labels"]


@dataclass(frozen=True)
class WordAlignment:
    """Frames of the tokens and words of ``N`` transcripts (frames of ``log_probs``).

    Attributes:
      token_begin, token_end: int32 ``k2.RaggedTensor`` ``[utt][token]``: token ``k`` covers
        frames ``begin <= f < end`` on the best path (rows empty when not ``aligned``).
      word_begin, word_end: int32 ``k2.RaggedTensor`` ``[utt][word]``: the frames from the
        word's first token's first frame to its last token's end (rows empty when not
        ``aligned``).
      word_confidence: float32 ``k2.RaggedTensor`` ``[utt][word]`` in ``(0, 1]`` (see the
        module docstring).
      aligned: bool ``(N,)``: False when the utterance has fewer frames than a CTC path of its
        tokens needs.
      score: float64 ``(N,)``: log-prob of the best path (``-inf`` when not aligned).
    """

    token_begin: k2.RaggedTensor
    token_end: k2.RaggedTensor
    word_begin: k2.RaggedTensor
    word_end: k2.RaggedTensor
    word_confidence: k2.RaggedTensor
    aligned: torch.Tensor
    score: torch.Tensor


def _ragged3(rows: list[list[list[int]]], device: torch.device) -> k2.RaggedTensor:
    """An int32 ``[utt][word][token]`` ragged tensor of nested lists (empty rows kept)."""
    words = torch.tensor([0] + [len(u) for u in rows], dtype=torch.int32).cumsum(0)
    tokens = torch.tensor([0] + [len(w) for u in rows for w in u], dtype=torch.int32).cumsum(0)
    values = torch.tensor([x for u in rows for w in u for x in w], dtype=torch.int32)
    shape = k2.ragged.create_ragged_shape2(row_splits=words.to(torch.int32))
    shape2 = k2.ragged.create_ragged_shape2(row_splits=tokens.to(torch.int32))
    return k2.RaggedTensor(shape.compose(shape2), values).to(device)


def _word_tokens(words: k2.RaggedTensor | Sequence[Sequence[Sequence[int]]], n: int,
                 device: torch.device) -> k2.RaggedTensor:
    if isinstance(words, k2.RaggedTensor):
        if words.num_axes != 3 or words.dim0 != n:
            raise ValueError(f"words must be a 3-axis ragged tensor [utt][word][token] with "
                             f"{n} rows, got {words.num_axes} axes and {words.dim0} rows")
        ragged = words.to(device)
    else:
        rows = [[[int(x) for x in w] for w in utt] for utt in words]
        if len(rows) != n:
            raise ValueError(f"words has {len(rows)} transcripts but log_probs has N={n}")
        ragged = _ragged3(rows, device)
    sizes = ragged.shape.row_splits(2)
    empty = (sizes[1:] == sizes[:-1]).nonzero()
    if empty.numel():
        k = int(empty[0])
        utt = int(torch.searchsorted(ragged.shape.row_splits(1), k, right=True)) - 1
        raise ValueError(f"words[{utt}] has a word with no tokens (word "
                         f"{k - int(ragged.shape.row_splits(1)[utt])}); every word needs one")
    return ragged


def frame_labels(begin: k2.RaggedTensor, end: k2.RaggedTensor, tokens: torch.Tensor,
                 num_frames: int) -> torch.Tensor:
    """The label of every frame of a CTC path given by its token runs.

    Args:
      begin, end: int32 ``[utt][token]`` runs (frames ``begin <= f < end``), ``N`` rows.
      tokens: int32 ``(num_tokens,)``: the token of each run (``begin.values``' order).
      num_frames: ``T``.

    Returns:
      int64 ``(N, T)``: the run's token on its frames, 0 (blank) elsewhere.
    """
    n = begin.dim0
    labels = torch.zeros(n * num_frames, dtype=torch.int64, device=tokens.device)
    runs = (end.values - begin.values).to(torch.int64)
    if runs.numel() == 0:
        return labels.view(n, num_frames)
    row = begin.shape.row_ids(1).to(torch.int64)
    first = row * num_frames + begin.values.to(torch.int64)
    starts = torch.repeat_interleave(first, runs)
    offsets = torch.arange(int(runs.sum()), device=tokens.device) - torch.repeat_interleave(
        torch.cumsum(runs, 0) - runs, runs)
    labels[starts + offsets] = torch.repeat_interleave(tokens.to(torch.int64), runs)
    return labels.view(n, num_frames)


def _confidences(log_probs: torch.Tensor, labels: torch.Tensor, word_begin: torch.Tensor,
                 word_end: torch.Tensor, word_row: torch.Tensor) -> torch.Tensor:
    lp = log_probs.float()
    gap = lp.gather(2, labels.unsqueeze(2)).squeeze(2) - lp.max(dim=2).values  # (N, T), <= 0
    cum = torch.nn.functional.pad(torch.cumsum(gap.double(), dim=1), (1, 0))
    b, e = word_begin.to(torch.int64), word_end.to(torch.int64)
    total = cum[word_row, e] - cum[word_row, b]
    mean = total / (e - b).clamp(min=1).double()
    return torch.exp(mean).clamp(min=1e-30, max=1.0).float()


def align_words(log_probs: torch.Tensor, log_probs_lens: torch.Tensor,
                words: k2.RaggedTensor | Sequence[Sequence[Sequence[int]]]) -> WordAlignment:
    """Align each utterance's words (their token sequences) to its CTC log-probs.

    Args:
      log_probs: float32 ``(N, T, V)`` CTC log-probs (log-softmax, blank = 0).
      log_probs_lens: integer ``(N,)`` valid frames of each utterance, in ``[1, T]``.
      words: the transcripts: int32 ``k2.RaggedTensor`` ``[utt][word][token]`` or nested
        lists; token ids in ``[1, V)``, every word at least one token, ``N`` transcripts
        (an empty one aligns everything to blank).

    Returns:
      :class:`WordAlignment` in ``log_probs``' frames, on its device.

    Raises:
      ValueError, TypeError: malformed log-probs or lengths (named), a word without tokens,
        a token id outside ``[1, V)``.
    """
    if not isinstance(log_probs, torch.Tensor) or log_probs.dim() != 3:
        raise TypeError(f"log_probs must be a float tensor (N, T, V), got "
                        f"{getattr(log_probs, 'shape', type(log_probs).__name__)}")
    n, t = log_probs.shape[0], log_probs.shape[1]
    ragged = _word_tokens(words, n, log_probs.device)
    flat = ragged.remove_axis(1)
    ctc = ctc_forced_alignment(log_probs, log_probs_lens, flat)
    aligned = ctc.aligned.to(log_probs.device)
    word_shape = ragged.shape.remove_axis(2)  # [utt][word]
    word_row = word_shape.row_ids(1).to(torch.int64)
    keep = aligned[word_row]
    splits = ragged.shape.row_splits(2).to(torch.int64)
    # Unaligned utterances have empty token rows: index the tokens of aligned ones only.
    token_pos = torch.cumsum(keep.repeat_interleave(splits[1:] - splits[:-1]).to(torch.int64),
                             0) - 1
    first = token_pos[splits[:-1][keep]] if keep.any() else splits[:0]
    last = token_pos[splits[1:][keep] - 1] if keep.any() else splits[:0]
    wb = ctc.begin.values.to(torch.int64)[first].to(torch.int32)
    we = ctc.end.values.to(torch.int64)[last].to(torch.int32)
    rows = word_row[keep].to(torch.int32)
    token_keep = aligned[flat.shape.row_ids(1).to(torch.int64)]
    labels = frame_labels(ctc.begin, ctc.end, flat.values[token_keep], t)
    conf = _confidences(log_probs, labels, wb, we, rows.long())
    return WordAlignment(token_begin=ctc.begin, token_end=ctc.end,
                         word_begin=ragged_from_row_ids(rows, wb, n),
                         word_end=ragged_from_row_ids(rows, we, n),
                         word_confidence=ragged_from_row_ids(rows, conf, n),
                         aligned=aligned.cpu(), score=ctc.score)
