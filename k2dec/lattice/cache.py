"""A bounded cache of lattices for the methods of one decode job.

Most HLG methods (``nbest``, ``nbest-rescoring``, ``nbest-oracle``, ``attention-decoder``,
``rnn-lm``, ``multi-pass``, ``whole-lattice-rescoring``, ``mbr``) start from the same
``k2.intersect_dense_pruned`` search of the same log-probs through the same graph; a job that
runs several of them (``k2dec decode --method A --method B``, ``k2dec demo``, ``k2dec tune``)
searched every batch once per method. :class:`LatticeCache` keeps each search's result,
keyed by the graph, the search settings and the bytes of the log-probs, so a later method gets
the very lattice a new search would give (the search is deterministic; on CUDA up to the
numbering of states: k2 numbers a frame's states in the order its threads reach them, so two
searches may number the same lattice's states differently). Each get returns a
copy, so a method may change its lattice freely. The search's seconds are remembered and
handed back by :meth:`LatticeCache.take_saved_seconds`, so that a job can charge every method
the search it would have run (RTFs stay comparable with a job that decodes one method).
"""

from __future__ import annotations

import hashlib
import math
import time
from dataclasses import dataclass

import k2
import torch

from .search import LatticeConfig, LatticeResult, config_subsampling, get_lattice

__all__ = ["LatticeCache", "lattice_nbytes"]


@dataclass(frozen=True)
class _Entry:
    graph: k2.Fsa  # held so that its id is not reused while the entry lives
    result: LatticeResult
    seconds: float


def lattice_nbytes(lattice: k2.Fsa) -> int:
    """Bytes of a lattice's arcs and per-arc attributes (tensors and ragged tensors)."""
    total = lattice.arcs.values().numel() * 4
    for _, value in lattice.named_tensor_attr(include_scores=True):
        if isinstance(value, torch.Tensor):
            total += value.numel() * value.element_size()
        else:  # a ragged tensor: its values and row splits
            total += value.values.numel() * value.values.element_size() + 4 * value.numel()
    return total


def _digest(*tensors: torch.Tensor) -> bytes:
    h = hashlib.blake2b(digest_size=16)
    for t in tensors:
        t = t.detach().contiguous()
        h.update(f"{t.dtype}{tuple(t.shape)}".encode())
        h.update(t.cpu().numpy().tobytes())
    return h.digest()


class LatticeCache:
    """:func:`k2dec.lattice.get_lattice` with its results kept for later calls.

    Args:
      max_mb: MiB of lattices to keep; once full, further searches are not kept (they run
        each time). 0 keeps none (every call searches).

    Attributes:
      hits, misses: calls answered from the cache / by a search.
    """

    def __init__(self, max_mb: float) -> None:
        if not (isinstance(max_mb, int | float) and max_mb >= 0 and math.isfinite(max_mb)):
            raise ValueError(f"max_mb must be a finite number >= 0, got {max_mb!r}")
        self.max_bytes = int(max_mb * 2**20)
        self._entries: dict[tuple, _Entry] = {}
        self._used = 0
        self._saved = 0.0
        self.hits = 0
        self.misses = 0

    @property
    def used_bytes(self) -> int:
        return self._used

    def clear(self) -> None:
        """Forget every kept lattice."""
        self._entries.clear()
        self._used = 0

    def take_saved_seconds(self) -> float:
        """Search seconds that hits saved since the last call."""
        saved, self._saved = self._saved, 0.0
        return saved

    def get_lattice(
        self,
        log_probs: torch.Tensor,
        log_probs_lens: torch.Tensor,
        graph: k2.Fsa,
        config: LatticeConfig = LatticeConfig(),  # noqa: B008 (frozen, immutable)
        subsampling_factor: int | None = None,
        allow_truncate: int = 0,
    ) -> LatticeResult:
        """What :func:`k2dec.lattice.get_lattice` returns for these arguments (see there for
        shapes and dtypes): a copy of a kept result when ``graph`` (the same object), the
        settings and the contents of ``log_probs`` and ``log_probs_lens`` were searched
        before."""
        subsampling_factor = config_subsampling(config, subsampling_factor)
        if self.max_bytes == 0:
            return get_lattice(log_probs, log_probs_lens, graph, config, subsampling_factor,
                               allow_truncate)
        key = (id(graph), config, subsampling_factor, allow_truncate, str(log_probs.device),
               _digest(log_probs, log_probs_lens.to(torch.int64)))
        entry = self._entries.get(key)
        if entry is not None:
            self.hits += 1
            self._saved += entry.seconds
            return LatticeResult(entry.result.lattice.clone(), entry.result.reports)
        self.misses += 1
        start = time.perf_counter()
        result = get_lattice(log_probs, log_probs_lens, graph, config, subsampling_factor,
                             allow_truncate)
        seconds = time.perf_counter() - start
        size = lattice_nbytes(result.lattice)
        if self._used + size > self.max_bytes:
            return result
        self._entries[key] = _Entry(graph, result, seconds)
        self._used += size
        return LatticeResult(result.lattice.clone(), result.reports)
