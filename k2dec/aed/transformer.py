"""A small pre-norm Transformer attention decoder implementing :class:`AttentionDecoder`.

It plays the role of icefall's conformer_ctc attention decoder: token embedding plus sinusoidal
positions, ``num_layers`` blocks of (causal self-attention, cross-attention over the encoder
memory, feed-forward), a final layer norm and an output projection. ``sos_id`` and ``eos_id``
default to ``vocab_size - 1`` as in icefall's BPE recipes.
"""

from __future__ import annotations

import math

import k2
import torch
from torch import nn

from ..primitives.positional import sinusoidal_positions

__all__ = ["TransformerDecoder"]

# Per layer: (self_k, self_v, memory_k, memory_v). self_k/self_v: [M, heads, u, head_dim], the
# self-attention keys/values of each row's past positions. memory_k/memory_v:
# [G, heads, T, head_dim], the projected encoder memory once per group of B = M // G consecutive
# rows (G divides M; row m attends to memory row m // B). The beam search's rows are
# utterance-major with B slots per utterance, so G is the number of utterances and the memory
# is shared by the beams of an utterance instead of being copied per hypothesis.
_State = tuple[tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], ...]


def _rows_per_group(num_rows: int, num_groups: int) -> int:
    return num_rows // num_groups if num_groups > 0 else 1


def _memory_groups(group: torch.Tensor, num_groups: int) -> torch.Tensor | None:
    """How to lay out the memory for new rows whose memory rows are ``group`` (int64 ``[M']``).

    Splits the rows into the largest equal chunks of consecutive rows that share a memory row
    (the gcd of the lengths of the runs of equal values) and returns the memory row of each
    chunk, int64 ``[G']`` (``G'`` divides ``M'``), or None when that is exactly the current
    memory (``arange(num_groups)``), which then needs no copy."""
    num_rows = group.numel()
    if num_rows == 0:
        return group
    starts = torch.ones(num_rows, dtype=torch.bool, device=group.device)
    starts[1:] = group[1:] != group[:-1]
    bounds = starts.nonzero().squeeze(1).tolist() + [num_rows]
    size = math.gcd(*[b - a for a, b in zip(bounds[:-1], bounds[1:])])
    first = group[::size]
    if first.numel() == num_groups and bool(
        (first == torch.arange(num_groups, device=group.device)).all()
    ):
        return None
    return first


class _Attention(nn.Module):
    """Multi-head attention whose key/value projections can be computed once and cached."""

    def __init__(self, d_model: int, nhead: int, dropout: float) -> None:
        super().__init__()
        self.nhead = nhead
        self.head_dim = d_model // nhead
        self.query = nn.Linear(d_model, d_model)
        self.key = nn.Linear(d_model, d_model)
        self.value = nn.Linear(d_model, d_model)
        self.out = nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(dropout)

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        """``[M, L, D]`` -> ``[M, heads, L, head_dim]``."""
        return x.view(x.size(0), x.size(1), self.nhead, self.head_dim).transpose(1, 2)

    def keys_values(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self._heads(self.key(x)), self._heads(self.value(x))

    def forward(
        self, x: torch.Tensor, k: torch.Tensor, v: torch.Tensor, blocked: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """x: ``[M, Lq, D]``; k, v: ``[G, heads, Lk, head_dim]`` where ``G`` divides ``M`` and
        row ``m`` attends to ``k[m // B]``, ``v[m // B]`` (``B = M // G``); blocked: bool
        broadcastable to ``[M, 1, Lq, Lk]`` (True = may not attend). Returns (``[M, Lq, D]``,
        head-averaged weights ``[M, Lq, Lk]``).

        With ``B > 1`` the queries of a group are stacked (``[G, heads, B * Lq, head_dim]``) so
        that each group's keys/values are used in place, never copied per row."""
        num_rows, lq = x.size(0), x.size(1)
        groups, lk = k.size(0), k.size(2)
        per_group = _rows_per_group(num_rows, groups)
        q = self._heads(self.query(x)) / math.sqrt(self.head_dim)  # [M, heads, Lq, head_dim]
        if per_group > 1:
            q = q.view(groups, per_group, self.nhead, lq, self.head_dim).transpose(1, 2)
            q = q.reshape(groups, self.nhead, per_group * lq, self.head_dim)
            if blocked is not None and (blocked.size(0) != groups or blocked.size(2) != 1):
                blocked = blocked.expand(num_rows, 1, lq, lk).reshape(
                    groups, 1, per_group * lq, lk
                )  # (a mask per group that no query changes broadcasts as it is)
        scores = q @ k.transpose(2, 3)
        if blocked is not None:  # in place: one [G, heads, B * Lq, Lk] less at a time
            scores.masked_fill_(blocked, float("-inf"))
        weights = scores.softmax(dim=-1)
        del scores
        out = self.dropout(weights) @ v  # [G, heads, B * Lq, head_dim]
        mean_weights = weights.mean(dim=1).reshape(num_rows, lq, lk)
        if per_group > 1:
            out = out.view(groups, self.nhead, per_group, lq, self.head_dim).transpose(1, 2)
            out = out.reshape(num_rows, self.nhead, lq, self.head_dim)
        out = out.transpose(1, 2).reshape(num_rows, lq, -1)
        return self.out(out), mean_weights


class _DecoderLayer(nn.Module):
    def __init__(self, d_model: int, nhead: int, dim_feedforward: int, dropout: float) -> None:
        super().__init__()
        self.self_attn = _Attention(d_model, nhead, dropout)
        self.src_attn = _Attention(d_model, nhead, dropout)
        self.feed_forward = nn.Sequential(
            nn.Linear(d_model, dim_feedforward),
            nn.ReLU(),
            nn.Dropout(dropout),
            nn.Linear(dim_feedforward, d_model),
        )
        self.norm_self_attn = nn.LayerNorm(d_model)
        self.norm_src_attn = nn.LayerNorm(d_model)
        self.norm_ff = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(
        self,
        x: torch.Tensor,
        cache: tuple[torch.Tensor, ...],
        memory_blocked: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor, tuple[torch.Tensor, ...]]:
        """x: ``[M, u_new, D]`` new positions; cache: (self_k, self_v, memory_k, memory_v) (see
        ``_State``) with self_k/self_v possibly covering 0 past positions; memory_blocked: bool
        ``[M, 1, 1, T]``.

        Returns (output ``[M, u_new, D]``, cross-attention ``[M, u_new, T]``, new cache).
        """
        self_k, self_v, mem_k, mem_v = cache
        h = self.norm_self_attn(x)
        k_new, v_new = self.self_attn.keys_values(h)
        self_k = torch.cat([self_k, k_new], dim=2)
        self_v = torch.cat([self_v, v_new], dim=2)
        u_new, u_all = h.size(1), self_k.size(2)
        blocked = None
        if u_new > 1:
            q_pos = torch.arange(u_all - u_new, u_all, device=x.device).unsqueeze(1)
            blocked = torch.arange(u_all, device=x.device).unsqueeze(0) > q_pos
        sa, _ = self.self_attn(h, self_k, self_v, blocked)
        x = x + self.dropout(sa)
        ca, weights = self.src_attn(self.norm_src_attn(x), mem_k, mem_v, memory_blocked)
        x = x + self.dropout(ca)
        x = x + self.dropout(self.feed_forward(self.norm_ff(x)))
        return x, weights, (self_k, self_v, mem_k, mem_v)


class TransformerDecoder(nn.Module):
    """Pre-norm Transformer decoder with incremental decoding and whole-sequence scoring.

    Args:
      vocab_size: output vocabulary size ``V`` (including ``sos``/``eos`` and the CTC blank).
      memory_dim: feature size ``C`` of the encoder memory (a projection is added when it
        differs from ``d_model``).
      d_model, nhead, num_layers, dim_feedforward, dropout: the usual Transformer sizes.
      sos_id, eos_id: default ``vocab_size - 1``.
    """

    def __init__(
        self,
        vocab_size: int,
        memory_dim: int,
        d_model: int = 256,
        nhead: int = 4,
        num_layers: int = 6,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        sos_id: int | None = None,
        eos_id: int | None = None,
    ) -> None:
        super().__init__()
        for name, value in (
            ("vocab_size", vocab_size),
            ("memory_dim", memory_dim),
            ("d_model", d_model),
            ("nhead", nhead),
            ("num_layers", num_layers),
            ("dim_feedforward", dim_feedforward),
        ):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if vocab_size < 2:
            raise ValueError(f"vocab_size must be >= 2 (tokens plus eos), got {vocab_size}")
        if d_model % nhead != 0:
            raise ValueError(f"d_model ({d_model}) must be divisible by nhead ({nhead})")
        self.vocab_size = vocab_size
        self.sos_id = vocab_size - 1 if sos_id is None else sos_id
        self.eos_id = vocab_size - 1 if eos_id is None else eos_id
        for name, value in (("sos_id", self.sos_id), ("eos_id", self.eos_id)):
            if not 0 <= value < vocab_size:
                raise ValueError(f"{name} must be in [0, {vocab_size}), got {value}")
        self.d_model = d_model
        self.embed = nn.Embedding(vocab_size, d_model)
        self.memory_proj = nn.Linear(memory_dim, d_model) if memory_dim != d_model else None
        self.layers = nn.ModuleList(
            [_DecoderLayer(d_model, nhead, dim_feedforward, dropout) for _ in range(num_layers)]
        )
        self.final_norm = nn.LayerNorm(d_model)
        self.output = nn.Linear(d_model, vocab_size)

    def _run(
        self,
        tokens: torch.Tensor,
        memory: torch.Tensor,
        memory_padding_mask: torch.Tensor,
        state: _State | None,
    ) -> tuple[torch.Tensor, torch.Tensor, _State]:
        offset = 0 if state is None else state[0][0].size(2)
        x = self.embed(tokens) * math.sqrt(self.d_model)
        x = x + sinusoidal_positions(offset, tokens.size(1), self.d_model, x.device, x.dtype)
        if state is None:
            if self.memory_proj is not None:
                memory = self.memory_proj(memory)
            empty = x.new_zeros(x.size(0), self.layers[0].self_attn.nhead, 0,
                                self.d_model // self.layers[0].self_attn.nhead)
            state = tuple(
                (empty, empty) + layer.src_attn.keys_values(memory) for layer in self.layers
            )
        memory_blocked = memory_padding_mask[:, None, None, :]
        caches = []
        weights = None
        for layer, cache in zip(self.layers, state):
            x, weights, cache = layer(x, cache, memory_blocked)
            caches.append(cache)
        logits = self.output(self.final_norm(x))
        return logits.log_softmax(dim=-1), weights, tuple(caches)

    def forward(
        self, tokens: torch.Tensor, memory: torch.Tensor, memory_padding_mask: torch.Tensor
    ) -> torch.Tensor:
        """Teacher-forced scoring.

        Args:
          tokens: int64 ``[N, U]`` (starting with ``sos_id``).
          memory: float ``[G, T, C]``; memory_padding_mask: bool ``[G, T]``, True at padding:
            ``G`` divides ``N`` and row ``n`` attends to memory row ``n // (N / G)`` (e.g.
            ``G = 1``: every row to the one utterance's memory, projected once).

        Returns:
          float ``[N, U, V]``: log-probs of the token after each position.
        """
        log_probs, _, _ = self._run(tokens, memory, memory_padding_mask, None)
        return log_probs

    def step(
        self,
        tokens: torch.Tensor,
        memory: torch.Tensor,
        memory_padding_mask: torch.Tensor,
        state: _State | None,
    ) -> tuple[torch.Tensor, torch.Tensor, _State]:
        """One incremental step; see :meth:`k2dec.aed.AttentionDecoder.step` for shapes.

        The state caches the self-attention keys/values of each row's past positions and the
        projected memory (computed on the first call, one copy per row of that call's
        ``memory``; :meth:`select_state` keeps one copy per group of rows that share it), so
        later calls use ``memory`` only for its mask.
        """
        offset = 0 if state is None else state[0][0].size(2)
        if tokens.size(1) <= offset:
            raise ValueError(
                f"tokens has {tokens.size(1)} positions but the state already covers {offset}"
            )
        if memory_padding_mask.dim() != 2 or memory_padding_mask.size(0) != tokens.size(0):
            raise ValueError(
                f"memory_padding_mask must have shape [M, T] with M = {tokens.size(0)} rows "
                f"like tokens, got {tuple(memory_padding_mask.shape)}"
            )
        if state is not None:
            rows, groups = state[0][0].size(0), state[0][2].size(0)
            if rows != tokens.size(0) or (groups > 0 and rows % groups != 0) or (
                groups == 0 and rows > 0
            ):
                raise ValueError(
                    f"state has {rows} rows and {groups} memory groups, tokens has "
                    f"{tokens.size(0)} rows (the memory groups must divide the rows)"
                )
        log_probs, weights, caches = self._run(
            tokens[:, offset:], memory, memory_padding_mask, state
        )
        return log_probs[:, -1], weights[:, -1], caches

    def select_state(self, state: _State, index: torch.Tensor) -> _State:
        """The state of rows ``index`` (int64 ``[M']``, values in ``[0, M)``), in order.

        The self-attention caches are reordered row by row. The projected memory is shared:
        when consecutive selected rows keep using the same memory row (as the beam search's
        utterance-major rows do), the new state keeps one memory row per such group, without a
        copy when that is the current memory (a step that only reorders hypotheses within
        utterances) and with a copy of the kept groups' rows when some are dropped."""
        if not state:
            return state
        rows, groups = state[0][0].size(0), state[0][2].size(0)
        per_group = _rows_per_group(rows, groups)
        group = index // per_group if per_group > 1 else index
        keep = _memory_groups(group, groups)
        out = []
        for self_k, self_v, mem_k, mem_v in state:
            if keep is not None:
                mem_k, mem_v = mem_k.index_select(0, keep), mem_v.index_select(0, keep)
            out.append((self_k.index_select(0, index), self_v.index_select(0, index), mem_k, mem_v))
        return tuple(out)

    def score_sequences(
        self,
        memory: torch.Tensor,
        memory_lens: torch.Tensor,
        tokens: k2.RaggedTensor,
        seq_to_utt: torch.Tensor,
    ) -> k2.RaggedTensor:
        """Whole-sequence scoring, e.g. for n-best rescoring.

        The sequences of one utterance are scored together against its memory, projected once
        and cut to its ``memory_lens`` frames (never copied per sequence): the memory this
        takes grows with the ``(len + 1) x frames`` cells of the utterance's sequences (the
        cross-attention weights), not with ``sequences x frames x layers``.

        Args:
          memory: float ``[N, T, C]``; memory_lens: int ``[N]`` valid frames per utterance.
          tokens: int32 ragged ``[seq][token]``, token ids without ``sos``/``eos``.
          seq_to_utt: int64 ``[S]``, the utterance of each sequence (in ``[0, N)``, any order).

        Returns:
          float ragged ``[seq][token]`` with ``len + 1`` entries per sequence: the log-prob of
          each token given its prefix, then of ``eos``. Its ``.sum()`` gives per-sequence scores.
        """
        if tokens.num_axes != 2:
            raise ValueError(f"tokens must have 2 axes [seq][token], got {tokens.num_axes}")
        num_seqs = tokens.dim0
        if seq_to_utt.shape != (num_seqs,):
            raise ValueError(
                f"seq_to_utt must have shape ({num_seqs},), got {tuple(seq_to_utt.shape)}"
            )
        device = memory.device
        seq_to_utt = seq_to_utt.to(device=device, dtype=torch.int64)
        if num_seqs and (int(seq_to_utt.min()) < 0 or int(seq_to_utt.max()) >= memory.size(0)):
            raise ValueError(f"seq_to_utt must be in [0, {memory.size(0)}) (memory's "
                             f"utterances), got values in [{int(seq_to_utt.min())}, "
                             f"{int(seq_to_utt.max())}]")
        row_splits = tokens.shape.row_splits(1).to(device=device, dtype=torch.int64)
        lens = row_splits[1:] - row_splits[:-1]
        padded, targets = self._teacher_forced(tokens.values.to(device), row_splits)
        tok_lp = torch.zeros(padded.shape, dtype=memory.dtype, device=device)
        order = torch.sort(seq_to_utt, stable=True).indices
        utts, counts = torch.unique_consecutive(seq_to_utt[order], return_counts=True)
        frames = memory_lens.to(device).index_select(0, utts).clamp(min=0).tolist()
        for u, rows, t in zip(utts.tolist(), order.split(counts.tolist()), frames):
            width = int(lens[rows].max()) + 1
            mem = memory[u : u + 1, : max(t, 1)]  # at least one (then blocked) frame
            mask = torch.arange(mem.size(1), device=device).unsqueeze(0) >= t
            log_probs = self.forward(padded[rows, :width], mem, mask)
            tok_lp[rows, :width] = log_probs.gather(
                2, targets[rows, :width].unsqueeze(2)).squeeze(2)
            del log_probs
        keep = torch.arange(padded.size(1), device=device).unsqueeze(0) <= lens.unsqueeze(1)
        out_splits = (row_splits + torch.arange(num_seqs + 1, device=device)).to(torch.int32)
        shape = k2.ragged.create_ragged_shape2(out_splits, None, int(out_splits[-1]))
        return k2.RaggedTensor(shape, tok_lp[keep].contiguous())

    def _teacher_forced(self, values: torch.Tensor, row_splits: torch.Tensor
                        ) -> tuple[torch.Tensor, torch.Tensor]:
        """The decoder's inputs and targets of sequences ``values`` (int ``[total]``) split by
        ``row_splits`` (int64 ``[S + 1]``): int64 ``[S, max_len + 1]`` each, ``sos`` then the
        tokens (``eos`` after them), and the tokens then ``eos`` (what follows is padding)."""
        device = values.device
        num_seqs = row_splits.numel() - 1
        lens = row_splits[1:] - row_splits[:-1]
        max_len = int(lens.max()) if num_seqs > 0 else 0
        padded = torch.full((num_seqs, max_len + 1), self.eos_id, dtype=torch.int64, device=device)
        padded[:, 0] = self.sos_id
        pos = torch.arange(values.numel(), device=device) - row_splits[:-1].repeat_interleave(lens)
        seq_ids = torch.arange(num_seqs, device=device).repeat_interleave(lens)
        padded[seq_ids, pos + 1] = values.to(torch.int64)
        targets = padded.roll(-1, dims=1)
        targets[torch.arange(num_seqs, device=device), lens] = self.eos_id
        return padded, targets
