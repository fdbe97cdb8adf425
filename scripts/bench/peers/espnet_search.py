"""ESPnet's ``BatchBeamSearch`` with its ``CTCPrefixScorer``, searching k2dec's attention decoder
and the same CTC log-probs as k2dec's :func:`k2dec.aed.beam_search`, once per utterance (its
usual way: the beams of one utterance are batched).

ESPnet is optional: ``pip install --no-deps -r requirements/bench-espnet.txt``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["INSTALL_HINT", "PEER", "Espnet", "EspnetSearch", "PrecomputedCtc",
           "decoder_scorer", "eos_prebeamed_ctc_scorer", "import_espnet"]

PEER = "ESPnet BatchBeamSearch"
INSTALL_HINT = "pip install --no-deps -r requirements/bench-espnet.txt"


@dataclass
class Espnet:
    """The ESPnet classes the benchmark uses (imported only when ESPnet is installed)."""

    version: str
    BatchBeamSearch: Any
    BatchScorerInterface: Any
    CTCPrefixScorer: Any


def import_espnet() -> tuple[Espnet | None, str]:
    """``(Espnet, "")`` when ESPnet's beam search imports, else ``(None, reason)``."""
    try:
        import espnet
        from espnet.nets.batch_beam_search import BatchBeamSearch
        from espnet.nets.scorer_interface import BatchScorerInterface
        from espnet.nets.scorers.ctc import CTCPrefixScorer
    except (ImportError, AttributeError) as e:  # not installed / incompatible numpy or torch
        return None, f"cannot import ESPnet's beam search ({type(e).__name__}: {e}); {INSTALL_HINT}"
    # its beam search logs a warning for every hypothesis that reaches the maximum length
    logging.getLogger("espnet").setLevel(logging.ERROR)
    return Espnet(getattr(espnet, "__version__", "?"), BatchBeamSearch, BatchScorerInterface,
                  CTCPrefixScorer), ""


def decoder_scorer(esp: Espnet, decoder: Any) -> Any:
    """Wrap a :class:`k2dec.aed.TransformerDecoder` as an ESPnet ``BatchScorerInterface``.

    ESPnet keeps one state per hypothesis (a list); here a hypothesis' state is its
    self-attention key/value cache, ``[heads, u, head_dim]`` per layer, plus a reference to the
    utterance's projected memory keys/values (computed once on the first step and shared by all
    hypotheses, passed to the decoder as one memory group for all rows, so the peer does not
    pay for copying them). ``batch_score`` stacks the caches,
    runs one incremental :meth:`TransformerDecoder.step` for the ``n_batch`` prefixes and splits
    the new caches again."""

    class DecoderScorer(esp.BatchScorerInterface):
        def init_state(self, x: torch.Tensor) -> None:
            return None

        def batch_score(self, ys: torch.Tensor, states: list, xs: torch.Tensor):
            n = ys.size(0)
            mask = torch.zeros(n, xs.size(1), dtype=torch.bool, device=xs.device)
            state = None
            if states[0] is not None:
                memory_kv = states[0][1]
                state = tuple(
                    (torch.stack([s[0][i][0] for s in states]),
                     torch.stack([s[0][i][1] for s in states]),
                     mk, mv)  # one memory row for all n rows (TransformerDecoder groups)
                    for i, (mk, mv) in enumerate(memory_kv)
                )
            log_probs, _, new = decoder.step(ys, xs, mask, state)
            memory_kv = tuple((layer[2][:1], layer[3][:1]) for layer in new)
            out = [(tuple((layer[0][j], layer[1][j]) for layer in new), memory_kv)
                   for j in range(n)]
            return log_probs, out

        def score(self, y: torch.Tensor, state: Any, x: torch.Tensor):
            log_probs, states = self.batch_score(y.unsqueeze(0), [state], x.unsqueeze(0))
            return log_probs[0], states[0]

    return DecoderScorer()


class PrecomputedCtc:
    """The ``ctc`` object of ESPnet's ``CTCPrefixScorer``: ``log_softmax(x)`` returns the CTC
    log-probs ``[1, T, V]`` of the utterance being decoded (set ``log_probs`` before each
    utterance), the same numbers k2dec's search reads."""

    def __init__(self) -> None:
        self.log_probs: torch.Tensor | None = None

    def log_softmax(self, x: torch.Tensor) -> torch.Tensor:
        if self.log_probs is None or self.log_probs.size(1) != x.size(1):
            got = None if self.log_probs is None else tuple(self.log_probs.shape)
            raise ValueError(f"PrecomputedCtc.log_probs must be [1, {x.size(1)}, V], got {got}")
        return self.log_probs


def eos_prebeamed_ctc_scorer(esp: Espnet, ctc: PrecomputedCtc, eos: int) -> Any:
    """ESPnet's ``CTCPrefixScorer`` with one change: ``eos`` gets ESPnet's ``logzero`` unless it
    is among the hypothesis' pre-beam candidates, as in k2dec (stock ESPnet always scores eos)."""

    class EosPrebeamed(esp.CTCPrefixScorer):
        def batch_score_partial(self, y, ids, state, x):
            scores, new_state = super().batch_score_partial(y, ids, state, x)
            if ids is not None:
                outside = ~(ids == self.eos).any(dim=1)
                scores[outside, self.eos] = -1e10
            return scores, new_state

    return EosPrebeamed(ctc, eos)


class EspnetSearch:
    """ESPnet's BatchBeamSearch over ``decoder`` (weight ``1 - ctc_weight``) and, for
    ``ctc_weight > 0``, its CTC prefix scorer (stock, or eos pre-beamed like k2dec's
    ``ctc_always_score_eos=False``); pre-beam ``int(1.5 * beam)`` on the weighted score, no
    length normalization."""

    def __init__(self, esp: Espnet, decoder: Any, beam: int, ctc_weight: float,
                 eos_prebeamed: bool = False) -> None:
        self.ctc = PrecomputedCtc()
        scorers: dict[str, Any] = {"decoder": decoder_scorer(esp, decoder)}
        weights = {"decoder": 1.0 - ctc_weight}
        if ctc_weight > 0:
            scorers["ctc"] = (eos_prebeamed_ctc_scorer(esp, self.ctc, decoder.eos_id)
                              if eos_prebeamed else esp.CTCPrefixScorer(self.ctc, decoder.eos_id))
            weights["ctc"] = ctc_weight
        self.search = esp.BatchBeamSearch(
            scorers=scorers, weights=weights, beam_size=beam, vocab_size=decoder.vocab_size,
            sos=decoder.sos_id, eos=decoder.eos_id, pre_beam_ratio=1.5,
            pre_beam_score_key="full" if 0 < ctc_weight < 1 else None, normalize_length=False,
        ).eval()

    def __call__(self, encoder_out: torch.Tensor, encoder_lens: torch.Tensor,
                 ctc_log_probs: torch.Tensor, end_detect: bool = True) -> list:
        """ESPnet's n-best list of each utterance, searched one after the other."""
        out = []
        with torch.no_grad():
            for i, t in enumerate(encoder_lens.tolist()):
                self.ctc.log_probs = ctc_log_probs[i : i + 1, :t]
                # maximum length T either way; maxlenratio=0 also switches on end detection
                # (ESPnet's ASR default)
                out.append(self.search(encoder_out[i, :t], maxlenratio=0.0 if end_detect else 1.0,
                                       minlenratio=0.0))
        return out

    @staticmethod
    def best(nbest: list) -> tuple[list[int], float | None]:
        """Tokens (without sos/eos) and score of an n-best list's first hypothesis."""
        if not nbest:
            return [], None
        return [int(i) for i in nbest[0].yseq[1:-1].tolist()], float(nbest[0].score)
