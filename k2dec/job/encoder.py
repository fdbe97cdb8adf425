"""The network pass of a decode job: per utterance or per padded batch, with a bounded cache
of per-utterance outputs shared by the methods of one job.

A job that decodes the same cuts with several methods (``k2dec decode --method A --method B``,
``k2dec demo``) would otherwise run the encoder once per method. With the cache each utterance
goes through the network once; the cached outputs are the very tensors a new pass computes
(an utterance is encoded alone, so its outputs do not depend on its batch), and each method is
still charged the encoder's time (measured when the utterance was encoded) so that RTFs stay
comparable between methods and with a job that decodes one method.

The job's lattice searches are shared the same way: a :class:`JobEncoder` may hold a
:class:`k2dec.lattice.LatticeCache` (:attr:`JobEncoder.lattices`) that the CTC inputs it makes
carry to the lattice methods, and its saved search seconds are charged back likewise.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass

import torch

from ..lattice import LatticeCache
from ..model import AcousticModel, EncoderOutput

__all__ = ["JobEncoder"]

_FIELDS = ("encoder_out", "encoder_out_lens", "ctc_log_probs", "memory", "memory_lens")


@dataclass(frozen=True)
class _Entry:
    out: EncoderOutput
    seconds: float


def _nbytes(out: EncoderOutput) -> int:
    return sum(t.numel() * t.element_size() for t in (getattr(out, f) for f in _FIELDS)
               if t is not None)


class JobEncoder:
    """Runs ``model.encode`` for the batches of a decode job.

    Args:
      batch: encode each batch padded in one call (faster on a GPU; results then depend on the
        batch composition through float rounding); else each utterance alone (no cache is
        kept for padded batches).
      cache_mb: MiB of per-utterance outputs to keep for the job's later methods (0: none).
        Once full, further utterances are encoded each time they are decoded.
      lattice_cache_mb: MiB of lattices to keep for the job's later methods
        (:attr:`lattices`; 0: no cache, every method searches).
    """

    def __init__(self, batch: bool = False, cache_mb: float = 0.0,
                 lattice_cache_mb: float = 0.0) -> None:
        if not cache_mb >= 0:
            raise ValueError(f"cache_mb must be >= 0, got {cache_mb}")
        self.batch = batch
        self.cache_bytes = int(cache_mb * 2**20) if not batch else 0
        self.lattices = LatticeCache(lattice_cache_mb) if lattice_cache_mb > 0 else None
        self._cache: dict[tuple[int, bytes], _Entry] = {}
        self._used = 0
        self._saved = 0.0
        self.hits = 0
        self.misses = 0

    def clear(self) -> None:
        """Forget every kept output and lattice (their memory is freed)."""
        self._cache.clear()
        self._used = 0
        if self.lattices is not None:
            self.lattices.clear()

    def take_saved_seconds(self) -> float:
        """Encoder and lattice-search seconds that cache hits saved since the last call (to
        charge the method with them)."""
        saved, self._saved = self._saved, 0.0
        if self.lattices is not None:
            saved += self.lattices.take_saved_seconds()
        return saved

    def _one(self, model: AcousticModel, feats: torch.Tensor, lens: torch.Tensor
             ) -> EncoderOutput:
        if self.cache_bytes == 0:
            return model.encode(feats, lens)
        key = (id(model), hashlib.blake2b(feats.detach().cpu().contiguous().numpy().tobytes(),
                                          digest_size=16).digest())
        hit = self._cache.get(key)
        if hit is not None:
            self.hits += 1
            self._saved += hit.seconds
            return hit.out
        self.misses += 1
        start = time.perf_counter()
        out = model.encode(feats, lens)
        seconds = time.perf_counter() - start
        size = _nbytes(out)
        if self._used + size <= self.cache_bytes:
            self._cache[key] = _Entry(out, seconds)
            self._used += size
        return out

    def __call__(self, model: AcousticModel, feats: torch.Tensor, lens: torch.Tensor
                 ) -> EncoderOutput:
        """The model's outputs for features ``[N, T, F]`` (float) with lengths ``[N]`` (int).

        Unless ``batch``, each utterance goes through the model alone (its valid frames only)
        and the outputs are padded with zeros: a padded batch's outputs depend on the other
        rows (attention and convolution sum over the padded length in another order), which
        would make results depend on the batch by float rounding. On CPU this is no slower
        (no padding to compute).
        """
        if self.batch:
            return model.encode(feats, lens)
        outs = [self._one(model, feats[i:i + 1, : int(lens[i])], lens[i:i + 1])
                for i in range(lens.numel())]

        def padded(field: str, lens_field: str
                   ) -> tuple[torch.Tensor | None, torch.Tensor | None]:
            if getattr(outs[0], field) is None:
                return None, None
            rows = [getattr(o, field)[0, : int(getattr(o, lens_field)[0])] for o in outs]
            return (torch.nn.utils.rnn.pad_sequence(rows, batch_first=True),
                    torch.cat([getattr(o, lens_field) for o in outs]))

        enc, enc_lens = padded("encoder_out", "encoder_out_lens")
        memory, memory_lens = padded("memory", "memory_lens")
        return EncoderOutput(enc, enc_lens, padded("ctc_log_probs", "encoder_out_lens")[0],
                             memory, memory_lens)
