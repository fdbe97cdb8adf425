"""Neural language models over BPE tokens: an LSTM LM and a causal Transformer LM.

Both are a :class:`NeuralLM`, the one LM interface every search and rescorer takes: they score
ragged batches of whole token sequences (n-best rescoring), step incrementally with a state
(shallow fusion, in a search as a :class:`~k2dec.scorers.NeuralLmScorer`), report perplexity, and
are trained on a text file with :func:`k2dec.train.train_lm` and loaded back with :func:`load_lm`.

Token convention (icefall BPE): ``<blk>`` = 0, ``<sos/eos>`` = 1, ``<unk>`` = 2.

Example (random weights, so the numbers are arbitrary)::

    >>> import k2, torch
    >>> from k2dec.lm import RnnLM, RnnLmConfig
    >>> _ = torch.manual_seed(0)
    >>> lm = RnnLM(RnnLmConfig(vocab_size=10, embedding_dim=8, hidden_dim=8)).eval()
    >>> seqs = k2.RaggedTensor([[3, 4, 5], []], dtype=torch.int32)  # [seq][token], no sos/eos
    >>> with torch.no_grad():
    ...     scores = lm.score_sequences(seqs)
    >>> [len(row) for row in scores.token_log_probs.tolist()]  # each token, then eos
    [4, 1]
    >>> scores.totals.shape
    torch.Size([2])
    >>> with torch.no_grad():  # shallow fusion: one step per new token, state carried along
    ...     log_probs, state = lm.step(torch.tensor([[1, 3]]), None)
    ...     log_probs, state = lm.step(torch.tensor([[1, 3, 4]]), state)
    >>> abs(float(log_probs[0, 5]) - scores.token_log_probs.tolist()[0][2]) < 1e-5
    True
"""

from .base import NeuralLM, SequenceScores
from .checkpoint import build_lm, export_lm, load_lm
from .perplexity import PerplexityResult, compute_perplexity, compute_text_perplexity
from .rnn import RnnLM, RnnLmConfig, RnnLmState
from .transformer import TransformerLM, TransformerLmConfig, TransformerLmState

__all__ = [
    "export_lm",
    "NeuralLM",
    "PerplexityResult",
    "RnnLM",
    "RnnLmConfig",
    "RnnLmState",
    "SequenceScores",
    "TransformerLM",
    "TransformerLmConfig",
    "TransformerLmState",
    "build_lm",
    "compute_perplexity",
    "compute_text_perplexity",
    "load_lm",
]
