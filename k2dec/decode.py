"""The decode job behind ``k2dec decode`` and the recipes: cuts -> model -> a named method ->
per-cut JSONL results (resumable) -> icefall result files, WER and real-time factor.

Every cut ends up in the results file: decoded, or recorded as failed with the reason (a
batch that raises is retried cut by cut so that one bad cut cannot sink its neighbours; an
utterance whose lattice is empty is a failure with the lattice report's reason). A rerun skips
the cuts already recorded, so a killed job resumes where it stopped. Under ``torchrun`` each
rank decodes every ``world_size``-th cut into its own shard file; rank 0 merges the shards.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from lhotse import CutSet
from tqdm import tqdm

from .data import make_dataloader
from .lang import LangDir
from .methods import (
    AedInputs,
    CtcInputs,
    Family,
    Method,
    MethodResult,
    Resources,
    TransducerInputs,
    get_method,
)
from .results import (
    ResultWriter,
    RtfTimer,
    bpe_ids_to_words,
    merge_results,
    read_results,
    save_results,
    token_ids_to_words,
    word_ids_to_words,
)

__all__ = [
    "DecodeConfig",
    "DecodeAssets",
    "DecodeSummary",
    "load_assets",
    "decode_cuts",
    "check_references",
    "shard_cuts",
    "dist_info",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class DecodeConfig:
    """Settings of a decode job.

    Attributes:
      max_duration: seconds of audio per batch; a longer cut is recorded as failed, since
        memory grows with the square of a cut's length (``k2dec decode`` with the shipped
        model peaks at about 0.5 GB for one 60 s cut, 2.2 GB for 300 s).
      num_buckets: duration buckets of the sampler.
      retry_failed: decode again cuts a previous run recorded as failed.
      world_size, rank: sharding (``torchrun``); rank ``r`` decodes cuts ``r, r + W, ...``.
    """

    max_duration: float = 200.0
    num_buckets: int = 10
    retry_failed: bool = False
    world_size: int = 1
    rank: int = 0

    def __post_init__(self) -> None:
        if not 0 <= self.rank < self.world_size:
            raise ValueError(f"need 0 <= rank < world_size, got rank={self.rank}, "
                             f"world_size={self.world_size}")


@dataclass
class DecodeAssets:
    """What decoding needs besides the cuts.

    Attributes:
      model: the acoustic model (:class:`k2dec.model.AcousticModel`: k2dec's joint model, an
        icefall TorchScript export or an ONNX export); methods need what it has.
      lang: the lang dir (tokens.txt/words.txt, graphs); ``None`` for token-only methods.
      sp: the sentencepiece model turning token ids into words.
      resources: graphs / LMs / attention decoder for the methods.
      tokens: the token table turning token ids into words when there is no ``sp``
        (the lang dir's, else the one found beside the model).
    """

    model: Any
    lang: LangDir | None
    sp: Any
    resources: Resources = field(default_factory=Resources)
    tokens: Any = None


@dataclass(frozen=True)
class DecodeSummary:
    """Outcome of :func:`decode_cuts` for one test set and method.

    Attributes:
      wers: ``{key: WER %}`` (one key per setting of the method).
      rtf: decode seconds / audio seconds of the cuts decoded in this run (NaN if none).
      num_cuts: cuts in the test set (this rank's shard).
      failed: ids of cuts that could not be decoded (with reasons in the JSONL file).
      results_path: the JSONL file.
    """

    wers: dict[str, float]
    rtf: float
    num_cuts: int
    failed: list[str]
    results_path: Path


def dist_info() -> tuple[int, int]:
    """``(world_size, rank)`` from torchrun's environment (``(1, 0)`` outside torchrun)."""
    return int(os.environ.get("WORLD_SIZE", "1")), int(os.environ.get("RANK", "0"))


def shard_cuts(cuts: CutSet, world_size: int, rank: int) -> CutSet:
    """Every ``world_size``-th cut starting at ``rank`` (deterministic, order kept)."""
    return CutSet.from_cuts(c for i, c in enumerate(cuts) if i % world_size == rank)


def check_references(method_names: Sequence[str], cuts: CutSet) -> None:
    """Refuse, before any decoding, methods that read references (oracle methods) when a
    cut has none (an empty supervision text).

    Raises:
      ValueError: naming the method and the first cuts without a reference.
    """
    oracles = [m for m in method_names if get_method(m).needs_references]
    if not oracles:
        return
    missing = [c.id for c in cuts if not any((s.text or "").strip() for s in c.supervisions)]
    if missing:
        raise ValueError(
            f"method {oracles[0]!r} compares hypotheses with the references, but {len(missing)} "
            f"of {len(cuts)} cuts have none (e.g. {', '.join(missing[:5])}); give references "
            "(k2dec decode --text, or *.trans.txt files in the audio folder) or drop the method")


def load_assets(
    model_path: str | Path,
    lang_dir: str | Path | None = None,
    bpe_model: str | Path | None = None,
    lm_paths: dict[str, str | Path] | None = None,
    device: torch.device | str = "cpu",
    feature_overrides: dict[str, Any] | None = None,
) -> DecodeAssets:
    """Load a model (any :func:`k2dec.model.load_model` recognises), its lang dir graphs
    (``HLG.pt``, ``LG.pt``, ``G_4_gram.pt``, H built from tokens.txt), the BPE model and
    neural LMs, all on ``device``.

    Tokens: the lang dir's ``tokens.txt`` and ``bpe.model`` when given, else a
    ``tokens.txt`` / ``bpe.model`` beside the model. ``feature_overrides`` (FeatureConfig
    field names) change the features the model expects (default: icefall's, or what an ONNX
    export declares), for a model trained otherwise."""
    from .graph import build_ctc_topo, load_graph
    from .lang import load_bpe_model
    from .model import find_tokens, load_model

    device = torch.device(device)
    lang = LangDir(Path(lang_dir)) if lang_dir is not None else None
    tokens = lang.path / "tokens.txt" if lang is not None and (
        lang.path / "tokens.txt").is_file() else None
    model = load_model(model_path, device, tokens=tokens)
    if feature_overrides:
        model.set_feature_config(model.feature_config.override(**feature_overrides))
    if bpe_model is None:
        beside = find_tokens(model_path)
        for folder in ([lang.path] if lang is not None else []) + (
                [beside.parent] if beside is not None else []):
            if (folder / "bpe.model").is_file():
                bpe_model = folder / "bpe.model"
                break
    sp = load_bpe_model(bpe_model) if bpe_model is not None else None
    res = Resources(attention_decoder=model.attention_decoder)
    if lang is not None:
        res.graphs["H"] = build_ctc_topo(lang.max_token_id, device=device)
        for name, file in (("HLG", "HLG.pt"), ("LG", "LG.pt"), ("G", "G_4_gram.pt")):
            path = lang.path / file
            if path.is_file():
                res.graphs[name] = load_graph(path, lang.token_table, lang.word_table, device)
    if lm_paths:
        from .lm.train import load_lm

        for name, path in lm_paths.items():
            res.lms[name] = load_lm(path).to(device).eval()
    return DecodeAssets(model=model, lang=lang, sp=sp, resources=res, tokens=model.tokens)


def _batch_arrays(batch: dict) -> tuple[torch.Tensor, torch.Tensor, list[str], list[list[str]]]:
    sup = batch["supervisions"]
    idx = sup["sequence_idx"].to(torch.int64)
    feats = batch["inputs"][idx]
    lens = sup["num_frames"].to(torch.int64)
    cut_ids = [c.id for c in sup["cut"]]
    refs = [t.split() for t in sup["text"]]
    return feats, lens, cut_ids, refs


def _inputs(method: Method, assets: DecodeAssets, feats: torch.Tensor, lens: torch.Tensor,
            refs: list[list[str]]):
    model = assets.model
    out = model.encode(feats, lens)
    if method.family is Family.TRANSDUCER:
        ref_tokens = ([assets.sp.encode(" ".join(r)) for r in refs]
                      if assets.sp is not None else None)
        return TransducerInputs(model.transducer, out.encoder_out, out.encoder_out_lens,
                                ref_tokens=ref_tokens)
    if method.family is Family.AED:
        return AedInputs(out.memory, out.memory_lens, ctc_log_probs=out.ctc_log_probs)
    ref_words = None
    if assets.lang is not None:
        table = assets.lang.word_table
        unk = table.get("<UNK>") if "<UNK>" in table else 0
        ref_words = [[table.get(w) if w in table else unk for w in r] for r in refs]
    return CtcInputs(out.ctc_log_probs, out.encoder_out_lens, ref_words=ref_words,
                     memory=out.memory, memory_lens=out.memory_lens)


def _to_words(result: MethodResult, assets: DecodeAssets) -> list[list[str]]:
    if result.words is not None:
        if assets.lang is None:
            raise ValueError("word hypotheses need the lang dir (words.txt)")
        return word_ids_to_words(result.words, assets.lang.word_table)
    if assets.sp is not None:
        return bpe_ids_to_words(result.tokens, assets.sp)
    tokens = assets.tokens if assets.tokens is not None else (
        assets.lang.token_table if assets.lang is not None else None)
    if tokens is None:
        raise ValueError("token hypotheses need a bpe.model or tokens.txt (--lang-dir, or "
                         "beside the model) to become words")
    return token_ids_to_words(result.tokens, tokens)


def _decode_batch(method: Method, config: Any, assets: DecodeAssets, feats, lens, refs
                  ) -> tuple[list[dict[str, list[str]]], list[str]]:
    """Hypotheses ``[{key: words}]`` and failure reasons (``""`` if fine) per utterance."""
    inputs = _inputs(method, assets, feats, lens, refs)
    with torch.no_grad():
        results = method(inputs, assets.resources, config)
    n = len(refs)
    hyps: list[dict[str, list[str]]] = [{} for _ in range(n)]
    failed = [""] * n
    for r in results:
        words = _to_words(r, assets)
        for i in range(n):
            hyps[i][r.key] = words[i]
            if r.failed[i] and not failed[i]:
                failed[i] = r.failed[i]
    return hyps, failed


def decode_cuts(
    assets: DecodeAssets,
    cuts: CutSet,
    method_name: str,
    out_dir: str | Path,
    test_set: str,
    method_config: Any = None,
    config: DecodeConfig = DecodeConfig(),  # noqa: B008 (frozen)
    suffix: str = "",
    failed: Mapping[str, str] | None = None,
) -> DecodeSummary:
    """Decode ``cuts`` with one method, resuming ``out_dir/{method}/results-{test_set}.jsonl``
    (per-rank shard files under torchrun), then write icefall result files for every setting.

    Args:
      failed: ``{cut_id: reason}`` of utterances that never became cuts (e.g. unreadable
        audio files, :attr:`k2dec.data.AudioDirCuts.failures`); they are recorded as failed
        cuts of the test set (by rank 0 under torchrun).

    Returns:
      :class:`DecodeSummary` (on ranks > 0 the WERs are empty: rank 0 merges and scores).

    Raises:
      ValueError: an oracle method and a cut without a reference (:func:`check_references`).
    """
    method = get_method(method_name)
    check_references([method_name], cuts)
    if not assets.model.supports(method):
        raise ValueError(f"method {method_name!r} ({method.family.value}) needs what this "
                         f"model lacks: {assets.model.describe()}")
    method_config = method.default_config() if method_config is None else method_config
    out_dir = Path(out_dir) / method_name
    shard = f".rank{config.rank}" if config.world_size > 1 else ""
    path = out_dir / f"results-{test_set}{shard}.jsonl"
    cuts = shard_cuts(cuts, config.world_size, config.rank) if config.world_size > 1 else cuts
    failed = dict(failed or {}) if config.rank == 0 else {}
    total = len(cuts) + len(failed)
    timer = RtfTimer()
    frames_per_second = assets.model.feature_config.frames_per_second
    with ResultWriter(path, retry_failed=config.retry_failed) as writer:
        for cut_id, reason in failed.items():
            if cut_id not in writer:
                writer.write_failure(cut_id, reason)
        min_frames = assets.model.min_input_frames
        todo = []
        for c in cuts:
            if c.id in writer:
                continue
            if c.num_frames is not None and c.num_frames < min_frames:
                writer.write_failure(c.id, f"too short: {c.num_frames} feature frames, the "
                                           f"model needs at least {min_frames}")
                continue
            if c.duration > config.max_duration:
                # a batch holds at most max_duration seconds: this bounds memory (the
                # encoder's attention grows with the square of the length)
                writer.write_failure(c.id, f"too long: {c.duration:.1f} s of audio, more than "
                                           f"max_duration={config.max_duration:g} s per batch; "
                                           "raise max_duration (--max-duration) or split it")
                continue
            todo.append(c)
        todo = CutSet.from_cuts(todo)
        logger.info("%s/%s: %d cuts, %d to decode", test_set, method_name, total, len(todo))
        if len(todo):
            loader = make_dataloader(todo, config.max_duration, shuffle=False,
                                     num_buckets=config.num_buckets, world_size=1, rank=0)
            for batch in tqdm(loader, desc=f"{test_set} {method_name}", unit="batch"):
                feats, lens, cut_ids, refs = _batch_arrays(batch)
                audio = float(lens.sum()) / frames_per_second
                start = time.perf_counter()
                try:
                    per_utt = [_decode_batch(method, method_config, assets, feats, lens, refs)]
                    spans = [(0, len(cut_ids))]
                except (ValueError, RuntimeError) as e:
                    logger.warning("batch of %d failed (%s); decoding its cuts one by one",
                                   len(cut_ids), e)
                    per_utt, spans = [], []
                    for i in range(len(cut_ids)):
                        try:
                            per_utt.append(_decode_batch(method, method_config, assets,
                                                         feats[i:i + 1, : int(lens[i])],
                                                         lens[i:i + 1], refs[i:i + 1]))
                        except (ValueError, RuntimeError) as err:
                            per_utt.append(([{}], [f"{type(err).__name__}: {err}"]))
                        spans.append((i, i + 1))
                timer.add(time.perf_counter() - start, audio)
                for (lo, hi), (hyps, failed) in zip(spans, per_utt):
                    for j, i in enumerate(range(lo, hi)):
                        if failed[j]:
                            writer.write_failure(cut_ids[i], failed[j])
                        else:
                            first = next(iter(hyps[j].values()))
                            writer.write(cut_ids[i], hyp=first, ref=refs[i] or None,
                                         hyps=hyps[j])
    rtf = timer.rtf if timer.audio_seconds > 0 else float("nan")
    if config.world_size > 1:
        _barrier()  # every shard file is complete past this point
        if config.rank != 0:
            return DecodeSummary({}, rtf, total, [], path)
        path = out_dir / f"results-{test_set}.jsonl"
        merge_results([out_dir / f"results-{test_set}.rank{r}.jsonl"
                       for r in range(config.world_size)], path)
    return _score(path, out_dir, test_set, rtf, suffix)


def _barrier() -> None:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.barrier()


def _score(path: Path, out_dir: Path, test_set: str, rtf: float, suffix: str) -> DecodeSummary:
    records = read_results(path)
    failed = sorted(k for k, r in records.items() if r["status"] == "error")
    by_key: dict[str, list] = {}
    for cut_id in sorted(records):
        rec = records[cut_id]
        if rec["status"] != "ok" or rec.get("ref") is None:
            continue
        for key, hyp in rec["hyps"].items():
            by_key.setdefault(key, []).append((cut_id, rec["ref"], hyp))
    wers = save_results(out_dir, test_set, by_key, suffix=suffix) if by_key else {}
    if failed:
        logger.warning("%s: %d cuts could not be decoded (see %s): %s", test_set, len(failed),
                       path, ", ".join(failed[:10]))
    return DecodeSummary(wers, rtf, len(records), failed, path)
