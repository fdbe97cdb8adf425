"""Small implementations of the attention-decoder and LM protocols for tests and benchmarks: a GRU
LM, a table-driven decoder for hand-worked cases, a call-counting wrapper, a random Transformer
decoder."""

from __future__ import annotations

import math

import torch
from torch import nn

from k2dec.aed import TransformerDecoder

__all__ = ["CountingDecoder", "TableDecoder", "TinyLM", "random_decoder"]


class TinyLM(nn.Module):
    """A GRU LM implementing ``k2dec.aed.IncrementalLM`` (state: hidden ``[M, H]`` plus the
    number of tokens it has consumed)."""

    def __init__(self, vocab_size: int, hidden: int = 8, seed: int = 0) -> None:
        super().__init__()
        gen = torch.Generator().manual_seed(seed)
        self.vocab_size = vocab_size
        self.embed = nn.Embedding(vocab_size, hidden)
        self.cell = nn.GRUCell(hidden, hidden)
        self.out = nn.Linear(hidden, vocab_size)
        with torch.no_grad():
            for p in self.parameters():
                p.copy_(torch.randn(p.shape, generator=gen))

    def step(self, tokens: torch.Tensor, state):
        if state is None:
            h = torch.zeros(tokens.size(0), self.cell.hidden_size, dtype=self.out.weight.dtype,
                            device=tokens.device)
            done = 0
        else:
            h, done = state
        for i in range(done, tokens.size(1)):
            h = self.cell(self.embed(tokens[:, i]), h)
        return self.out(h).log_softmax(-1), (h, tokens.size(1))

    def select_state(self, state, index: torch.Tensor):
        h, done = state
        return h.index_select(0, index), done


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
