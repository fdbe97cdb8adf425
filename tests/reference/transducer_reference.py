"""Slow, obviously-correct transducer search references: one utterance at a time, Python lists
and dicts, one network call per (frame, context) without projections done up front.

All scores follow the one-symbol-per-frame topology (Kang et al., 2022): on every frame the
model emits exactly one symbol (blank or a token); a token consumes the frame.
"""

from __future__ import annotations

import itertools
import math

import torch


class NetOracle:
    """log-probs of one utterance's frames under every context, memoized, computed by calling
    ``model.decoder`` and ``model.joiner`` with ``project_input=True`` (the unprojected path,
    independent of :class:`k2dec.transducer.TransducerNet`)."""

    def __init__(
        self,
        model,
        encoder_out: torch.Tensor,
        temperature: float = 1.0,
        blank_penalty: float = 0.0,
        k2_initial_context: bool = False,
    ) -> None:
        self.model = model
        # icefall's greedy/modified beam search start from [-1, ..., -1, blank]; k2's
        # RnntDecodingStreams (fast_beam_search) from [blank, ..., blank].
        self.k2_initial_context = k2_initial_context
        self.enc = encoder_out  # [T, C]
        self.temperature = temperature
        self.blank_penalty = blank_penalty
        self.blank_id = int(model.decoder.blank_id)
        self.context_size = int(model.decoder.context_size)
        self.vocab_size = int(model.decoder.vocab_size)
        self._dec: dict[tuple[int, ...], torch.Tensor] = {}
        self._lp: dict[tuple[int, tuple[int, ...]], list[float]] = {}

    def initial_context(self) -> tuple[int, ...]:
        if self.k2_initial_context:
            return tuple([self.blank_id] * self.context_size)
        return tuple([-1] * (self.context_size - 1) + [self.blank_id])

    def next_context(self, ctx: tuple[int, ...], token: int) -> tuple[int, ...]:
        if token == self.blank_id:
            return ctx
        return (ctx + (token,))[1:]

    def logits(self, t: int, ctx: tuple[int, ...]) -> list[float]:
        if ctx not in self._dec:
            y = torch.tensor([list(ctx)], dtype=torch.int64, device=self.enc.device)
            with torch.no_grad():
                self._dec[ctx] = self.model.decoder(y, need_pad=False)[0, 0]
        with torch.no_grad():
            out = self.model.joiner(
                self.enc[t][None, None, None, :],
                self._dec[ctx][None, None, None, :],
                project_input=True,
            )
        return [float(x) for x in out.reshape(-1).tolist()]

    def log_probs(self, t: int, ctx: tuple[int, ...]) -> list[float]:
        key = (t, ctx)
        if key not in self._lp:
            logits = self.logits(t, ctx)
            logits[self.blank_id] -= self.blank_penalty
            logits = [x / self.temperature for x in logits]
            m = max(logits)
            lse = m + math.log(sum(math.exp(x - m) for x in logits))
            self._lp[key] = [x - lse for x in logits]
        return self._lp[key]


def all_alignments(oracle: NetOracle, num_frames: int, graph=None):
    """Yield ``(tokens, timestamps, score)`` for every one-symbol-per-frame alignment
    (``V ** num_frames`` of them).

    With ``graph`` (a :class:`GraphWalker`), only alignments whose token sequence the graph
    accepts are yielded, with the best graph path's score added."""
    V = oracle.vocab_size
    for alignment in itertools.product(range(V), repeat=num_frames):
        ctx = oracle.initial_context()
        score = 0.0
        tokens, times = [], []
        for t, a in enumerate(alignment):
            score += oracle.log_probs(t, ctx)[a]
            if a != oracle.blank_id:
                tokens.append(a)
                times.append(t)
            ctx = oracle.next_context(ctx, a)
        if graph is not None:
            g = graph.score(tokens)
            if g is None:
                continue
            score += g
        yield tokens, times, score


def best_alignment(
    oracle: NetOracle, num_frames: int, graph=None
) -> tuple[list[int], list[int], float]:
    """The highest-scoring alignment by exhaustive enumeration."""
    return max(all_alignments(oracle, num_frames, graph), key=lambda x: x[2])


class GraphWalker:
    """Scores token sequences against an epsilon-free decoding graph given as a list of arcs
    ``(src, dst, label, score)`` with start state 0 and final arcs labelled -1: the best
    (max-score) path that reads the sequence and ends with a final arc, or None."""

    def __init__(self, arcs: list[tuple[int, int, int, float]]) -> None:
        self.arcs = arcs

    def score(self, tokens: list[int]) -> float | None:
        best: dict[int, float] = {0: 0.0}
        for tok in tokens:
            nxt: dict[int, float] = {}
            for src, dst, label, w in self.arcs:
                if label == tok and src in best:
                    nxt[dst] = max(nxt.get(dst, -math.inf), best[src] + w)
            best = nxt
        finals = [best[src] + w for src, _, label, w in self.arcs if label == -1 and src in best]
        return max(finals) if finals else None


def sequence_log_probs(oracle: NetOracle, num_frames: int) -> dict[tuple[int, ...], float]:
    """log-sum-exp over alignments of each token sequence, by exhaustive enumeration."""
    acc: dict[tuple[int, ...], list[float]] = {}
    for tokens, _, score in all_alignments(oracle, num_frames):
        acc.setdefault(tuple(tokens), []).append(score)
    return {k: _logsumexp(v) for k, v in acc.items()}


def total_log_prob(oracle: NetOracle, num_frames: int) -> float:
    """log-sum-exp over all alignments."""
    return _logsumexp([s for _, _, s in all_alignments(oracle, num_frames)])


def greedy_reference(
    oracle: NetOracle, num_frames: int, max_sym_per_frame: int = 1
) -> tuple[list[int], list[int], float]:
    """Frame-wise argmax: on each frame emit the argmax symbol; a token keeps the search on the
    frame until blank wins or ``max_sym_per_frame`` tokens were emitted there."""
    ctx = oracle.initial_context()
    tokens, times, score = [], [], 0.0
    for t in range(num_frames):
        for _ in range(max_sym_per_frame):
            lp = oracle.log_probs(t, ctx)
            best = max(range(len(lp)), key=lambda k: (lp[k], -k))
            score += lp[best]
            if best == oracle.blank_id:
                break
            tokens.append(best)
            times.append(t)
            ctx = oracle.next_context(ctx, best)
    return tokens, times, score


def modified_beam_search_reference(
    oracle: NetOracle, num_frames: int, beam: int, scorers=(), utt: int = 0,
    before_topk: bool = False,
) -> dict[tuple[int, ...], tuple[float, list[int]]]:
    """Per-utterance modified beam search: on each frame every hypothesis is extended by every
    symbol, the ``beam`` best (hypothesis, symbol) pairs survive, and survivors with equal token
    sequences are merged by log-add (keeping the timestamps of the better one).

    ``scorers``: ``[(reference scorer, weight)]`` (tests/reference/scorers.py); a token (not
    blank) gets ``sum_i w_i * score_i``, after the choice of the ``beam`` best pairs by the
    transducer score (icefall) or, with ``before_topk``, before it; the reported scores
    include the scorers' final scores.

    Returns:
      ``{tokens: (log_prob, timestamps)}`` of the final hypotheses.
    """
    from tests.reference.scorers import weighted_final, weighted_step

    start = tuple(ref.start(utt) for ref, _ in scorers)
    hyps = {(): (0.0, [], oracle.initial_context(), start)}
    for t in range(num_frames):
        cands = []
        for tokens, (score, times, ctx, states) in hyps.items():
            lp = oracle.log_probs(t, ctx)
            for k, p in enumerate(lp):
                extra, new_states = 0.0, states
                if k != oracle.blank_id and scorers:
                    extra, new_states = weighted_step(scorers, states, k)
                base = score + p + (extra if before_topk else 0.0)
                cands.append((base, extra, tokens, times, ctx, k, new_states))
        cands.sort(key=lambda c: -c[0])
        new = {}
        for base, extra, tokens, times, ctx, k, states in cands[:beam]:
            score = base if before_topk else base + extra
            if k != oracle.blank_id:
                tokens = tokens + (k,)
                times = times + [t]
                ctx = oracle.next_context(ctx, k)
            if tokens in new:
                old = new[tokens]
                new[tokens] = (_logsumexp([old[0], score]),) + old[1:]
            else:
                new[tokens] = (score, times, ctx, states)
        hyps = new
    return {k: (v[0] + weighted_final(scorers, v[3]), v[1]) for k, v in hyps.items()}


def pick_best(
    hyps: dict[tuple[int, ...], tuple[float, list[int]]], length_norm: bool, context_size: int
) -> tuple[tuple[int, ...], float, list[int]]:
    """icefall's final choice: max of ``log_prob / (context_size + len(tokens))`` when
    ``length_norm`` else of ``log_prob``."""

    def key(item):
        tokens, (score, _) = item
        return score / (context_size + len(tokens)) if length_norm else score

    tokens, (score, times) = max(hyps.items(), key=key)
    return tokens, score, times


def _logsumexp(xs: list[float]) -> float:
    m = max(xs)
    if m == -math.inf:
        return m
    return m + math.log(sum(math.exp(x - m) for x in xs))


def classic_beam_search_reference(
    oracle: NetOracle, num_frames: int, beam: int, max_expansions: int = 32, scorers=(),
    utt: int = 0,
) -> dict[tuple[int, ...], tuple[float, list[int]]]:
    """icefall's ``beam_search`` for one utterance with Python dicts: per frame, repeatedly
    take the best hypothesis of ``A``, add its blank extension to ``B`` and its extensions by
    the ``beam + 1`` most likely symbols (blank skipped) to ``A`` (equal token sequences are
    log-added, keeping the first one's timestamps), until ``B`` has ``beam`` hypotheses better
    than the best of ``A`` or ``max_expansions`` were taken; then keep the ``beam`` best of
    ``B``. ``scorers`` (``[(reference, weight)]``) add to each token extension, their final
    scores to the result.

    Returns:
      ``{tokens: (log_prob, timestamps)}`` of the final hypotheses.
    """
    from tests.reference.scorers import weighted_final, weighted_step

    def add(hyps, tokens, score, times, ctx, states):
        if tokens in hyps:
            old = hyps[tokens]
            hyps[tokens] = (_logsumexp([old[0], score]),) + old[1:]
        else:
            hyps[tokens] = (score, times, ctx, states)

    vocab = oracle.vocab_size
    b = {(): (0.0, [], oracle.initial_context(), tuple(r.start(utt) for r, _ in scorers))}
    for t in range(num_frames):
        a, b = dict(b), {}
        expansions = 0
        while True:
            tokens, (score, times, ctx, states) = max(a.items(), key=lambda kv: kv[1][0])
            del a[tokens]
            lp = oracle.log_probs(t, ctx)
            add(b, tokens, score + lp[oracle.blank_id], times, ctx, states)
            for k in sorted(range(vocab), key=lambda j: -lp[j])[: min(beam + 1, vocab)]:
                if k == oracle.blank_id:
                    continue
                extra, new_states = weighted_step(scorers, states, k) if scorers else (0.0, ())
                add(a, tokens + (k,), score + lp[k] + extra, times + [t],
                    oracle.next_context(ctx, k), new_states)
            expansions += 1
            a_best = max(v[0] for v in a.values())
            if sum(v[0] > a_best for v in b.values()) >= beam or expansions >= max_expansions:
                b = dict(sorted(b.items(), key=lambda kv: -kv[1][0])[:beam])
                break
    return {k: (v[0] + weighted_final(scorers, v[3]), v[1]) for k, v in b.items()}
