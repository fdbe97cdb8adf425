"""Train an RNN or Transformer LM on a text file of sentences, with resumable checkpoints.

Library function :func:`train_lm` (typed config in, checkpoints out) and a thin argparse
:func:`main` behind the ``k2dec train-lm`` command::

    k2dec train-lm --text data/lm/train.txt --bpe-model data/lang_bpe_500/bpe.model \\
        --exp-dir exp/rnn_lm --model-type rnn --num-steps 20000 --batch-size 400

Rerunning the same command resumes from the newest ``checkpoint-<step>.pt`` in ``--exp-dir``
(model, optimizer, step and the torch RNG of the training device, so a resumed run repeats an
uninterrupted one). :func:`~k2dec.lm.load_lm` rebuilds a model from any of these checkpoints.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import k2
import torch
from tqdm import tqdm

from ..lang import bpe_token_table, load_bpe_model, token_inventory_digest
from ..lm.base import NeuralLM, check_positive_ints
from ..lm.checkpoint import MODEL_TYPES, LmConfig, build_lm
from ..lm.data import encode_text_file
from ..lm.perplexity import PerplexityResult, compute_perplexity
from ..lm.rnn import RnnLM, RnnLmConfig
from ..lm.transformer import TransformerLmConfig
from .checkpoints import latest_checkpoint, prune_checkpoints

__all__ = [
    "TrainLmConfig",
    "TrainLmResult",
    "epoch_batches",
    "main",
    "train_lm",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrainLmConfig:
    """What :func:`train_lm` trains and where it writes.

    Attributes:
      text: training text, one sentence per line (UTF-8; blank lines skipped).
      bpe_model: sentencepiece model (icefall layout: ``<blk>`` 0, ``<sos/eos>`` 1, ``<unk>`` 2);
        its vocabulary size replaces ``model.vocab_size``.
      exp_dir: where ``checkpoint-<step>.pt`` files go; training resumes from the newest one.
      model: an :class:`RnnLmConfig` or :class:`TransformerLmConfig`.
      valid_text: optional held-out text whose perplexity is logged at each checkpoint.
      num_steps: optimizer steps in total (a resumed run continues up to it).
      batch_size: sentences per step.
      lr, weight_decay: Adam's.
      grad_clip: max gradient 2-norm (``0`` disables clipping).
      max_sentence_length: sentences with more tokens are dropped (and counted in the log).
      save_every_n: write a checkpoint every this many steps (and at the last step).
      keep_last_k: keep this many newest checkpoints (``0`` keeps all).
      log_interval: log the mean training loss every this many steps.
      seed: seeds initialization and the per-epoch sentence order.
      device: torch device to train on.
      progress: show a tqdm bar over steps.
    """

    text: Path
    bpe_model: Path
    exp_dir: Path
    model: LmConfig = field(default_factory=RnnLmConfig)
    valid_text: Path | None = None
    num_steps: int = 10000
    batch_size: int = 400
    lr: float = 1e-3
    weight_decay: float = 1e-6
    grad_clip: float = 5.0
    max_sentence_length: int = 200
    save_every_n: int = 1000
    keep_last_k: int = 5
    log_interval: int = 100
    seed: int = 42
    device: str = "cpu"
    progress: bool = True


@dataclass(frozen=True)
class TrainLmResult:
    """What a :func:`train_lm` call did.

    Attributes:
      checkpoint: the newest checkpoint (``exp_dir/checkpoint-<num_steps>.pt``).
      start_step: the step the call started from (``> 0`` when it resumed).
      losses: the training loss (mean negative log-prob per token, ``eos`` included) of each
        step this call ran, in order.
      valid: the validation perplexity of the final model, when ``valid_text`` is given.
    """

    checkpoint: Path
    start_step: int
    losses: list[float]
    valid: PerplexityResult | None = None


def _check_train_config(config: TrainLmConfig) -> None:
    if not isinstance(config, TrainLmConfig):
        raise TypeError(f"config must be a TrainLmConfig, got {type(config).__name__}")
    if not isinstance(config.model, RnnLmConfig | TransformerLmConfig):
        raise TypeError(
            "config.model must be an RnnLmConfig or TransformerLmConfig, got "
            f"{type(config.model).__name__}"
        )
    check_positive_ints(config, ("num_steps", "batch_size", "save_every_n", "log_interval",
                                 "max_sentence_length"))
    if not isinstance(config.keep_last_k, int) or config.keep_last_k < 0:
        raise ValueError(f"config.keep_last_k must be an int >= 0, got {config.keep_last_k!r}")
    for name in ("lr", "weight_decay", "grad_clip"):
        value = getattr(config, name)
        if not math.isfinite(value) or value < 0 or (name == "lr" and value == 0):
            raise ValueError(f"config.{name} must be finite and {'>' if name == 'lr' else '>='} 0,"
                             f" got {value!r}")


def _state_dict_config(config: TrainLmConfig) -> dict:
    out = dataclasses.asdict(config)
    return {k: str(v) if isinstance(v, Path) else v for k, v in out.items()}


def train_lm(config: TrainLmConfig) -> TrainLmResult:
    """Train (or resume training) an LM on ``config.text``; see :class:`TrainLmConfig`.

    Each step takes a batch of at most ``batch_size`` sentences (:func:`epoch_batches`, seeded by
    ``seed + epoch``), scores them with :meth:`~k2dec.lm.NeuralLM.score_sequences` and takes an
    Adam step on the mean negative log-prob per token (``eos`` included).
    """
    _check_train_config(config)
    exp_dir = Path(config.exp_dir)
    device = torch.device(config.device)
    sp = load_bpe_model(config.bpe_model)
    vocab_size = sp.get_piece_size()
    model_config = config.model
    if model_config.vocab_size != vocab_size:
        logger.info("vocab_size %d -> %d (from %s)", model_config.vocab_size, vocab_size,
                    config.bpe_model)
        model_config = dataclasses.replace(model_config, vocab_size=vocab_size)
    tokens = _training_sentences(config, sp)

    torch.manual_seed(config.seed)
    model = build_lm(model_config).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr,
                                 weight_decay=config.weight_decay)
    resume = latest_checkpoint(exp_dir)
    step = 0 if resume is None else _resume(resume, model, optimizer, model_config, device)
    exp_dir.mkdir(parents=True, exist_ok=True)
    logger.info(
        "training a %s LM (%d parameters) on %d sentences, %d tokens; %d steps per epoch",
        model.model_type, sum(p.numel() for p in model.parameters()), tokens.dim0,
        tokens.numel(), math.ceil(tokens.dim0 / config.batch_size),
    )
    valid_tokens = None if config.valid_text is None else encode_text_file(config.valid_text, sp)
    run = _TrainingRun(config, model_config, model, optimizer, tokens, valid_tokens,
                       token_inventory_digest(bpe_token_table(sp), vocab_size))
    end_step = run.train(step, resume)
    model.eval()
    if valid_tokens is not None and run.valid is None:  # resumed at num_steps: nothing ran
        run.valid = _validate(model, valid_tokens, config.batch_size, end_step)
    if run.last is None:  # num_steps >= 1: a checkpoint exists at num_steps
        raise RuntimeError("training ended without a checkpoint")
    return TrainLmResult(checkpoint=run.last, start_step=step, losses=run.losses,
                         valid=run.valid)


def _training_sentences(config: TrainLmConfig, sp) -> k2.RaggedTensor:
    """The training text as int32 ragged ``[sentence][token]``, without sentences longer than
    ``config.max_sentence_length`` tokens."""
    tokens = encode_text_file(config.text, sp)
    splits = tokens.shape.row_splits(1).to(torch.int64)
    keep = ((splits[1:] - splits[:-1]) <= config.max_sentence_length).nonzero().squeeze(1)
    if keep.numel() < tokens.dim0:
        logger.info("dropping %d of %d sentences longer than %d tokens",
                    tokens.dim0 - keep.numel(), tokens.dim0, config.max_sentence_length)
        tokens, _ = tokens.index(keep.to(torch.int32), axis=0)
    if tokens.dim0 == 0:
        raise ValueError(f"no training sentences left in {str(config.text)!r}")
    return tokens


def _resume(
    path: Path,
    model: NeuralLM,
    optimizer: torch.optim.Optimizer,
    model_config: LmConfig,
    device: torch.device,
) -> int:
    """Load a checkpoint of this run into ``model`` and ``optimizer``, restore the RNG state;
    return its step."""
    ckpt = torch.load(path, map_location="cpu", weights_only=False)
    saved = ckpt.get("model_config")
    if ckpt.get("model_type") != model.model_type or saved != dataclasses.asdict(model_config):
        raise ValueError(
            f"cannot resume from {str(path)!r}: it holds a {ckpt.get('model_type')} model "
            f"with config {saved}, but this run asks for a {model.model_type} model with "
            f"{dataclasses.asdict(model_config)} (use another exp_dir)"
        )
    model.load_state_dict(ckpt["model"])
    optimizer.load_state_dict(ckpt["optimizer"])
    step = int(ckpt["step"])
    torch.set_rng_state(ckpt["rng_state"])
    if device.type == "cuda" and ckpt.get("cuda_rng_state") is not None:
        torch.cuda.set_rng_state(ckpt["cuda_rng_state"], device)
    logger.info("resuming from %s (step %d)", path, step)
    return step


@dataclass
class _TrainingRun:
    """The optimizer loop of :func:`train_lm` and what it produced (``losses`` of the steps it
    ran, the ``last`` checkpoint written, the latest validation result)."""

    config: TrainLmConfig
    model_config: LmConfig
    model: NeuralLM
    optimizer: torch.optim.Optimizer
    tokens: k2.RaggedTensor
    valid_tokens: k2.RaggedTensor | None
    #: what the token ids mean (:func:`k2dec.lang.token_inventory_digest` of the BPE model's
    #: pieces), stored in every checkpoint: the decode job refuses the LM with a model whose
    #: tokens differ (another BPE model of the same size)
    tokens_sha256: str | None = None
    losses: list[float] = field(default_factory=list)
    last: Path | None = None
    valid: PerplexityResult | None = None

    def train(self, step: int, resume: Path | None) -> int:
        """Run from ``step`` to ``config.num_steps`` (``resume``: the checkpoint of ``step``);
        return the last step."""
        config, model = self.config, self.model
        device = next(model.parameters()).device
        splits = self.tokens.shape.row_splits(1).to(torch.int64)
        lengths = splits[1:] - splits[:-1]
        batches_per_epoch = math.ceil(self.tokens.dim0 / config.batch_size)
        self.last = resume
        model.train()
        bar = tqdm(total=config.num_steps, initial=step, desc="train-lm",
                   disable=not config.progress)
        while step < config.num_steps:
            epoch, first_batch = divmod(step, batches_per_epoch)
            batches = epoch_batches(lengths, config.batch_size, config.seed + epoch)
            for b in range(first_batch, min(batches_per_epoch,
                                            first_batch + config.num_steps - step)):
                batch, _ = self.tokens.index(batches[b], axis=0)
                self.losses.append(_train_step(model, self.optimizer, batch.to(device),
                                               config.grad_clip))
                step += 1
                bar.update(1)
                self._after_step(step, epoch)
        bar.close()
        return step

    def _after_step(self, step: int, epoch: int) -> None:
        config = self.config
        if step % config.log_interval == 0:
            recent = self.losses[-config.log_interval :]
            logger.info("step %d epoch %d: loss %.4f", step, epoch, sum(recent) / len(recent))
        if step % config.save_every_n == 0 or step == config.num_steps:
            self.last = _save_checkpoint(Path(config.exp_dir), self.model, self.optimizer, step,
                                         config, self.model_config, self.tokens_sha256)
            if self.valid_tokens is not None:
                self.valid = _validate(self.model, self.valid_tokens, config.batch_size, step)


def epoch_batches(lengths: torch.Tensor, batch_size: int, seed: int,
                  bucket_batches: int = 50) -> list[torch.Tensor]:
    """The batches of one epoch: a seeded random order of the sentences, sorted by length
    within windows of ``bucket_batches * batch_size`` sentences (so that batches need little
    padding), cut into ``ceil(S / batch_size)`` batches, in a seeded random batch order.

    Args:
      lengths: int64 ``[S]`` sentence lengths (CPU).

    Returns:
      int32 index tensors (CPU), each of at most ``batch_size`` sentence indexes; together
      they cover every sentence exactly once.
    """
    gen = torch.Generator().manual_seed(seed)
    order = torch.randperm(lengths.numel(), generator=gen)
    window = bucket_batches * batch_size
    for start in range(0, order.numel(), window):
        part = order[start : start + window]
        order[start : start + window] = part[torch.argsort(lengths[part], stable=True)]
    batches = list(order.to(torch.int32).split(batch_size))
    return [batches[i] for i in torch.randperm(len(batches), generator=gen).tolist()]


def _validate(
    model: NeuralLM, tokens: k2.RaggedTensor, batch_size: int, step: int
) -> PerplexityResult:
    model.eval()
    result = compute_perplexity(model, tokens, batch_size)
    model.train()
    logger.info("step %d: validation perplexity %.3f", step, result.perplexity)
    return result


def _train_step(
    model: NeuralLM, optimizer: torch.optim.Optimizer, batch: k2.RaggedTensor, grad_clip: float
) -> float:
    scores = model.score_sequences(batch)
    num_tokens = batch.numel() + batch.dim0
    loss = -scores.totals.sum() / num_tokens
    optimizer.zero_grad()
    loss.backward()
    if grad_clip > 0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    optimizer.step()
    return float(loss.detach())


def _save_checkpoint(
    exp_dir: Path,
    model: NeuralLM,
    optimizer: torch.optim.Optimizer,
    step: int,
    config: TrainLmConfig,
    model_config: LmConfig,
    tokens_sha256: str | None,
) -> Path:
    path = exp_dir / f"checkpoint-{step}.pt"
    tmp = path.with_suffix(".pt.tmp")
    torch.save(
        {
            "model_type": model.model_type,
            "model_config": dataclasses.asdict(model_config),
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "step": step,
            "rng_state": torch.get_rng_state(),
            "cuda_rng_state": (
                torch.cuda.get_rng_state(model.device) if model.device.type == "cuda" else None
            ),
            "train_config": _state_dict_config(config),
            "tokens_sha256": tokens_sha256,
        },
        tmp,
    )
    tmp.replace(path)
    logger.info("saved %s", path)
    prune_checkpoints(exp_dir, config.keep_last_k)
    return path


def build_arg_parser() -> argparse.ArgumentParser:
    """Arguments of :func:`main`; unset options keep the config dataclasses' defaults."""
    p = argparse.ArgumentParser(
        prog="k2dec train-lm",
        description="Train an RNN or Transformer LM on BPE tokens of a text file.",
    )
    p.add_argument("--text", type=Path, required=True, help="Training text, one sentence a line.")
    p.add_argument("--bpe-model", type=Path, required=True, help="sentencepiece model.")
    p.add_argument("--exp-dir", type=Path, required=True, help="Checkpoint dir (resumed).")
    p.add_argument("--model-type", choices=sorted(MODEL_TYPES), default=RnnLM.model_type)
    p.add_argument("--valid-text", type=Path, help="Held-out text for perplexity.")
    for name, typ in (("num_steps", int), ("batch_size", int), ("lr", float),
                      ("weight_decay", float), ("grad_clip", float),
                      ("max_sentence_length", int), ("save_every_n", int), ("keep_last_k", int),
                      ("log_interval", int), ("seed", int), ("device", str)):
        p.add_argument("--" + name.replace("_", "-"), type=typ, default=None,
                       help=f"(default {getattr(TrainLmConfig, name)})")
    model_fields: dict[str, tuple[object, list[str]]] = {}
    for model_type, (config_cls, _) in sorted(MODEL_TYPES.items()):
        for f in dataclasses.fields(config_cls):
            if f.name not in ("vocab_size", "sos_id", "eos_id"):
                typ, owners = model_fields.setdefault(f.name, (f.type, []))
                owners.append(f"{model_type}: {f.default}")
    for name, (typ, owners) in model_fields.items():
        flag = "--" + name.replace("_", "-")
        help_text = f"Model config field (default {', '.join(owners)})."
        if typ in ("bool", bool):
            p.add_argument(flag, action=argparse.BooleanOptionalAction, default=None,
                           help=help_text)
        else:
            p.add_argument(flag, type=float if typ in ("float", float) else int, default=None,
                           help=help_text)
    p.add_argument("--no-progress", action="store_true", help="No tqdm progress bar.")
    return p


def main(argv: Sequence[str] | None = None) -> TrainLmResult:
    """Command-line entry point (``k2dec train-lm``)."""
    args = vars(build_arg_parser().parse_args(argv))
    config_cls, _ = MODEL_TYPES[args.pop("model_type")]
    field_names = {f.name for f in dataclasses.fields(config_cls)}
    model_kwargs = {}
    train_names = {f.name for f in dataclasses.fields(TrainLmConfig)}
    train_kwargs = {"progress": not args.pop("no_progress")}
    for name, value in args.items():
        if value is None:
            continue
        if name in train_names:
            train_kwargs[name] = value
        elif name in field_names:
            model_kwargs[name] = value
        else:
            raise SystemExit(
                f"--{name.replace('_', '-')} does not apply to a {config_cls.__name__}"
            )
    config = TrainLmConfig(model=config_cls(**model_kwargs), **train_kwargs)
    result = train_lm(config)
    logger.info("done: %s", result.checkpoint)
    return result

