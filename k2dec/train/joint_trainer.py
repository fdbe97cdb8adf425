"""Training the joint model: a plain, resumable loop over lhotse batches.

Checkpoints (``exp_dir/checkpoint-{step}.pt``, ``exp_dir/epoch-{n}.pt``) hold the model,
optimizer and scheduler states, the step and epoch, and the model config, so an interrupted
run resumes from the newest one. :func:`average_checkpoints` averages the last few (icefall's
``--avg``), and :func:`k2dec.model.export_model` writes a small release file (optionally
float16).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import k2
import torch
from tqdm import tqdm

from ..model.joint import UTTERANCE_SECONDS, JointModel
from .checkpoints import latest_checkpoint, prune_checkpoints
from .losses import LossConfig, joint_losses

__all__ = [
    "TrainConfig",
    "train_joint_model",
    "batch_to_inputs",
    "average_checkpoints",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation settings.

    Attributes:
      num_epochs: passes over the training batches.
      max_steps: stop after this many optimizer steps (``None``: no limit).
      lr: peak learning rate (Noam-style warmup then inverse square-root decay).
      warmup_steps: linear warmup length.
      grad_clip: max gradient norm.
      save_every_n: save ``checkpoint-{step}.pt`` every this many steps (0: only per epoch).
      keep_last_k: keep this many step checkpoints (older ones are deleted).
      log_every: log the running losses every this many steps.
      seed: torch seed at the start (resume restores the RNG state).
      loss: :class:`LossConfig` (``rnnt_type`` etc.).
    """

    num_epochs: int = 10
    max_steps: int | None = None
    lr: float = 2e-3
    warmup_steps: int = 500
    grad_clip: float = 5.0
    save_every_n: int = 200
    keep_last_k: int = 5
    log_every: int = 20
    seed: int = 42
    loss: LossConfig = field(default_factory=LossConfig)

    def __post_init__(self) -> None:
        if self.num_epochs < 1:
            raise ValueError(f"num_epochs must be >= 1, got {self.num_epochs}")
        if self.lr <= 0 or self.warmup_steps < 1:
            raise ValueError("lr must be > 0 and warmup_steps >= 1")
        if isinstance(self.loss, dict):
            object.__setattr__(self, "loss", LossConfig(**self.loss))


def batch_to_inputs(
    batch: dict, encode: Callable[[list[str]], list[list[int]]]
) -> tuple[torch.Tensor, torch.Tensor, k2.RaggedTensor, list[str]]:
    """A lhotse ``K2SpeechRecognitionDataset`` batch -> (features ``[N, T, F]``, lengths ``[N]``,
    token ids ``[utt][token]``, texts), in the batch's supervision order (one supervision per
    cut)."""
    feats = batch["inputs"]
    sup = batch["supervisions"]
    idx = sup["sequence_idx"].to(torch.int64)
    if idx.numel() != feats.size(0) or len(set(idx.tolist())) != idx.numel():
        raise ValueError("batches must have exactly one supervision per cut")
    lens = sup["num_frames"].to(torch.int64)
    texts = list(sup["text"])
    tokens = k2.RaggedTensor(encode(texts))
    return feats[idx], lens, tokens, texts


def _lr_lambda(warmup: int) -> Callable[[int], float]:
    def f(step: int) -> float:
        step = max(step, 1)
        return min(step / warmup, math.sqrt(warmup / step))

    return f


def _save(path: Path, model: JointModel, opt, sched, step: int, epoch: int,
          cfg: TrainConfig, batches_done: int = 0) -> None:
    tmp = path.with_suffix(".tmp")
    seconds = {UTTERANCE_SECONDS: model.utterance_seconds} if model.utterance_seconds else {}
    torch.save({
        "model": model.state_dict(), "optimizer": opt.state_dict(),
        "scheduler": sched.state_dict(), "step": step, "epoch": epoch,
        "batches_done": batches_done,
        "model_config": model.cfg.to_dict(), "train_config": asdict(cfg),
        "rng": torch.get_rng_state(), **seconds,
    }, tmp)
    tmp.replace(path)


def train_joint_model(
    model: JointModel,
    make_batches: Callable[[int], Iterable[dict]],
    encode: Callable[[list[str]], list[list[int]]],
    exp_dir: str | Path,
    cfg: TrainConfig = TrainConfig(),  # noqa: B008
) -> dict[str, Any]:
    """Train (or resume training) ``model``.

    Args:
      model: the :class:`JointModel` (its device is used).
      make_batches: ``epoch -> iterable of lhotse batches`` (so samplers can reshuffle per
        epoch).
      encode: texts -> token ids (e.g. a sentencepiece model's ``encode``).
      exp_dir: checkpoints go here; an existing newest ``checkpoint-*.pt`` is resumed.
        Checkpoints record ``model.utterance_seconds`` when set (the recipe's, of its cuts).

    Returns:
      ``{"step", "epoch", "loss_per_token"}`` at the end (the last logged running average).
    """
    exp_dir = Path(exp_dir)
    exp_dir.mkdir(parents=True, exist_ok=True)
    device = next(model.parameters()).device
    torch.manual_seed(cfg.seed)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=1e-6)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, _lr_lambda(cfg.warmup_steps))
    step, start_epoch, skip = _resume(exp_dir, model, opt, sched, device)
    log = _LossLog()
    for epoch in range(start_epoch, cfg.num_epochs):
        model.train()
        bar = tqdm(make_batches(epoch), desc=f"epoch {epoch}", unit="batch", leave=False)
        done = 0
        for batch in bar:
            if done < skip:  # resuming mid-epoch: these batches were trained on already
                done += 1
                continue
            if cfg.max_steps is not None and step >= cfg.max_steps:
                break
            done += 1
            losses = _train_step(model, batch, encode, device, opt, sched, cfg)
            if losses is None:
                logger.warning("step %d: non-finite loss, batch skipped", step)
                continue
            step += 1
            log.add(losses)
            if step % cfg.log_every == 0:
                log.report(bar, sched.get_last_lr()[0], epoch, step)
            if cfg.save_every_n and step % cfg.save_every_n == 0:
                _save(exp_dir / f"checkpoint-{step}.pt", model, opt, sched, step, epoch, cfg,
                      done)
                prune_checkpoints(exp_dir, cfg.keep_last_k)
        skip = 0
        if cfg.max_steps is not None and step >= cfg.max_steps:
            _save(exp_dir / f"checkpoint-{step}.pt", model, opt, sched, step, epoch, cfg, done)
            break
        _save(exp_dir / f"epoch-{epoch + 1}.pt", model, opt, sched, step, epoch + 1, cfg)
        _save(exp_dir / f"checkpoint-{step}.pt", model, opt, sched, step, epoch + 1, cfg)
        prune_checkpoints(exp_dir, cfg.keep_last_k)
    return {"step": step, "epoch": min(cfg.num_epochs, epoch + 1) if cfg.num_epochs else 0,
            "loss_per_token": log.final()}


def _resume(exp_dir: Path, model: JointModel, opt, sched, device: torch.device
            ) -> tuple[int, int, int]:
    """Load the newest checkpoint of ``exp_dir`` if any: ``(step, epoch, batches done)``."""
    resume = latest_checkpoint(exp_dir)
    if resume is None:
        return 0, 0, 0
    ckpt = torch.load(resume, map_location=device, weights_only=False)
    model.load_state_dict(ckpt["model"])
    opt.load_state_dict(ckpt["optimizer"])
    sched.load_state_dict(ckpt["scheduler"])
    step, start_epoch = ckpt["step"], ckpt["epoch"]
    skip = ckpt.get("batches_done", 0)
    torch.set_rng_state(ckpt["rng"])
    logger.info("resumed from %s (step %d, epoch %d)", resume, step, start_epoch)
    return step, start_epoch, skip


def _train_step(model: JointModel, batch: dict, encode: Callable[[list[str]], list[list[int]]],
                device: torch.device, opt, sched, cfg: TrainConfig) -> Any:
    """One optimizer step on ``batch``: its losses, or None (no step) when not finite."""
    feats, lens, tokens, _ = batch_to_inputs(batch, encode)
    losses = joint_losses(model, feats.to(device), lens.to(device), tokens, cfg.loss)
    if not torch.isfinite(losses.total):
        return None
    opt.zero_grad()
    (losses.total / max(1, losses.num_tokens)).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
    opt.step()
    sched.step()
    return losses


@dataclass
class _LossLog:
    """Sums of the losses since the last log line, and the last logged loss per token."""

    running: dict[str, float] = field(default_factory=dict)
    tokens_seen: int = 0
    last: float = float("nan")

    def add(self, losses: Any) -> None:
        """Add one step's losses."""
        for name in ("ctc", "transducer_simple", "transducer_pruned", "attention", "total"):
            self.running[name] = self.running.get(name, 0.0) + float(getattr(losses, name))
        self.tokens_seen += losses.num_tokens

    def report(self, bar: tqdm, lr: float, epoch: int, step: int) -> None:
        """Log the losses per token since the last report, and start the sums over."""
        self.last = self.running["total"] / max(1, self.tokens_seen)
        bar.set_postfix(loss=f"{self.last:.3f}", lr=f"{lr:.2e}")
        logger.info("epoch %d step %d: %s (per token)", epoch, step, ", ".join(
            f"{k}={v / max(1, self.tokens_seen):.3f}" for k, v in self.running.items()))
        self.running, self.tokens_seen = {}, 0

    def final(self) -> float:
        """The loss per token since the last report if steps came after it, else the last."""
        if self.tokens_seen:
            return self.running.get("total", 0.0) / self.tokens_seen
        return self.last


def average_checkpoints(paths: list[str | Path]) -> dict[str, torch.Tensor]:
    """Element-wise mean of the ``model`` state dicts in ``paths`` (integer buffers are
    taken from the last checkpoint)."""
    if not paths:
        raise ValueError("no checkpoints to average")
    states = [torch.load(p, map_location="cpu", weights_only=False)["model"] for p in paths]
    out = {}
    for name, value in states[-1].items():
        if value.is_floating_point():
            out[name] = sum(s[name].double() for s in states).div(len(states)).to(value.dtype)
        else:
            out[name] = value
    return out
