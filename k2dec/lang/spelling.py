"""Word ids of BPE token sequences: a word begins at every word-start piece (``▁...``) and is
looked up by its pieces in the lexicon; what the lexicon lacks is the OOV word.

This is what icefall's ``fast_beam_search_with_nbest_rescoring`` does with
``sp.decode`` and ``word_table``, read from the lang dir alone (``lexicon.txt``,
``tokens.txt``, ``words.txt``).
"""

from __future__ import annotations

from collections.abc import Mapping

import k2
import torch

from .bpe import bpe_word_start_mask
from .langdir import LangDir

__all__ = ["TokenWords"]


class TokenWords:
    """Token id sequences -> word id sequences.

    Args:
      spellings: the token ids of each word (its lexicon pronunciation) -> its word id.
      word_start: bool ``(V,)``: which token ids begin a word (the first token of a sequence
        always does).
      oov_id: the word id of a token span that spells no lexicon word.

    Raises:
      ValueError: an empty ``spellings`` or ``word_start`` without any word-start token.
    """

    def __init__(self, spellings: Mapping[tuple[int, ...], int], word_start: torch.Tensor,
                 oov_id: int) -> None:
        if not spellings:
            raise ValueError("TokenWords needs at least one spelling")
        if not isinstance(word_start, torch.Tensor) or word_start.dtype != torch.bool \
                or word_start.dim() != 1:
            raise TypeError(f"word_start must be a 1-D bool tensor, got {word_start!r}")
        if not bool(word_start.any()):
            raise ValueError("word_start marks no token as beginning a word (a BPE token table "
                             "has pieces starting with '\u2581')")
        self.spellings = dict(spellings)
        self.word_start = word_start.cpu()
        self.oov_id = int(oov_id)

    @classmethod
    def from_lang_dir(cls, lang: LangDir, oov: str = "<UNK>") -> TokenWords:
        """From a BPE lang dir: ``lexicon.txt`` spellings, ``words.txt`` ids, word starts
        from the pieces of ``tokens.txt`` (:func:`~k2dec.lang.bpe_word_start_mask`).

        Raises:
          ValueError: ``oov`` not in words.txt, or a token table without word-start pieces
            (a phone lang dir).
        """
        words, tokens = lang.word_table, lang.token_table
        if oov not in words:
            raise ValueError(f"the OOV word {oov!r} is not in {lang.path / 'words.txt'}")
        spellings: dict[tuple[int, ...], int] = {}
        for word, pron in lang.lexicon:
            if word in words:
                spellings.setdefault(tuple(tokens.get(t) for t in pron), words.get(word))
        return cls(spellings, bpe_word_start_mask(tokens), words.get(oov))

    def __call__(self, tokens: k2.RaggedTensor) -> k2.RaggedTensor:
        """Word ids of token sequences.

        Args:
          tokens: int ``[seq][token]`` ragged, token ids > 0, any device.

        Returns:
          int32 ``[seq][word]`` ragged on ``tokens``' device.

        Raises:
          ValueError: a token id outside ``word_start``.
        """
        if not isinstance(tokens, k2.RaggedTensor) or tokens.num_axes != 2:
            raise TypeError(f"tokens must be a 2-axis k2.RaggedTensor, got {tokens!r}")
        values = tokens.values.to("cpu", torch.int64)
        if values.numel() and (int(values.min()) < 0 or
                               int(values.max()) >= len(self.word_start)):
            raise ValueError(f"token ids must be in [0, {len(self.word_start)}), got "
                             f"{int(values.min())}..{int(values.max())}")
        splits = tokens.shape.row_splits(1).to("cpu", torch.int64)
        first = torch.zeros(len(values), dtype=torch.bool)
        first[splits[:-1][splits[:-1] < splits[1:]]] = True
        starts = (self.word_start[values] | first).tolist()
        flat = values.tolist()
        ids: list[int] = []
        words_per_seq = []
        for s in range(len(splits) - 1):
            lo, hi = int(splits[s]), int(splits[s + 1])
            bounds = [i for i in range(lo, hi) if starts[i]] + [hi]
            for b, e in zip(bounds[:-1], bounds[1:]):
                ids.append(self.spellings.get(tuple(flat[b:e]), self.oov_id))
            words_per_seq.append(len(bounds) - 1)
        device = tokens.device
        row_splits = torch.zeros(len(words_per_seq) + 1, dtype=torch.int32)
        row_splits[1:] = torch.tensor(words_per_seq, dtype=torch.int32).cumsum(0)
        shape = k2.ragged.create_ragged_shape2(row_splits.to(device), None, len(ids))
        return k2.RaggedTensor(shape, torch.tensor(ids, dtype=torch.int32, device=device))
