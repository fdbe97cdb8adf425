"""Decoding one batch of features with one method: the method's inputs from the network
pass, a batch that raises retried cut by cut (:func:`decode_or_split`: one bad cut cannot sink
its neighbours), silent utterances given empty hypotheses (:func:`silenced`)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, fields, replace
from typing import Any

import torch

from ..data import loudest_frames, silence_energy
from ..methods import AedInputs, CtcInputs, Family, Method, TransducerInputs
from ..primitives.hypothesis import HypothesisRecord
from .assets import DecodeAssets, hypothesis_texts
from .config import DecodeConfig
from .encoder import JobEncoder

__all__ = ["Decoded", "decode_or_split", "silence_check", "silenced"]

logger = logging.getLogger(__name__)


def _inputs(method: Method, assets: DecodeAssets, feats: torch.Tensor, lens: torch.Tensor,
            refs: list[list[str]], encoder: JobEncoder):
    model = assets.model
    out = encoder(model, feats, lens)
    if method.family is Family.TRANSDUCER:
        ref_tokens = ([assets.sp.encode(" ".join(r)) for r in refs]
                      if assets.sp is not None else None)
        return TransducerInputs(model.transducer, out.encoder_out, out.encoder_out_lens,
                                ref_tokens=ref_tokens)
    if method.family is Family.AED:
        return AedInputs(out.memory, out.memory_lens, ctc_log_probs=out.ctc_log_probs)
    ref_words = None
    if method.needs_references and assets.lang is not None:  # oracles: words.txt ids
        table = assets.lang.word_table
        # without <UNK>, an id no hypothesis has (0 is epsilon, refused by the oracle)
        unk = table.get("<UNK>") if "<UNK>" in table else max(table.ids) + 1
        ref_words = [[table.get(w) if w in table else unk for w in r] for r in refs]
    return CtcInputs(out.ctc_log_probs, out.encoder_out_lens, ref_words=ref_words,
                     memory=out.memory, memory_lens=out.memory_lens, lattices=encoder.lattices)


#: Per utterance: ``{setting: (record, words)}`` and the failure reason (``""`` if fine).
Decoded = tuple[dict[str, tuple[HypothesisRecord, list[str]]], str]


def _decode_batch(method: Method, config: Any, assets: DecodeAssets, feats, lens, refs,
                  encoder: JobEncoder) -> list[Decoded]:
    """Decode one batch; per utterance its hypotheses by setting and its failure reason."""
    inputs = _inputs(method, assets, feats, lens, refs, encoder)
    with torch.no_grad():
        results = method(inputs, assets.resources, config)
    out: list[Decoded] = [({}, "") for _ in refs]
    for r in results:
        for i, (rec, words) in enumerate(zip(r.hyps, hypothesis_texts(r, assets))):
            out[i][0][r.key] = (rec, words)
            if rec.error and not out[i][1]:
                out[i] = (out[i][0], rec.error)
    return out


def decode_or_split(method: Method, config: Any, assets: DecodeAssets, feats, lens, refs,
                     encoder: JobEncoder) -> list[Decoded]:
    """:func:`_decode_batch`; if the batch raises, each cut alone (a cut that raises fails
    with the exception)."""
    try:
        return _decode_batch(method, config, assets, feats, lens, refs, encoder)
    except (ValueError, RuntimeError) as e:
        logger.warning("batch of %d failed (%s); decoding its cuts one by one", len(refs), e)
    out: list[Decoded] = []
    for i in range(len(refs)):
        try:
            out += _decode_batch(method, config, assets, feats[i:i + 1, : int(lens[i])],
                                 lens[i:i + 1], refs[i:i + 1], encoder)
        except (ValueError, RuntimeError) as err:
            out.append(({}, f"{type(err).__name__}: {err}"))
    return out


@dataclass(frozen=True)
class _Silence:
    """The frame energy below which an utterance is silent, and the note its records get."""

    energy: float
    note: str


def silence_check(assets: DecodeAssets, config: DecodeConfig) -> _Silence | None:
    if config.silence_db is None:
        return None
    energy = silence_energy(assets.model.feature_config, float(config.silence_db))
    return _Silence(energy, f"silent input: no frame is louder than white noise at "
                            f"{config.silence_db:g} dBFS (DecodeConfig.silence_db, "
                            "--silence-db); empty hypothesis")


def _empty_like(rec: HypothesisRecord, note: str) -> HypothesisRecord:
    """``rec`` with no tokens, words, frames or confidences (where it has them), no score and
    ``note``."""
    empty = {f.name: () for f in fields(rec) if isinstance(getattr(rec, f.name), tuple)}
    return replace(rec, **empty, score=None, error="", notes=note)


def silenced(decoded: list[Decoded], feats: torch.Tensor, lens: torch.Tensor,
              silence: _Silence | None) -> list[Decoded]:
    """Silent utterances' results as empty hypotheses (every setting the method gave them)."""
    if silence is None:
        return decoded
    quiet = (loudest_frames(feats, lens) < silence.energy).tolist()
    return [({key: (_empty_like(rec, silence.note), []) for key, (rec, _) in hyps.items()}, "")
            if q and hyps else (hyps, failed) for q, (hyps, failed) in zip(quiet, decoded)]
