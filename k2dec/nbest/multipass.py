"""Multi-pass n-best rescoring: spend neural evaluations only on paths that may win.

The plan (k2's snowfall issue 232): rescore the first ``first_k`` paths of each
utterance's n-best with the neural model; for every path not yet rescored, look up the
best-matching words-in-context among the rescored paths with
``k2.get_best_matching_stats`` (suffix arrays over the token sequences: per position the
mean and variance of the neural scores at the longest matching left context, and that
context's order); predict each unrescored path's neural total as a Gaussian; rank the
paths by how many standard deviations they are from beating the current best; rescore
the most promising ``batch_k`` per utterance; repeat until the budget is spent or no path
is within ``stop_sigmas`` of winning.

Everything runs on whole batches: one scorer call per pass covers all utterances.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import k2
import torch

from ..primitives.ragged import add_at
from ..primitives.sizes import check_int_range
from .nbest import Nbest, NbestTopK, PathScorer

__all__ = [
    "MultiPassConfig",
    "MultiPassResult",
    "GaussianPredictor",
    "ParameterFreePredictor",
    "LinearGaussianPredictor",
    "matching_features",
    "multi_pass_rescore",
    "full_rescore",
]

logger = logging.getLogger(__name__)



@dataclass(frozen=True)
class MultiPassConfig:
    """Settings of :func:`multi_pass_rescore`.

    Attributes:
      first_k: paths per utterance rescored in the first pass (the best by base score).
      batch_k: paths per utterance rescored in each later pass.
      max_evaluations: budget of rescored paths per utterance (``None``: no limit).
      stop_sigmas: stop rescoring an utterance when no unrescored path's predicted total is
        within this many standard deviations of beating its current best (``inf``: never
        stop early).
      lm_scale: weight of the neural (LM) score in ``base + lm_scale * nn`` (the weight of a
        neural LM everywhere in k2dec; formerly ``rnn_lm_scale``, before that ``nn_scale``).
      max_order: longest left context ``get_best_matching_stats`` reports.
      top_k: paths per utterance kept from the n-best for the passes (the ``multi-pass``
        method; formerly its top-level ``top_k``).
      lm_batch_size: sequences per neural LM call (the ``multi-pass`` method; formerly its
        top-level ``lm_batch_size``).
    """

    first_k: int = 10
    batch_k: int = 10
    max_evaluations: int | None = None
    stop_sigmas: float = 3.0
    lm_scale: float = 1.0
    max_order: int = 10
    top_k: int = 100
    lm_batch_size: int = 256

    def __post_init__(self) -> None:
        check_int_range(self, "top_k", 1, 10_000)
        check_int_range(self, "lm_batch_size", 1, 4096)
        check_int_range(self, "first_k", 1, 10_000)
        check_int_range(self, "batch_k", 1, 10_000)
        check_int_range(self, "max_evaluations", 1, 10_000_000, optional=True)
        if not self.stop_sigmas > 0:
            raise ValueError(f"stop_sigmas must be > 0, got {self.stop_sigmas}")
        check_int_range(self, "max_order", 1, 100)


@dataclass(frozen=True)
class MultiPassResult:
    """Outcome of :func:`multi_pass_rescore` / :func:`full_rescore`.

    Attributes:
      best: int64 ``[num_utts]``: index of the chosen path in the n-best (``k`` per utterance).
      scores: float64 ``[num_utts]``: its ``base + lm_scale * nn``.
      hyps: its key sequence per utterance.
      evaluations: int64 ``[num_utts]``: paths rescored per utterance.
      passes: number of scorer calls.
      nn_scores: float64 ``[num_paths]``: neural totals (NaN where not rescored).
      path_scores: float64 ``[num_paths]``: ``base + lm_scale * nn`` of every rescored path,
        ``-inf`` for the others (the list the choice was made from; the n-best confidences
        of ``multi-pass`` are its posteriors).
    """

    best: torch.Tensor
    scores: torch.Tensor
    hyps: list[list[int]]
    evaluations: torch.Tensor
    passes: int
    nn_scores: torch.Tensor
    path_scores: torch.Tensor


class GaussianPredictor:
    """Maps per-position matching features to a per-position Gaussian (mean, variance)."""

    def __call__(self, feats: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``feats`` float64 ``[num_positions, 4]`` = (mean, var, counts, order) ->
        (mean, var), each float64 ``[num_positions]``."""
        raise NotImplementedError


class ParameterFreePredictor(GaussianPredictor):
    """Uses the matched statistics directly: mean as is, variance plus a floor that shrinks
    as the matched context grows (an unmatched position, order 0, gets ``unmatched_var``)."""

    def __init__(self, var_floor: float = 0.05, unmatched_var: float = 4.0):
        self.var_floor = var_floor
        self.unmatched_var = unmatched_var

    def __call__(self, feats: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mean, var, _, order = feats.unbind(1)
        extra = self.unmatched_var / (1.0 + order) + self.var_floor
        return mean, var + extra


class LinearGaussianPredictor(GaussianPredictor, torch.nn.Module):
    """A tiny learned predictor: mean = mean + linear(features), log-variance = linear(features);
    trained with Gaussian negative log-likelihood on held-out rescored n-bests."""

    def __init__(self) -> None:
        torch.nn.Module.__init__(self)
        self.mean_head = torch.nn.Linear(4, 1, dtype=torch.float64)
        self.logvar_head = torch.nn.Linear(4, 1, dtype=torch.float64)
        torch.nn.init.zeros_(self.mean_head.weight)
        torch.nn.init.zeros_(self.mean_head.bias)

    @staticmethod
    def _inputs(feats: torch.Tensor) -> torch.Tensor:
        mean, var, counts, order = feats.unbind(1)
        return torch.stack([mean, torch.log1p(var), torch.log1p(counts), order.log1p()], dim=1)

    def __call__(self, feats: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.nn.Module.__call__(self, feats)

    def forward(self, feats: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = self._inputs(feats)
        mean = feats[:, 0] + self.mean_head(x).squeeze(1)
        var = torch.exp(self.logvar_head(x).squeeze(1)).clamp(min=1e-6)
        return mean, var

    def fit(self, feats: torch.Tensor, targets: torch.Tensor, steps: int = 300,
            lr: float = 0.05) -> list[float]:
        """Fit on per-position features and the true per-position scores; returns losses."""
        opt = torch.optim.Adam(self.parameters(), lr=lr)
        losses = []
        for _ in range(steps):
            mean, var = self.forward(feats)
            loss = torch.nn.functional.gaussian_nll_loss(mean, targets, var, full=True)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(float(loss))
        return losses


def _with_eos(key_seqs: k2.RaggedTensor, eos: int) -> k2.RaggedTensor:
    """Append ``eos`` to every row of ``[path][tok]``."""
    n = key_seqs.dim0
    eos_col = k2.RaggedTensor(
        k2.ragged.regular_ragged_shape(n, 1).to(key_seqs.device),
        torch.full((n,), eos, dtype=torch.int32, device=key_seqs.device),
    )
    return k2.ragged.cat([key_seqs, eos_col], axis=1)


def matching_features(
    nbest: Nbest, token_scores: torch.Tensor, rescored: torch.Tensor, max_order: int
) -> torch.Tensor:
    """Per-position matching statistics of every path against the rescored ones.

    Args:
      nbest: ``[utt][path]``; token ids must be >= 1 (0 and negatives are reserved).
      token_scores: float64 ``[num_positions]``: per-token neural scores of the
        ``token_seqs() + eos`` positions, defined where the path is rescored (anything
        elsewhere).
      rescored: bool ``[num_paths]``.

    Returns:
      float64 ``[num_positions, 4]`` = (mean, var, counts, ngram_order) from
      ``k2.get_best_matching_stats`` (CPU), aligned with the ``token_seqs() + eos`` positions.
    """
    eos = 0
    seqs = _with_eos(nbest.token_seqs(), eos)  # [path][tok + 1], eos = 0 (< every real token)
    max_token = int(seqs.values.max()) if seqs.values.numel() else 0
    # An explicit bos (k2 pads with eos, which cannot tell "sentence start" from "after a
    # sentence end" for an empty hypothesis): [bos, tok..., eos].
    bos = max_token + 1
    n = seqs.dim0
    bos_col = k2.RaggedTensor(
        k2.ragged.regular_ragged_shape(n, 1).to(seqs.device),
        torch.full((n,), bos, dtype=torch.int32, device=seqs.device),
    )
    with_bos = k2.ragged.cat([bos_col, seqs], axis=1)
    shape3 = nbest.shape.compose(with_bos.shape)  # [utt][path][tok + 2]
    tokens3 = k2.RaggedTensor(shape3.to(torch.device("cpu")), with_bos.values.cpu())
    pos_path = with_bos.shape.row_ids(1).to(torch.int64).cpu()
    first = with_bos.shape.row_splits(1)[:-1].to(torch.int64).cpu()
    is_bos = torch.zeros(with_bos.numel(), dtype=torch.bool)
    is_bos[first] = True
    scores = torch.zeros(with_bos.numel(), dtype=torch.float32)
    scores[~is_bos] = token_scores.cpu().to(torch.float32)
    counts = rescored.cpu()[pos_path].to(torch.int32)
    mean, var, counts_out, order = k2.get_best_matching_stats(
        tokens3, scores * counts, counts, eos, -1, bos, max_order
    )
    keep = ~is_bos
    feats = torch.stack(
        [mean[keep].double(), var[keep].double().clamp(min=0.0), counts_out[keep].double(),
         order[keep].double()], 1,
    )
    return feats.to(token_scores.device)


def _score_paths(scorer: PathScorer, nbest: Nbest, idx: torch.Tensor) -> torch.Tensor:
    """Per-position scores (float64, ``[positions of idx paths]``) from one scorer call."""
    sub, _ = nbest.token_seqs().index(idx.to(torch.int32), axis=0)
    out = scorer(sub, nbest.path_to_utt()[idx.to(torch.int64)])
    if not isinstance(out, k2.RaggedTensor) or out.dim0 != sub.dim0:
        raise ValueError("the scorer must return a RaggedTensor [path][tok + 1]")
    want = sub.numel() + sub.dim0
    if out.numel() != want:
        raise ValueError(f"the scorer returned {out.numel()} token scores, expected {want} "
                         "(one per token plus end-of-sentence)")
    return out.values.to(torch.float64)


def multi_pass_rescore(
    top: NbestTopK,
    base_scores: torch.Tensor,
    scorer: PathScorer,
    config: MultiPassConfig = MultiPassConfig(),  # noqa: B008 (frozen)
    predictor: GaussianPredictor | None = None,
) -> MultiPassResult:
    """Rescore a regular n-best in passes, predicting the scores of the paths not rescored.

    Args:
      top: from :meth:`Nbest.top_k` (``k`` paths per utterance, best base score first).
      base_scores: float64 ``[num_utts * k]``: the first-pass score of each path (e.g. AM +
        n-gram, or the lattice total).
      scorer: neural model(s) scoring whole key sequences (see :data:`PathScorer`).
      config: :class:`MultiPassConfig`.
      predictor: :class:`GaussianPredictor` (default :class:`ParameterFreePredictor`).

    Returns:
      :class:`MultiPassResult`; only rescored paths can be chosen. Padding repeats (from
      ``top_k``) are never rescored twice: they are treated as already evaluated copies.
    """
    nbest = top.nbest
    num_utts, k = top.padded.shape
    device = base_scores.device
    if base_scores.numel() != nbest.num_paths:
        raise ValueError(f"base_scores has {base_scores.numel()} values, the n-best "
                         f"{nbest.num_paths} paths")
    predictor = predictor or ParameterFreePredictor()
    base = base_scores.to(torch.float64).view(num_utts, k)
    pos_path = _with_eos(nbest.token_seqs(), 0).shape.row_ids(1).to(torch.int64).to(device)
    token_scores = torch.zeros(pos_path.numel(), dtype=torch.float64, device=device)
    rescored = torch.zeros(num_utts, k, dtype=torch.bool, device=device)
    padded = top.padded.to(device)
    budget = config.max_evaluations or k
    active = torch.ones(num_utts, dtype=torch.bool, device=device)
    select = (torch.arange(k, device=device) < min(config.first_k, budget)) & ~padded
    passes = 0
    nn = torch.full((num_utts, k), float("nan"), dtype=torch.float64, device=device)
    while select.any():
        idx = torch.nonzero(select.flatten()).flatten()
        scores = _score_paths(scorer, nbest, idx)
        positions = torch.isin(pos_path, idx)
        token_scores[positions] = scores.to(device)
        passes += 1
        rescored |= select
        nn = torch.where(rescored, _per_path(token_scores, pos_path, nbest.num_paths).view(
            num_utts, k), nn)
        evaluated = rescored.sum(dim=1)
        total = base + config.lm_scale * nn
        best_total = torch.where(rescored, total, torch.full_like(total, -math.inf)).max(1).values
        remaining = ~rescored & ~padded
        active &= (evaluated < budget) & remaining.any(dim=1)
        if not active.any():
            break
        feats = matching_features(nbest, token_scores, rescored.flatten(), config.max_order)
        z = _sigmas_above(predictor(feats), pos_path, base, best_total, config.lm_scale)
        z = torch.where(remaining & active.unsqueeze(1), z, torch.full_like(z, -math.inf))
        z = torch.where(z >= -config.stop_sigmas, z, torch.full_like(z, -math.inf))
        select = _most_promising(z, (budget - evaluated).clamp(min=0), config.batch_k)
    return _finish(top, base, nn, rescored, config.lm_scale, passes)


def _per_path(values: torch.Tensor, pos_path: torch.Tensor, num_paths: int) -> torch.Tensor:
    """float64 ``[num_paths]``: the sum of ``values`` (one per position) over each path."""
    out = torch.zeros(num_paths, dtype=torch.float64, device=pos_path.device)
    add_at(out, pos_path, values.to(pos_path.device))
    return out


def _sigmas_above(predicted: tuple[torch.Tensor, torch.Tensor], pos_path: torch.Tensor,
                  base: torch.Tensor, best_total: torch.Tensor, nn_scale: float
                  ) -> torch.Tensor:
    """float64 ``[num_utts, k]``: how many predicted standard deviations each path's total
    lies above its utterance's best rescored total (``predicted``: per position mean and
    variance)."""
    num_utts, k = base.shape
    mean, var = predicted
    pred_mean = _per_path(mean, pos_path, num_utts * k)
    pred_var = _per_path(var, pos_path, num_utts * k)
    pred_total = base + nn_scale * pred_mean.view(num_utts, k)
    sd = (nn_scale * pred_var.view(num_utts, k).clamp(min=1e-12).sqrt())
    return (pred_total - best_total.unsqueeze(1)) / sd


def _most_promising(z: torch.Tensor, room: torch.Tensor, batch_k: int) -> torch.Tensor:
    """bool ``[num_utts, k]``: per utterance the ``min(room, batch_k)`` paths of highest
    finite ``z``."""
    k = z.shape[1]
    order = torch.argsort(z, dim=1, descending=True)
    take = torch.arange(k, device=z.device).unsqueeze(0) < torch.minimum(
        room, torch.tensor(batch_k, device=z.device)).unsqueeze(1)
    chosen = torch.zeros(z.shape, dtype=torch.bool, device=z.device)
    chosen.scatter_(1, order, take)
    return chosen & torch.isfinite(z)


def full_rescore(
    top: NbestTopK, base_scores: torch.Tensor, scorer: PathScorer, rnn_lm_scale: float = 1.0
) -> MultiPassResult:
    """Rescore every (non-padding) path in one scorer call: the reference for multi-pass
    (``rnn_lm_scale``: as :attr:`MultiPassConfig.lm_scale`)."""
    nbest = top.nbest
    num_utts, k = top.padded.shape
    base = base_scores.to(torch.float64).view(num_utts, k)
    select = ~top.padded.to(base.device)
    idx = torch.nonzero(select.flatten()).flatten()
    scores = _score_paths(scorer, nbest, idx)
    seqs = _with_eos(nbest.token_seqs(), 0)
    pos_path = seqs.shape.row_ids(1).to(torch.int64).to(base.device)
    token_scores = torch.zeros(seqs.numel(), dtype=torch.float64, device=base.device)
    token_scores[torch.isin(pos_path, idx)] = scores.to(base.device)
    per_path = torch.zeros(nbest.num_paths, dtype=torch.float64, device=base.device)
    add_at(per_path, pos_path, token_scores)
    nn = torch.where(select, per_path.view(num_utts, k), torch.full_like(base, float("nan")))
    return _finish(top, base, nn, select, rnn_lm_scale, 1)


def _finish(top: NbestTopK, base: torch.Tensor, nn: torch.Tensor, rescored: torch.Tensor,
            nn_scale: float, passes: int) -> MultiPassResult:
    num_utts, k = base.shape
    total = torch.where(rescored, base + nn_scale * nn, torch.full_like(base, -math.inf))
    # argmax with ties to the lowest index
    best_in_row = torch.argmax(total, dim=1)
    scores = total.gather(1, best_in_row.unsqueeze(1)).squeeze(1)
    best = best_in_row + torch.arange(num_utts, device=base.device) * k
    hyps = top.nbest.keys_at(best)
    return MultiPassResult(
        best=best, scores=scores, hyps=hyps, evaluations=rescored.sum(1).to(torch.int64),
        passes=passes, nn_scores=nn.flatten(), path_scores=total.flatten(),
    )
