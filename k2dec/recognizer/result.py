""":class:`RecognitionResult`: one utterance's hypothesis with its text, a thin layer over the
:class:`~k2dec.primitives.hypothesis.HypothesisRecord` a method returns."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..job import DecodeAssets, DecodeConfig
from ..job.outputs import CtmSettings, ctm_settings
from ..primitives.hypothesis import HypothesisRecord
from ..results import CtmWord, record_ctm_words

__all__ = ["RecognitionResult", "ResultMaker"]


@dataclass(frozen=True)
class RecognitionResult:
    """The hypothesis of one utterance.

    Attributes:
      id: an audio file's stem, as ``k2dec decode --audio-dir`` names it
        (:func:`k2dec.data.utterance_id`: ``spk1/utt7.FLAC`` -> ``utt7``), a waveform's
        position in the inputs (``"0"``, ``"1"``, ...), a cut's utterance id
        (:func:`k2dec.data.utterance_cuts`), a stream's name.
      text: the words joined by single spaces (``""`` when the utterance failed).
      words: the words.
      tokens: the token symbols (BPE pieces such as ``"▁THE"``) of the hypothesis, ``None``
        when the method yields only words.
      timestamps: per token, the time in seconds of the network output frame where it starts
        (CTC) or is emitted (transducer); ``None`` when the method has no token frames.
      timed_words: per word, its start and duration in seconds and its confidence in
        ``[0, 1]`` (what ``k2dec decode`` writes to CTM files); ``None`` when the method gives
        no frames and confidences for its words (``1best``, ``fast_beam_search``, ...; see
        the README's "Word times and confidences").
      record: the method's record (token / word ids, frames after subsampling, score,
        confidences), as ``k2dec decode`` writes it to ``results-*.jsonl``.
      error: why there is no hypothesis (too short, too long, an empty lattice, ...); ``""``
        when there is one.
      segments: ``(start, end)`` seconds of the segments a long recording was decoded in
        (times and frames are in the recording's clock); ``()`` when decoded whole.
    """

    id: str
    text: str
    words: tuple[str, ...]
    tokens: tuple[str, ...] | None
    timestamps: tuple[float, ...] | None
    timed_words: tuple[CtmWord, ...] | None
    record: HypothesisRecord
    error: str = ""
    segments: tuple[tuple[float, float], ...] = ()

    @property
    def confidences(self) -> tuple[float, ...] | None:
        """Per word, its confidence in ``[0, 1]`` (from :attr:`timed_words`), or ``None``."""
        if self.timed_words is None:
            return None
        return tuple(w.confidence for w in self.timed_words)

    @property
    def score(self) -> float | None:
        """The method's score of the hypothesis (:attr:`HypothesisRecord.score`)."""
        return self.record.score


class ResultMaker:
    """Turns records and their words into :class:`RecognitionResult` s for one set of assets
    (token symbols from the BPE model or the token table, times from the model's frame
    rate)."""

    def __init__(self, assets: DecodeAssets) -> None:
        model = assets.model
        self.ctm: CtmSettings = ctm_settings(
            assets, DecodeConfig(frame_shift=model.feature_config.frame_shift))
        self.frame_seconds = model.output_frame_shift
        self.symbol = _symbols(assets)

    def __call__(self, result_id: str, record: HypothesisRecord | None, words: list[str],
                 error: str = "", segments: tuple[tuple[float, float], ...] = ()
                 ) -> RecognitionResult:
        if record is None or error:
            return RecognitionResult(result_id, "", (), None, None, None,
                                     record or HypothesisRecord(error=error), error)
        tokens = timestamps = None
        if record.tokens is not None and self.symbol is not None:
            tokens = tuple(self.symbol(t) for t in record.tokens)
        if record.token_frames is not None:
            timestamps = tuple(round(f * self.frame_seconds, 6) for f in record.token_frames)
        timed = record_ctm_words({**record.to_json(), "text": words}, self.ctm.word_start,
                                 self.ctm.subsampling_factor, self.ctm.frame_shift)
        return RecognitionResult(result_id, " ".join(words), tuple(words), tokens, timestamps,
                                 tuple(timed) if timed is not None else None, record,
                                 segments=tuple(segments))


def _symbols(assets: DecodeAssets) -> Callable[[int], str] | None:
    """Token id -> symbol: the BPE model's pieces, else the token table's symbols."""
    if assets.sp is not None:
        return assets.sp.id_to_piece
    table = assets.tokens if assets.tokens is not None else (
        assets.lang.token_table if assets.lang is not None else None)
    return table.get if table is not None else None
