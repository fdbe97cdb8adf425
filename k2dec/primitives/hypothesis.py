"""The one typed record of a decoded utterance: :class:`HypothesisRecord`, which every method
returns and the result files store."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

__all__ = ["HypothesisRecord", "joined_notes"]


@dataclass(frozen=True)
class HypothesisRecord:
    """One utterance's hypothesis as a decoding method returns it, carried unchanged into the
    result files (like torchaudio's ``CTCHypothesis``, with ids instead of strings: the job maps
    ids to text with the lang dir or BPE model).

    Frames count the network's output frames (after subsampling), from 0.

    Attributes:
      tokens: token ids, or ``None`` when the method yields only words (e.g. n-best by words).
      words: word ids, or ``None`` when the method yields only tokens.
      token_frames: per token, the frame where it starts (CTC) or is emitted (transducer);
        ``None`` when the method does not track alignments.
      word_frames: per word, the frame of the arc emitting it (its start); ``None`` if unknown.
      word_durations: per word, its length in frames; ``None`` if unknown.
      score: the method's score of this hypothesis (log domain; what it adds up is documented
        by each method), ``None`` when the method has no single score (e.g. an oracle).
      token_confidences, word_confidences: per token / word, a confidence in ``[0, 1]``;
        ``None`` when not computed.
      error: why the utterance has no hypothesis (empty lattice, ...); ``""`` when it has one.
      notes: what happened to the utterance that the hypothesis does not show, e.g. that its
        lattice was pruned to fit the memory bounds; ``""`` when nothing did.

    Raises:
      ValueError: a per-token or per-word field whose length differs from ``tokens`` /
        ``words``.
    """

    tokens: tuple[int, ...] | None = None
    words: tuple[int, ...] | None = None
    token_frames: tuple[int, ...] | None = None
    word_frames: tuple[int, ...] | None = None
    word_durations: tuple[int, ...] | None = None
    score: float | None = None
    token_confidences: tuple[float, ...] | None = None
    word_confidences: tuple[float, ...] | None = None
    error: str = ""
    notes: str = ""

    def __post_init__(self) -> None:
        for name, of in (("token_frames", "tokens"), ("token_confidences", "tokens"),
                         ("word_frames", "words"), ("word_durations", "words"),
                         ("word_confidences", "words")):
            per, base = getattr(self, name), getattr(self, of)
            if per is not None and (base is None or len(per) != len(base)):
                raise ValueError(f"HypothesisRecord.{name} needs one value per entry of {of}, "
                                 f"got {per!r} for {of}={base!r}")

    @classmethod
    def failure(cls, error: str, tokens: bool, words: bool) -> HypothesisRecord:
        """The record of an utterance without a hypothesis: empty ``tokens`` / ``words`` where
        the method yields them (``None`` elsewhere) and the reason."""
        if not error:
            raise ValueError("a failure needs its reason")
        return cls(tokens=() if tokens else None, words=() if words else None, error=error)

    def to_json(self) -> dict[str, Any]:
        """The fields that are set, as JSON-ready lists and numbers (``None`` fields and an
        empty ``error`` or ``notes`` are left out)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None or (f.name in ("error", "notes") and not value):
                continue
            out[f.name] = list(value) if isinstance(value, tuple) else value
        return out


def joined_notes(*notes: str) -> str:
    """The non-empty ``notes`` of one record (:attr:`HypothesisRecord.notes`) joined with
    ``"; "`` (``""`` when none)."""
    return "; ".join(n for n in notes if n)
