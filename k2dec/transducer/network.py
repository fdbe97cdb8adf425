"""The network of a stateless transducer as the searches run it: icefall's stateless decoder
(:class:`StatelessDecoder`), the checks of the decoder/joiner interface every search takes
(:func:`check_model`), and the driver of a model's decoder and joiner (:class:`TransducerNet`:
projected encoder frames, decoder outputs with an optional cache, or k2dec's own decoder as
per-token tables, joiner logits).

The interface (icefall's checkpoints and TorchScript exports follow it):
``model.decoder.context_size`` / ``blank_id`` / ``vocab_size``, ``model.decoder(y,
need_pad=False)`` with ``y`` int64 ``[N, context_size]`` returning ``[N, 1, D]``, and
``model.joiner(encoder_out, decoder_out, project_input=...)`` returning logits ``[..., V]``,
optionally with ``model.joiner.encoder_proj`` / ``model.joiner.decoder_proj``.
"""

from __future__ import annotations

import math
import time
import weakref
from collections.abc import Callable
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["DecoderCache", "DecoderTables", "RawDecoderOutputs", "StatelessDecoder",
           "TransducerNet",
           "cached_equivalent_tables", "check_decoder_sizes", "check_model", "decode_by_tables",
           "cached_equivalent_joiner", "equivalent_joiner", "equivalent_tables"]


def check_model(model: nn.Module) -> tuple[int, int, int]:
    """Validate the stateless-transducer interface; return (blank_id, context_size, vocab_size)."""
    for name in ("decoder", "joiner"):
        if not hasattr(model, name):
            raise TypeError(
                f"model must have a .{name} (icefall's stateless transducer interface), "
                f"got {type(model).__name__}"
            )
    values = []
    for name in ("blank_id", "context_size", "vocab_size"):
        if not hasattr(model.decoder, name):
            raise TypeError(f"model.decoder must have an int attribute {name!r}")
        values.append(int(getattr(model.decoder, name)))
    blank_id, context_size, vocab_size = values
    check_decoder_sizes(blank_id, context_size, vocab_size, owner="model.decoder.")
    return blank_id, context_size, vocab_size


def check_decoder_sizes(blank_id: int, context_size: int, vocab_size: int,
                        owner: str = "") -> None:
    """Raise ``ValueError`` unless a stateless decoder's sizes fit together:
    ``context_size >= 1``, ``vocab_size >= 2`` and ``0 <= blank_id < vocab_size``; ``owner``
    prefixes the names in the message (e.g. ``"model.decoder."``)."""
    if context_size < 1:
        raise ValueError(f"{owner}context_size must be >= 1, got {context_size}")
    if vocab_size < 2:
        raise ValueError(f"{owner}vocab_size must be >= 2 (blank + one token), got {vocab_size}")
    if not 0 <= blank_id < vocab_size:
        raise ValueError(f"{owner}blank_id must be in [0, {vocab_size}), got {blank_id}")


class StatelessDecoder(nn.Module):
    """Stateless prediction network: an embedding of the last ``context_size`` tokens followed by
    a grouped 1-D convolution over them and a ReLU (Ghodsi et al., 2020; icefall's ``Decoder``).

    Negative token ids (used to fill the initial context) embed to zero. The blank embedding is a
    learned vector like any other (icefall versions differ on this; the searches do not rely on
    it).

    Args:
      vocab_size: number of output symbols ``V`` including blank.
      decoder_dim: embedding and output dimension ``D``.
      blank_id: the blank symbol (0 in icefall's models; required to be 0 by fast_beam_search).
      context_size: number of previous tokens the output depends on (1 = bigram, 2 = trigram).
      conv_groups: groups of the context convolution; ``None`` means ``decoder_dim // 4`` when
        ``decoder_dim`` is divisible by 4 (icefall's choice), else 1.
    """

    def __init__(
        self,
        vocab_size: int,
        decoder_dim: int,
        blank_id: int = 0,
        context_size: int = 2,
        conv_groups: int | None = None,
    ) -> None:
        super().__init__()
        check_decoder_sizes(blank_id, context_size, vocab_size)
        if decoder_dim < 1:
            raise ValueError(f"decoder_dim must be >= 1, got {decoder_dim}")
        if conv_groups is None:
            conv_groups = decoder_dim // 4 if decoder_dim % 4 == 0 else 1
        if conv_groups < 1 or decoder_dim % conv_groups != 0:
            raise ValueError(
                f"conv_groups must divide decoder_dim={decoder_dim}, got {conv_groups}"
            )
        self.vocab_size = vocab_size
        self.decoder_dim = decoder_dim
        self.blank_id = blank_id
        self.context_size = context_size
        self.embedding = nn.Embedding(vocab_size, decoder_dim)
        # With context_size == 1 the convolution would be a per-channel scale; icefall skips it,
        # and so do we (an identity module keeps the module scriptable).
        self.conv: nn.Module
        if context_size > 1:
            self.conv = nn.Conv1d(
                decoder_dim, decoder_dim, kernel_size=context_size, groups=conv_groups, bias=False
            )
        else:
            self.conv = nn.Identity()

    def forward(self, y: torch.Tensor, need_pad: bool = True) -> torch.Tensor:
        """Decoder output for each position of ``y``.

        Args:
          y: int tensor ``[N, U]`` of token ids; negative ids embed to zero.
          need_pad: if True (training), left-pad with ``context_size - 1`` zero frames so the
            output has one row per input position; if False (decoding), ``U`` must equal
            ``context_size`` and the output has one row.

        Returns:
          float tensor ``[N, U, D]`` (``need_pad=True``) or ``[N, 1, D]`` (``need_pad=False``).
        """
        y = y.to(torch.int64)
        emb = self.embedding(y.clamp(min=0)) * (y >= 0).unsqueeze(-1).to(self.embedding.weight)
        if self.context_size > 1:
            x = emb.permute(0, 2, 1)  # [N, D, U]
            if need_pad:
                x = F.pad(x, (self.context_size - 1, 0))
            elif x.size(-1) != self.context_size:
                raise ValueError(
                    f"with need_pad=False, y must have context_size={self.context_size} "
                    f"columns, got {x.size(-1)}"
                )
            emb = self.conv(x).permute(0, 2, 1)
        return F.relu(emb)


#: key spaces ((vocabulary + 1) ** context_size) up to this many keys are indexed by a dense
#: table of rows (int64, 8 MiB): a lookup is one gather, an insert one scatter; larger ones
#: keep their keys sorted (a ``torch.searchsorted`` per lookup, a sort per insert)
DENSE_KEYS_MAX = 1 << 20


class DecoderCache:
    """Projected decoder outputs keyed by context, shared by all streams of one searcher.

    A context ``(y_1, ..., y_c)`` (ids in ``[-1, V)``) is keyed by the integer
    ``sum_i (y_i + 1) * (V + 1) ** (c - i)``. With at most :data:`DENSE_KEYS_MAX` possible
    keys a dense table maps each key to its row (``-1``: absent); otherwise the keys are kept
    sorted so a batch of lookups is one ``torch.searchsorted``. When the cache would exceed
    ``max_size`` entries it is emptied (contexts recur mostly within an utterance, so a
    simple reset loses little).

    Args:
      vocab_size: ``V``.
      context_size: ``c``; ``(V + 1) ** c`` must fit in int64.
      max_size: maximum number of cached rows.
    """

    def __init__(self, vocab_size: int, context_size: int, max_size: int) -> None:
        if context_size * math.log2(vocab_size + 1) >= 62:
            raise ValueError(
                f"cannot key contexts of size {context_size} over {vocab_size} symbols in int64"
            )
        self.base = vocab_size + 1
        self.context_size = context_size
        self.max_size = max_size
        self.dense = self.base ** context_size <= DENSE_KEYS_MAX
        self.slots: torch.Tensor | None = None  # dense: int64 [(V + 1) ** c], row or -1
        self.keys: torch.Tensor | None = None  # sorted int64 [K] (dense: in insertion order)
        self.rows: torch.Tensor | None = None  # int64 [K]: row of each key in `values`
        self.values: torch.Tensor | None = None  # append-only buffer [capacity, J]
        self.num_rows = 0
        self.hits = 0
        self.lookups = 0
        #: hits of the last lookup
        self.last_hits = 0
        self._powers: torch.Tensor | None = None

    def key(self, contexts: torch.Tensor) -> torch.Tensor:
        """int64 key of each row of ``contexts`` ``[M, c]``."""
        # (an int32 context times the int64 powers is int64)
        return ((contexts + 1) * self._powers_on(contexts.device)).sum(dim=1)

    def contexts_of(self, keys: torch.Tensor) -> torch.Tensor:
        """The contexts (int64 ``[M, c]``) of keys ``[M]`` (:meth:`key`'s inverse)."""
        powers = self._powers_on(keys.device)
        return torch.div(keys.unsqueeze(1), powers, rounding_mode="floor") % self.base - 1

    def _powers_on(self, device: torch.device) -> torch.Tensor:
        """``(V + 1) ** (c - 1 - i)`` for ``i < c``, int64 ``[c]`` on ``device``."""
        if self._powers is None or self._powers.device != device:
            self._powers = self.base ** torch.arange(self.context_size - 1, -1, -1,
                                                     device=device, dtype=torch.int64)
        return self._powers

    def clear(self) -> None:
        """Empty the cache (its buffers are kept for reuse)."""
        if self.dense and self.slots is not None and self.keys is not None:
            self.slots.index_fill_(0, self.keys, -1)
        self.keys = None if self.keys is None else self.keys[:0]
        self.rows = None if self.rows is None else self.rows[:0]
        self.num_rows = 0

    def lookup(self, keys: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Return (found mask ``[M]`` bool, row index into ``values`` ``[M]`` int64, valid where
        found)."""
        self.lookups += keys.numel()
        if self.dense:
            if self.slots is None:
                self.last_hits = 0
                return torch.zeros_like(keys, dtype=torch.bool), torch.zeros_like(keys)
            rows = self.slots.index_select(0, keys)
            found = rows >= 0
            self._count(found)
            return found, rows
        if self.keys is None or self.rows is None or self.keys.numel() == 0:
            found = torch.zeros_like(keys, dtype=torch.bool)
            self.last_hits = 0
            return found, torch.zeros_like(keys)
        pos = torch.searchsorted(self.keys, keys).clamp(max=self.keys.numel() - 1)
        found = self.keys[pos] == keys
        self._count(found)
        return found, self.rows[pos]

    def _count(self, found: torch.Tensor) -> None:
        self.last_hits = int(found.sum())
        self.hits += self.last_hits

    def insert(self, keys: torch.Tensor, values: torch.Tensor) -> None:
        """Add rows (keys must not be present yet and be unique). Values are appended to a
        buffer (amortized O(1) per row); only the key index is updated (a scatter into the
        dense table, or a re-sort of the small sorted one)."""
        n = keys.numel()
        if n == 0:
            return
        if self.keys is None or self.rows is None or self.values is None or (
            self.num_rows + n > self.max_size
        ):
            self._reset(keys, values, n)
        if self.num_rows + n > self.values.size(0):
            bigger = self.values.new_empty((max(2 * self.values.size(0), self.num_rows + n),
                                            self.values.size(1)))
            bigger[: self.num_rows] = self.values[: self.num_rows]
            self.values = bigger
        new_rows = torch.arange(self.num_rows, self.num_rows + n, device=keys.device)
        self.values[self.num_rows : self.num_rows + n] = values
        self.num_rows += n
        if self.dense:
            self.slots.index_copy_(0, keys, new_rows)
            self.keys = torch.cat([self.keys, keys])
            return
        all_keys = torch.cat([self.keys, keys])
        order = torch.argsort(all_keys)
        self.keys = all_keys[order]
        self.rows = torch.cat([self.rows, new_rows])[order]

    def _reset(self, keys: torch.Tensor, values: torch.Tensor, n: int) -> None:
        """Empty the cache (room for ``n`` rows like ``values``)."""
        capacity = min(self.max_size, max(2 * n, 1024))
        self.values = values.new_empty((max(capacity, n), values.size(1)))
        if self.dense:
            if self.slots is None or self.slots.device != keys.device:
                self.slots = torch.full((self.base ** self.context_size,), -1,
                                        dtype=torch.int64, device=keys.device)
            elif self.keys is not None and self.keys.numel() > 0:
                self.slots.index_fill_(0, self.keys, -1)
        self.keys = keys.new_empty((0,))
        self.rows = keys.new_empty((0,))
        self.num_rows = 0


class TransducerNet:
    """Drives a stateless transducer's decoder and joiner for the searches.

    If the joiner has ``encoder_proj`` and ``decoder_proj``, encoder frames and decoder outputs
    are projected once and the joiner is called with ``project_input=False`` (icefall's fast
    path); otherwise the joiner is called on raw inputs.

    Args:
      model: object with ``.decoder`` and ``.joiner`` following icefall's interface (an
        ``nn.Module`` or a TorchScript module).
      decoder_cache_size: if > 0, decoder outputs are cached by context (see
        :class:`DecoderCache`); 0 disables the cache.
      tables: run k2dec's own decoder as per-token tables (:class:`DecoderTables`) where
        it applies; False: always the module.
      equivalent_tables: also run a decoder of another class laid out as icefall's as
        tables, where :func:`cached_equivalent_tables` finds them (equal to the module's
        outputs up to float rounding: for searches that only take maxima, greedy search).
      equivalent_joiner: run a joiner laid out as icefall's (``decoder_proj`` and
        ``output_linear(tanh(encoder_out + decoder_out))`` with ``nn.Linear`` layers) as
        matrix products with its weights transposed once (:func:`cached_equivalent_joiner`;
        the same outputs up to float rounding, and faster than ``nn.Linear`` on the few rows
        of a search step), where it gives the module's outputs; for searches that only take
        maxima.
    """

    def __init__(self, model: nn.Module, decoder_cache_size: int = 0, tables: bool = True,
                 equivalent_tables: bool = False, equivalent_joiner: bool = False) -> None:
        self.blank_id, self.context_size, self.vocab_size = check_model(model)
        self.decoder = model.decoder
        self.joiner = model.joiner
        self.project = hasattr(self.joiner, "encoder_proj") and hasattr(
            self.joiner, "decoder_proj"
        )
        self.cache: DecoderCache | None = None
        if decoder_cache_size > 0:
            self.cache = DecoderCache(self.vocab_size, self.context_size, decoder_cache_size)
        #: seconds spent in the decoder and joiner networks (for benchmarks)
        self.net_seconds = 0.0
        #: rows evaluated by the decoder and by the joiner so far (for benchmarks)
        self.decoder_rows = 0
        self.joiner_rows = 0
        self.timing = False
        self._joiner_dim: int | None = None
        #: k2dec's own decoder runs as per-token tables (:class:`DecoderTables`)
        self.tables = (DecoderTables() if tables and DecoderTables.applies(self.decoder)
                       else None)
        self.equivalent = tables and equivalent_tables and self.tables is None
        self._decoder_tensors: list[torch.Tensor] | None = None
        self.equivalent_joiner = equivalent_joiner and self.project
        self._joiner_tensors: list[torch.Tensor] | None = None
        self.raw: RawDecoderOutputs | None = None

    def joiner_dim(self, encoder_out: torch.Tensor) -> int:
        """The last dimension of the joiner's inputs (of projected encoder frames; found once,
        by projecting one frame of ``encoder_out [..., C]``)."""
        if self._joiner_dim is None:
            weight = getattr(getattr(self.joiner, "encoder_proj", None), "weight", None)
            if self.project and isinstance(weight, torch.Tensor) and weight.dim() == 2:
                self._joiner_dim = int(weight.size(0))  # a linear layer's [out, in]
            else:
                frame = encoder_out.reshape(-1, encoder_out.size(-1))[:1]
                self._joiner_dim = int(self.project_encoder(frame).size(-1))
        return self._joiner_dim

    def check_frames(self, encoder_out: torch.Tensor) -> None:
        """Raise ``TypeError`` unless ``encoder_out``'s dtype is the joiner's (float32 for a
        float32 model: a float64 tensor fails deep in a matmul), and ``ValueError`` unless
        its last dimension ``C`` is the input width of ``joiner.encoder_proj`` (where the
        joiner has one)."""
        params = getattr(self.joiner, "parameters", None)
        first = next((p for p in params() if p.is_floating_point()), None) if params else None
        if first is not None and encoder_out.dtype != first.dtype:
            raise TypeError(f"encoder_out has dtype {encoder_out.dtype}, but the model's joiner "
                            f"computes in {first.dtype}: pass encoder_out.to({first.dtype})")
        weight = getattr(getattr(self.joiner, "encoder_proj", None), "weight", None)
        if (self.project and isinstance(weight, torch.Tensor) and weight.dim() == 2
                and encoder_out.size(-1) != weight.size(1)):
            raise ValueError(
                f"encoder_out must have shape [N, T, C] with C = {weight.size(1)} (the input "
                f"width of the model's joiner.encoder_proj), got shape "
                f"{tuple(encoder_out.shape)}: is it the output of this model's encoder?")

    def initial_context(self, n: int, device: torch.device) -> torch.Tensor:
        """icefall's initial context ``[-1] * (c - 1) + [blank]`` for ``n`` hypotheses,
        int64 ``[n, c]``."""
        ctx = torch.full((n, self.context_size), -1, dtype=torch.int64, device=device)
        ctx[:, -1] = self.blank_id
        return ctx

    def project_encoder(self, encoder_out: torch.Tensor) -> torch.Tensor:
        """``[..., C]`` -> ``[..., J]`` (identity without projections)."""
        if self.project:
            with self._timer():
                return self.joiner.encoder_proj(encoder_out)
        return encoder_out

    def project_time_major(self, encoder_out: torch.Tensor, order: torch.Tensor,
                           lens_sorted: torch.Tensor
                           ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The valid frames of utterances ``order`` (int64 ``[N]``, by decreasing length
        ``lens_sorted``) packed frame after frame and projected: frame ``t`` holds the
        utterances still active on it (a prefix of ``order``) in one slice, so padding is
        never projected. Returns the frames ``[F, J]`` and each one's frame index and
        position in ``order`` (int64 ``[F]`` each). Projected in a batch of a multiple of 8
        rows, so that every frame gets the bits of a large batch (see :func:`_padded`)."""
        t_max = encoder_out.size(1)
        frame, row = torch.nonzero(
            torch.arange(t_max, device=order.device).unsqueeze(1) < lens_sorted.unsqueeze(0),
            as_tuple=True)
        index = order.index_select(0, row) * t_max + frame
        flat = encoder_out.reshape(-1, encoder_out.size(-1))
        if index.numel() == 0:
            return self.project_encoder(flat[:0]), frame, row
        enc = self.project_encoder(flat.index_select(0, _padded(index)))
        return enc[: index.numel()], frame, row

    def _decoder_raw(self, contexts: torch.Tensor) -> torch.Tensor:
        self.decoder_rows += contexts.size(0)
        with self._timer():
            tables = None if torch.is_grad_enabled() else self.decoder_tables()
            if tables is not None:
                out = decode_by_tables(tables, contexts)
            else:
                out = self._decoder_module(contexts)
        return self.project_decoder(out)

    def decoder_tables(self) -> torch.Tensor | None:
        """The per-token tables ``[c, V + 1, D]`` this net runs its decoder as (see
        ``tables`` and ``equivalent_tables``), or None: the module."""
        if self.tables is not None:
            return self.tables.get(self.decoder)
        if not self.equivalent:
            return None
        if self._decoder_tensors is None:  # (listed once: each step only reads versions)
            self._decoder_tensors = module_tensors(self.decoder)
        return cached_equivalent_tables(self, self._decoder_tensors)

    def _decoder_module(self, contexts: torch.Tensor) -> torch.Tensor:
        out = self.decoder(contexts, need_pad=False)
        if out.dim() != 3 or out.size(0) != contexts.size(0) or out.size(1) != 1:
            raise ValueError(
                "model.decoder(y, need_pad=False) must return [N, 1, D] for y of shape "
                f"{tuple(contexts.shape)}, got {tuple(out.shape)}"
            )
        return out.squeeze(1)

    def raw_decoder_out(self, contexts: torch.Tensor) -> torch.Tensor:
        """The decoder module's own output (not projected) for int64 contexts ``[M, c]`` ->
        float ``[M, D]``, bit for bit what ``model.decoder(contexts, need_pad=False)`` gives
        in any batch (an embedding and a convolution compute each row on its own): read
        from :class:`RawDecoderOutputs` (every context at once when small, else cached by
        context). icefall's fast_beam_search layout (:meth:`FastBeamSearch` with
        ``decoder_tables=False``) projects these rows in the batch icefall projects."""
        if self.raw is None:
            self.raw = RawDecoderOutputs(self)
        return self.raw.get(contexts)

    def project_decoder(self, decoder_out: torch.Tensor) -> torch.Tensor:
        """``joiner.decoder_proj`` of decoder outputs in any layout ``[..., D]`` (identity
        without projections)."""
        if self.project:
            with self._timer():
                fast = self._joiner_weights()
                if fast is not None:
                    return _linear(decoder_out, fast.decoder_t, fast.decoder_bias)
                return self.joiner.decoder_proj(decoder_out)
        return decoder_out

    def _joiner_weights(self) -> JoinerWeights | None:
        """The joiner's transposed weights (``equivalent_joiner``; None: the modules)."""
        if not self.equivalent_joiner or torch.is_grad_enabled():
            return None
        if self._joiner_tensors is None:  # (listed once: each step only reads versions)
            self._joiner_tensors = module_tensors(self.joiner)
        return cached_equivalent_joiner(self, self._joiner_tensors)

    def decoder_out(self, contexts: torch.Tensor) -> torch.Tensor:
        """Projected decoder output for int64 contexts ``[M, c]`` -> float ``[M, J]``."""
        if self.cache is None or contexts.size(0) == 0:
            return self._decoder_raw(contexts)
        keys = self.cache.key(contexts)
        found, pos = self.cache.lookup(keys)
        cached = self.cache.values
        if cached is not None and bool(found.all()):
            return cached[pos]
        miss = ~found
        uniq_keys, inverse = torch.unique(keys[miss], return_inverse=True)
        # One representative row per missing context (equal contexts give equal outputs, so
        # which one wins a duplicate index does not matter).
        first = torch.empty(uniq_keys.numel(), dtype=torch.int64, device=keys.device)
        first[inverse] = torch.nonzero(miss).squeeze(1)
        new_values = self._decoder_raw(contexts[_padded(first)])[: first.numel()]
        out = new_values.new_empty((contexts.size(0), new_values.size(1)))
        if cached is not None and bool(found.any()):
            out[found] = cached[pos[found]]
        out[miss] = new_values[inverse]
        self.cache.insert(uniq_keys, new_values)
        return out

    def logits(self, encoder_out: torch.Tensor, decoder_out: torch.Tensor) -> torch.Tensor:
        """Joiner logits for matching rows: ``[M, J]`` x ``[M, J]`` -> float ``[M, V]``.

        The joiner is called on 4-D inputs ``[M, 1, 1, J]`` (some icefall joiners insist)."""
        return self.logits4(encoder_out.unsqueeze(1).unsqueeze(1),
                            decoder_out.unsqueeze(1).unsqueeze(1))

    def logits4(self, encoder_out: torch.Tensor, decoder_out: torch.Tensor) -> torch.Tensor:
        """:meth:`logits` of rows already in the joiner's 4-D layout: ``[M, 1, 1, J]`` x
        ``[M, 1, 1, J]`` -> float ``[M, V]`` (for loops that keep their inputs that way)."""
        m = encoder_out.size(0)
        self.joiner_rows += m
        with self._timer():
            fast = self._joiner_weights()
            if fast is not None:
                out = _joined(fast, encoder_out, decoder_out)
            elif self.project:
                out = self.joiner(encoder_out, decoder_out, project_input=False)
            else:
                out = self.joiner(encoder_out, decoder_out)
            out = out.reshape(m, -1)
        if out.size(1) != self.vocab_size:
            raise ValueError(
                f"joiner output has {out.size(1)} symbols but model.decoder.vocab_size is "
                f"{self.vocab_size}"
            )
        return out

    def window_logits(self, encoder_out: torch.Tensor, decoder_out: torch.Tensor
                      ) -> torch.Tensor:
        """Joiner logits of ``n`` rows x ``w`` frames sharing their row's decoder output:
        ``[n, w, J]`` x ``[n, J]`` -> float ``[n * w, V]`` (see :meth:`grid_logits`)."""
        return self.grid_logits(encoder_out, decoder_out.unsqueeze(1))

    def grid_logits(self, encoder_out: torch.Tensor, decoder_out: torch.Tensor
                    ) -> torch.Tensor:
        """Joiner logits of every pair of ``a`` encoder rows and ``b`` decoder rows of each of
        ``n`` groups: ``[n, a, J]`` x ``[n, b, J]`` -> float ``[n * a * b, V]`` (row
        ``(i * a + p) * b + q`` pairs ``encoder_out[i, p]`` with ``decoder_out[i, q]``),
        equal to :meth:`logits` on the repeated rows. Joiners with projections (icefall's,
        which add their inputs) get ``[n, a, 1, J]`` and ``[n, 1, b, J]`` and broadcast;
        others get the repeated rows."""
        n, a, b = encoder_out.size(0), encoder_out.size(1), decoder_out.size(1)
        if not self.project:
            enc = encoder_out.unsqueeze(2).expand(n, a, b, encoder_out.size(2))
            dec = decoder_out.unsqueeze(1).expand(n, a, b, decoder_out.size(2))
            return self.logits(enc.reshape(n * a * b, -1), dec.reshape(n * a * b, -1))
        self.joiner_rows += n * a * b
        with self._timer():
            fast = self._joiner_weights()
            if fast is not None:
                out = _joined(fast, encoder_out.unsqueeze(2), decoder_out.unsqueeze(1))
            else:
                out = self.joiner(encoder_out.unsqueeze(2), decoder_out.unsqueeze(1),
                                  project_input=False)
            out = out.reshape(n * a * b, -1)
        if out.size(1) != self.vocab_size:
            raise ValueError(
                f"joiner output has {out.size(1)} symbols but model.decoder.vocab_size is "
                f"{self.vocab_size}"
            )
        return out

    def _timer(self) -> _Timer:
        return _Timer(self)


#: the most entries (context taps x (vocabulary + 1) x decoder dimension) of decoder tables
#: (64 MiB of float32); a bigger decoder runs as a module
DECODER_TABLE_MAX = 1 << 24


class DecoderTables:
    """k2dec's :class:`~k2dec.transducer.StatelessDecoder` as per-token tables.

    Its output for a context ``y_1 .. y_c`` is ``relu(sum_k T_k[y_k])``, where ``T_k``
    (``[V + 1, D]``) is the context convolution's tap ``k`` applied to every token's embedding
    (row ``V`` zeros: the ``-1`` padding of icefall's initial context embeds to zero). The
    convolution is linear in the embeddings, so the tables give the module's output up to
    float rounding, with a gather and an add per step instead of an embedding and a grouped
    convolution (greedy_search runs faster). Built on first use and again when the weights
    change (their version counters: training in between is seen)."""

    def __init__(self) -> None:
        self.key: tuple | None = None
        self.tables: torch.Tensor | None = None

    @staticmethod
    def applies(decoder: object) -> bool:
        """Exactly k2dec's decoder class (a subclass may change its forward), small enough."""
        if type(decoder) is not StatelessDecoder:
            return False
        conv = decoder.conv
        if decoder.context_size > 1 and (not isinstance(conv, nn.Conv1d)
                                         or conv.bias is not None):
            return False
        size = decoder.context_size * (decoder.vocab_size + 1) * decoder.decoder_dim
        return size <= DECODER_TABLE_MAX

    def get(self, decoder: nn.Module) -> torch.Tensor:
        """float ``[c, V + 1, D]``: the tables of ``decoder``'s current weights."""
        weights = [decoder.embedding.weight]
        if decoder.context_size > 1:
            weights.append(decoder.conv.weight)
        key = tuple((w.data_ptr(), w._version, w.device, w.dtype) for w in weights)
        if key != self.key:
            self.tables, self.key = _decoder_tables(decoder), key
        return self.tables


def equivalent_tables(net: TransducerNet) -> torch.Tensor | None:
    """:class:`DecoderTables` ``[c, V + 1, D]`` for a decoder of any class laid out as
    icefall's (an ``nn.Embedding`` ``embedding``, for ``context_size > 1`` a bias-free
    ``nn.Conv1d`` ``conv`` over the context, a ReLU; eval-time no-ops such as icefall's
    balancers may sit between), or None. Its forward is not read: the tables are used only
    when they give the module's outputs (up to float rounding) on probe contexts (the
    initial one and every context of the first 5 tokens): equal up to rounding, not bit for
    bit, so for searches that only take maxima (greedy)."""
    decoder, c = net.decoder, net.context_size
    emb = getattr(decoder, "embedding", None)
    conv = getattr(decoder, "conv", None)
    if not isinstance(emb, nn.Embedding) or emb.weight.size(0) != net.vocab_size:
        return None
    if c > 1 and (not isinstance(conv, nn.Conv1d) or conv.bias is not None
                  or conv.kernel_size != (c,) or conv.padding != (0,)):
        return None
    if c * (net.vocab_size + 1) * emb.weight.size(1) > DECODER_TABLE_MAX:
        return None
    tables = _grouped_tables(emb.weight, conv if c > 1 else None)
    first = torch.arange(min(net.vocab_size, 5), device=emb.weight.device)
    probe = torch.cartesian_prod(*[first] * c).reshape(-1, c)
    probe = torch.cat([net.initial_context(1, first.device), probe])
    with torch.no_grad():
        want = net._decoder_module(probe)
    got = decode_by_tables(tables, probe)
    if got.shape != want.shape or not torch.allclose(got, want, rtol=1e-4, atol=1e-5):
        return None
    return tables


#: :func:`cached_equivalent_tables`' tables by decoder object: ``(weights key, tables or None)``
_EQUIVALENT_TABLES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def cached_equivalent_tables(net: TransducerNet,
                             tensors: list[torch.Tensor] | None = None) -> torch.Tensor | None:
    """:func:`equivalent_tables` of ``net.decoder``, kept with the decoder object while its
    parameters and buffers (or ``tensors``, a list of them taken once) stay the same
    tensors at the same versions (an optimizer step or ``load_state_dict`` builds them
    again): a search called again and again (one call per batch) builds and checks them
    once. At most one entry per live decoder, of at most :data:`DECODER_TABLE_MAX`
    floats."""
    return _kept_with_weights(_EQUIVALENT_TABLES, net.decoder, tensors,
                              lambda: equivalent_tables(net))


def _kept_with_weights(cache: weakref.WeakKeyDictionary, module: object,
                       tensors: list[torch.Tensor] | None, build: Callable[[], Any]) -> Any:
    """``build()``, kept in ``cache`` with ``module`` while its parameters and buffers (or
    ``tensors``) stay the same tensors at the same versions; built each call for a module
    that cannot be weakly referenced."""
    key = _weights_key(module_tensors(module) if tensors is None else tensors)
    try:
        hit = cache.get(module)
    except TypeError:  # not weakly referenceable
        return build()
    if hit is not None and hit[0] == key:
        return hit[1]
    value = build()
    cache[module] = (key, value)
    return value


def module_tensors(module: object) -> list[torch.Tensor]:
    """The parameters and buffers of ``module`` (none for an object that has no
    ``parameters()`` / ``buffers()``)."""
    try:
        return [*module.parameters(), *module.buffers()]
    except (AttributeError, TypeError):
        return []


def _weights_key(tensors: list[torch.Tensor]) -> tuple:
    return tuple((t.data_ptr(), t._version, t.device, t.dtype, t.shape) for t in tensors)


class JoinerWeights(NamedTuple):
    """A joiner laid out as icefall's, as transposed weights (:func:`equivalent_joiner`)."""

    decoder_t: torch.Tensor  # [D, J], decoder_proj's weight transposed (contiguous)
    decoder_bias: torch.Tensor | None  # [J]
    output_t: torch.Tensor  # [J, V], output_linear's weight transposed (contiguous)
    output_bias: torch.Tensor | None  # [V]


def equivalent_joiner(net: TransducerNet) -> JoinerWeights | None:
    """:class:`JoinerWeights` of a joiner with ``nn.Linear`` layers ``decoder_proj`` and
    ``output_linear`` whose ``joiner(e, d, project_input=False)`` is
    ``output_linear(tanh(e + d))`` (icefall's), or None. Its forward is not read: the
    weights are used only when they give the module's outputs up to float rounding on
    seeded probe rows (for searches that only take maxima: not bit for bit)."""
    joiner = net.joiner
    dec, out = getattr(joiner, "decoder_proj", None), getattr(joiner, "output_linear", None)
    if not net.project or type(dec) is not nn.Linear or type(out) is not nn.Linear:
        return None
    with torch.no_grad():
        weights = JoinerWeights(dec.weight.t().contiguous(), dec.bias,
                                out.weight.t().contiguous(), out.bias)
        g = torch.Generator().manual_seed(0)
        shape = (4, 1, 1, out.in_features)
        e, d = (torch.randn(shape, generator=g).to(out.weight) for _ in range(2))
        want = net.joiner(e, d, project_input=False)
        got = _joined(weights, e, d)
    if want.shape[-1] != got.shape[-1] or want.numel() != got.numel() or not torch.allclose(
            got, want.reshape(got.shape), rtol=1e-4, atol=1e-5 * (1.0 + float(
                want.abs().max()))):
        return None
    return weights


#: :func:`cached_equivalent_joiner`'s weights by joiner object: ``(weights key, weights)``
_EQUIVALENT_JOINERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def cached_equivalent_joiner(net: TransducerNet, tensors: list[torch.Tensor] | None = None
                             ) -> JoinerWeights | None:
    """:func:`equivalent_joiner` of ``net.joiner``, kept with the joiner object while its
    parameters and buffers (or ``tensors``) stay the same tensors at the same versions (as
    :func:`cached_equivalent_tables`); at most one copy of its weights per live joiner."""
    return _kept_with_weights(_EQUIVALENT_JOINERS, net.joiner, tensors,
                              lambda: equivalent_joiner(net))


def _linear(x: torch.Tensor, weight_t: torch.Tensor, bias: torch.Tensor | None
            ) -> torch.Tensor:
    """``x @ weight_t + bias`` over the last axis of ``x`` ``[..., I]`` (``weight_t``
    ``[I, O]``): ``nn.Linear`` up to float rounding."""
    flat = x.reshape(-1, x.size(-1))
    out = torch.mm(flat, weight_t) if bias is None else torch.addmm(bias, flat, weight_t)
    return out.reshape(*x.shape[:-1], weight_t.size(1))


def _joined(weights: JoinerWeights, encoder_out: torch.Tensor, decoder_out: torch.Tensor
            ) -> torch.Tensor:
    """icefall's joiner on projected inputs (broadcast against each other) -> ``[..., V]``."""
    return _linear(torch.tanh(encoder_out + decoder_out), weights.output_t,
                   weights.output_bias)


def _grouped_tables(emb: torch.Tensor, conv: nn.Conv1d | None) -> torch.Tensor:
    """:class:`DecoderTables` ``[c, V + 1, D]`` of embeddings ``[V, D]`` and a grouped
    context convolution (None: context 1), one batched matmul per tap (what
    :func:`_decoder_tables` computes with a convolution per tap, several times slower)."""
    with torch.no_grad():
        if conv is None:
            taps = emb.unsqueeze(0)
        else:
            vocab, dim = emb.shape
            groups = conv.groups
            weight = conv.weight.reshape(groups, conv.out_channels // groups, dim // groups, -1)
            x = emb.reshape(vocab, groups, dim // groups).transpose(0, 1)  # [G, V, in]
            taps = torch.stack([torch.bmm(x, weight[..., k].transpose(1, 2)).transpose(0, 1)
                                .reshape(vocab, -1) for k in range(weight.size(-1))])
        return torch.cat([taps, taps.new_zeros(taps.size(0), 1, taps.size(2))], dim=1)


def _decoder_tables(decoder: nn.Module) -> torch.Tensor:
    """See :class:`DecoderTables`."""
    with torch.no_grad():
        emb = decoder.embedding.weight  # [V, D]
        if decoder.context_size == 1:
            taps = emb.unsqueeze(0)
        else:
            conv = decoder.conv
            x = emb.unsqueeze(-1)  # [V, D, 1]: each token a length-1 sequence
            taps = torch.stack([
                torch.nn.functional.conv1d(x, conv.weight[:, :, k : k + 1],
                                           groups=conv.groups).squeeze(-1)
                for k in range(decoder.context_size)])
        return torch.cat([taps, taps.new_zeros(taps.size(0), 1, taps.size(2))], dim=1)


def decode_by_tables(tables: torch.Tensor, contexts: torch.Tensor) -> torch.Tensor:
    """The decoder's output float ``[M, D]`` for int64 contexts ``[M, c]`` (negative ids: the
    zero row) from :class:`DecoderTables`."""
    vocab = tables.size(1) - 1
    y = torch.where(contexts < 0, vocab, contexts)
    out = tables[0].index_select(0, y[:, 0])
    for k in range(1, tables.size(0)):
        out = out + tables[k].index_select(0, y[:, k])
    return torch.relu(out)


#: the most entries ((vocabulary + 1) ** context_size x decoder dimension) of a table of
#: every context's decoder output (16 MiB of float32); larger decoders are cached by context
RAW_TABLE_MAX = 1 << 22
#: raw decoder outputs :class:`RawDecoderOutputs` caches by context when there is no table
RAW_CACHE_SIZE = 1 << 15


class RawDecoderOutputs:
    """The decoder module's outputs (before ``decoder_proj``) by context, for a searcher that
    must give icefall's bits: the module computes each row on its own (an embedding, a
    grouped convolution over the context, a ReLU), so a row computed once serves every
    later batch that has its context. With ``(V + 1) ** c * D <=`` :data:`RAW_TABLE_MAX`
    every context (ids ``-1 .. V - 1`` in each position) is computed in one call and looked
    up by index; otherwise the rows are cached by context (:class:`DecoderCache`, at most
    :data:`RAW_CACHE_SIZE` rows)."""

    def __init__(self, net: TransducerNet) -> None:
        self.net = net
        self.base = net.vocab_size + 1
        self.table: torch.Tensor | None = None
        self.cache: DecoderCache | None = None
        self.table_rows = self.base ** net.context_size

    def get(self, contexts: torch.Tensor) -> torch.Tensor:
        net = self.net
        if self.table is None and self.cache is None:
            dim = net._decoder_module(net.initial_context(1, contexts.device)).size(1)
            if self.table_rows * dim <= RAW_TABLE_MAX:
                self.table = self._all_contexts(contexts.device)
            else:
                self.cache = DecoderCache(net.vocab_size, net.context_size, RAW_CACHE_SIZE)
        if self.table is not None:
            powers = self.base ** torch.arange(net.context_size - 1, -1, -1,
                                               device=contexts.device)
            return self.table.index_select(0, ((contexts + 1) * powers).sum(1))
        return self._cached(contexts)

    def _all_contexts(self, device: torch.device) -> torch.Tensor:
        net = self.net
        index = torch.arange(self.table_rows, device=device)
        digits = [(index // self.base ** k) % self.base
                  for k in range(net.context_size - 1, -1, -1)]
        contexts = torch.stack(digits, dim=1) - 1
        net.decoder_rows += self.table_rows
        with net._timer():
            return net._decoder_module(contexts)

    def _cached(self, contexts: torch.Tensor) -> torch.Tensor:
        def compute(new_contexts: torch.Tensor) -> torch.Tensor:
            self.net.decoder_rows += new_contexts.size(0)
            with self.net._timer():
                return self.net._decoder_module(new_contexts)

        return cached_rows(self.cache, contexts, compute)


def cached_rows(cache: Any, contexts: torch.Tensor,
                compute: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
    """Rows for ``contexts`` (int64 ``[M, context_size]``) from ``cache`` (a
    :class:`DecoderCache`-like object: ``key``, ``lookup``, ``values``, ``insert``), computing
    each distinct missing context once with ``compute`` (``[K, context_size] -> [K, D]``) and
    inserting it: float ``[M, D]`` in the order of ``contexts``."""
    keys = cache.key(contexts)
    found, pos = cache.lookup(keys)
    if cache.values is not None and bool(found.all()):
        return cache.values.index_select(0, pos)
    miss = ~found
    uniq_keys, inverse = torch.unique(keys[miss], return_inverse=True)
    first = torch.empty(uniq_keys.numel(), dtype=torch.int64, device=keys.device)
    first[inverse] = torch.nonzero(miss).squeeze(1)
    new_values = compute(contexts.index_select(0, first))
    out = new_values.new_empty((contexts.size(0), new_values.size(1)))
    if cache.values is not None and bool(found.any()):
        out[found] = cache.values.index_select(0, pos[found])
    out[miss] = new_values.index_select(0, inverse)
    cache.insert(uniq_keys, new_values)
    return out


def cached_row_ids(cache: DecoderCache, contexts: torch.Tensor,
                   compute: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
    """The rows of ``contexts`` (int ``[M, context_size]``) in ``cache.values``: int64
    ``[M]``. Each distinct missing context is computed once with ``compute`` (int64
    ``[K, context_size] -> [K, D]``) and inserted; when they would overflow
    ``cache.max_size`` the cache is emptied first and every distinct context of
    ``contexts`` is computed again (so the returned rows are all valid)."""
    keys = cache.key(contexts)
    found, pos = cache.lookup(keys)
    if cache.values is not None and cache.last_hits == keys.numel():
        return pos
    missing = keys[~found]
    uniq, inverse = torch.unique(missing, return_inverse=True)
    if cache.values is None or cache.num_rows + uniq.numel() > cache.max_size:
        cache.clear()
        found = torch.zeros_like(found)
        uniq, inverse = torch.unique(keys, return_inverse=True)
    first = cache.num_rows
    cache.insert(uniq, compute(cache.contexts_of(uniq)))
    if cache.num_rows != first + uniq.numel():  # (insert emptied it: a bigger batch)
        first = 0
    pos[~found] = inverse + first
    return pos


class _Timer:
    """Accumulates wall time into ``net.net_seconds`` when ``net.timing`` is set."""

    def __init__(self, net: TransducerNet) -> None:
        self.net = net
        self.start = 0.0

    def __enter__(self) -> None:
        if self.net.timing:
            self.start = time.perf_counter()

    def __exit__(self, *exc) -> None:
        if self.net.timing:
            self.net.net_seconds += time.perf_counter() - self.start


#: row multiple the decoder's cache misses are padded to (see :func:`_padded`)
_GEMM_ROWS = 8


def _padded(rows: torch.Tensor) -> torch.Tensor:
    """``rows`` (int64 ``[M]``, ``M >= 1``) padded with copies of its first entry to a multiple
    of :data:`_GEMM_ROWS`. A float32 GEMM on CPU computes the last ``M mod 8`` rows of its
    input with another kernel than the others, and their last bits differ: computed in a
    batch of a multiple of 8 rows, a context's decoder output has the bits it has in any
    such batch, so a cached output equals a fresh one in large batches. (Not icefall's
    bits in general: small batches, below 11-16 rows depending on the layer's sizes, take
    other kernels; icefall's bits come from fast_beam_search's icefall layout,
    ``k2dec.transducer.fast_beam_search.ICEFALL_MIN_ROWS``.)"""
    extra = -rows.numel() % _GEMM_ROWS
    if extra == 0:
        return rows
    return torch.cat([rows, rows[:1].expand(extra)])
