"""Writing a job's files besides the results file's lines: a decoded utterance's line
(:func:`write_decoded`), the canonical results file (:func:`write_canonical`), the CTM files and
confidence summary (:func:`write_ctms`), and the names of the files a job wrote
(:func:`result_files`)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..lang import bpe_token_table, bpe_word_start_mask
from ..results import (
    Calibration,
    CtmWord,
    ResultWriter,
    confidence_metrics,
    normalized_cross_entropy,
    record_ctm_words,
    word_correctness,
    write_ctm,
    write_results,
)
from ..results.paths import check_component, replace_text
from .assets import DecodeAssets
from .batches import Decoded
from .config import DecodeConfig
from .resume import update_references
from .scoring import scored_word, scored_words

__all__ = ["CtmSettings", "ctm_settings", "ctm_words", "result_files", "word_start_mask",
           "write_canonical", "write_ctms", "write_decoded"]

logger = logging.getLogger(__name__)


def write_decoded(writer: ResultWriter, cut_id: str, ref: list[str], decoded: Decoded,
                  digest: str, extra: Mapping[str, Any] | None = None) -> None:
    """One utterance's line: its hypotheses by setting (the first setting's words as
    ``hyp``), or its failure; ``digest``: its cut's (:func:`~k2dec.job.resume.cut_digest`);
    ``extra``: further fields (a long utterance's segments, :mod:`k2dec.job.longform`)."""
    hyps, failed = decoded
    extra = dict(extra or {})
    if failed:
        writer.write_failure(cut_id, failed, input=digest, **extra)
        return
    first = next(iter(hyps.values()))[1]
    writer.write(cut_id, hyp=first, ref=ref,
                 hyps={key: {"text": words, **rec.to_json()} for key, (rec, words) in
                       hyps.items()}, input=digest, **extra)


def result_files(out_dir: Path, test_set: str, suffix: str,
                 records: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The names of the icefall, CTM and summary files of the settings in ``records`` that
    exist in ``out_dir``."""
    tail = f"-{suffix}" if suffix else ""
    keys = dict.fromkeys(k for r in records.values() if r["status"] == "ok"
                         and isinstance(r.get("hyps"), Mapping) for k in r["hyps"])
    names = [f"{kind}-{test_set}-{key}{tail}.{ext}" for key in keys
             for kind, ext in (("recogs", "txt"), ("errs", "txt"), ("ctm", "ctm"))]
    names += [f"wer-summary-{test_set}{tail}.txt", f"confidence-summary-{test_set}{tail}.txt"]
    return [n for n in names if (out_dir / n).is_file()]


def write_canonical(records: dict[str, dict[str, Any]], refs: Mapping[str, list[str] | None],
                    name: str, path: Path) -> None:
    """Write ``records`` to ``path`` in canonical form (one line per utterance, sorted by
    id): the utterances of ``refs`` (``{utterance id: reference words or None}``, the test
    set's) only, with their current references (logged, under the job's ``name``, when some
    changed: only the scores change)."""
    others = sorted(set(records) - set(refs))
    if others:
        logger.warning("%s: %d results of utterances not in the test set are left out of %s "
                       "(e.g. %s)", name, len(others), path, ", ".join(others[:5]))
    kept = {k: dict(v) for k, v in records.items() if k in refs}
    changed = update_references(kept, refs)
    if changed:
        logger.warning("%s: %d references changed since they were decoded: scoring them "
                       "again", name, changed)
    write_results(kept, path)


@dataclass(frozen=True)
class CtmSettings:
    """How a job turns result records into CTM words (:func:`k2dec.results.record_ctm_words`)
    and which settings' confidences it calibrates there (``{setting key: Calibration}``)."""

    word_start: list[bool] | None
    subsampling_factor: int
    frame_shift: float
    calibration: Mapping[str, Calibration] = field(default_factory=dict)


def ctm_settings(assets: DecodeAssets, config: DecodeConfig,
                 calibration: Mapping[str, Calibration] | None = None) -> CtmSettings:
    """The :class:`CtmSettings` of a job with these assets and config."""
    return CtmSettings(word_start_mask(assets), _subsampling(assets, config), config.frame_shift,
                       dict(calibration or {}))


def word_start_mask(assets: DecodeAssets) -> list[bool] | None:
    """Which token ids begin a word (for CTM words of token-level hypotheses):
    ``Resources.word_start``, else :func:`k2dec.lang.bpe_word_start_mask` of the BPE
    model's pieces or of the tokens.txt beside an icefall / sherpa-onnx model."""
    if assets.resources.word_start is not None:
        return assets.resources.word_start.tolist()
    table = bpe_token_table(assets.sp) if assets.sp is not None else assets.tokens
    return None if table is None else bpe_word_start_mask(table).tolist()


def _subsampling(assets: DecodeAssets, config: DecodeConfig) -> int:
    if config.subsampling_factor is not None:
        return config.subsampling_factor
    return int(assets.model.subsampling_factor)


def ctm_words(records: Mapping[str, Mapping[str, Any]], ctm: CtmSettings
              ) -> tuple[dict[str, dict[str, list[CtmWord]]],
                         dict[str, tuple[list[float], list[bool]]]]:
    """The CTM words of every setting of a results file's records (``{key: {cut_id:
    words}}``, raw confidences; settings without frames and confidences are left out) and,
    where the cuts have references, their confidences with whether each word is correct
    (``{key: (confidences, correct)}``)."""
    per_key: dict[str, dict[str, list[CtmWord]]] = {}
    scored: dict[str, tuple[list[float], list[bool]]] = {}
    for cut_id in sorted(records):
        rec = records[cut_id]
        if rec["status"] != "ok" or not isinstance(rec.get("hyps"), Mapping):
            continue
        for key, hyp in rec["hyps"].items():
            if not isinstance(hyp, Mapping):
                continue
            words = record_ctm_words(hyp, ctm.word_start, ctm.subsampling_factor,
                                     ctm.frame_shift)
            if words is None:
                continue
            per_key.setdefault(key, {})[cut_id] = words
            if rec.get("ref") is not None:
                confs, correct = scored.setdefault(key, ([], []))
                confs += [w.confidence for w in words]
                # one entry per CTM word: a word that is only punctuation stays (as itself)
                correct += word_correctness(scored_words(rec["ref"]),
                                            [scored_word(w.word) for w in words])
    return per_key, scored


def write_ctms(records: Mapping[str, Mapping[str, Any]], out_dir: Path, test_set: str,
                suffix: str, ctm: CtmSettings) -> None:
    """``ctm-<test_set>-<key>[-<suffix>].ctm`` for every setting whose hypotheses have frames
    and confidences (calibrated where ``ctm.calibration`` has the setting), and
    ``confidence-summary-<test_set>[-<suffix>].txt`` (words, % correct, mean confidence,
    NCE, AUC, calibration error of the CTM's confidences, the calibration ``a,b`` or ``-``,
    and the NCE of the raw confidences) where the cuts have references."""
    tail = f"-{suffix}" if suffix else ""
    per_key, scored = ctm_words(records, ctm)
    for key, utts in per_key.items():
        check_component(key, "setting key")
        cal = ctm.calibration.get(key)
        if cal is not None:
            utts = {cut: [replace(w, confidence=float(c)) for w, c in
                          zip(words, cal([w.confidence for w in words]))]
                    for cut, words in utts.items()}
        write_ctm(out_dir / f"ctm-{test_set}-{key}{tail}.ctm", utts)
    if scored:
        lines = ["setting\twords\tcorrect%\tmean_confidence\tNCE\tAUC\tECE\tcalibration\t"
                 "NCE_raw"]
        for key in sorted(scored):
            confs, correct = scored[key]
            cal = ctm.calibration.get(key)
            m = confidence_metrics(cal(confs).tolist() if cal is not None else confs, correct)
            raw = normalized_cross_entropy(confs, correct) if cal is not None else m.nce
            acc = 100.0 * m.num_correct / max(1, m.num_words)
            how = f"{cal.a:.4f},{cal.b:.4f}" if cal is not None else "-"
            lines.append(f"{key}\t{m.num_words}\t{acc:.2f}\t{m.mean_confidence:.4f}\t"
                         f"{m.nce:.4f}\t{m.auc:.4f}\t{m.ece:.4f}\t{how}\t{raw:.4f}")
        replace_text(out_dir / f"confidence-summary-{test_set}{tail}.txt",
                     "\n".join(lines) + "\n")
