"""How good word confidences are: which hypothesis words are correct (kaldialign alignment
with the reference), normalised cross entropy (NCE), the area under the ROC curve of correct
vs wrong words (AUC), expected calibration error and a reliability plot."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .wer import EPS, align_words

__all__ = [
    "Calibration",
    "ConfidenceMetrics",
    "ReliabilityBin",
    "confidence_metrics",
    "fit_calibration",
    "normalized_cross_entropy",
    "plot_reliability",
    "roc_auc",
    "word_correctness",
]


def word_correctness(ref: Sequence[str], hyp: Sequence[str]) -> list[bool]:
    """For each hypothesis word, whether the Levenshtein alignment (kaldialign) pairs it with
    the same reference word (substitutions and insertions are wrong)."""
    out = []
    for r, h in align_words(ref, hyp):
        if h != EPS:
            out.append(r == h)
    return out


def _arrays(confidences: Sequence[float], correct: Sequence[bool]
            ) -> tuple[np.ndarray, np.ndarray]:
    c = np.asarray(confidences, dtype=np.float64)
    y = np.asarray(correct, dtype=bool)
    if c.shape != y.shape or c.ndim != 1:
        raise ValueError(f"confidences and correct must be 1-D of the same length, got "
                         f"{c.shape} and {y.shape}")
    if c.size and (np.isnan(c).any() or c.min() < 0 or c.max() > 1):
        raise ValueError("confidences must be in [0, 1]")
    return c, y


def normalized_cross_entropy(confidences: Sequence[float], correct: Sequence[bool],
                             eps: float = 1e-6) -> float:
    """NIST's NCE: ``(H_max - H) / H_max`` where ``H`` is the cross entropy (bits) of the
    confidences against correctness and ``H_max`` that of the constant confidence
    ``p = fraction correct``. 1 is perfect, 0 no better than the constant, negative worse.
    Confidences are clipped to ``[eps, 1 - eps]``. NaN when every word is correct or every
    word is wrong."""
    c, y = _arrays(confidences, correct)
    n, n_correct = y.size, int(y.sum())
    if n_correct in (0, n):
        return math.nan
    p = n_correct / n
    h_max = -(n_correct * math.log2(p) + (n - n_correct) * math.log2(1 - p))
    c = np.clip(c, eps, 1 - eps)
    h = -(np.log2(c[y]).sum() + np.log2(1 - c[~y]).sum())
    return float((h_max - h) / h_max)


def roc_auc(confidences: Sequence[float], correct: Sequence[bool]) -> float:
    """Area under the ROC curve of the confidence as a detector of correct words: the
    probability that a random correct word has a higher confidence than a random wrong one
    (ties count one half). NaN without both kinds of words."""
    c, y = _arrays(confidences, correct)
    n_pos, n_neg = int(y.sum()), int((~y).sum())
    if n_pos == 0 or n_neg == 0:
        return math.nan
    # average 1-based ranks over ties
    values, group, counts = np.unique(c, return_inverse=True, return_counts=True)
    first = np.cumsum(counts) - counts  # 0-based rank of each value's first word
    ranks = (first + (counts + 1) / 2.0)[group]
    return float((ranks[y].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


@dataclass(frozen=True)
class ReliabilityBin:
    """Words whose confidence is in ``[lo, hi)`` (the last bin includes 1)."""

    lo: float
    hi: float
    count: int
    mean_confidence: float
    accuracy: float


@dataclass(frozen=True)
class ConfidenceMetrics:
    """Quality of the confidences of a set of hypothesis words.

    Attributes:
      num_words, num_correct: hypothesis words, and those correct.
      nce: normalised cross entropy (see :func:`normalized_cross_entropy`).
      auc: ROC AUC (see :func:`roc_auc`).
      ece: expected calibration error: the count-weighted mean of
        ``|accuracy - mean confidence|`` over the bins.
      mean_confidence: over all words (compare with ``num_correct / num_words``).
      bins: the reliability diagram's bins (empty bins left out).
    """

    num_words: int
    num_correct: int
    nce: float
    auc: float
    ece: float
    mean_confidence: float
    bins: tuple[ReliabilityBin, ...]


def confidence_metrics(confidences: Sequence[float], correct: Sequence[bool],
                       num_bins: int = 10) -> ConfidenceMetrics:
    """NCE, AUC, calibration error and reliability bins of word confidences."""
    if isinstance(num_bins, bool) or not isinstance(num_bins, int) or num_bins < 1:
        raise ValueError(f"num_bins must be an int >= 1, got {num_bins!r}")
    c, y = _arrays(confidences, correct)
    edges = np.linspace(0.0, 1.0, num_bins + 1)
    which = np.clip(np.searchsorted(edges, c, side="right") - 1, 0, num_bins - 1)
    bins = []
    ece = 0.0
    for b in range(num_bins):
        sel = which == b
        k = int(sel.sum())
        if k == 0:
            continue
        mc, acc = float(c[sel].mean()), float(y[sel].mean())
        ece += k * abs(acc - mc)
        bins.append(ReliabilityBin(float(edges[b]), float(edges[b + 1]), k, mc, acc))
    n = int(c.size)
    return ConfidenceMetrics(
        num_words=n, num_correct=int(y.sum()),
        nce=normalized_cross_entropy(c, y) if n else math.nan,
        auc=roc_auc(c, y) if n else math.nan,
        ece=ece / n if n else math.nan,
        mean_confidence=float(c.mean()) if n else math.nan,
        bins=tuple(bins))


@dataclass(frozen=True)
class Calibration:
    """Platt scaling of confidences: ``sigmoid(a * logit(c) + b)`` (Kaldi recipes calibrate
    lattice confidences on held-out data in the same spirit, ``steps/conf/``). ``a = 1, b = 0``
    is the identity."""

    a: float = 1.0
    b: float = 0.0
    eps: float = 1e-6

    def __call__(self, confidences: Sequence[float]) -> np.ndarray:
        c = np.clip(np.asarray(confidences, dtype=np.float64), self.eps, 1 - self.eps)
        z = self.a * np.log(c / (1 - c)) + self.b
        return 1.0 / (1.0 + np.exp(-z))


def fit_calibration(confidences: Sequence[float], correct: Sequence[bool],
                    eps: float = 1e-6, iterations: int = 100) -> Calibration:
    """The :class:`Calibration` minimizing the log loss of the calibrated confidences against
    correctness (Newton's method on ``(a, b)``, a tiny ridge for stability). Fit it on
    held-out words, not on the words it will be judged on."""
    c, y = _arrays(confidences, correct)
    if y.size == 0 or y.all() or not y.any():
        raise ValueError("fitting a calibration needs both correct and wrong words")
    c = np.clip(c, eps, 1 - eps)
    x = np.stack([np.log(c / (1 - c)), np.ones_like(c)], axis=1)
    t = y.astype(np.float64)
    w = np.array([1.0, 0.0])
    ridge = 1e-6 * np.eye(2)

    def loss(v: np.ndarray) -> float:
        z = x @ v
        return float(np.sum(np.logaddexp(0.0, z) - t * z) + 0.5e-6 * v @ v)

    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-(x @ w)))
        grad = x.T @ (p - t) + 1e-6 * w
        hess = (x * (p * (1 - p))[:, None]).T @ x + ridge
        step = np.linalg.solve(hess, grad)
        scale = 1.0
        while loss(w - scale * step) > loss(w) and scale > 1e-8:  # damped Newton
            scale /= 2
        w = w - scale * step
        if np.max(np.abs(scale * step)) < 1e-10:
            break
    return Calibration(float(w[0]), float(w[1]), eps)


def plot_reliability(curves: Mapping[str, ConfidenceMetrics], path: str | Path,
                     title: str = "Reliability of word confidences") -> Path:
    """A reliability diagram (accuracy against mean confidence per bin, one line per entry of
    ``curves``, the diagonal for perfect calibration) above a histogram of the words per bin;
    written as PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, hist) = plt.subplots(2, 1, figsize=(7, 8), gridspec_kw={"height_ratios": [3, 1]},
                                   sharex=True)
    ax.plot([0, 1], [0, 1], color="gray", linestyle="--", label="perfect calibration")
    width = 1.0 / max(1, len(curves)) * 0.09
    for k, (name, m) in enumerate(curves.items()):
        xs = [b.mean_confidence for b in m.bins]
        ys = [b.accuracy for b in m.bins]
        ax.plot(xs, ys, marker="o",
                label=f"{name} (NCE {m.nce:.3f}, AUC {m.auc:.3f}, ECE {m.ece:.3f})")
        centers = [(b.lo + b.hi) / 2 + (k - (len(curves) - 1) / 2) * width for b in m.bins]
        hist.bar(centers, [b.count for b in m.bins], width=width, label=name)
    ax.set_ylabel("fraction of words correct")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")
    hist.set_xlabel("word confidence")
    hist.set_ylabel("words")
    hist.set_yscale("log")
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
