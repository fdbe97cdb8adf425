"""Multi-process CPU 1best decoding.

On CPU, ``k2.intersect_dense_pruned`` works through a batch's utterances one after another on a
single core (k2 issue 929), so a large batch leaves the other cores idle.
:class:`ParallelOneBestDecoder` keeps a pool of worker processes, each holding its own copy of
the decoding graph, and spreads the utterances of every batch over them (balanced by number of
frames). Each utterance is decoded independently of the others, so the hypotheses are identical
to a single-process decode (:func:`~k2dec.lattice.one_best.one_best_decoding`).

Worker processes are started with the ``spawn`` method: scripts that use a pool need the usual
``if __name__ == "__main__":`` guard.

:attr:`ParallelOneBestDecoder.stats` says where the time went: wall seconds of
:meth:`ParallelOneBestDecoder.decode` and the seconds its workers spent decoding. Their ratio
separates the pool's own cost (IPC, waiting for the slowest group) from the slowdown that
parallel searches cause each other (on a 2-core machine two k2 searches run slower each than
one alone, whether or not they share the graph's memory: BENCHMARKS.md ``lattice``).
"""

from __future__ import annotations

import io
import logging
import multiprocessing
import os
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import k2
import numpy as np
import torch

from k2dec.lattice.dense import check_vocab, validate_log_probs
from k2dec.lattice.one_best import AuxLabels, Hypothesis, one_best_decoding
from k2dec.lattice.search import LatticeConfig, prepare_graph

logger = logging.getLogger(__name__)

__all__ = ["ParallelOneBestDecoder", "WorkerStats", "available_cores", "balance_by_frames"]


_WORKER: dict = {}


def available_cores() -> int:
    """Number of CPU cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def balance_by_frames(num_frames: list[int], num_workers: int) -> list[list[int]]:
    """Split utterance indexes into ``num_workers`` groups of similar total frames (longest
    first to the least-loaded group). Each group is returned sorted; empty groups are dropped."""
    loads = [0] * num_workers
    groups: list[list[int]] = [[] for _ in range(num_workers)]
    for i in sorted(range(len(num_frames)), key=lambda k: (-num_frames[k], k)):
        w = min(range(num_workers), key=lambda k: (loads[k], k))
        groups[w].append(i)
        loads[w] += num_frames[i]
    return [sorted(g) for g in groups if g]


def _graph_to_bytes(graph: k2.Fsa) -> bytes:
    buf = io.BytesIO()
    torch.save(graph.as_dict(), buf)
    return buf.getvalue()


def _graph_from_bytes(data: bytes) -> k2.Fsa:
    return k2.Fsa.from_dict(torch.load(io.BytesIO(data), weights_only=False))


def _init_worker(graph_bytes: bytes, config: LatticeConfig, aux_labels: AuxLabels,
                 blank_id: int) -> None:
    torch.set_num_threads(1)
    _WORKER["graph"] = _graph_from_bytes(graph_bytes)
    _WORKER["config"] = config
    _WORKER["aux_labels"] = aux_labels
    _WORKER["blank_id"] = blank_id


def _timed_one_best(log_probs: torch.Tensor, num_frames: torch.Tensor, graph: k2.Fsa,
                    config: LatticeConfig, aux_labels: AuxLabels, blank_id: int
                    ) -> tuple[list[Hypothesis], float]:
    """:func:`one_best_decoding` and the seconds it took."""
    start = time.perf_counter()
    hyps = one_best_decoding(log_probs, num_frames, graph, config, aux_labels=aux_labels,
                             blank_id=blank_id)
    return hyps, time.perf_counter() - start


def _decode_in_worker(log_probs: np.ndarray, num_frames: np.ndarray
                      ) -> tuple[list[Hypothesis], float]:
    """One group's hypotheses and the worker's seconds spent on them."""
    return _timed_one_best(torch.from_numpy(log_probs), torch.from_numpy(num_frames),
                           _WORKER["graph"], _WORKER["config"], _WORKER["aux_labels"],
                           _WORKER["blank_id"])


@dataclass
class WorkerStats:
    """Time accounting of a :class:`ParallelOneBestDecoder`, summed over its
    :meth:`~ParallelOneBestDecoder.decode` calls.

    Attributes:
      calls: ``decode`` calls.
      wall_seconds: wall-clock seconds inside ``decode``.
      busy_seconds: seconds the workers spent decoding (summed over workers; with one worker,
        the decode itself, which is then ``wall_seconds`` less the input checks).
    """

    calls: int = 0
    wall_seconds: float = 0.0
    busy_seconds: float = 0.0

    def utilization(self, num_workers: int) -> float:
        """``busy_seconds / (num_workers * wall_seconds)``: 1.0 when every worker decoded all
        the time; the rest is the pool's own cost and the wait for the slowest group."""
        if self.wall_seconds <= 0:
            return 0.0
        return self.busy_seconds / (num_workers * self.wall_seconds)


class ParallelOneBestDecoder:
    """1best lattice decoding spread over CPU worker processes.

    Example::

        with ParallelOneBestDecoder(HLG, LatticeConfig(), num_workers=4) as decoder:
            hyps = decoder.decode(log_probs, lengths)  # list[Hypothesis], caller's order

    Args:
      graph: CPU decoding graph (a single Fsa), e.g. HLG; copied once into each worker.
      config: lattice pruning settings.
      aux_labels: what the graph's ``aux_labels`` hold (words for HLG, tokens for H).
      num_workers: worker processes; ``None`` means all available cores. With 1, decoding runs
        in the calling process.
      blank_id: blank token id (CTC collapse of labels).
    """

    def __init__(
        self,
        graph: k2.Fsa,
        config: LatticeConfig = LatticeConfig(),  # noqa: B008 (frozen, immutable)
        aux_labels: AuxLabels = AuxLabels.WORDS,
        num_workers: int | None = None,
        blank_id: int = 0,
    ) -> None:
        if not isinstance(graph, k2.Fsa):
            raise TypeError(f"graph must be a k2.Fsa, got {type(graph).__name__}")
        if graph.device.type != "cpu":
            raise ValueError(
                f"ParallelOneBestDecoder is for CPU decoding; graph is on {graph.device} "
                "(on GPU, decode the whole batch with one_best_decoding)"
            )
        if graph.arcs.num_axes() != 2:
            raise ValueError("ParallelOneBestDecoder needs a single graph (2 axes), not an FsaVec")
        if not isinstance(config, LatticeConfig):
            raise TypeError(f"config must be a LatticeConfig, got {type(config).__name__}")
        if not isinstance(aux_labels, AuxLabels):
            raise TypeError(f"aux_labels must be an AuxLabels, got {aux_labels!r}")
        if num_workers is None:
            num_workers = available_cores()
        if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 1:
            raise ValueError(f"num_workers must be a positive int, got {num_workers!r}")
        self.graph = prepare_graph(graph, 1, torch.device("cpu"))
        self.config = config
        self.aux_labels = aux_labels
        self.num_workers = num_workers
        self.blank_id = blank_id
        self.stats = WorkerStats()
        self._pool: ProcessPoolExecutor | None = None
        if num_workers > 1:
            self._pool = ProcessPoolExecutor(
                max_workers=num_workers,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_init_worker,
                initargs=(_graph_to_bytes(self.graph), config, aux_labels, blank_id),
            )

    def decode(
        self,
        log_probs: torch.Tensor,
        log_probs_lens: torch.Tensor,
        subsampling_factor: int = 1,
        allow_truncate: int = 0,
    ) -> list[Hypothesis]:
        """Decode a batch; same arguments and result as
        :func:`~k2dec.lattice.one_best.one_best_decoding` (``log_probs`` on CPU). Adds to
        :attr:`stats`."""
        start = time.perf_counter()
        hyps, busy = self._decode(log_probs, log_probs_lens, subsampling_factor, allow_truncate)
        self.stats.calls += 1
        self.stats.wall_seconds += time.perf_counter() - start
        self.stats.busy_seconds += busy
        return hyps

    def _decode(self, log_probs: torch.Tensor, log_probs_lens: torch.Tensor,
                subsampling_factor: int, allow_truncate: int
                ) -> tuple[list[Hypothesis], float]:
        num_frames = validate_log_probs(log_probs, log_probs_lens, subsampling_factor,
                                        allow_truncate)
        if log_probs.device.type != "cpu":
            raise ValueError(f"log_probs must be on CPU for ParallelOneBestDecoder, got "
                             f"{log_probs.device}")
        check_vocab(self.graph, log_probs.shape[2])
        if self._pool is None:
            return _timed_one_best(log_probs, num_frames, self.graph, self.config,
                                   self.aux_labels, self.blank_id)
        groups = balance_by_frames(num_frames.tolist(), self.num_workers)
        lp = log_probs.detach()
        futures = []
        for g in groups:
            idx = torch.tensor(g)
            t = int(num_frames[idx].max())
            futures.append(
                self._pool.submit(
                    _decode_in_worker,
                    lp[idx, :t].contiguous().numpy(),
                    num_frames[idx].numpy(),
                )
            )
        out: list[Hypothesis | None] = [None] * log_probs.shape[0]
        busy = 0.0
        for g, fut in zip(groups, futures):
            hyps, seconds = fut.result()
            busy += seconds
            for i, hyp in zip(g, hyps):
                out[i] = hyp
        return out, busy  # type: ignore[return-value]

    def close(self) -> None:
        """Stop the worker processes."""
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None

    def __enter__(self) -> ParallelOneBestDecoder:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
