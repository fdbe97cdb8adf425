"""The protocol of the decoder the attention beam search talks to (an LM reaches the search
as a scorer: :class:`~k2dec.scorers.NeuralLmScorer` of a :class:`~k2dec.lm.NeuralLM`, the one
LM protocol).

The decoder is incremental: the search calls ``step`` once per output position for all live
hypotheses of all utterances at once (``M = N_active * B`` rows), and reorders the returned
state with ``select_state`` when hypotheses are pruned, extended or dropped.

The first ``step`` of a search is called with ``state=None``; an implementation must then
compute from the whole prefix it is given. ``step`` must give the same result whether it is
called incrementally (with the state returned by the previous call, on the same prefixes
extended by one token) or from scratch with ``state=None`` on the whole prefix; the tests and
the per-hypothesis reference rely on that. :func:`k2dec.aed.beam_search` needs only ``step``
and ``select_state`` (plus the three attributes) of a decoder.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import k2
import torch

__all__ = ["AttentionDecoder"]


@runtime_checkable
class AttentionDecoder(Protocol):
    """An attention (encoder-decoder) decoder usable by :func:`k2dec.aed.beam_search`.

    Attributes:
      vocab_size: ``V``, the size of the output distribution.
      sos_id: the token every prefix starts with (``tokens[:, 0]``).
      eos_id: the token that ends a hypothesis (may equal ``sos_id``, as in icefall).
    """

    vocab_size: int
    sos_id: int
    eos_id: int

    def step(
        self,
        tokens: torch.Tensor,
        memory: torch.Tensor,
        memory_padding_mask: torch.Tensor,
        state: Any,
    ) -> tuple[torch.Tensor, torch.Tensor | None, Any]:
        """Score the next token of every prefix.

        Args:
          tokens: int64 ``[M, u]``, ``u >= 1``; ``tokens[:, 0] == sos_id``. Row ``m`` is the
            whole prefix of hypothesis ``m``.
          memory: float ``[M, T, C]``, the encoder output of each row's utterance.
          memory_padding_mask: bool ``[M, T]``, ``True`` at padded frames.
          state: ``None`` on the first call, otherwise the state returned by the previous call
            (after :meth:`select_state`).

        Returns:
          ``(log_probs, attention, state)``: ``log_probs`` float ``[M, V]``, normalized
          log-probabilities of the token after each prefix; ``attention`` float ``[M, T]``,
          the cross-attention weights of this position (zero at padded frames) or ``None``
          when the decoder has none (then coverage penalties cannot be used); the new state.
        """
        ...

    def select_state(self, state: Any, index: torch.Tensor) -> Any:
        """Return the state of rows ``index`` (int64 ``[M']``, values in ``[0, M)``), in order."""
        ...

    def score_sequences(
        self,
        memory: torch.Tensor,
        memory_lens: torch.Tensor,
        tokens: k2.RaggedTensor,
        seq_to_utt: torch.Tensor,
    ) -> k2.RaggedTensor:
        """Teacher-forced scores of whole sequences (n-best rescoring; not used by the search).

        Args:
          memory: float ``[N, T, C]``; memory_lens: int ``[N]`` valid frames per utterance.
          tokens: int32 ragged ``[seq][token]``, without ``sos``/``eos``.
          seq_to_utt: int64 ``[S]``, the utterance of each sequence.

        Returns:
          float ragged ``[seq][token]`` with ``len + 1`` log-probs per sequence (the last for
          ``eos``).
        """
        ...
