"""torchaudio 0.13's flashlight lexicon beam search (``torchaudio.models.decoder.ctc_decoder``)
with KenLM reading an ARPA file.

It gets the lang dir's lexicon.txt (word followed by its BPE pieces: flashlight's format) and
tokens.txt's first V symbols (``<blk>`` is the blank; flashlight needs a silence token,
``<sos/eos>`` plays it: the CTC head never emits it). Its ``lm_weight`` multiplies KenLM's
log10 scores, so a natural-log weight lambda is ``lm_weight = lambda * ln(10)``.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from .tokens import quiet_stderr, read_tokens

__all__ = ["BUILDER", "PEER", "TorchaudioDecoder"]

PEER = "torchaudio ctc_decoder"
BUILDER = "torchaudio.models.decoder.ctc_decoder"


class TorchaudioDecoder:
    """The decoder at any (lambda, beam) setting; built lazily, the last one kept."""

    def __init__(self, lang_dir: Path, arpa: Path, vocab: int) -> None:
        from torchaudio.models.decoder import ctc_decoder

        self._factory = ctc_decoder
        self.lexicon = str(lang_dir / "lexicon.txt")
        self.tokens = read_tokens(lang_dir / "tokens.txt", vocab)
        self.arpa = str(arpa)
        self._decoders: dict[tuple, Any] = {}

    def decoder(self, lam: float, beam: tuple[int, int]):
        """The decoder for one setting (only the last one is kept: each holds its own KenLM);
        ``beam`` is ``(beam_size, beam_size_token)``."""
        key = (lam, beam)
        if key not in self._decoders:
            self._decoders.clear()
            with quiet_stderr():
                self._decoders[key] = self._factory(
                    lexicon=self.lexicon, tokens=self.tokens, lm=self.arpa,
                    beam_size=beam[0], beam_size_token=beam[1], beam_threshold=25.0,
                    lm_weight=lam * math.log(10.0), word_score=0.0, sil_score=0.0,
                    blank_token="<blk>", sil_token="<sos/eos>", unk_word="<UNK>")
        return self._decoders[key]

    def decode(self, log_probs, lengths, lam: float, beam: tuple[int, int]) -> list[list[str]]:
        """Words of each utterance of ``log_probs`` ``(N, T, V)`` / ``lengths`` ``(N,)``."""
        hyps = self.decoder(lam, beam)(log_probs, lengths)
        return [list(h[0].words) if h else [] for h in hyps]
