"""Chunked (streaming) lattice decoding with ``k2.OnlineDenseIntersecter``.

Protocol (one :class:`StreamingDecoder` serves many streams; each stream is a :class:`Stream`)::

    decoder = StreamingDecoder(HLG, LatticeConfig(), max_streams=8)
    a, b = Stream(), Stream()
    hyps = decoder.decode_chunk([a, b], chunk_log_probs, chunk_lengths)  # partial results
    hyps = decoder.decode_chunk([b], next_chunk_of_b, torch.tensor([16]))  # any subset, any order
    ...
    hyps = decoder.decode_chunk([a], last_chunk_of_a, torch.tensor([7]), last=[True])
    # the hypothesis returned with last=True is the stream's final result: it equals the
    # offline 1best of the whole input. The stream is then finished.

Chunk ends. k2 1.23.4's ``OnlineDenseIntersecter`` treats the end of every chunk like the end
of the utterance: graph states without a final arc are dropped there, so on graphs such as HLG
(mid-word states cannot end) partial results would be empty and the final result wrong. The
decoder therefore decodes with a copy of the graph in which every state has an extra final arc
of score 0, marked by the arc attribute ``chunk_end`` (1 on those arcs). Partial hypotheses may
end on such an arc (the best path so far, wherever it is in the graph); the final hypothesis
(``last=True``) never does. The intersecter's output beam is widened to at least the search
beam so that chunk ends prune no state the offline search would keep.

Exactness. With icefall's default beams the final hypothesis equals the offline 1best (tested
on random graphs). With a tight ``search_beam``/``max_active_states`` the online search can keep
slightly different states than the offline one across chunk ends, so the final hypotheses can
then differ (measured: 1-4 of 30 random utterances at ``search_beam=4``).

Rows of a call with the same chunk length are advanced together in one k2 call. k2 1.23.4
corrupts the decoding state of the shorter rows when one call mixes chunk lengths, so rows of
different lengths go to separate k2 calls (same results, less batching): give all streams
equal-length chunks (except final ones) for the best speed.

``decode_chunk`` advances the given streams in place (their decoding state and frame count).
Each partial hypothesis covers every frame the stream has received so far.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import k2
import torch

from k2dec.lattice.dense import check_vocab, dense_rows, validate_log_probs
from k2dec.lattice.one_best import AuxLabels, Hypothesis, hypotheses_from_lattice
from k2dec.lattice.search import (
    LatticeConfig,
    LatticeResult,
    LatticeStatus,
    UtteranceReport,
    prepare_graph,
)

logger = logging.getLogger(__name__)

__all__ = ["Stream", "StreamingDecoder"]


def new_stream_state() -> object:
    """The decoding state ``k2.OnlineDenseIntersecter.decode`` takes for a stream that has not
    started: an empty ``k2.DecodeStateInfo`` where it can be constructed (k2 >= 1.24, whose
    ``decode`` refuses ``None``), else ``None`` (k2 1.23, whose ``DecodeStateInfo`` has no
    constructor)."""
    try:
        return k2.DecodeStateInfo()
    except TypeError:
        return None


@dataclass
class Stream:
    """The decoding state of one stream. Create one per utterance; pass it to every
    :meth:`StreamingDecoder.decode_chunk` call for that utterance.

    Attributes:
      num_frames: frames decoded so far.
      finished: True after its last chunk.
    """

    num_frames: int = 0
    finished: bool = False
    _state: object = field(default_factory=new_stream_state, repr=False)


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
        if config.allow_partial:
            raise ValueError("StreamingDecoder returns partial results by itself; "
                             "LatticeConfig.allow_partial must be False")
        if config.approximate:
            raise ValueError(
                "StreamingDecoder does not prune its inputs: token_top_k and "
                f"blank_skip_threshold must be None, got {config.token_top_k!r} and "
                f"{config.blank_skip_threshold!r}")
        if not isinstance(graph, k2.Fsa):
            raise TypeError(f"graph must be a k2.Fsa, got {type(graph).__name__}")
        if graph.arcs.num_axes() != 2:
            raise ValueError("StreamingDecoder needs a single graph (2 axes), not an FsaVec")
        if isinstance(max_streams, bool) or not isinstance(max_streams, int) or max_streams < 1:
            raise ValueError(f"max_streams must be a positive int, got {max_streams!r}")
        if not isinstance(aux_labels, AuxLabels):
            raise TypeError(f"aux_labels must be an AuxLabels, got {aux_labels!r}")
        graph = prepare_graph(graph, 1, graph.device)
        self.graph = k2.create_fsa_vec([add_chunk_end_arcs(graph)])
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
                output_beam=max(c.output_beam, c.search_beam),
                min_active_states=c.min_active_states,
                max_active_states=c.max_active_states,
            )
        return self._intersecters[num_streams]

    def decode_chunk(
        self,
        streams: list[Stream],
        log_probs: torch.Tensor,
        log_probs_lens: torch.Tensor,
        last: list[bool] | None = None,
    ) -> list[Hypothesis]:
        """Advance ``streams`` by one chunk each and return their 1best hypotheses: partial
        ones, and final ones for rows with ``last[i]`` (arguments as in
        :meth:`decode_chunk_lattice`)."""
        result = self.decode_chunk_lattice(streams, log_probs, log_probs_lens, last)
        return hypotheses_from_lattice(result, aux_labels=self.aux_labels, blank_id=self.blank_id)

    def decode_chunk_lattice(
        self,
        streams: list[Stream],
        log_probs: torch.Tensor,
        log_probs_lens: torch.Tensor,
        last: list[bool] | None = None,
    ) -> LatticeResult:
        """Advance ``streams`` by one chunk each and return their lattices so far.

        Args:
          streams: the streams this chunk belongs to (distinct, not finished),
            ``len(streams) == B``.
          log_probs: float32 ``(B, T_chunk, V)``; row ``i`` continues ``streams[i]``.
          log_probs_lens: integer ``(B,)``: valid frames of each row (``>= 1``).
          last: ``B`` flags; ``True`` marks a stream's last chunk (default: none is last).

        Returns:
          :class:`LatticeResult` with ``B`` lattices (axes ``[stream][state][arc]``), each
          covering all frames of its stream so far (frames count from the stream's start).
          Arcs carry the ``chunk_end`` attribute; for the rows marked ``last`` the chunk-end
          arcs have score ``-inf``, so only complete paths of the original graph remain.
        """
        last = self._check_chunk(streams, log_probs, log_probs_lens, last)
        num_frames = validate_log_probs(log_probs, log_probs_lens)
        if log_probs.shape[0] != len(streams):
            raise ValueError(
                f"log_probs has {log_probs.shape[0]} rows but {len(streams)} streams were given"
            )
        if log_probs.device != self.graph.device:
            raise ValueError(
                f"log_probs is on {log_probs.device} but the graph is on {self.graph.device}"
            )
        check_vocab(self.graph, log_probs.shape[2])
        lattice = self._advance(streams, log_probs, num_frames)
        for st, f, is_last in zip(streams, num_frames.tolist(), last):
            st.num_frames += f
            st.finished = bool(is_last)
        if any(last):
            lattice = _drop_chunk_end_arcs(lattice, torch.tensor(last, dtype=torch.bool))
        tot = lattice.get_tot_scores(use_double_scores=True, log_semiring=False)
        reports = tuple(
            self._report(st, empty) for st, empty in zip(streams, (tot == -float("inf")).tolist())
        )
        return LatticeResult(lattice=lattice, reports=reports)

    def _check_chunk(
        self, streams: list[Stream], log_probs: torch.Tensor, log_probs_lens: torch.Tensor,
        last: list[bool] | None,
    ) -> list[bool]:
        """Validate the streams of a chunk; return ``last`` (all False when None)."""
        if not isinstance(streams, list | tuple) or not all(
            isinstance(s, Stream) for s in streams
        ):
            raise TypeError("streams must be a list of Stream")
        if len({id(s) for s in streams}) != len(streams):
            raise ValueError("streams must be distinct (one row per stream per chunk)")
        if any(st.finished for st in streams):
            raise ValueError("a stream is finished (its last chunk was decoded); use a new Stream")
        if last is None:
            last = [False] * len(streams)
        if len(last) != len(streams):
            raise ValueError(f"last has {len(last)} flags but {len(streams)} streams were given")
        if len(streams) > self.max_streams:
            raise ValueError(
                f"got {len(streams)} streams but max_streams={self.max_streams}"
            )
        return list(last)

    def _advance(
        self, streams: list[Stream], log_probs: torch.Tensor, num_frames: torch.Tensor
    ) -> k2.Fsa:
        """Run the intersecter over the chunk; update the streams' decoding states; return the
        lattices in the order of ``streams``."""
        # In k2 1.23.4, a call whose rows have different numbers of frames leaves the shorter
        # rows' decoding states corrupt (the next call builds invalid lattices), so rows are
        # grouped by chunk length and each group is one k2 call.
        groups: dict[int, list[int]] = {}
        for i, f in enumerate(num_frames.tolist()):
            groups.setdefault(f, []).append(i)
        pieces = []
        rows: list[int] = []
        for members in groups.values():
            idx = torch.tensor(members, dtype=torch.int64)
            lattice, new_states = self._intersecter(len(members)).decode(
                dense_rows(log_probs, idx, num_frames), [streams[i]._state for i in members]
            )
            for i, st in zip(members, new_states):
                streams[i]._state = st
            pieces.append(lattice)
            rows.extend(members)
        lattice = pieces[0] if len(pieces) == 1 else k2.cat(pieces)
        if rows == sorted(rows):
            return lattice
        position = torch.empty(len(rows), dtype=torch.int64)
        position[torch.tensor(rows)] = torch.arange(len(rows))
        return k2.index_fsa(lattice, position.to(device=lattice.device, dtype=torch.int32))

    def _report(self, stream: Stream, empty: bool) -> UtteranceReport:
        c = self.config
        reason = ""
        if empty:
            reason = (
                f"no path survived the first {stream.num_frames} frames at "
                f"search_beam={c.search_beam:g}, output_beam={c.output_beam:g}"
            )
        return UtteranceReport(
            status=LatticeStatus.EMPTY if empty else LatticeStatus.OK,
            num_frames=stream.num_frames,
            search_beam=c.search_beam,
            output_beam=c.output_beam,
            max_active_states=c.max_active_states,
            reason=reason,
        )


def add_chunk_end_arcs(graph: k2.Fsa) -> k2.Fsa:
    """A copy of a single graph (2 axes) with an extra final arc (label -1, score 0) from every
    non-final state, and an int32 arc attribute ``chunk_end`` that is 1 on exactly those arcs.
    Other attributes of the new arcs take their fillers (0). ``graph`` is not modified."""
    arcs = graph.arcs.values()
    device = arcs.device
    num_states = graph.shape[0]
    final = num_states - 1
    old_src = arcs[:, 0].to(torch.int64)
    new_src = torch.arange(final, device=device, dtype=torch.int64)
    src = torch.cat([old_src, new_src])
    order = torch.sort(src, stable=True).indices
    new_arcs = torch.stack(
        [
            new_src.to(torch.int32),
            torch.full_like(new_src, final, dtype=torch.int32),
            torch.full_like(new_src, -1, dtype=torch.int32),
            torch.zeros_like(new_src, dtype=torch.int32),  # bits of 0.0
        ],
        dim=1,
    )
    all_arcs = torch.cat([arcs, new_arcs])[order]
    arc_map = torch.cat(
        [torch.arange(arcs.shape[0], device=device), torch.full_like(new_src, -1)]
    )[order].to(torch.int32)
    out = k2.utils.fsa_from_unary_function_tensor(graph, k2.Fsa(all_arcs).arcs, arc_map)
    out.chunk_end = (arc_map == -1).to(torch.int32)
    return k2.arc_sort(out)


def _drop_chunk_end_arcs(lattice: k2.Fsa, rows: torch.Tensor) -> k2.Fsa:
    """Clone of ``lattice`` in which the chunk-end arcs of the FSAs selected by ``rows`` (bool,
    one per FSA) have score ``-inf``, so no best path uses them."""
    shape = lattice.arcs.shape().remove_axis(1)
    fsa_of_arc = shape.row_ids(1).to(torch.int64)
    drop = (lattice.chunk_end == 1) & rows.to(lattice.device)[fsa_of_arc]
    out = lattice.clone()
    out.scores = torch.where(drop, torch.full_like(out.scores, -float("inf")), out.scores)
    return out
