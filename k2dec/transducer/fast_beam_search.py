"""fast_beam_search: frame-synchronous FSA-constrained transducer search on
``k2.RnntDecodingStreams`` (Kang et al., 2022), batched over utterances, streaming or offline.

On every frame k2 reports, per utterance, the distinct decoder contexts alive in its search
space; the decoder and joiner are evaluated once per (utterance, context) and k2 expands every
(graph state, context) pair by blank (stay) or by each graph arc (emit its label, consume the
frame), pruning with a log-prob ``beam``, ``max_states`` and ``max_contexts`` per utterance.
The result is a lattice (one ``k2.Fsa`` per utterance) whose arc ``i`` on any path consumes
frame ``i``; the one-best path gives tokens, their frames and the score.

The decoding graph is ``k2.trivial_graph(vocab_size - 1)`` (no constraint) by default, or any
single ``k2.Fsa`` whose ``labels`` are token ids in ``[0, vocab_size)`` (``-1`` on final arcs),
e.g. an LG graph whose word ids are in ``aux_labels``. k2 assumes blank id 0.

Streaming protocol (:func:`fast_beam_search` is this with one chunk)::

    search = FastBeamSearch(model, graph, FastBeamSearchConfig())
    streams = [search.new_stream() for _ in range(N)]
    for chunk, chunk_lens in chunks:
        search.decode_chunk(streams, chunk, chunk_lens)
        partial = search.results(streams, final=False)
    lattice = search.lattice(streams)
    hyps = search.results(streams)

n-best variants (``fast_beam_search_nbest``, ``..._nbest_LG``, ``..._nbest_oracle``) are
compositions of :meth:`FastBeamSearch.lattice` with :mod:`k2dec.nbest` and live in
:mod:`k2dec.methods`; the n-best options are carried in :class:`FastBeamSearchConfig` so each
default is defined once.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass

import k2
import torch
from torch import nn

from k2dec.primitives.batch_search import num_active_per_frame
from k2dec.primitives.best_paths import arc_frames
from k2dec.primitives.ragged import ragged_select
from k2dec.primitives.sizes import check_finite, check_float_range, check_int_range, check_positive
from k2dec.transducer.common import (
    TransducerHypothesis,
    check_encoder_out,
    check_streams,
    log_probs_from_logits,
)
from k2dec.transducer.network import DecoderCache, TransducerNet, cached_row_ids

logger = logging.getLogger(__name__)

__all__ = [
    "DECODER_CACHE_SIZE",
    "FastBeamSearch",
    "FastBeamSearchConfig",
    "FastBeamSearchResult",
    "FastBeamSearchStream",
    "check_decoding_graph",
    "fast_beam_search",
    "fast_beam_search_lattice",
]


#: decoder outputs :class:`FastBeamSearch` caches by default (4096 rows: 8 MiB at dimension 512)
DECODER_CACHE_SIZE = 4096


@dataclass(frozen=True)
class FastBeamSearchConfig:
    """Options of fast_beam_search (icefall's defaults). The n-best and LG methods built on its
    lattice keep their own settings in :mod:`k2dec.methods`.

    Attributes:
      beam: log-prob beam of the search, per utterance and frame.
      max_contexts: maximum number of decoder contexts kept per utterance and frame.
      max_states: maximum number of (graph state, context) states kept per utterance and frame.
      temperature: logits are divided by it before the log-softmax.
      blank_penalty: subtracted from the blank logit before the log-softmax.
      ilme_scale: internal-LM estimation: ``ilme_scale`` times the log-probs of the joiner on a
        zero encoder frame are subtracted from the log-probs (0 disables it).
      allow_partial: when no final graph state survives at the last frame, treat every surviving
        state as final instead of returning an empty lattice.
      termination_frame: k2dec's default True: after the last frame every stream is advanced
        over one blank-only termination frame (:meth:`FastBeamSearch.terminate`), so the
        lattice scores the emissions of *every* frame. False is icefall's
        ``fast_beam_search`` (``format_output`` right after the last frame): the last frame
        only decides which states are final and its emission scores never reach the lattice;
        k2dec differs because dropping a real frame's evidence is a bug, not a setting. With
        ``allow_partial`` as well, a lattice without a final state gets one final arc (score
        0) per arc of its last frame, and the one-best path's final arc keeps the token of
        the arc it stands for: icefall reads its tokens from the graph arcs the lattice arcs
        came from (``aux_labels``), where that token is, and so does k2dec then
        (:func:`one_best` reads ``token_labels``, see :class:`FastBeamSearchResult`).
      decoder_tables: run k2dec's decoder as per-token tables
        (:class:`~k2dec.transducer.network.DecoderTables`: faster, equal up to float
        rounding). False runs the decoder module as icefall does, bit for bit: what
        ``k2.random_paths`` needs to draw icefall's n-best paths from the lattice (it is
        chaotic: last-bit score changes change its samples); ``--icefall-compat`` sets it.
        With ``termination_frame=False`` as well (icefall's), :func:`fast_beam_search`
        computes every score with icefall's bits also for icefall's own decoder and joiner
        classes: the decoder projection and the joiner run on each frame's batch as icefall
        runs them (a float32 GEMM's last bits depend on the batch's size), see
        :data:`ICEFALL_MIN_ROWS`.
    """

    beam: float = 20.0
    max_contexts: int = 8
    max_states: int = 64
    temperature: float = 1.0
    blank_penalty: float = 0.0
    ilme_scale: float = 0.0
    allow_partial: bool = False
    termination_frame: bool = True
    decoder_tables: bool = True

    def __post_init__(self) -> None:
        check_float_range(self, "beam", 0.0, 1e5)  # memory: max_states, max_contexts
        check_int_range(self, "max_contexts", 1, 256)
        check_int_range(self, "max_states", 1, 4096)
        check_positive("temperature", self.temperature)
        check_finite("blank_penalty", self.blank_penalty)
        check_finite("ilme_scale", self.ilme_scale)
        for name in ("allow_partial", "termination_frame", "decoder_tables"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"{name} must be a bool, got {getattr(self, name)!r}")


@dataclass(frozen=True)
class FastBeamSearchResult:
    """Output of :func:`fast_beam_search`.

    Attributes:
      lattice: FsaVec ``[utt][state][arc]`` in input order. ``labels`` are token ids (0 = blank;
        ``-1`` on final arcs), other attributes (e.g. ``aux_labels``) come from the decoding
        graph; arc scores are acoustic log-probs plus graph scores; along any path arc ``i``
        consumes frame ``i``. The final arcs have score 0: k2 drops the graph's final weights.
        An utterance with no frames has the one-arc lattice of the empty hypothesis. With
        ``allow_partial`` and ``termination_frame=False`` it also has ``token_labels``: the
        label of the graph arc each arc took (0 on blank self-loops), also on the final arcs
        of a lattice that had no final state, which stand for the arcs of its last frame.
      hyps: the one-best hypothesis of each utterance (tokens = non-blank labels of the best
        path; an utterance with no frames gives ``([], [], 0.0)``; an empty lattice gives an
        empty hypothesis with score ``-inf``).
      config: the configuration used (the very object passed in).
    """

    lattice: k2.Fsa
    hyps: list[TransducerHypothesis]
    config: FastBeamSearchConfig


def check_decoding_graph(graph: k2.Fsa, vocab_size: int, context_size: int) -> None:
    """Raise ValueError/TypeError unless ``graph`` is a single FSA usable with a joiner of
    ``vocab_size`` symbols and a decoder history of ``context_size``."""
    if not isinstance(graph, k2.Fsa):
        raise TypeError(f"decoding_graph must be a k2.Fsa, got {type(graph).__name__}")
    if graph.arcs.num_axes() != 2:
        raise ValueError(
            "decoding_graph must be a single FSA (2 axes), got an FsaVec; "
            "pass graph[0] or one graph per stream via new_stream(decoding_graph=...)"
        )
    labels = graph.labels
    if labels.numel() == 0:
        raise ValueError("decoding_graph has no arcs")
    lo, hi = int(labels.min()), int(labels.max())
    if hi >= vocab_size:
        raise ValueError(
            f"decoding_graph has label {hi} but the joiner has only vocab_size={vocab_size} "
            f"symbols (ids 0..{vocab_size - 1}); the graph must be built on the model's token "
            "table (token ids in labels, word ids in aux_labels)"
        )
    if lo < -1:
        raise ValueError(f"decoding_graph has label {lo}; labels must be >= -1")
    num_states = int(graph.shape[0])
    if math.log2(vocab_size) * context_size + math.log2(max(num_states, 1)) >= 63:
        raise ValueError(
            f"vocab_size={vocab_size} ** context_size={context_size} * num_states={num_states} "
            "does not fit k2's int64 state ids"
        )


class FastBeamSearchStream:
    """Decoding state of one utterance for :class:`FastBeamSearch`: a ``k2.RnntDecodingStream``
    over its decoding graph and the number of frames consumed so far (``num_frames``)."""

    def __init__(self, graph: k2.Fsa) -> None:
        self.graph = graph
        self.rnnt_stream = k2.RnntDecodingStream(graph)
        self.num_frames = 0
        #: True once the stream's final result was taken (see FastBeamSearch.terminate)
        self.terminated = False
        #: 1 if it was advanced over a termination frame, else 0
        self.extra_frames = 0
        # A terminated k2.RnntDecodingStreams that contains this stream (and its index there);
        # k2 formats lattices only through such an object.
        self._owner: tuple[k2.RnntDecodingStreams, int] | None = None


class FastBeamSearch:
    """Batched fast_beam_search over a stateless transducer.

    Args:
      model: object with ``.decoder`` (``blank_id`` must be 0) and ``.joiner``.
      decoding_graph: a single ``k2.Fsa``; ``None`` means ``k2.trivial_graph(vocab_size - 1)``.
      config: search options.
      decoder_cache_size: if > 0, decoder outputs are cached by context across frames and
        streams (at most this many rows; see :class:`~k2dec.transducer.DecoderCache`); 0
        disables the cache. The contexts alive on a frame are mostly those of the frame before,
        so the default :data:`DECODER_CACHE_SIZE` evaluates the decoder on about a quarter of
        the rows (the speed-up: BENCHMARKS.md ``transducer``). In icefall's layout from
        :data:`ICEFALL_MIN_ROWS` utterances on (and when streaming), it is the number of
        contexts whose projected decoder output and ILME log-probs are kept instead
        (:class:`_ContextRows`: the same bits as computing them on every frame).
    """

    def __init__(
        self,
        model: nn.Module,
        decoding_graph: k2.Fsa | None = None,
        config: FastBeamSearchConfig | None = None,
        decoder_cache_size: int | None = None,
    ) -> None:
        if config is None:
            config = FastBeamSearchConfig()
        if not isinstance(config, FastBeamSearchConfig):
            raise TypeError(f"config must be a FastBeamSearchConfig, got {type(config).__name__}")
        self.config = config
        if decoder_cache_size is None:
            decoder_cache_size = DECODER_CACHE_SIZE
        self.net = TransducerNet(model, decoder_cache_size, tables=config.decoder_tables)
        #: rows :class:`_ContextRows` keeps in icefall's layout (0: computed on every frame)
        self.context_rows_size = decoder_cache_size
        self._context_rows: _ContextRows | None = None
        #: whole utterances are decoded in icefall's layout, for its bits (``decoder_tables``
        #: and ``termination_frame`` False, a joiner with icefall's projections; see
        #: :meth:`_decode_icefall`: its streams may be advanced over padding frames, which a
        #: termination frame would follow)
        self.icefall_layout = (not config.decoder_tables and not config.termination_frame
                               and self.net.project)
        if self.net.blank_id != 0:
            raise ValueError(
                f"fast_beam_search needs blank_id == 0 (k2 assumes it), got "
                f"model.decoder.blank_id={self.net.blank_id}"
            )
        if decoding_graph is not None:
            check_decoding_graph(decoding_graph, self.net.vocab_size, self.net.context_size)
        self.decoding_graph = None if decoding_graph is None else self._tokened(decoding_graph)
        self._trivial: dict[torch.device, k2.Fsa] = {}
        self.k2_config = k2.RnntDecodingConfig(
            vocab_size=self.net.vocab_size,
            decoder_history_len=self.net.context_size,
            beam=float(config.beam),
            max_states=config.max_states,
            max_contexts=config.max_contexts,
        )
        # The termination frame prunes nothing: it only decides which states are final.
        self._termination_config = k2.RnntDecodingConfig(
            vocab_size=self.net.vocab_size,
            decoder_history_len=self.net.context_size,
            beam=1e30,
            max_states=1 << 30,
            max_contexts=1 << 30,
        )

    def _graph_on(self, device: torch.device) -> k2.Fsa:
        if self.decoding_graph is not None:
            if self.decoding_graph.device != device:
                raise ValueError(
                    f"decoding_graph is on {self.decoding_graph.device} but the stream is on "
                    f"{device}; move one of them"
                )
            return self.decoding_graph
        if device not in self._trivial:
            trivial = k2.trivial_graph(self.net.vocab_size - 1, device=device)
            check_decoding_graph(trivial, self.net.vocab_size, self.net.context_size)
            self._trivial[device] = self._tokened(trivial)
        return self._trivial[device]

    def _tokened(self, graph: k2.Fsa) -> k2.Fsa:
        """The graph streams decode: ``graph`` itself, or, for icefall's partial lattices
        (``allow_partial`` without a termination frame, see :class:`FastBeamSearchConfig`),
        a copy sharing its arcs and attributes that also carries each arc's label as
        ``token_labels`` (k2 copies it onto every lattice arc, final arcs of a partial
        lattice included)."""
        if not self.config.allow_partial or self.config.termination_frame:
            return graph
        copy = k2.Fsa(graph.arcs)
        for name, value in graph.named_tensor_attr(include_scores=False):
            setattr(copy, name, value)
        for name, value in graph.named_non_tensor_attr():
            setattr(copy, name, value)
        copy.token_labels = graph.labels.clone()
        return copy

    def new_stream(
        self, device: torch.device | str = "cpu", decoding_graph: k2.Fsa | None = None
    ) -> FastBeamSearchStream:
        """A fresh stream on ``device``, over ``decoding_graph`` if given (per-utterance graphs,
        e.g. for biasing) else the searcher's graph."""
        device = torch.device(device)
        if decoding_graph is None:
            graph = self._graph_on(device)
        else:
            check_decoding_graph(decoding_graph, self.net.vocab_size, self.net.context_size)
            if decoding_graph.device != device:
                raise ValueError(
                    f"decoding_graph is on {decoding_graph.device}, the stream on {device}"
                )
            graph = self._tokened(decoding_graph)
        return FastBeamSearchStream(graph)

    def decode_chunk(
        self,
        streams: Sequence[FastBeamSearchStream],
        encoder_out: torch.Tensor,
        encoder_out_lens: torch.Tensor,
    ) -> None:
        """Advance each stream over its next frames.

        Args:
          streams: ``N`` distinct streams from :meth:`new_stream`, on ``encoder_out.device``.
          encoder_out: float ``[N, T, C]`` padded encoder frames of this chunk (not projected).
          encoder_out_lens: int ``[N]`` valid frames of each stream in this chunk.

        Utterances are sorted by length; whenever the shortest active one runs out of frames the
        k2 streams object is terminated (flushing state to the individual streams) and rebuilt
        over the remaining ones, so no stream ever consumes a padding frame.
        """
        lens = check_encoder_out(encoder_out, encoder_out_lens, self.net)
        self._decode(streams, encoder_out, lens)

    def _decode(
        self, streams: Sequence[FastBeamSearchStream], encoder_out: torch.Tensor,
        lens: torch.Tensor
    ) -> None:
        """:meth:`decode_chunk` after checking ``encoder_out`` (``lens``: int64, its
        device)."""
        check_streams(streams, encoder_out.size(0), FastBeamSearchStream)
        device = encoder_out.device
        for i, s in enumerate(streams):
            if s.terminated:
                raise ValueError(
                    f"streams[{i}] was already terminated (its final result was taken); "
                    "create a new stream"
                )
            if s.graph.device != device:
                raise ValueError(
                    f"streams[{i}] is on {s.graph.device} but encoder_out is on {device}"
                )
        if encoder_out.size(0) == 0 or encoder_out.size(1) == 0 or int(lens.max()) == 0:
            return
        net = self.net

        lens_sorted, order = torch.sort(lens, descending=True, stable=True)
        ordered = [streams[i] for i in order.tolist()]
        num_active = num_active_per_frame(lens_sorted.tolist())
        enc, _, _ = net.project_time_major(encoder_out, order, lens_sorted)
        offset = 0  # of frame t's rows in `enc`

        current_n = num_active[0]
        decoding = k2.RnntDecodingStreams(
            [s.rnnt_stream for s in ordered[:current_n]], self.k2_config
        )
        for i, s in enumerate(ordered[:current_n]):
            s._owner = (decoding, i)
        for n in num_active:
            if n != current_n:
                decoding.terminate_and_flush_to_streams()
                decoding = k2.RnntDecodingStreams(
                    [s.rnnt_stream for s in ordered[:n]], self.k2_config
                )
                current_n = n
            shape, contexts = decoding.get_contexts()
            utt = shape.row_ids(1)  # int32: an index as good as int64
            frame = enc[offset : offset + n]
            offset += n
            if self.icefall_layout:
                log_probs = self._icefall_rows(net, contexts, frame, utt)
            else:
                log_probs = self._frame_log_probs(contexts.to(torch.int64),
                                                  frame.index_select(0, utt), 0)
            decoding.advance(log_probs)
        decoding.terminate_and_flush_to_streams()
        for s, n_frames in zip(ordered, lens_sorted.tolist()):
            s.num_frames += n_frames

    def _decode_icefall(self, streams: Sequence[FastBeamSearchStream],
                        encoder_out: torch.Tensor, lens: torch.Tensor) -> None:
        """:meth:`_decode` of fresh streams over a whole utterance each, in icefall's layout,
        so that every score has icefall's bits (``decoder_tables=False``; what
        ``k2.random_paths`` needs to draw icefall's n-best paths): one
        ``k2.RnntDecodingStreams`` over the utterances in input order, advanced over every
        frame up to the longest (the shorter ones over padding frames, which their lattices
        do not reach), the whole padded ``encoder_out`` projected in one call, and on each
        frame ``decoder_proj`` and the joiner on all the frame's contexts in one batch (a
        float32 GEMM's rows depend on the batch's size). Only the decoder module's rows, which
        do not, come from :class:`~k2dec.transducer.network.RawDecoderOutputs`. Utterances
        without frames (icefall refuses them) are left out."""
        net = self.net
        keep = torch.nonzero(lens > 0).squeeze(1)
        if keep.numel() < lens.numel():
            encoder_out, lens = encoder_out.index_select(0, keep), lens.index_select(0, keep)
        used = [streams[i] for i in keep.tolist()]
        if not used:
            return
        enc = net.project_encoder(encoder_out)
        decoding = k2.RnntDecodingStreams([s.rnnt_stream for s in used], self.k2_config)
        for t in range(int(lens.max())):
            shape, contexts = decoding.get_contexts()
            cur = enc[:, t].index_select(0, shape.row_ids(1).to(torch.int64))
            log_probs = self._frame_log_probs(contexts.to(torch.int64), cur, 0)
            decoding.advance(log_probs)
        decoding.terminate_and_flush_to_streams()
        for i, (s, n) in enumerate(zip(used, lens.tolist())):
            s._owner = (decoding, i)
            s.num_frames += n

    def _icefall_rows(self, net: TransducerNet, contexts: torch.Tensor, frame: torch.Tensor,
                      utt: torch.Tensor) -> torch.Tensor:
        """:meth:`_frame_log_probs` in icefall's layout on batches of at least
        :data:`ICEFALL_MIN_ROWS` rows: the contexts' rows (int32 ``[M, c]``, ``M >= 1``) from
        :class:`_ContextRows`, joined with the frame's projected rows ``frame`` ``[n, J]`` of
        their utterances ``utt`` (int ``[M]``)."""
        if self._context_rows is None:
            self._context_rows = _ContextRows(net, self.config, self.context_rows_size,
                                              ICEFALL_MIN_ROWS)
        return self._context_rows.log_probs(contexts, frame, utt)

    def _frame_log_probs(self, contexts: torch.Tensor, enc_t: torch.Tensor, min_rows: int
                         ) -> torch.Tensor:
        """The log-probs ``[M, V]`` of one frame's contexts (int64 ``[M, c]``) on their
        utterances' projected frames ``enc_t`` ``[M, J]`` (with ILME, blank penalty and
        temperature). In icefall's layout (:attr:`icefall_layout`) the decoder module's rows
        are projected and joined as icefall does, in 4-D batches of at least ``min_rows``
        rows (padded with copies of the first; 0: exactly ``M``, see
        :data:`ICEFALL_MIN_ROWS`)."""
        net, cfg = self.net, self.config
        m = contexts.size(0)
        if self.icefall_layout:
            if m < min_rows:
                pad = _pad_rows(torch.arange(m, device=contexts.device), min_rows)
                contexts, enc_t = contexts.index_select(0, pad), enc_t.index_select(0, pad)
            raw = net.raw_decoder_out(contexts)
            dec = net.project_decoder(raw.unsqueeze(1)).unsqueeze(1)  # [M', 1, 1, J]
            cur = enc_t.unsqueeze(1).unsqueeze(1)
            logits = net.logits4(cur, dec)[:m]
            ilme = (net.logits4(torch.zeros_like(cur), dec)[:m] if cfg.ilme_scale != 0.0
                    else None)
        else:
            dec = net.decoder_out(contexts)
            logits = net.logits(enc_t, dec)
            ilme = net.logits(torch.zeros_like(enc_t), dec) if cfg.ilme_scale != 0.0 else None
        log_probs = log_probs_from_logits(logits, 0, cfg.temperature, cfg.blank_penalty)
        if ilme is not None:
            log_probs = log_probs - cfg.ilme_scale * log_probs_from_logits(
                ilme, 0, cfg.temperature, cfg.blank_penalty)
        return log_probs

    def terminate(self, streams: Sequence[FastBeamSearchStream]) -> None:
        """End the given streams (already terminated ones are skipped).

        k2 takes a graph's final arc (label ``-1``) while advancing a frame and formats the
        frame after the last one only as "which states are final". So that the lattice covers
        *every* real frame, each stream is advanced over one extra termination frame whose
        log-probs are 0 for blank and ``-inf`` for tokens (nothing is pruned on it; its scores
        do not appear in the lattice). icefall's ``fast_beam_search`` skips this step, so its
        lattices ignore the emissions of the last encoder frame; with
        ``config.termination_frame=False`` the streams are ended without it, as icefall's.
        """
        check_streams(streams, len(streams), FastBeamSearchStream)
        todo = [s for s in streams if not s.terminated]
        if not todo:
            return
        if not self.config.termination_frame:
            for s in todo:
                s.terminated = True
            return
        decoding = k2.RnntDecodingStreams(
            [s.rnnt_stream for s in todo], self._termination_config
        )
        shape, _ = decoding.get_contexts()
        log_probs = torch.full(
            (shape.tot_size(1), self.net.vocab_size),
            float("-inf"),
            device=todo[0].graph.device,
        )
        log_probs[:, 0] = 0.0
        decoding.advance(log_probs)
        decoding.terminate_and_flush_to_streams()
        for i, s in enumerate(todo):
            s._owner = (decoding, i)
            s.terminated = True
            s.extra_frames = 1

    def lattice(
        self, streams: Sequence[FastBeamSearchStream], final: bool = True
    ) -> k2.Fsa:
        """The lattices of the streams over all frames consumed so far.

        Args:
          streams: the streams, in the order wanted in the output.
          final: True at the end of the utterances: terminates the streams (see
            :meth:`terminate`; no more chunks can be fed) and uses ``config.allow_partial``.
            False for partial results mid-stream: the lattice covers all frames but the last
            one consumed (which k2 uses to find final states), and if no state can be final
            every surviving state counts as final.

        Returns:
          FsaVec ``[utt][state][arc]``, see :class:`FastBeamSearchResult`.
        """
        check_streams(streams, len(streams), FastBeamSearchStream)
        if not streams:
            raise ValueError("streams is empty")
        allow_partial = self.config.allow_partial if final else True
        if final:
            self.terminate(streams)
        groups: dict[int, tuple[k2.RnntDecodingStreams, dict[int, int]]] = {}
        orphan_owner = self._orphan_owner([s for s in streams if s._owner is None], groups)
        positions: list[tuple[int, int]] = []  # (group key, index in owner) per stream
        for s in streams:
            owner, idx = s._owner if s._owner is not None else orphan_owner[id(s)]
            key = id(owner)
            if key not in groups:
                groups[key] = (owner, {})
            groups[key][1][idx] = s.num_frames + s.extra_frames
            positions.append((key, idx))
        return _format_groups(groups, positions, allow_partial)

    def _orphan_owner(self, orphans: list[FastBeamSearchStream],
                      groups: dict[int, tuple[k2.RnntDecodingStreams, dict[int, int]]]
                      ) -> dict[int, tuple[k2.RnntDecodingStreams, int]]:
        """Streams that never saw a frame get an owner over fresh k2 streams (the real stream
        is untouched) plus one extra stream given one dummy frame, because k2 formats only
        through a streams object that advanced; formatting 0 frames gives an empty lattice.
        Returns ``{id(stream): (owner, index)}``; the owner's group is added to ``groups``."""
        if not orphans:
            return {}
        fresh = [k2.RnntDecodingStream(s.graph) for s in orphans + orphans[:1]]
        dummy = k2.RnntDecodingStreams(fresh, self.k2_config)
        shape, _ = dummy.get_contexts()
        dummy.advance(
            torch.zeros(
                shape.tot_size(1), self.net.vocab_size, device=orphans[0].graph.device
            )
        )
        dummy.terminate_and_flush_to_streams()
        groups[id(dummy)] = (dummy, {len(orphans): 1})
        return {id(s): (dummy, i) for i, s in enumerate(orphans)}

    def results(
        self, streams: Sequence[FastBeamSearchStream], final: bool = True
    ) -> list[TransducerHypothesis]:
        """One-best hypothesis of each stream (see :meth:`lattice` for ``final``)."""
        lattice = self.lattice(streams, final)
        return one_best(lattice, [s.num_frames for s in streams])


def one_best(lattice: k2.Fsa, num_frames: Sequence[int]) -> list[TransducerHypothesis]:
    """Best path of each lattice of a transducer FsaVec as hypotheses.

    Args:
      lattice: FsaVec from :meth:`FastBeamSearch.lattice` (arc ``i`` of a path = frame ``i``).
        num_frames: frames of each utterance; utterances with 0 frames get ``([], [], 0.0)``
        whatever their lattice (empty for partial results).

    The tokens are the path's labels > 0, or, when the lattice has ``token_labels`` (icefall's
    partial lattices, see :class:`FastBeamSearchConfig`), its ``token_labels`` > 0.
    """
    best = k2.shortest_path(lattice, use_double_scores=True)
    scores = best.get_tot_scores(use_double_scores=True, log_semiring=False).tolist()
    shape = best.arcs.shape().remove_axis(1)  # [utt][arc]
    # A 1-element column view counts as contiguous to torch but not to k2 (stride 4): copy.
    source = best.token_labels if hasattr(best, "token_labels") else best.labels
    label_values = source.new_empty(source.shape)
    label_values.copy_(source)
    labels = k2.RaggedTensor(shape, label_values)
    frames = k2.RaggedTensor(shape, arc_frames(best))
    keep = label_values > 0
    tokens = ragged_select(labels, keep).tolist()
    times = ragged_select(frames, keep).tolist()
    out = []
    for i, n in enumerate(num_frames):
        if n == 0:
            out.append(TransducerHypothesis([], [], 0.0))
        else:
            out.append(TransducerHypothesis(tokens[i], times[i], float(scores[i])))
    return out


#: In icefall's layout (``decoder_tables=False``) a frame's decoder projection and joiner run
#: on at least this many rows: a float32 GEMM on CPU computes a batch of fewer rows with other
#: kernels (other last bits) than a larger one, where each row's bits do not depend on the
#: batch. icefall's batch on a frame holds at least one context per utterance, so from this
#: many utterances on k2dec may drop the utterances that ended (icefall advances them over
#: padding frames) and pad its smaller batches up to it with the same bits; with fewer,
#: it runs icefall's very batches (:meth:`FastBeamSearch._decode_icefall`).
ICEFALL_MIN_ROWS = 16
#: the most contexts whose rows :class:`_ContextRows` computes all at once on first use
#: (vocabulary 31 at context 2)
ALL_CONTEXTS_MAX = 1024


class _ContextRows:
    """Per-context rows of :class:`FastBeamSearch`'s icefall layout on batches of at least
    :data:`ICEFALL_MIN_ROWS` rows, computed once per context instead of on every frame: the
    projected decoder output (``decoder_proj`` of the decoder module's output, ``[J]``) and,
    with ILME, the log-probs of the joiner on a zero encoder frame (``[V]``). Each is
    computed in a batch of at least ``min_rows`` rows, where a float32 GEMM's rows have the
    bits they have in any such batch (icefall's per-frame batches included), so the
    lattices are bit for bit those of computing them on every frame.

    Args:
      net: the searcher's network (a joiner with projections).
      config: the search's options (``ilme_scale``, ``temperature``, ``blank_penalty``).
      max_size: contexts kept (:class:`~k2dec.transducer.DecoderCache`: emptied when full;
        ``max_size * (J + V)`` floats at most, ``J`` without ILME); 0 keeps none (every
        frame computes its rows, in the same batches of at least ``min_rows``). When every
        context (ids ``-1 .. V - 1`` in each position) fits, at most
        :data:`ALL_CONTEXTS_MAX` of them, all their rows are computed in one batch on first
        use and looked up by key (small vocabularies, where a search reaches most contexts
        and the per-frame cache bookkeeping would cost more than the rows).
      min_rows: the least rows of a batch.
    """

    def __init__(self, net: TransducerNet, config: FastBeamSearchConfig, max_size: int,
                 min_rows: int) -> None:
        self.net, self.config, self.min_rows = net, config, min_rows
        self.cache = (DecoderCache(net.vocab_size, net.context_size, max_size)
                      if max_size > 0 else None)
        self.ilme = config.ilme_scale != 0.0
        num_contexts = (net.vocab_size + 1) ** net.context_size
        #: every context's rows, by key (:meth:`DecoderCache.key`), when they fit
        self.every: torch.Tensor | None = None
        self.all_contexts = (self.cache is not None
                             and num_contexts <= min(max_size, ALL_CONTEXTS_MAX))

    def compute(self, contexts: torch.Tensor) -> torch.Tensor:
        """The rows ``[M, J (+ V)]`` of int64 contexts ``[M, c]`` (``M >= 1``)."""
        net, cfg, m = self.net, self.config, contexts.size(0)
        rows = _pad_rows(torch.arange(m, device=contexts.device), self.min_rows)
        if self.cache is None:
            raw = net.raw_decoder_out(contexts)
        else:  # the rows are cached here: no second cache of the module's rows
            net.decoder_rows += m
            with net._timer():
                raw = net._decoder_module(contexts)
        # the module computes each row on its own (any batch, the same bits): only the
        # projection and the joiner need the padded batch
        dec = net.project_decoder(raw.index_select(0, rows).unsqueeze(1))  # [M', 1, J]
        if not self.ilme:
            return dec[:m, 0]
        dec4 = dec.unsqueeze(1)
        ilme = log_probs_from_logits(net.logits4(torch.zeros_like(dec4), dec4), 0,
                                     cfg.temperature, cfg.blank_penalty)
        return torch.cat([dec[:m, 0], ilme[:m]], dim=1)

    def log_probs(self, contexts: torch.Tensor, frame: torch.Tensor, utt: torch.Tensor
                  ) -> torch.Tensor:
        """The log-probs ``[M, V]`` (ILME subtracted) of contexts (int ``[M, c]``, ``M >= 1``)
        on the projected frames ``frame`` ``[n, J]`` of their utterances ``utt`` (int
        ``[M]``): one gather of the contexts' rows and one of the frames, both padded to
        ``min_rows`` rows, and one joiner call."""
        net, cfg, m = self.net, self.config, contexts.size(0)
        if self.all_contexts:
            rows = self._every_context(contexts.device)
            ids = self.cache.key(contexts)
        elif self.cache is None:
            rows = self.compute(contexts.to(torch.int64))
            ids = torch.arange(m, device=contexts.device)
        else:
            ids = cached_row_ids(self.cache, contexts, self.compute)
            rows = self.cache.values
        got = rows.index_select(0, _pad_rows(ids, self.min_rows))  # [M', J (+ V)]
        j = got.size(1) - (net.vocab_size if self.ilme else 0)
        cur = frame.index_select(0, _pad_rows(utt, self.min_rows)).unsqueeze(1).unsqueeze(1)
        logits = net.logits4(cur, got[:, :j].unsqueeze(1).unsqueeze(1))[:m]
        log_probs = log_probs_from_logits(logits, 0, cfg.temperature, cfg.blank_penalty)
        return log_probs - cfg.ilme_scale * got[:m, j:] if self.ilme else log_probs


    def _every_context(self, device: torch.device) -> torch.Tensor:
        """The rows of every context, computed once, in the order of their keys."""
        if self.every is None or self.every.device != device:
            keys = torch.arange(self.cache.base ** self.cache.context_size, device=device)
            self.every = self.compute(self.cache.contexts_of(keys))
        return self.every


def _pad_rows(rows: torch.Tensor, min_rows: int) -> torch.Tensor:
    """``rows`` (int64 ``[M]``, ``M >= 1``) followed by copies of its first entry up to
    ``min_rows`` entries."""
    if rows.numel() >= min_rows:
        return rows
    return torch.cat([rows, rows[:1].expand(min_rows - rows.numel())])


def fast_beam_search(
    model: nn.Module,
    encoder_out: torch.Tensor,
    encoder_out_lens: torch.Tensor,
    decoding_graph: k2.Fsa | None = None,
    config: FastBeamSearchConfig | None = None,
) -> FastBeamSearchResult:
    """fast_beam_search over a padded batch: the lattices and their one-best hypotheses.

    Args:
      model: stateless transducer (``.decoder`` with ``blank_id == 0``, ``.joiner``).
      encoder_out: float ``[N, T, C]`` encoder output (not projected), ``N >= 1``.
      encoder_out_lens: int ``[N]`` valid frames per utterance.
      decoding_graph: single ``k2.Fsa`` on ``encoder_out.device``; default trivial graph.
      config: options; defaults to ``FastBeamSearchConfig()``.

    Returns:
      :class:`FastBeamSearchResult` (lattice, one-best hyps, the config).
    """
    search, streams = _search_batch(model, encoder_out, encoder_out_lens, decoding_graph,
                                    config)
    lattice = search.lattice(streams)
    hyps = one_best(lattice, [s.num_frames for s in streams])
    return FastBeamSearchResult(lattice=lattice, hyps=hyps, config=search.config)


def fast_beam_search_lattice(
    model: nn.Module,
    encoder_out: torch.Tensor,
    encoder_out_lens: torch.Tensor,
    decoding_graph: k2.Fsa | None = None,
    config: FastBeamSearchConfig | None = None,
) -> k2.Fsa:
    """:func:`fast_beam_search`'s lattice FsaVec ``[utt][state][arc]`` alone (no one-best
    hypotheses: for callers that sample, rescore or take their own best path). Same
    arguments."""
    search, streams = _search_batch(model, encoder_out, encoder_out_lens, decoding_graph,
                                    config)
    return search.lattice(streams)


def _search_batch(model: nn.Module, encoder_out: torch.Tensor, encoder_out_lens: torch.Tensor,
                  decoding_graph: k2.Fsa | None, config: FastBeamSearchConfig | None
                  ) -> tuple[FastBeamSearch, list[FastBeamSearchStream]]:
    """A searcher and one stream per utterance, decoded over the whole padded batch (in
    icefall's very batches when its layout applies to fewer than
    :data:`ICEFALL_MIN_ROWS` utterances)."""
    search = FastBeamSearch(model, decoding_graph, config)
    lens = check_encoder_out(encoder_out, encoder_out_lens, search.net)
    device = encoder_out.device
    streams = [search.new_stream(device) for _ in range(encoder_out.size(0))]
    if (search.icefall_layout and encoder_out.size(1) > 0
            and int((lens > 0).sum()) < ICEFALL_MIN_ROWS):
        search._decode_icefall(streams, encoder_out, lens)
    else:
        search._decode(streams, encoder_out, lens)
    return search, streams


def _format_groups(groups: dict[int, tuple[k2.RnntDecodingStreams, dict[int, int]]],
                   positions: list[tuple[int, int]], allow_partial: bool) -> k2.Fsa:
    """The lattices of every group's streams (each over its number of frames), in the order
    of ``positions`` (``(group key, index in owner)`` per stream)."""
    parts: list[k2.Fsa] = []
    offsets: dict[int, int] = {}
    total = 0
    for key, (owner, frames_by_idx) in groups.items():
        num_frames = [frames_by_idx.get(i, 0) for i in range(owner.num_streams)]
        parts.append(owner.format_output(num_frames, allow_partial=allow_partial))
        offsets[key] = total
        total += owner.num_streams
    lattice = parts[0] if len(parts) == 1 else k2.cat(parts)
    index = torch.tensor(
        [offsets[key] + idx for key, idx in positions],
        dtype=torch.int32,
        device=lattice.device,
    )
    if total == len(positions) and bool(
        (index == torch.arange(total, dtype=torch.int32, device=index.device)).all()
    ):
        return lattice
    return k2.index_fsa(lattice, index)
