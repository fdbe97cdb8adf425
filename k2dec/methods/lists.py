"""Rescoring of the hypothesis lists of beam searches (every final hypothesis of
``modified_beam_search`` or ``ctc_prefix_beam_search``): whole-sequence scores of a neural LM,
a token n-gram or the attention decoder, and a sweep of weighted sums over a scale grid with
icefall's result keys."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import k2
import torch

from ..nbest import ATTENTION_CHUNK_CELLS, NbestConfig, chunks
from ..nbest.list_confidences import nbest_confidences
from ..primitives.hypothesis import HypothesisRecord
from ..scorers import Scorer
from .records import probabilities

__all__ = ["HypothesisLists", "attention_scores", "lm_scores", "scorer_scores", "sweep"]


@dataclass(frozen=True)
class HypothesisLists:
    """The hypotheses of a batch, flattened.

    Attributes:
      tokens: int32 ragged ``[hyp][token]``, hypotheses grouped by utterance.
      utt: int64 ``[H]``, the utterance of each hypothesis.
      num_utts: ``N``.
      frames: the token frames of each hypothesis (for the records; empty when unknown).
    """

    tokens: k2.RaggedTensor
    utt: torch.Tensor
    num_utts: int
    frames: list[list[int]]

    @staticmethod
    def from_lists(hyps: Sequence[Sequence], device: torch.device) -> HypothesisLists:
        """From ``[N][hyps]`` of anything with ``tokens`` and ``timestamps``."""
        seqs = [list(h.tokens) for hs in hyps for h in hs]
        utt = torch.tensor([u for u, hs in enumerate(hyps) for _ in hs], dtype=torch.int64,
                           device=device)
        tokens = k2.RaggedTensor(seqs, dtype=torch.int32).to(device)
        return HypothesisLists(tokens, utt, len(hyps),
                               [list(h.timestamps) for hs in hyps for h in hs])


def lm_scores(lm, lists: HypothesisLists, batch_size: int = 256) -> torch.Tensor:
    """Float64 ``[H]``: each hypothesis' neural LM log-prob (``sos`` ... ``eos``)."""
    if lists.utt.numel() == 0:
        return torch.zeros(0, dtype=torch.float64, device=lists.utt.device)
    with torch.no_grad():
        return lm.score_sequences(lists.tokens, batch_size=batch_size).totals.to(torch.float64)


def attention_scores(decoder, memory: torch.Tensor, memory_lens: torch.Tensor,
                     lists: HypothesisLists, chunk: int = 500,
                     max_cells: int = ATTENTION_CHUNK_CELLS) -> torch.Tensor:
    """Float64 ``[H]``: each hypothesis' attention-decoder log-prob (tokens and ``eos``),
    scored in chunks of at most ``chunk`` hypotheses and ``max_cells`` (tokens + 1) x frames
    (see :data:`k2dec.nbest.ATTENTION_CHUNK_CELLS`: memory does not grow with the list)."""
    out = torch.zeros(lists.utt.numel(), dtype=torch.float64, device=lists.utt.device)
    splits = lists.tokens.shape.row_splits(1).to(torch.int64)
    cells = (splits[1:] - splits[:-1] + 1) * memory.size(1)
    with torch.no_grad():
        for start, end in chunks(cells, chunk, max_cells):
            idx = torch.arange(start, end, dtype=torch.int32, device=lists.utt.device)
            sub, _ = lists.tokens.index(idx, axis=0)
            scores = decoder.score_sequences(memory, memory_lens, sub, lists.utt[start:end])
            out[start:end] = scores.sum().to(torch.float64)
    return out


def scorer_scores(scorer: Scorer, lists: HypothesisLists) -> torch.Tensor:
    """Float64 ``[H]``: the sum of a scorer's scores along each hypothesis plus its final
    score (e.g. a token n-gram's ``log p(tokens </s>)``), all hypotheses advanced together."""
    device = lists.utt.device
    num = lists.utt.numel()
    state = scorer.init_state(lists.utt)
    total = torch.zeros(num, dtype=torch.float64, device=device)
    splits = lists.tokens.shape.row_splits(1).to(torch.int64)
    lengths = splits[1:] - splits[:-1]
    values = lists.tokens.values.to(torch.int64)
    rows = torch.arange(num, device=device)
    for pos in range(int(lengths.max()) if num else 0):
        alive = lengths > pos
        tok = torch.where(alive, values[(splits[:-1] + pos).clamp(max=max(values.numel() - 1, 0))],
                          torch.zeros_like(lengths))
        scores, pending = scorer.score(state)
        total += torch.where(alive, scores.to(torch.float64)[rows, tok], torch.zeros_like(total))
        state = scorer.advance(state, pending, rows, tok, alive)
    return total + scorer.final_score(state).to(torch.float64)


def sweep(
    lists: HypothesisLists,
    base: torch.Tensor,
    components: Mapping[str, torch.Tensor],
    grid: Mapping[str, Sequence[float]],
    combine: Callable[[torch.Tensor, Mapping[str, torch.Tensor], Mapping[str, float]],
                      torch.Tensor],
    key: Callable[[Mapping[str, float]], str],
    posterior_scale: float = NbestConfig.posterior_scale,
) -> dict[str, tuple[HypothesisRecord, ...]]:
    """For every point of ``grid`` (a product of scale lists), each utterance's hypothesis with
    the largest ``combine(base, components, scales)`` (float64 ``[H]``), as records keyed
    ``key(scales)``; an utterance without hypotheses fails. Each chosen token's confidence is
    its n-best posterior under that point's scores times ``posterior_scale``
    (:func:`k2dec.nbest.list_confidences.nbest_confidences`)."""
    device = base.device
    names = list(grid)
    counts = torch.bincount(lists.utt, minlength=lists.num_utts)
    starts = torch.cumsum(counts, 0) - counts
    width = max(int(counts.max()) if lists.num_utts else 0, 1)
    pos = torch.arange(width, device=device).unsqueeze(0)
    valid = pos < counts.unsqueeze(1)
    index = (starts.unsqueeze(1) + pos).clamp(max=max(base.numel() - 1, 0))
    seqs = lists.tokens.tolist()
    points, totals, chosen, best_scores = [], [], [], []
    for values in itertools.product(*(grid[n] for n in names)):
        scales = dict(zip(names, values))
        total = combine(base, components, scales)
        padded = torch.where(valid, total[index] if total.numel() else torch.zeros_like(
            index, dtype=torch.float64), torch.tensor(float("-inf"), device=device))
        best = padded.argmax(dim=1)
        points.append(scales)
        totals.append(total)
        best_scores.append(padded.gather(1, best.unsqueeze(1)).squeeze(1).tolist())
        chosen.append(torch.where(counts > 0, starts + best, torch.full_like(best, -1)))
    confs = nbest_confidences(lists.tokens, lists.utt, lists.num_utts, totals, chosen,
                              posterior_scale)
    out = {}
    for scales, ch, sc, conf in zip(points, chosen, best_scores, confs):
        conf_rows = conf.tolist()
        recs = []
        for u, h in enumerate(ch.tolist()):
            if h < 0:
                recs.append(HypothesisRecord(tokens=(), error="no hypothesis"))
                continue
            frames = tuple(lists.frames[h]) if len(lists.frames[h]) == len(seqs[h]) else None
            recs.append(HypothesisRecord(tokens=tuple(seqs[h]), token_frames=frames,
                                         score=float(sc[u]),
                                         token_confidences=probabilities(conf_rows[u])))
        out[key(scales)] = tuple(recs)
    return out
