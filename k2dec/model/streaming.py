"""icefall's streaming TorchScript exports (causal zipformer, ``export.py --causal 1 --jit 1``
-> ``jit_script_chunk_{C}_left_{L}.pt``), chunk by chunk.

The export's ``encoder`` takes ``(features [N, W, F], feature_lengths [N], states)`` and
returns ``(encoder_out [N, C/2, J], encoder_out_lens, new_states)``, where ``W = 2 * C +
pad_length`` feature frames (``C = encoder.chunk_size``, ``pad_length = 13``: the
subsampling's right context) and each call advances by ``2 * C`` frames;
``encoder.get_init_states(batch_size, device)`` gives the initial states. icefall's
``streaming_decode.py`` appends 30 frames of ``log(1e-10)`` to every utterance, pads the last
window with ``log(1e-10)`` (its ``feature_lengths`` say how many frames are real), and its
streaming searches use every output frame of every chunk; :meth:`encode_offline` does the
same, so an offline search on its output and k2dec's streaming searchers fed chunk by chunk
(:meth:`chunks`) both give icefall's streaming result.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import torch

__all__ = ["LOG_EPS", "TAIL_PAD_FRAMES", "TorchScriptStreamingEncoder"]

#: the padding value of icefall's feature batches
LOG_EPS = math.log(1e-10)
#: frames of LOG_EPS icefall's streaming_decode.py appends to every utterance
TAIL_PAD_FRAMES = 30


class TorchScriptStreamingEncoder:
    """Drives the ``encoder`` of a streaming icefall TorchScript export.

    Attributes:
      chunk_length: feature frames consumed per call (``2 * encoder.chunk_size``).
      window: feature frames given per call (``chunk_length + encoder.pad_length``).
    """

    def __init__(self, encoder: Any) -> None:
        for name in ("chunk_size", "pad_length"):
            if not isinstance(getattr(encoder, name, None), int):
                raise ValueError(f"streaming encoder has no int attribute {name!r}: not an "
                                 "icefall zipformer streaming export")
        self.encoder = encoder
        self.chunk_length = 2 * int(encoder.chunk_size)
        self.window = self.chunk_length + int(encoder.pad_length)

    def init_states(self, batch_size: int, device: torch.device | str) -> list[torch.Tensor]:
        return self.encoder.get_init_states(batch_size, torch.device(device))

    def encode_chunk(self, features: torch.Tensor, feature_lens: torch.Tensor,
                     states: list[torch.Tensor]
                     ) -> tuple[torch.Tensor, torch.Tensor, list[torch.Tensor]]:
        """One call: ``features`` float ``[N, window, F]`` (padded with :data:`LOG_EPS`),
        ``feature_lens`` int ``[N]`` real frames in it -> (``[N, T', J]``, ``[N]``, states)."""
        if features.dim() != 3 or features.size(1) != self.window:
            raise ValueError(f"a chunk must have shape [N, {self.window}, F], got "
                             f"{tuple(features.shape)}")
        return self.encoder(features, feature_lens, states)

    def chunks(self, features: torch.Tensor, feature_lens: torch.Tensor
               ) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """Encoder output chunk by chunk as icefall's streaming decode computes it: yields
        ``(encoder_out [N, T', J], frames [N])`` where ``frames[i]`` is ``T'`` while utterance
        ``i`` still has input and 0 after (its rows are then padding)."""
        n, _, f = features.shape
        device = features.device
        lens = feature_lens.to(device=device, dtype=torch.int64) + TAIL_PAD_FRAMES
        num_chunks = (lens + self.chunk_length - 1) // self.chunk_length
        total = int(num_chunks.max()) * self.chunk_length + self.window if n else 0
        padded = features.new_full((n, max(total, features.size(1)), f), LOG_EPS)
        padded[:, : features.size(1)] = features
        frames = torch.arange(padded.size(1), device=device).unsqueeze(0)
        padded[frames >= feature_lens.to(device).unsqueeze(1)] = LOG_EPS
        states = self.init_states(n, device)
        for k in range(int(num_chunks.max()) if n else 0):
            start = k * self.chunk_length
            x = padded[:, start: start + self.window]
            active = num_chunks > k
            x_lens = torch.where(active, (lens - start).clamp(max=self.window),
                                 torch.full_like(lens, self.window))
            enc, _, states = self.encode_chunk(x, x_lens, states)
            yield enc, torch.where(active, torch.full_like(lens, enc.size(1)),
                                   torch.zeros_like(lens))

    def encode_offline(self, features: torch.Tensor, feature_lens: torch.Tensor
                       ) -> tuple[torch.Tensor, torch.Tensor]:
        """All chunks of :meth:`chunks` concatenated: (``[N, T, J]``, int64 ``[N]``)."""
        outs, counts = [], []
        for enc, frames in self.chunks(features, feature_lens):
            outs.append(enc)
            counts.append(frames)
        if not outs:
            raise ValueError("no utterances to encode")
        return torch.cat(outs, dim=1), torch.stack(counts).sum(dim=0)
