"""pyctcdecode's CTC beam search over BPE pieces (no lexicon: ``▁`` starts a word), with KenLM
reading an ARPA file or without an LM.

Its ``alpha`` weights the LM's natural-log score (it converts KenLM's log10 itself); words
outside the ARPA get its unknown-word offset of -10. Utterances are decoded one after the
other (its multiprocessing pool is not used).
"""

from __future__ import annotations

import logging
from pathlib import Path

from .tokens import quiet_stderr, read_tokens

__all__ = ["BUILDER", "PEER", "PyctcDecoder"]

PEER = "pyctcdecode"
BUILDER = "pyctcdecode.build_ctcdecoder with the ARPA (needs kenlm)"


class PyctcDecoder:
    """``pyctcdecode.build_ctcdecoder`` on tokens.txt's first ``vocab`` symbols (the blank
    ``""``), with the ARPA at ``arpa`` (None: no LM)."""

    def __init__(self, lang_dir: Path, vocab: int, arpa: Path | None = None) -> None:
        import pyctcdecode

        logging.getLogger("pyctcdecode").setLevel(logging.ERROR)
        labels = read_tokens(lang_dir / "tokens.txt", vocab)
        labels[0] = ""  # the blank
        if arpa is None:
            self.decoder = pyctcdecode.build_ctcdecoder(labels)
            return
        with quiet_stderr():
            self.decoder = pyctcdecode.build_ctcdecoder(
                labels, kenlm_model_path=str(arpa), alpha=0.5, beta=0.0)

    def set_lm_weight(self, lam: float) -> None:
        """LM weight ``alpha = lam``, no word bonus."""
        self.decoder.reset_params(alpha=lam, beta=0.0)

    def decode(self, log_probs, lengths, beam_width: int) -> list[list[str]]:
        """Words of each utterance of ``log_probs`` ``(N, T, V)`` / ``lengths`` ``(N,)``."""
        lp = log_probs.numpy()
        lens = [int(x) for x in lengths]
        return [self.decoder.decode(lp[i, : lens[i]], beam_width=beam_width).split()
                for i in range(len(lens))]
