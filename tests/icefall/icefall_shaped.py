"""Objects with exactly the interfaces of icefall's (written for the tests; icefall is not
installed in CI), computed from k2dec's models so that results can be compared:

- :class:`RnnLmModel` / :class:`LmScorer`: icefall's RNN LM (``forward(x, y, lengths)`` ->
  per-token nll, ``score_token(x, x_lens, state)``) and its ``LmScorer`` wrapper, over a
  k2dec :class:`~k2dec.lm.RnnLM`'s embedding / LSTM / output layers;
- :class:`TransformerLmScorer`: an ``LmScorer`` with ``lm_type == "transformer"`` (whole
  padded prefixes, no state) over a k2dec :class:`~k2dec.lm.TransformerLM`;
- :class:`ZipformerAttentionDecoder` (``nll(encoder_out, encoder_out_lens, token_ids)``) and
  :class:`ConformerModel` (``decoder_nll(memory (T, N, C), memory_key_padding_mask,
  token_ids, sos_id, eos_id)``) over a k2dec decoder's ``score_sequences``;
- :class:`DictNgramLm`: ``NgramLm``'s ``get_next_state_and_cost(state, label)`` over an FST in
  a dict (a token bigram with backoff arcs);
- :class:`TableContextGraph`: icefall's ``ContextGraph`` protocol (``root``,
  ``forward_one_step``, ``finalize``) over a k2dec ContextGraph's tables.
"""

from __future__ import annotations

import k2
import torch
from torch import nn


def _padded_nll(log_probs: k2.RaggedTensor) -> torch.Tensor:
    """Ragged per-token log-probs ``[seq][tok + 1]`` -> nll ``[S, max + 1]``, 0 at padding."""
    return -log_probs.pad(mode="constant", padding_value=0.0)


class RnnLmModel(nn.Module):
    def __init__(self, lm) -> None:
        super().__init__()
        self.lm = lm

    def forward(self, x: torch.Tensor, y: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        log_probs = self.lm(x)  # [B, L, V] teacher-forced
        nll = -log_probs.gather(2, y.unsqueeze(2)).squeeze(2)
        pad = torch.arange(x.size(1)).unsqueeze(0) >= lengths.unsqueeze(1)
        return nll.masked_fill(pad, 0.0)

    def score_token(self, x: torch.Tensor, x_lens: torch.Tensor, state=None):
        lm = self.lm
        if state is None:
            dtype = next(lm.parameters()).dtype
            h = torch.zeros(lm.rnn.num_layers, x.size(0), lm.rnn.hidden_size, dtype=dtype)
            state = (h, h.clone())
        y, (h, c) = lm.rnn(lm.embedding(x), state)
        return lm.output(y)[:, 0].log_softmax(-1), (h, c)


class LmScorer(nn.Module):
    lm_type = "rnn"

    def __init__(self, lm, lm_scale: float) -> None:
        super().__init__()
        self.lm = RnnLmModel(lm)
        self.lm_scale = lm_scale

    def score_token(self, x, x_lens, state=None):
        return self.lm.score_token(x, x_lens, state)


class TransformerLmScorer(nn.Module):
    lm_type = "transformer"

    def __init__(self, lm, lm_scale: float) -> None:
        super().__init__()
        self.lm = lm
        self.lm_scale = lm_scale

    def score_token(self, x, x_lens, state=None):
        assert state is None
        log_probs = self.lm(x)  # [B, U, V]; the positions after x_lens are padding
        rows = torch.arange(x.size(0))
        return log_probs[rows, x_lens - 1], None


class ZipformerAttentionDecoder:
    def __init__(self, decoder) -> None:
        self.decoder = decoder

    def nll(self, encoder_out, encoder_out_lens, token_ids):
        tokens = k2.RaggedTensor(token_ids, dtype=torch.int32)
        rows = torch.arange(len(token_ids))
        return _padded_nll(self.decoder.score_sequences(encoder_out, encoder_out_lens, tokens,
                                                        rows))


class ConformerModel:
    def __init__(self, decoder) -> None:
        self.decoder = decoder

    def decoder_nll(self, memory, memory_key_padding_mask, token_ids, sos_id, eos_id):
        assert (sos_id, eos_id) == (self.decoder.sos_id, self.decoder.eos_id)
        lens = (~memory_key_padding_mask).sum(1)
        tokens = k2.RaggedTensor(token_ids, dtype=torch.int32)
        rows = torch.arange(len(token_ids))
        return _padded_nll(self.decoder.score_sequences(memory.permute(1, 0, 2), lens, tokens,
                                                        rows))


class DictNgramLm:
    """A token bigram FST: state 0 the start, 1 the unigram state, ``2 + t`` the history
    ``t``; ``arcs[state][label] = (next_state, cost)``, ``backoff_id`` the backoff label."""

    def __init__(self, arcs: dict[int, dict[int, tuple[int, float]]], backoff_id: int) -> None:
        self.arcs = arcs
        self.backoff_id = backoff_id

    def get_next_state_and_cost(self, state: int, label: int):
        states, costs = [state], [0.0]
        while self.backoff_id in self.arcs.get(states[-1], {}):
            nxt, cost = self.arcs[states[-1]][self.backoff_id]
            states.append(nxt)
            costs.append(costs[-1] + cost)
        out_states, out_costs = [], []
        for s, c in zip(states, costs):
            if label in self.arcs.get(s, {}):
                ns, nc = self.arcs[s][label]
                out_states.append(ns)
                out_costs.append(c + nc)
        return out_states, out_costs


def random_bigram(vocab: int, seed: int) -> DictNgramLm:
    """Random costs over tokens ``[1, vocab)``: every token from the unigram state, some
    from each history, a backoff arc from every history (and from the start)."""
    g = torch.Generator().manual_seed(seed)
    arcs: dict[int, dict[int, tuple[int, float]]] = {1: {}}
    for t in range(1, vocab):
        arcs[1][t] = (2 + t, float(torch.rand(1, generator=g)) * 3 + 0.5)
    for h in [0] + [2 + t for t in range(1, vocab)]:
        arcs[h] = {vocab: (1, float(torch.rand(1, generator=g)))}
        for t in range(1, vocab):
            if float(torch.rand(1, generator=g)) < 0.5:
                arcs[h][t] = (2 + t, float(torch.rand(1, generator=g)) * 2)
    return DictNgramLm(arcs, backoff_id=vocab)


class TableContextGraph:
    """icefall's ContextGraph protocol over the tables of a k2dec ContextGraph (icefall's
    rules: partial share 1, phrases complete on their last token); states are node ids."""

    def __init__(self, graph, vocab: int) -> None:
        self.root = 0
        self.tables = {strict: graph.tables(vocab, strict) for strict in (False, True)}

    def forward_one_step(self, state: int, token: int, strict_mode: bool = True):
        nxt, score, _ = self.tables[strict_mode]
        return float(score[state, token]), int(nxt[state, token]), None

    def finalize(self, state: int):
        _, _, final = self.tables[True]
        return float(final[state]), self.root


class _EvalNoOp(nn.Module):
    """Stands where icefall's ``Balancer`` sits: an identity at inference."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x


class ZipformerDecoder(nn.Module):
    """The stateless decoder of icefall's zipformer recipe, with its attribute names and
    forward: an embedding (negative ids embed to zero, the product with a bool mask), a
    no-op where icefall balances, a grouped ``Conv1d`` over ``context_size`` (group size 4),
    a ReLU; ``need_pad`` left-pads for training."""

    def __init__(self, vocab_size: int, decoder_dim: int, blank_id: int, context_size: int):
        super().__init__()
        self.embedding = nn.Embedding(num_embeddings=vocab_size, embedding_dim=decoder_dim)
        self.balancer = _EvalNoOp()
        self.blank_id = blank_id
        self.context_size = context_size
        self.vocab_size = vocab_size
        if context_size > 1:
            self.conv = nn.Conv1d(decoder_dim, decoder_dim, kernel_size=context_size,
                                  padding=0, groups=decoder_dim // 4, bias=False)
            self.balancer2 = _EvalNoOp()
        else:
            self.conv = nn.Identity()
            self.balancer2 = nn.Identity()

    def forward(self, y: torch.Tensor, need_pad: bool = True) -> torch.Tensor:
        y = y.to(torch.int64)
        out = self.embedding(y.clamp(min=0)) * (y >= 0).unsqueeze(-1)
        out = self.balancer(out)
        if self.context_size > 1:
            out = out.permute(0, 2, 1)
            if need_pad:
                out = torch.nn.functional.pad(out, pad=(self.context_size - 1, 0))
            else:
                assert out.size(-1) == self.context_size
            out = self.conv(out).permute(0, 2, 1)
            out = self.balancer2(torch.nn.functional.relu(out))
        return out


class ZipformerJoiner(nn.Module):
    """icefall's zipformer joiner: ``encoder_proj`` / ``decoder_proj`` (linear layers),
    ``output_linear`` over ``tanh`` of their sum; inputs of equal rank (4-D in the
    searches); ``project_input=False`` takes projected inputs."""

    def __init__(self, encoder_dim: int, decoder_dim: int, joiner_dim: int, vocab_size: int):
        super().__init__()
        self.encoder_proj = nn.Linear(encoder_dim, joiner_dim)
        self.decoder_proj = nn.Linear(decoder_dim, joiner_dim)
        self.output_linear = nn.Linear(joiner_dim, vocab_size)

    def forward(self, encoder_out: torch.Tensor, decoder_out: torch.Tensor,
                project_input: bool = True) -> torch.Tensor:
        assert encoder_out.ndim == decoder_out.ndim, (encoder_out.shape, decoder_out.shape)
        if project_input:
            logit = self.encoder_proj(encoder_out) + self.decoder_proj(decoder_out)
        else:
            logit = encoder_out + decoder_out
        return self.output_linear(torch.tanh(logit))


class ZipformerTransducer(nn.Module):
    """The ``decoder`` / ``joiner`` pair of icefall's ``AsrModel`` (no encoder: the searches
    take encoder outputs)."""

    def __init__(self, decoder: ZipformerDecoder, joiner: ZipformerJoiner) -> None:
        super().__init__()
        self.decoder = decoder
        self.joiner = joiner


def zipformer_transducer(vocab: int, decoder_dim: int, encoder_dim: int, seed: int,
                         blank_bias: float) -> ZipformerTransducer:
    """A seeded :class:`ZipformerTransducer` (context 2) whose output distributions are
    peaked like a trained model's: the output layer's weights scaled by 4 and the blank
    logit raised by ``blank_bias``."""
    torch.manual_seed(seed)
    model = ZipformerTransducer(ZipformerDecoder(vocab, decoder_dim, 0, 2),
                                ZipformerJoiner(encoder_dim, decoder_dim, decoder_dim, vocab))
    with torch.no_grad():
        model.joiner.output_linear.weight.mul_(4.0)
        model.joiner.output_linear.bias[0] += blank_bias
    return model.eval()
