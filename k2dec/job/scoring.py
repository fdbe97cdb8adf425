"""Scoring a finished results file: WERs of every setting (icefall's files:
:func:`k2dec.results.save_results`), words compared in upper case as icefall scores."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..results import SCORING_NORMALIZATION, is_degenerate, save_results, scoring_words
from .config import DecodeSummary

__all__ = ["score_results", "scored_word", "scored_words"]

logger = logging.getLogger(__name__)


def _words(hyp: Any) -> list[str]:
    """The words of one setting in a results line (older files stored the word list)."""
    return hyp["text"] if isinstance(hyp, dict) else hyp


def scored_words(words: Sequence[str]) -> list[str]:
    """Words as they are scored (:func:`k2dec.results.scoring_words`): upper case, as icefall
    scores (a reference in another case than the vocabulary is not all wrong), punctuation at
    word edges removed (``Hello?`` and ``Oh,`` are not errors against ``HELLO`` and ``OH``)."""
    return scoring_words(words)


def scored_word(word: str) -> str:
    """One word as :func:`scored_words` scores it, but a word that is only punctuation stays
    (upper-cased) instead of being dropped: for per-word lists that must keep their length
    (a CTM's words and their confidences)."""
    return next(iter(scoring_words([word])), word.upper())


def score_results(records: Mapping[str, Mapping[str, Any]], path: Path, out_dir: Path,
                  method: str, test_set: str, rtf: float, suffix: str) -> DecodeSummary:
    """Write icefall's files (``recogs-``, ``errs-``, ``wer-summary-<test_set>[-<suffix>]``)
    in ``out_dir`` for the records of the results file ``path``, and sum them up."""
    failed = sorted(k for k, r in records.items() if r["status"] == "error")
    by_key: dict[str, list] = {}
    for cut_id in sorted(records):
        rec = records[cut_id]
        if rec["status"] != "ok" or rec.get("ref") is None:
            continue
        for key, hyp in rec["hyps"].items():
            by_key.setdefault(key, []).append((cut_id, scored_words(rec["ref"]),
                                               scored_words(_words(hyp))))
    if by_key and not any(ref for rows in by_key.values() for _, ref, _ in rows):
        logger.warning("%s: every reference is empty (silent recordings): the WER, errors "
                       "over reference words, is undefined; no WER is reported", test_set)
        by_key = {}
    note = _normalization_note(records, test_set)
    wers = save_results(out_dir, test_set, by_key, suffix=suffix, failed=failed,
                        num_cuts=len(records), note=note) if by_key else {}
    first = records[failed[0]]["error"] if failed else ""
    if failed:  # the summary has them; k2dec decode prints one line per method
        logger.info("%s: %d cuts could not be decoded (see %s): %s", test_set, len(failed),
                    path, ", ".join(failed[:10]))
    return DecodeSummary(method, test_set, wers, rtf, len(records), failed, path, first,
                         _degenerate(records))


def _normalization_note(records: Mapping[str, Mapping[str, Any]], test_set: str) -> str | None:
    """The summary's note (and a logged warning) when scoring changed reference words beyond
    their case (punctuation removed); None when it changed none (the summary as before)."""
    changed = [w for r in records.values() if r.get("ref") for w in r["ref"]
               if [w.upper()] != scoring_words([w])]
    if not changed:
        return None
    logger.warning("%s: %d reference words hold punctuation at their edges (e.g. %s): scored "
                   "as %s", test_set, len(changed), ", ".join(map(repr, changed[:5])),
                   SCORING_NORMALIZATION)
    return (f"words normalized before scoring: {SCORING_NORMALIZATION} ({len(changed)} "
            "reference words changed)")


def _degenerate(records: Mapping[str, Mapping[str, Any]]) -> int:
    """Decoded records whose configured setting (the first of ``hyps``) is degenerate in its
    words or its tokens (:func:`k2dec.results.is_degenerate`: "BOSSSS" repeats a token)."""
    return sum(_looping(next(iter(r["hyps"].values())))
               for r in records.values() if r["status"] == "ok" and r["hyps"])


def _looping(hyp: Any) -> bool:
    tokens = hyp.get("tokens", ()) if isinstance(hyp, dict) else ()
    return is_degenerate(_words(hyp)) or is_degenerate(tokens)
