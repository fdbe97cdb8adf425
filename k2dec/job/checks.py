"""What a test set must satisfy before any of it is decoded: one id per utterance
(:func:`k2dec.data.utterance_cuts`) and, for oracle methods, a reference per utterance."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from lhotse import CutSet

from ..data import utterance_cuts
from ..methods import Method, get_method
from ..results.paths import MAX_TEST_SET_BYTES, check_component, path_component

__all__ = ["as_method", "check_cuts", "check_names", "check_references"]


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
