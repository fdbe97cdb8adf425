"""Chunked (streaming) lattice decoding with ``k2.OnlineDenseIntersecter``.

Protocol (one :class:`StreamingDecoder` serves many streams; each stream is a :class:`Stream`)::

    decoder = StreamingDecoder(HLG, LatticeConfig(), max_streams=8)
    a, b = Stream(), Stream()
    hyps = decoder.decode_chunk([a, b], chunk_log_probs, chunk_lengths)  # partial results
    hyps = decoder.decode_chunk([b], next_chunk_of_b, torch.tensor([16]))  # any subset, any order
    ...
    # the hypotheses returned for a stream after its last chunk are its final result: they equal
    # the offline decode of the whole input.

``decode_chunk`` advances the given streams in place (their decoding state and frame count).
Each partial hypothesis covers every frame the stream has received so far.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import k2
import torch

from k2dec.lattice.decode import (
    LatticeConfig,
    LatticeResult,
    LatticeStatus,
    UtteranceReport,
    arcs_per_fsa,
    prepare_graph,
)
from k2dec.lattice.dense import check_vocab, validate_log_probs
from k2dec.lattice.one_best import AuxLabels, Hypothesis, hypotheses_from_lattice

logger = logging.getLogger(__name__)

__all__ = ["Stream", "StreamingDecoder"]


@dataclass
class Stream:
    """The decoding state of one stream. Create one per utterance; pass it to every
    :meth:`StreamingDecoder.decode_chunk` call for that utterance.

    Attributes:
      num_frames: frames decoded so far.
    """

    num_frames: int = 0
    _state: object = field(default=None, repr=False)


class StreamingDecoder:
    """Streaming 1best (and partial lattices) over a fixed decoding graph.

    Args:
      graph: decoding graph (a single Fsa; labels token ids), on the device of the chunks.
      config: pruning settings (``retry_scales`` is not used: a stream's history cannot be
        re-decoded, so an empty partial lattice is reported as ``EMPTY``).
      max_streams: the most streams one ``decode_chunk`` call may advance.
      aux_labels: what the graph's ``aux_labels`` hold.
      blank_id: blank token id (CTC collapse of labels).
    """

    def __init__(
        self,
        graph: k2.Fsa,
        config: LatticeConfig = LatticeConfig(),  # noqa: B008 (frozen, immutable)
        max_streams: int = 1,
        aux_labels: AuxLabels = AuxLabels.WORDS,
        blank_id: int = 0,
    ) -> None:
        if not isinstance(config, LatticeConfig):
            raise TypeError(f"config must be a LatticeConfig, got {type(config).__name__}")
        if not isinstance(graph, k2.Fsa):
            raise TypeError(f"graph must be a k2.Fsa, got {type(graph).__name__}")
        if graph.arcs.num_axes() != 2:
            raise ValueError("StreamingDecoder needs a single graph (2 axes), not an FsaVec")
        if isinstance(max_streams, bool) or not isinstance(max_streams, int) or max_streams < 1:
            raise ValueError(f"max_streams must be a positive int, got {max_streams!r}")
        if not isinstance(aux_labels, AuxLabels):
            raise TypeError(f"aux_labels must be an AuxLabels, got {aux_labels!r}")
        graph = prepare_graph(graph, 1, graph.device)
        self.graph = k2.create_fsa_vec([graph])
        self.config = config
        self.max_streams = max_streams
        self.aux_labels = aux_labels
        self.blank_id = blank_id
        # k2's intersecter needs exactly its num_streams sequences per call; the decoding
        # state lives in the streams, so one intersecter per batch size serves any streams.
        self._intersecters: dict[int, k2.OnlineDenseIntersecter] = {}

    def _intersecter(self, num_streams: int) -> k2.OnlineDenseIntersecter:
        if num_streams not in self._intersecters:
            c = self.config
            self._intersecters[num_streams] = k2.OnlineDenseIntersecter(
                decoding_graph=self.graph,
                num_streams=num_streams,
                search_beam=c.search_beam,
                output_beam=c.output_beam,
                min_active_states=c.min_active_states,
                max_active_states=c.max_active_states,
            )
        return self._intersecters[num_streams]

    def decode_chunk(
        self, streams: list[Stream], log_probs: torch.Tensor, lengths: torch.Tensor
    ) -> list[Hypothesis]:
        """Advance ``streams`` by one chunk each and return their partial 1best hypotheses
        (arguments as in :meth:`decode_chunk_lattice`)."""
        result = self.decode_chunk_lattice(streams, log_probs, lengths)
        return hypotheses_from_lattice(result, aux_labels=self.aux_labels, blank_id=self.blank_id)

    def decode_chunk_lattice(
        self, streams: list[Stream], log_probs: torch.Tensor, lengths: torch.Tensor
    ) -> LatticeResult:
        """Advance ``streams`` by one chunk each and return their partial lattices.

        Args:
          streams: the streams this chunk belongs to (distinct), ``len(streams) == B``.
          log_probs: float32 ``(B, T_chunk, V)``; row ``i`` continues ``streams[i]``.
          lengths: integer ``(B,)``: valid frames of each row (``>= 1``).

        Returns:
          :class:`LatticeResult` with ``B`` lattices (axes ``[stream][state][arc]``), each
          covering all frames of its stream so far (frames count from the stream's start).
        """
        if not isinstance(streams, list | tuple) or not all(
            isinstance(s, Stream) for s in streams
        ):
            raise TypeError("streams must be a list of Stream")
        if len({id(s) for s in streams}) != len(streams):
            raise ValueError("streams must be distinct (one row per stream per chunk)")
        if len(streams) > self.max_streams:
            raise ValueError(
                f"got {len(streams)} streams but max_streams={self.max_streams}"
            )
        num_frames = validate_log_probs(log_probs, lengths)
        if log_probs.shape[0] != len(streams):
            raise ValueError(
                f"log_probs has {log_probs.shape[0]} rows but {len(streams)} streams were given"
            )
        if log_probs.device != self.graph.device:
            raise ValueError(
                f"log_probs is on {log_probs.device} but the graph is on {self.graph.device}"
            )
        check_vocab(self.graph, log_probs.shape[2])
        b = len(streams)
        segments = torch.stack(
            [torch.arange(b), torch.zeros(b, dtype=torch.int64), num_frames], dim=1
        ).to(torch.int32)
        dense = k2.DenseFsaVec(log_probs, segments)
        lattice, new_states = self._intersecter(b).decode(dense, [s._state for s in streams])
        for s, st, f in zip(streams, new_states, num_frames.tolist()):
            s._state = st
            s.num_frames += f
        empty = (arcs_per_fsa(lattice) == 0).tolist()
        reports = []
        for s, e in zip(streams, empty):
            reason = (
                f"no path survived the first {s.num_frames} frames at "
                f"search_beam={self.config.search_beam:g}, "
                f"output_beam={self.config.output_beam:g}"
                if e
                else ""
            )
            reports.append(
                UtteranceReport(
                    status=LatticeStatus.EMPTY if e else LatticeStatus.OK,
                    num_frames=s.num_frames,
                    search_beam=self.config.search_beam,
                    output_beam=self.config.output_beam,
                    max_active_states=self.config.max_active_states,
                    reason=reason,
                )
            )
        return LatticeResult(lattice=lattice, reports=tuple(reports))
