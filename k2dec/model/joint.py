"""The recipes' joint model: a Conformer encoder shared by a CTC head, a stateless
transducer (pruned RNN-T loss from k2) and an attention decoder.

Token convention (icefall BPE): ``<blk>`` = 0 (CTC and transducer blank), ``<sos/eos>`` = 1
(the attention decoder's sos and eos), ``<unk>`` = 2.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import k2
import torch
from torch import nn

from ..aed import TransformerDecoder
from ..data.features import FeatureConfig
from ..transducer import Joiner, StatelessDecoder
from .conformer import ConformerConfig, ConformerEncoder
from .interface import AcousticModel, EncoderOutput

__all__ = ["JointConfig", "JointModel", "LossConfig", "Losses"]

RNNT_TYPES = ("regular", "modified", "constrained")


@dataclass(frozen=True)
class JointConfig:
    """Model sizes (defaults: about 2.5M parameters with a 500-token vocabulary)."""

    vocab_size: int = 500
    encoder: ConformerConfig = field(default_factory=ConformerConfig)
    decoder_dim: int = 256
    joiner_dim: int = 256
    context_size: int = 2
    attention_dim: int = 144
    attention_heads: int = 4
    attention_layers: int = 2
    attention_ff: int = 384
    sos_eos_id: int = 1

    def __post_init__(self) -> None:
        if self.vocab_size < 4:
            raise ValueError(f"vocab_size must be >= 4, got {self.vocab_size}")
        if isinstance(self.encoder, dict):
            object.__setattr__(self, "encoder", ConformerConfig(**self.encoder))

    def to_dict(self) -> dict:
        return asdict(self)


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
    """Summed (not averaged) losses of a batch, and what they were summed over."""

    ctc: torch.Tensor
    transducer_simple: torch.Tensor
    transducer_pruned: torch.Tensor
    attention: torch.Tensor
    total: torch.Tensor
    num_frames: int
    num_tokens: int


class JointModel(nn.Module, AcousticModel):
    """Encoder + CTC head + stateless transducer + attention decoder.

    Exposes icefall's names ``encoder``, ``decoder``, ``joiner`` (the transducer search
    functions of :mod:`k2dec.transducer` accept this model as is), ``ctc_output`` and
    ``attention_decoder``, and implements :class:`k2dec.model.AcousticModel` (CTC,
    transducer and attention methods).
    """

    kind = "k2dec"

    def __init__(self, cfg: JointConfig = JointConfig()) -> None:  # noqa: B008
        super().__init__()
        self.cfg = cfg
        self.encoder = ConformerEncoder(cfg.encoder)
        d = cfg.encoder.d_model
        self.ctc_output = nn.Sequential(nn.Dropout(0.1), nn.Linear(d, cfg.vocab_size))
        self.decoder = StatelessDecoder(cfg.vocab_size, cfg.decoder_dim, blank_id=0,
                                        context_size=cfg.context_size)
        self.joiner = Joiner(d, cfg.decoder_dim, cfg.joiner_dim, cfg.vocab_size)
        self.simple_am_proj = nn.Linear(d, cfg.vocab_size)
        self.simple_lm_proj = nn.Linear(cfg.decoder_dim, cfg.vocab_size)
        self.attention_decoder = TransformerDecoder(
            cfg.vocab_size, d, d_model=cfg.attention_dim, nhead=cfg.attention_heads,
            num_layers=cfg.attention_layers, dim_feedforward=cfg.attention_ff, dropout=0.1,
            sos_id=cfg.sos_eos_id, eos_id=cfg.sos_eos_id,
        )

    def forward(self, features: torch.Tensor, feature_lens: torch.Tensor) -> tuple[
            torch.Tensor, torch.Tensor]:
        """``features`` float ``[N, T, F]`` -> (encoder_out ``[N, T', C]``, lengths ``[N]``)."""
        return self.encoder(features, feature_lens)

    def ctc_log_probs(self, encoder_out: torch.Tensor) -> torch.Tensor:
        """float ``[N, T', V]`` log-softmax of the CTC head."""
        return self.ctc_output(encoder_out).log_softmax(dim=-1)

    # --- AcousticModel -------------------------------------------------------------------
    @property
    def feature_config(self) -> FeatureConfig:
        return getattr(self, "_feature_config", None) or FeatureConfig(
            num_mel_bins=self.cfg.encoder.num_features)

    @property
    def vocab_size(self) -> int:  # type: ignore[override]
        """Network outputs (``cfg.vocab_size``)."""
        return self.cfg.vocab_size

    @property
    def min_input_frames(self) -> int:  # type: ignore[override]
        return self.encoder.min_input_frames

    @property
    def subsampling_factor(self) -> int:  # type: ignore[override]
        return self.encoder.subsampling_factor

    @property
    def has_ctc(self) -> bool:
        return True

    @property
    def transducer(self) -> JointModel:
        return self

    @property
    def attention_decoder(self) -> TransformerDecoder:  # type: ignore[override]
        # a property of the interface would hide the submodule registered in __init__
        return self._modules["attention_decoder"]

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    def _encode(self, features: torch.Tensor, feature_lens: torch.Tensor) -> EncoderOutput:
        enc, enc_lens = self.encoder(features, feature_lens)
        enc_lens = enc_lens.to(torch.int64)
        return EncoderOutput(enc, enc_lens, ctc_log_probs=self.ctc_log_probs(enc).float(),
                             memory=enc, memory_lens=enc_lens)

    def losses(
        self,
        features: torch.Tensor,
        feature_lens: torch.Tensor,
        tokens: k2.RaggedTensor,
        cfg: LossConfig = LossConfig(),  # noqa: B008
    ) -> Losses:
        """All losses of a batch.

        Args:
          features: float ``[N, T, F]``; feature_lens: int ``[N]``.
          tokens: int32 ragged ``[utt][token]`` (no blank, no sos/eos).
        """
        if tokens.dim0 != features.size(0):
            raise ValueError(f"{tokens.dim0} token sequences for {features.size(0)} utterances")
        enc, enc_lens = self.encoder(features, feature_lens)
        device = enc.device
        tokens = tokens.to(device)
        row_splits = tokens.shape.row_splits(1)
        y_lens = (row_splits[1:] - row_splits[:-1]).to(torch.int64)
        if cfg.rnnt_type != "regular" and bool((y_lens > enc_lens).any()):
            bad = torch.nonzero(y_lens > enc_lens).flatten().tolist()
            raise ValueError(f"utterances {bad} have more tokens than encoder frames; "
                             f"rnnt_type={cfg.rnnt_type!r} emits at most one per frame")
        zero = enc.new_zeros(())
        # CTC
        ctc = zero
        if cfg.ctc_weight > 0:
            lp = self.ctc_log_probs(enc).transpose(0, 1)  # [T, N, V]
            ctc = nn.functional.ctc_loss(lp, tokens.values.to(torch.int64), enc_lens, y_lens,
                                         blank=0, reduction="sum", zero_infinity=True)
        # pruned RNN-T
        simple = pruned = zero
        if cfg.transducer_weight > 0:
            simple, pruned = self._transducer_losses(enc, enc_lens, tokens, y_lens, cfg)
        # attention decoder (teacher forcing, label smoothing)
        att = zero
        if cfg.attention_weight > 0:
            att = self._attention_loss(enc, enc_lens, tokens, y_lens, cfg)
        total = (cfg.ctc_weight * ctc
                 + cfg.transducer_weight * (cfg.simple_loss_scale * simple + pruned)
                 + cfg.attention_weight * att)
        return Losses(ctc, simple, pruned, att, total, int(enc_lens.sum()), int(y_lens.sum()))

    def _transducer_losses(self, enc, enc_lens, tokens, y_lens, cfg: LossConfig):
        device = enc.device
        n = enc.size(0)
        blank = self.decoder.blank_id
        y_padded = tokens.pad(mode="constant", padding_value=0).to(torch.int64)
        sos_y = torch.cat([torch.full((n, 1), blank, dtype=torch.int64, device=device),
                           y_padded], dim=1)
        # decoder output after every prefix (left-padded context, as in decoding)
        dec_out = self.decoder(sos_y, need_pad=True)  # [N, S + 1, D]
        boundary = torch.zeros(n, 4, dtype=torch.int64, device=device)
        boundary[:, 2] = y_lens
        boundary[:, 3] = enc_lens
        lm = self.simple_lm_proj(dec_out)
        am = self.simple_am_proj(enc)
        simple, (px_grad, py_grad) = k2.rnnt_loss_smoothed(
            lm=lm.float(), am=am.float(), symbols=y_padded, termination_symbol=blank,
            lm_only_scale=cfg.lm_scale, am_only_scale=cfg.am_scale, boundary=boundary,
            rnnt_type=cfg.rnnt_type, reduction="sum", return_grad=True,
        )
        ranges = k2.get_rnnt_prune_ranges(px_grad, py_grad, boundary, cfg.prune_range)
        am_pruned, lm_pruned = k2.do_rnnt_pruning(
            am=self.joiner.encoder_proj(enc), lm=self.joiner.decoder_proj(dec_out), ranges=ranges
        )
        logits = self.joiner(am_pruned, lm_pruned, project_input=False)
        pruned = k2.rnnt_loss_pruned(
            logits=logits.float(), symbols=y_padded, ranges=ranges, termination_symbol=blank,
            boundary=boundary, rnnt_type=cfg.rnnt_type, reduction="sum",
        )
        return simple, pruned

    def _attention_loss(self, enc, enc_lens, tokens, y_lens, cfg: LossConfig):
        device = enc.device
        n = enc.size(0)
        sos = self.cfg.sos_eos_id
        y_padded = tokens.pad(mode="constant", padding_value=-1).to(torch.int64)
        width = y_padded.size(1) + 1
        inp = torch.full((n, width), sos, dtype=torch.int64, device=device)
        inp[:, 1:] = y_padded.clamp(min=0)
        target = torch.full((n, width), -100, dtype=torch.int64, device=device)
        target[:, :-1] = torch.where(y_padded >= 0, y_padded, torch.full_like(y_padded, -100))
        target[torch.arange(n, device=device), y_lens] = sos  # eos
        mask = torch.arange(enc.size(1), device=device).unsqueeze(0) >= enc_lens.unsqueeze(1)
        log_probs = self.attention_decoder(inp, enc, mask)
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
