"""Small implementations of the attention-decoder and LM protocols for tests and benchmarks: a GRU
LM (a :class:`~k2dec.lm.NeuralLM`), a table-driven decoder for hand-worked cases, a
call-counting wrapper, a random Transformer decoder, and the scorers of joint CTC/attention
decoding and LM fusion (:func:`joint_scorers`)."""

from __future__ import annotations

import math

import torch
from torch import nn

from k2dec.aed import TransformerDecoder
from k2dec.lm.base import NeuralLM
from k2dec.scorers import CtcScorer, NeuralLmScorer, WeightedScorer

__all__ = ["CountingDecoder", "TableDecoder", "TinyLM", "joint_scorers", "random_decoder"]


class TinyLM(NeuralLM):
    """A GRU LM, a :class:`~k2dec.lm.NeuralLM` (state: hidden ``[M, H]`` plus the number of
    positions it covers), with the ``sos``/``eos`` ids of :func:`random_decoder`'s decoders
    (``vocab_size - 1``) unless given."""

    model_type = "tiny"

    def __init__(self, vocab_size: int, hidden: int = 8, seed: int = 0,
                 sos_id: int | None = None, eos_id: int | None = None) -> None:
        last = vocab_size - 1
        super().__init__(vocab_size, last if sos_id is None else sos_id,
                         last if eos_id is None else eos_id)
        gen = torch.Generator().manual_seed(seed)
        self.embed = nn.Embedding(vocab_size, hidden)
        self.cell = nn.GRUCell(hidden, hidden)
        self.out = nn.Linear(hidden, vocab_size)
        with torch.no_grad():
            for p in self.parameters():
                p.copy_(torch.randn(p.shape, generator=gen))

    def _run(self, tokens: torch.Tensor, state):
        if state is None:
            h = torch.zeros(tokens.size(0), self.cell.hidden_size, dtype=self.out.weight.dtype,
                            device=tokens.device)
            done = 0
        else:
            h, done = state
        outs = []
        for i in range(tokens.size(1)):
            h = self.cell(self.embed(tokens[:, i]), h)
            outs.append(self.out(h).log_softmax(-1))
        return torch.stack(outs, dim=1), (h, done + tokens.size(1))

    def num_consumed(self, state) -> int:
        return 0 if state is None else state[1]

    def num_rows(self, state) -> int:
        return state[0].size(0)

    def select_state(self, state, index: torch.Tensor):
        h, done = state
        return h.index_select(0, index), done

    def _advance_rows(self, state, tokens: torch.Tensor, rows: torch.Tensor):
        h, done = state
        new = self.cell(self.embed(tokens), h.index_select(0, rows))
        return self.out(new).log_softmax(-1), (h.index_copy(0, rows, new), done)

    def cat_states(self, states):
        return torch.cat([h for h, _ in states]), states[0][1]


def joint_scorers(decoder, memory_lens: torch.Tensor, ctc_log_probs: torch.Tensor | None = None,
                  ctc_weight: float = 0.0, lm: NeuralLM | None = None, lm_scale: float = 0.0,
                  blank_id: int = 0) -> list[WeightedScorer]:
    """The scorers of joint CTC/attention decoding (a :class:`~k2dec.scorers.CtcScorer` of
    ``ctc_log_probs`` weighted ``ctc_weight``) and LM shallow fusion (a
    :class:`~k2dec.scorers.NeuralLmScorer` of ``lm``, ending with its ``eos``, weighted
    ``lm_scale``) for :func:`k2dec.aed.beam_search`, each left out when its weight is 0 or
    its source None (what ``k2dec.methods.build_scorers`` makes of a fusion part)."""
    out = []
    if ctc_weight > 0 and ctc_log_probs is not None:
        out.append(WeightedScorer(CtcScorer(ctc_log_probs, memory_lens, blank_id,
                                            decoder.eos_id), ctc_weight))
    if lm_scale > 0 and lm is not None:
        out.append(WeightedScorer(NeuralLmScorer(lm, score_eos=True), lm_scale))
    return out


class TableDecoder:
    """A decoder whose next-token distribution depends only on the last token (hand-worked
    tests). ``table[last]`` are probabilities; ``last`` is None for the empty prefix."""

    def __init__(self, table: dict, vocab_size: int, eos_id: int) -> None:
        self.table = {k: [math.log(p) for p in v] for k, v in table.items()}
        self.vocab_size = vocab_size
        self.sos_id = eos_id
        self.eos_id = eos_id
        self.calls = 0
        self.rows = 0

    def step(self, tokens, memory, memory_padding_mask, state):
        self.calls += 1
        self.rows += tokens.size(0)
        rows = []
        for prefix in tokens.tolist():
            last = prefix[-1] if len(prefix) > 1 else None
            rows.append(self.table.get(last, self.table[None]))  # dead slots end in eos
        return torch.tensor(rows, dtype=memory.dtype, device=memory.device), None, None

    def select_state(self, state, index):
        return state


class CountingDecoder:
    """Wraps a decoder and counts calls and rows (for tests of compute and the benchmark)."""

    def __init__(self, decoder) -> None:
        self.decoder = decoder
        self.vocab_size = decoder.vocab_size
        self.sos_id = decoder.sos_id
        self.eos_id = decoder.eos_id
        self.calls = 0
        self.rows = 0

    def step(self, tokens, memory, memory_padding_mask, state):
        self.calls += 1
        self.rows += tokens.size(0)
        return self.decoder.step(tokens, memory, memory_padding_mask, state)

    def select_state(self, state, index):
        return self.decoder.select_state(state, index)


def random_decoder(
    vocab_size: int,
    memory_dim: int,
    seed: int,
    eos_bias: float = 0.0,
    dtype: torch.dtype = torch.float64,
    scale: float = 1.0,
) -> TransformerDecoder:
    """A small random TransformerDecoder in eval mode; ``eos_bias`` is added to the eos logit
    (so that hypotheses end at varied lengths) and ``scale`` multiplies the output layer
    (peakier distributions)."""
    torch.manual_seed(seed)
    dec = TransformerDecoder(
        vocab_size, memory_dim, d_model=16, nhead=2, num_layers=2, dim_feedforward=32,
        dropout=0.0,
    )
    with torch.no_grad():
        dec.output.weight.mul_(scale)
        dec.output.bias.mul_(scale)
        dec.output.bias[dec.eos_id] += eos_bias
    return dec.to(dtype).eval()
