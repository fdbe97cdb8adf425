"""What a test set must satisfy before any of it is decoded: one id per utterance
(:func:`k2dec.data.utterance_cuts`) and, for oracle methods, a reference per utterance."""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from lhotse import CutSet

from ..data import utterance_cuts
from ..methods import Method, get_method
from ..results.paths import MAX_TEST_SET_BYTES, check_component, path_component
from ..results.text import scoring_words

__all__ = ["as_method", "check_cuts", "check_names", "check_references",
           "unknown_characters", "vocabulary_characters", "warn_unknown_characters"]

logger = logging.getLogger(__name__)

#: Symbols of a token or word table that are markup, not text: ``<eps>``, ``<unk>``,
#: ``<blk>``, ``<sos/eos>``, ``#0``..., ``!SIL``-style and ``[noise]``-style symbols.
_MARKUP = re.compile(r"^(<.*>|#\d+|!.*|\[.*\])$")
#: The sentencepiece word-start mark.
_WORD_START = "\u2581"


def check_names(test_set: str, suffix: str = "") -> None:
    """Refuse a test-set name or file-name suffix that cannot be part of a file name in the
    out dir (``/``, ``\\``, whitespace, control characters, ``.``, ``..``, a test-set name over
    :data:`k2dec.results.paths.MAX_TEST_SET_BYTES` bytes); the message gives the name to use
    (:func:`k2dec.results.paths.path_component`, as ``k2dec decode --test-set`` encodes it).

    Raises:
      TypeError, ValueError: naming the argument and the value.
    """
    path_component(test_set, "test_set", MAX_TEST_SET_BYTES)
    check_component(test_set, "test_set")
    if suffix:
        check_component(suffix, "suffix")


def check_references(methods: Sequence[str | Method],
                     cuts: CutSet | Mapping[str, str | None]) -> None:
    """Refuse, before any decoding, methods that read references (oracle methods) when a
    cut has none: no supervision, or a supervision whose text is ``None``. An empty text is
    a reference (a silent recording's: an id alone on its line of a ``--text`` file), which
    the oracles compare with and the WER scores (its insertions).

    Args:
      methods: names or :class:`~k2dec.methods.Method` objects.
      cuts: the cuts (each utterance of :func:`k2dec.data.utterance_cuts` needs a reference),
        or ``{utterance id: reference text or None}`` of the utterances to come (e.g. the
        files of an audio folder, before their features are computed).

    Raises:
      ValueError: naming the method and the first utterances without a reference (or two
        utterances with one id, see :func:`k2dec.data.utterance_cuts`).
    """
    oracles = [m.name for m in map(as_method, methods) if m.needs_references]
    if not oracles:
        return
    if not isinstance(cuts, Mapping):
        cuts = {c.id: c.supervisions[0].text if c.supervisions else None
                for c in utterance_cuts(cuts)}
    missing = [utt for utt, text in cuts.items() if text is None]
    if missing:
        raise ValueError(
            f"method {oracles[0]!r} compares hypotheses with the references, but {len(missing)} "
            f"of {len(cuts)} cuts have none (e.g. {', '.join(missing[:5])}); give "
            "references "
            "(k2dec decode --text, or *.trans.txt files in the audio folder) or drop the method")


def check_cuts(methods: Sequence[str | Method], cuts: CutSet) -> CutSet:
    """Everything about a test set that can be refused before decoding: two utterances with one
    id (:func:`k2dec.data.utterance_cuts`) and, for oracle methods, utterances without a
    reference (:func:`check_references`).

    Returns:
      the utterances to decode (:func:`k2dec.data.utterance_cuts`).

    Raises:
      ValueError: naming the problem and some of the utterances concerned.
    """
    utterances = utterance_cuts(cuts)
    check_references(methods, utterances)
    return utterances


def as_method(method: str | Method) -> Method:
    return get_method(method) if isinstance(method, str) else method


def vocabulary_characters(assets: Any) -> tuple[frozenset[str], str] | None:
    """The characters the vocabulary of ``assets`` (a :class:`k2dec.job.DecodeAssets`) can
    spell, upper-cased as scoring compares (:func:`k2dec.results.text.scoring_words`), and
    the vocabulary's name: words.txt's words and the BPE model's pieces together when there
    are any, else the token table's symbols; markup symbols (``<unk>``, ``#0``, ``[noise]``)
    and the word-start mark left out. ``None`` without a vocabulary."""
    symbols, names = [], []
    lang = assets.lang
    if lang is not None and (lang.path / "words.txt").is_file():
        symbols += lang.word_table.symbols
        names.append(str(lang.path / "words.txt"))
    if assets.sp is not None:
        symbols += [assets.sp.id_to_piece(i) for i in range(assets.sp.get_piece_size())
                    if not (assets.sp.is_unknown(i) or assets.sp.is_control(i))]
        names.append("the BPE model's pieces")
    if not symbols:
        tokens = assets.tokens if assets.tokens is not None else (
            lang.token_table if lang is not None and (lang.path / "tokens.txt").is_file()
            else None)
        if tokens is None:
            return None
        symbols, names = list(tokens.symbols), ["tokens.txt"]
    chars = {c.upper() for s in symbols if not _MARKUP.match(s) for c in s}
    return frozenset(chars - {_WORD_START}), " and ".join(names)


def unknown_characters(references: Sequence[str], known: frozenset[str]) -> Counter[str]:
    """``{character: occurrences}`` of the characters of ``references`` (texts; words as
    :func:`k2dec.results.text.scoring_words` leaves them) that are not in ``known``."""
    found: Counter[str] = Counter()
    for text in references:
        for word in scoring_words(text.split()):
            found.update(c for c in word if c not in known)
    return found


def warn_unknown_characters(assets: Any, utterances: CutSet, name: str) -> Counter[str]:
    """Warn (logged, once for the test set ``name``) when the references of ``utterances``
    hold characters the vocabulary lacks (:func:`vocabulary_characters`), after scoring's
    normalization (case and the punctuation at word edges do not count): the model can never
    output the words that hold them, so the WER counts each as an error. The message gives
    how many characters, their occurrences and words, and a few examples. Returns the
    characters found with their counts (empty without references or a vocabulary)."""
    vocab = vocabulary_characters(assets)
    texts = [s.text for c in utterances for s in c.supervisions[:1] if isinstance(s.text, str)]
    if vocab is None or not texts:
        return Counter()
    known, vocabulary = vocab
    found = unknown_characters(texts, known)
    if found:
        words = list(dict.fromkeys(w for t in texts for w in scoring_words(t.split())
                                   if any(c in found for c in w)))
        logger.warning("%s: the references hold %d characters not in %s (%d times, in %d "
                       "words; e.g. %s in %s): the model cannot output them, so the WER counts "
                       "these words as errors", name, len(found), vocabulary,
                       sum(found.values()), len(words),
                       ", ".join(repr(c) for c, _ in found.most_common(5)),
                       ", ".join(words[:5]))
    return found
