"""The joint model's training losses: CTC, the pruned RNN-T loss from k2 (with its simple
loss) and the attention decoder's label-smoothed cross entropy.

Token convention (icefall BPE): ``<blk>`` = 0 (CTC and transducer blank), ``<sos/eos>`` = 1
(the attention decoder's sos and eos), ``<unk>`` = 2.
"""

from __future__ import annotations

from dataclasses import dataclass

import k2
import torch
from torch import nn

from ..model.joint import JointModel

__all__ = ["LossConfig", "Losses", "joint_losses"]

RNNT_TYPES = ("regular", "modified", "constrained")


@dataclass(frozen=True)
class LossConfig:
    """Loss weights and the pruned RNN-T settings (icefall's defaults).

    ``rnnt_type``: ``"regular"``, ``"modified"`` (one symbol per frame) or ``"constrained"``
    (one symbol per frame; the frame index advances with each symbol).
    """

    ctc_weight: float = 0.3
    transducer_weight: float = 1.0
    attention_weight: float = 0.3
    simple_loss_scale: float = 0.5
    prune_range: int = 5
    lm_scale: float = 0.25
    am_scale: float = 0.0
    rnnt_type: str = "modified"
    label_smoothing: float = 0.1

    def __post_init__(self) -> None:
        if self.rnnt_type not in RNNT_TYPES:
            raise ValueError(f"rnnt_type must be one of {RNNT_TYPES}, got {self.rnnt_type!r}")
        if self.prune_range < 1:
            raise ValueError(f"prune_range must be >= 1, got {self.prune_range}")


@dataclass
class Losses:
    """Summed (not averaged) losses of a batch, and what they were summed over.

    The losses are float 0-dim tensors on the model's device (``total`` is the weighted sum
    that training minimises, divided by ``num_tokens``); ``num_frames`` counts encoder frames.
    """

    ctc: torch.Tensor
    transducer_simple: torch.Tensor
    transducer_pruned: torch.Tensor
    attention: torch.Tensor
    total: torch.Tensor
    num_frames: int
    num_tokens: int


def joint_losses(
    model: JointModel,
    features: torch.Tensor,
    feature_lens: torch.Tensor,
    tokens: k2.RaggedTensor,
    cfg: LossConfig = LossConfig(),  # noqa: B008
) -> Losses:
    """All losses of a batch, summed over it.

    Args:
      model: the :class:`~k2dec.model.JointModel` being trained.
      features: float ``[N, T, F]``; feature_lens: int ``[N]``.
      tokens: int32 ragged ``[utt][token]`` (no blank, no sos/eos).
      cfg: the loss weights and pruned RNN-T settings.
    """
    if tokens.dim0 != features.size(0):
        raise ValueError(f"{tokens.dim0} token sequences for {features.size(0)} utterances")
    enc, enc_lens = model.encoder(features, feature_lens)
    tokens = tokens.to(enc.device)
    row_splits = tokens.shape.row_splits(1)
    y_lens = (row_splits[1:] - row_splits[:-1]).to(torch.int64)
    if cfg.rnnt_type != "regular" and bool((y_lens > enc_lens).any()):
        bad = torch.nonzero(y_lens > enc_lens).flatten().tolist()
        raise ValueError(f"utterances {bad} have more tokens than encoder frames; "
                         f"rnnt_type={cfg.rnnt_type!r} emits at most one per frame")
    zero = enc.new_zeros(())
    ctc = simple = pruned = att = zero
    if cfg.ctc_weight > 0:
        lp = model.ctc_log_probs(enc).transpose(0, 1)  # [T, N, V]
        ctc = nn.functional.ctc_loss(lp, tokens.values.to(torch.int64), enc_lens, y_lens,
                                     blank=0, reduction="sum", zero_infinity=True)
    if cfg.transducer_weight > 0:
        simple, pruned = _transducer_losses(model, enc, enc_lens, tokens, y_lens, cfg)
    if cfg.attention_weight > 0:  # teacher forcing, label smoothing
        att = _attention_loss(model, enc, enc_lens, tokens, y_lens, cfg)
    total = (cfg.ctc_weight * ctc
             + cfg.transducer_weight * (cfg.simple_loss_scale * simple + pruned)
             + cfg.attention_weight * att)
    return Losses(ctc, simple, pruned, att, total, int(enc_lens.sum()), int(y_lens.sum()))


def _transducer_losses(model: JointModel, enc, enc_lens, tokens, y_lens, cfg: LossConfig):
    device = enc.device
    n = enc.size(0)
    blank = model.decoder.blank_id
    y_padded = tokens.pad(mode="constant", padding_value=0).to(torch.int64)
    sos_y = torch.cat([torch.full((n, 1), blank, dtype=torch.int64, device=device),
                       y_padded], dim=1)
    # decoder output after every prefix (left-padded context, as in decoding)
    dec_out = model.decoder(sos_y, need_pad=True)  # [N, S + 1, D]
    boundary = torch.zeros(n, 4, dtype=torch.int64, device=device)
    boundary[:, 2] = y_lens
    boundary[:, 3] = enc_lens
    lm = model.simple_lm_proj(dec_out)
    am = model.simple_am_proj(enc)
    simple, (px_grad, py_grad) = k2.rnnt_loss_smoothed(
        lm=lm.float(), am=am.float(), symbols=y_padded, termination_symbol=blank,
        lm_only_scale=cfg.lm_scale, am_only_scale=cfg.am_scale, boundary=boundary,
        rnnt_type=cfg.rnnt_type, reduction="sum", return_grad=True,
    )
    ranges = k2.get_rnnt_prune_ranges(px_grad, py_grad, boundary, cfg.prune_range)
    am_pruned, lm_pruned = k2.do_rnnt_pruning(
        am=model.joiner.encoder_proj(enc), lm=model.joiner.decoder_proj(dec_out), ranges=ranges
    )
    logits = model.joiner(am_pruned, lm_pruned, project_input=False)
    pruned = k2.rnnt_loss_pruned(
        logits=logits.float(), symbols=y_padded, ranges=ranges, termination_symbol=blank,
        boundary=boundary, rnnt_type=cfg.rnnt_type, reduction="sum",
    )
    return simple, pruned


def _attention_loss(model: JointModel, enc, enc_lens, tokens, y_lens, cfg: LossConfig):
    device = enc.device
    n = enc.size(0)
    sos = model.cfg.sos_eos_id
    y_padded = tokens.pad(mode="constant", padding_value=-1).to(torch.int64)
    width = y_padded.size(1) + 1
    inp = torch.full((n, width), sos, dtype=torch.int64, device=device)
    inp[:, 1:] = y_padded.clamp(min=0)
    target = torch.full((n, width), -100, dtype=torch.int64, device=device)
    target[:, :-1] = torch.where(y_padded >= 0, y_padded, torch.full_like(y_padded, -100))
    target[torch.arange(n, device=device), y_lens] = sos  # eos
    mask = torch.arange(enc.size(1), device=device).unsqueeze(0) >= enc_lens.unsqueeze(1)
    log_probs = model.attention_decoder(inp, enc, mask)
    return nn.functional.nll_loss(log_probs.reshape(-1, log_probs.size(-1)),
                                  target.reshape(-1), ignore_index=-100, reduction="sum") \
        if cfg.label_smoothing == 0 else _smoothed_nll(log_probs, target, cfg.label_smoothing)


def _smoothed_nll(log_probs: torch.Tensor, target: torch.Tensor, eps: float) -> torch.Tensor:
    keep = target != -100
    lp = log_probs[keep]
    t = target[keep]
    nll = -lp.gather(1, t.unsqueeze(1)).squeeze(1)
    smooth = -lp.mean(dim=1)
    return ((1.0 - eps) * nll + eps * smooth).sum()
