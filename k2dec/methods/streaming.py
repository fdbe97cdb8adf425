"""Methods that also decode chunk by chunk (:attr:`~k2dec.methods.Method.streaming`).

A method registered with ``streaming=`` builds a :class:`StreamingSearch` for a transducer,
the method's resources and config: the search of the offline method (the same searcher class,
config, hotword graph or scorers) fed encoder frames as they come. Its final records are the
offline method's hypotheses (tokens, their frames and score) for the same encoder output;
token confidences, which the offline methods compute from the whole encoder output at the
end, are left out. Methods with a streaming search: ``greedy_search``,
``modified_beam_search`` and ``fast_beam_search``.

Protocol (one or more utterances; streams may be advanced in different batches)::

    search = method.streaming(model.transducer, resources, config, device)
    streams = [search.new_stream(device) for _ in range(N)]
    search.decode_chunk(streams, encoder_out, encoder_out_lens)   # [N, T, C], [N]
    partial = search.records(streams, final=False)
    final = search.records(streams, final=True)                   # no more chunks after this
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

import torch

from ..primitives.hypothesis import HypothesisRecord
from .records import from_transducer

__all__ = ["StreamingSearch"]


class StreamingSearch:
    """A streaming transducer searcher (:class:`k2dec.transducer.GreedySearch`,
    :class:`~k2dec.transducer.ModifiedBeamSearch`, :class:`~k2dec.transducer.FastBeamSearch`)
    returning :class:`~k2dec.primitives.hypothesis.HypothesisRecord` s.

    Args:
      searcher: an object with ``new_stream(device)``, ``decode_chunk(streams, encoder_out,
        encoder_out_lens)`` and ``results(streams[, final])``.
    """

    def __init__(self, searcher: Any) -> None:
        for name in ("new_stream", "decode_chunk", "results"):
            if not callable(getattr(searcher, name, None)):
                raise TypeError(f"searcher {type(searcher).__name__} has no {name}()")
        self.searcher = searcher
        self._takes_final = "final" in inspect.signature(searcher.results).parameters

    def new_stream(self, device: torch.device | str = "cpu") -> Any:
        """A fresh stream (one utterance's search state)."""
        return self.searcher.new_stream(torch.device(device))

    def decode_chunk(self, streams: Sequence[Any], encoder_out: torch.Tensor,
                     encoder_out_lens: torch.Tensor) -> None:
        """Advance ``streams`` over their next frames: ``encoder_out`` float ``[N, T, C]``
        (not projected), ``encoder_out_lens`` int ``[N]`` valid frames of each (after
        subsampling), each in ``[0, T]``."""
        self.searcher.decode_chunk(streams, encoder_out, encoder_out_lens)

    def records(self, streams: Sequence[Any], final: bool) -> tuple[HypothesisRecord, ...]:
        """The streams' best hypotheses so far (``final=False``: partial results, more chunks
        may follow) or at their end (``final=True``: fast_beam_search then terminates its
        streams, which take no further chunks)."""
        if self._takes_final:
            hyps = self.searcher.results(streams, final=final)
        else:
            hyps = self.searcher.results(streams)
        return from_transducer(hyps)
