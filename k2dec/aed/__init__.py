"""Attention encoder-decoder search: vectorized beam search, CTC prefix scoring, LM fusion
(everything added to the decoder's score is a weighted :class:`~k2dec.scorers.Scorer`).

Example (a random decoder, so the hypotheses are arbitrary)::

    >>> import torch
    >>> from k2dec.aed import BeamSearchConfig, TransformerDecoder, beam_search
    >>> from k2dec.scorers import CtcScorer, WeightedScorer
    >>> _ = torch.manual_seed(0)
    >>> decoder = TransformerDecoder(vocab_size=10, memory_dim=8, d_model=16, num_layers=2,
    ...                              dim_feedforward=32).eval()
    >>> memory = torch.randn(2, 6, 8)            # [N, T, C] encoder output
    >>> memory_lens = torch.tensor([6, 4])       # [N] valid frames
    >>> ctc = torch.randn(2, 6, 10).log_softmax(-1)  # [N, T, V] CTC log-probs (blank = 0)
    >>> joint = WeightedScorer(CtcScorer(ctc, memory_lens, blank_id=0, eos_id=decoder.eos_id),
    ...                        0.3)                  # joint CTC/attention, CTC weight 0.3
    >>> config = BeamSearchConfig(beam_size=4, num_hyps=2)
    >>> hyps = beam_search(decoder, memory, memory_lens, config, scorers=[joint])
    >>> [len(h) for h in hyps]                   # [N][num_hyps]
    [2, 2]
    >>> hyps[0][0].score >= hyps[0][1].score
    True
"""

from k2dec.aed.beam_search import AedHypothesis, BeamSearchConfig, beam_search
from k2dec.aed.interface import AttentionDecoder
from k2dec.aed.transformer import TransformerDecoder
from k2dec.scorers.ctc_prefix import CtcPrefixScorer, CtcPrefixState

__all__ = [
    "AedHypothesis",
    "AttentionDecoder",
    "BeamSearchConfig",
    "CtcPrefixScorer",
    "CtcPrefixState",
    "TransformerDecoder",
    "beam_search",
]
