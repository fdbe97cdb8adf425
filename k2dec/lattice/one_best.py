"""One-best decoding: best paths of lattices to tokens, words and frame timestamps; CTC greedy
search; CTC decoding with H; HLG (or any token-in/word-out graph) 1best."""

from __future__ import annotations

import enum
import logging
import math
from dataclasses import dataclass

import k2
import torch

from k2dec.lattice.dense import validate_log_probs
from k2dec.lattice.search import (
    LatticeConfig,
    LatticeResult,
    LatticeStatus,
    UtteranceReport,
    config_subsampling,
    search_lattices,
)
from k2dec.primitives.best_paths import ctc_collapse, ctc_run_max, path_aux_ids, path_token_ids
from k2dec.primitives.ragged import ragged_from_row_ids

logger = logging.getLogger(__name__)

__all__ = [
    "AuxLabels",
    "Hypothesis",
    "assemble_hypotheses",
    "best_paths",
    "ctc_decoding",
    "ctc_greedy_search",
    "ctc_greedy_token_confidences",
    "hypotheses_from_lattice",
    "one_best_decoding",
]

ONE_BEST_OUTPUT_BEAM = 0.5
"""``output_beam`` cap of :func:`one_best_decoding`. In ``k2.intersect_dense_pruned`` the
``search_beam`` and active-state limits decide which paths survive; ``output_beam`` only prunes
what else the returned lattice keeps (arcs within that margin of the best path). 1best reads the
best path only, so it asks k2 for a thin lattice: less output pruning and formatting work, and a
smaller lattice for ``k2.shortest_path`` (a few percent on the shipped HLG at beams 10-16)."""


class AuxLabels(enum.Enum):
    """What a graph's ``aux_labels`` hold; its ``labels`` are always token ids (one per frame)."""

    WORDS = "words"
    """Word ids (HL, HLG, HCLG). Tokens are read from ``labels`` by CTC collapse."""
    TOKENS = "tokens"
    """Token ids emitted once per token (H from ``k2.ctc_topo``). No words."""


@dataclass(frozen=True)
class Hypothesis:
    """The 1-best result of one utterance.

    Attributes:
      tokens: token ids.
      token_frames: frame (after subsampling) where each token starts; same length as ``tokens``.
      words: word ids (empty when the graph has no words).
      word_frames: frame of the arc that emits each word; same length as ``words``.
      score: total score of the best path (``-inf`` when the utterance has no lattice).
      status: :class:`~k2dec.lattice.search.LatticeStatus` of the utterance's lattice.
      reason: why the lattice was retried or is empty (``""`` if OK).
    """

    tokens: tuple[int, ...]
    token_frames: tuple[int, ...]
    words: tuple[int, ...]
    word_frames: tuple[int, ...]
    score: float
    status: LatticeStatus = LatticeStatus.OK
    reason: str = ""


def best_paths(lattice: k2.Fsa, use_double_scores: bool = True) -> k2.Fsa:
    """Best path of every lattice: FsaVec ``[utt][state][arc]`` of linear FSAs (empty for empty
    lattices). Does not modify ``lattice``."""
    return k2.shortest_path(lattice, use_double_scores=use_double_scores)


def hypotheses_from_lattice(
    result: LatticeResult | k2.Fsa,
    aux_labels: AuxLabels = AuxLabels.WORDS,
    blank_id: int = 0,
    use_double_scores: bool = True,
) -> list[Hypothesis]:
    """One :class:`Hypothesis` per utterance from the best paths of lattices.

    Args:
      result: a :class:`LatticeResult` (reports are copied into the hypotheses) or a lattice
        FsaVec ``[utt][state][arc]`` produced by dense intersection.
      aux_labels: what the graph's ``aux_labels`` hold (see :class:`AuxLabels`).
      blank_id: blank token id for the CTC collapse of ``labels``.
    """
    if isinstance(result, LatticeResult):
        lattice, reports = result.lattice, result.reports
    elif isinstance(result, k2.Fsa):
        lattice, reports = result, None
    else:
        raise TypeError(f"result must be a LatticeResult or k2.Fsa, got {type(result).__name__}")
    if lattice.arcs.num_axes() != 3:
        raise ValueError("lattice must be an FsaVec (3 axes [utt][state][arc])")
    _check_aux_labels(aux_labels)
    paths = best_paths(lattice, use_double_scores)
    # shortest_path cached the lattice's tropical forward scores: its total scores are free
    scores = lattice.get_tot_scores(use_double_scores=use_double_scores, log_semiring=False)
    return _hypotheses_from_paths(paths, scores, reports, aux_labels, blank_id)


def _check_aux_labels(aux_labels: AuxLabels) -> None:
    if not isinstance(aux_labels, AuxLabels):
        raise TypeError(f"aux_labels must be an AuxLabels, got {aux_labels!r}")


def _hypotheses_from_paths(
    paths: k2.Fsa,
    scores: torch.Tensor,
    reports: tuple[UtteranceReport, ...] | None,
    aux_labels: AuxLabels,
    blank_id: int,
) -> list[Hypothesis]:
    """Hypotheses from best paths (FsaVec ``[utt][state][arc]`` of linear FSAs) and their
    float64 ``(N,)`` scores."""
    if aux_labels is AuxLabels.WORDS:
        tokens, token_frames = path_token_ids(paths, blank_id=blank_id)
        if hasattr(paths, "aux_labels"):
            words, word_frames = path_aux_ids(paths, "aux_labels")
        else:
            words = word_frames = None
    else:
        if not hasattr(paths, "aux_labels"):
            raise ValueError("aux_labels=AuxLabels.TOKENS but the lattice has no aux_labels")
        tokens, token_frames = path_aux_ids(paths, "aux_labels")
        words = word_frames = None
    n = paths.shape[0]
    return assemble_hypotheses(n, tokens, token_frames, words, word_frames, scores, reports)


def assemble_hypotheses(
    n: int,
    tokens: k2.RaggedTensor,
    token_frames: k2.RaggedTensor,
    words: k2.RaggedTensor | None,
    word_frames: k2.RaggedTensor | None,
    scores: torch.Tensor,
    reports: tuple[UtteranceReport, ...] | None,
) -> list[Hypothesis]:
    """``n`` :class:`Hypothesis` records from int32 ``[utt][token]`` / ``[utt][word]`` ragged
    ids and frames (``words`` ``None``: no words), float ``(n,)`` scores (``-inf``: no path,
    an ``EMPTY`` record) and the utterances' reports (``None``: all ``OK``)."""
    tok = tokens.tolist()
    tok_f = token_frames.tolist()
    if words is not None:
        wrd, wrd_f = words.tolist(), word_frames.tolist()
    else:
        wrd = wrd_f = [[] for _ in range(n)]
    sc = scores.tolist()
    out = []
    for i in range(n):
        status = reports[i].status if reports is not None else LatticeStatus.OK
        reason = reports[i].reason if reports is not None else ""
        score = float(sc[i])
        if score == -math.inf:  # empty lattice, or only -inf paths: no hypothesis
            if status is not LatticeStatus.EMPTY:
                status, reason = LatticeStatus.EMPTY, "the lattice has no path with a finite score"
            out.append(Hypothesis((), (), (), (), score, status, reason))
            continue
        out.append(
            Hypothesis(
                tokens=tuple(tok[i]),
                token_frames=tuple(tok_f[i]),
                words=tuple(wrd[i]),
                word_frames=tuple(wrd_f[i]),
                score=score,
                status=status,
                reason=reason,
            )
        )
    return out


def one_best_decoding(
    log_probs: torch.Tensor,
    log_probs_lens: torch.Tensor,
    graph: k2.Fsa,
    config: LatticeConfig = LatticeConfig(),  # noqa: B008 (frozen, immutable)
    aux_labels: AuxLabels = AuxLabels.WORDS,
    subsampling_factor: int | None = None,
    allow_truncate: int = 0,
    blank_id: int = 0,
) -> list[Hypothesis]:
    """``1best`` decoding with any graph whose ``labels`` are token ids (HLG, HL, H, HCLG with
    pdf-id labels): lattice, then its best path.

    The same hypotheses as ``hypotheses_from_lattice(get_lattice(...))`` with the same
    ``config``, but faster: the lattice is never returned, so k2 is asked for one pruned with
    ``min(config.output_beam, ONE_BEST_OUTPUT_BEAM)`` (the best path and its score do not depend
    on ``output_beam``; only among exactly tied paths may another one be picked), and the best
    paths are taken before the utterances are put back in the caller's order. Reports (status,
    reasons) quote ``config`` unchanged.

    Args:
      log_probs: float32 ``(N, T, V)``.
      log_probs_lens: integer ``(N,)`` valid frames of ``log_probs`` (after subsampling; see
        :func:`~k2dec.lattice.dense.validate_log_probs`).
      graph: decoding graph (see :func:`~k2dec.lattice.search.get_lattice`).
      aux_labels: :attr:`AuxLabels.WORDS` for word-output graphs (HLG), :attr:`AuxLabels.TOKENS`
        for H.

    Returns:
      ``N`` hypotheses in the caller's order; utterances with an empty lattice get an empty
      hypothesis with ``status=EMPTY`` and the reason.
    """
    _check_aux_labels(aux_labels)
    search = search_lattices(log_probs, log_probs_lens, graph, config, subsampling_factor,
                             allow_truncate, output_beam_cap=ONE_BEST_OUTPUT_BEAM)
    paths = search.gather([best_paths(p) for p in search.pieces])
    # shortest_path cached each piece's tropical forward scores: total scores are free
    scores = torch.cat([
        p.get_tot_scores(use_double_scores=True, log_semiring=False).to("cpu")
        for p in search.pieces
    ])[search.index]
    return _hypotheses_from_paths(paths, scores, search.reports, aux_labels, blank_id)


def ctc_decoding(
    log_probs: torch.Tensor,
    log_probs_lens: torch.Tensor,
    H: k2.Fsa | None = None,
    config: LatticeConfig = LatticeConfig(),  # noqa: B008 (frozen, immutable)
    modified: bool = False,
    subsampling_factor: int | None = None,
    allow_truncate: int = 0,
) -> list[Hypothesis]:
    """icefall's ``ctc-decoding``: 1best through the CTC topology H (token ids out, no words).

    Args:
      H: the CTC topology; built with ``k2.ctc_topo(V - 1, modified)`` on ``log_probs.device``
        when ``None``. Its ``aux_labels`` must be token ids.
    """
    if H is None:
        validate_log_probs(log_probs, log_probs_lens,
                           config_subsampling(config, subsampling_factor), allow_truncate)
        H = k2.arc_sort(
            k2.ctc_topo(log_probs.shape[2] - 1, modified=modified, device=log_probs.device)
        )
    return one_best_decoding(
        log_probs, log_probs_lens, H, config, AuxLabels.TOKENS, subsampling_factor,
        allow_truncate
    )


def ctc_greedy_search(
    log_probs: torch.Tensor,
    log_probs_lens: torch.Tensor,
    blank_id: int = 0,
    subsampling_factor: int = 1,
    allow_truncate: int = 0,
) -> list[Hypothesis]:
    """Batched CTC greedy search: per-frame argmax, merge repeats, remove blanks.

    Args:
      log_probs: float32 ``(N, T, V)``.
      log_probs_lens: integer ``(N,)`` valid frames of ``log_probs`` (after subsampling; see
        :func:`~k2dec.lattice.dense.validate_log_probs`).
      blank_id: the blank token id.

    Returns:
      ``N`` hypotheses; ``score`` is the sum over frames of the best log-prob (the score of the
      greedy path through the standard CTC topology).
    """
    labels, frames, best, valid = _greedy_labels(log_probs, log_probs_lens, blank_id,
                                                 subsampling_factor, allow_truncate)
    n = log_probs.shape[0]
    scores = torch.where(valid, best.double(), torch.zeros_like(best.double())).sum(dim=1)
    tokens, token_frames = ctc_collapse(labels, frames, blank_id=blank_id)
    return assemble_hypotheses(n, tokens, token_frames, None, None, scores, None)


def ctc_greedy_token_confidences(
    log_probs: torch.Tensor,
    log_probs_lens: torch.Tensor,
    blank_id: int = 0,
    subsampling_factor: int = 1,
    allow_truncate: int = 0,
) -> k2.RaggedTensor:
    """The confidence of each token :func:`ctc_greedy_search` outputs (same arguments): the
    largest posterior the network gives the token on the frames of its run (the frames
    where it is the argmax, before blanks or another token take over).

    Returns:
      float64 ``k2.RaggedTensor`` ``[utt][token]`` in ``[0, 1]``, aligned with the
      hypotheses' tokens, on ``log_probs``' device.
    """
    labels, _, best, valid = _greedy_labels(log_probs, log_probs_lens, blank_id,
                                            subsampling_factor, allow_truncate)
    return ctc_run_max(labels, best[valid].double().exp().clamp(max=1.0), blank_id)


def _greedy_labels(log_probs: torch.Tensor, log_probs_lens: torch.Tensor, blank_id: int,
                   subsampling_factor: int, allow_truncate: int
                   ) -> tuple[k2.RaggedTensor, k2.RaggedTensor, torch.Tensor, torch.Tensor]:
    """Checked inputs -> the argmax label of every valid frame and its index (int32
    ``[utt][frame]`` each), the best log-prob of every frame ``(N, T)`` and which frames are
    valid (bool ``(N, T)``)."""
    num_frames = validate_log_probs(log_probs, log_probs_lens, subsampling_factor,
                                    allow_truncate)
    if not 0 <= blank_id < log_probs.shape[2]:
        raise ValueError(f"blank_id must be in [0, {log_probs.shape[2]}), got {blank_id}")
    n, t, _ = log_probs.shape
    device = log_probs.device
    best, best_id = log_probs.detach().max(dim=2)  # (N, T)
    valid = (torch.arange(t).unsqueeze(0) < num_frames.unsqueeze(1)).to(device)
    row_ids = torch.arange(n, device=device).unsqueeze(1).expand(n, t)[valid]
    frames = torch.arange(t, device=device).unsqueeze(0).expand(n, t)[valid]
    return (ragged_from_row_ids(row_ids, best_id[valid].to(torch.int32), n),
            ragged_from_row_ids(row_ids, frames.to(torch.int32), n), best, valid)
