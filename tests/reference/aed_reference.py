"""Slow, per-hypothesis reference of k2dec.aed.beam_search and of CTC prefix scoring.

Everything here is a plain Python loop over utterances, hypotheses and candidate tokens, with
Python floats: the decoder and the LM are called on one unpadded prefix at a time with
``state=None`` (so incremental state handling and padding are not involved), CTC prefix
probabilities are recomputed from scratch for every prefix with the textbook forward recursion
over the blank-interleaved label sequence, and penalties are recomputed from their formulas.
It follows the scoring rules documented in ``k2dec/aed/beam_search.py``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

NEG_INF = float("-inf")


def logsumexp(values: list[float]) -> float:
    m = max(values, default=NEG_INF)
    if m == NEG_INF:
        return NEG_INF
    return m + math.log(sum(math.exp(v - m) for v in values))


def _ctc_forward(x, labels, blank, windows, last_label_entries):
    """Forward recursion over ``[blank, l1, blank, l2, ..., blank, lL(, blank)]``.

    ``windows[i] = (first, last)`` restricts the frames at which label ``i`` may be entered
    (its first frame); None means anywhere. Returns the final alphas and, if asked, the
    log-prob of entering the last label at each frame."""

    def may_enter(i, t):
        return windows is None or windows[i][0] <= t <= windows[i][1]

    ext, label_of = [blank], [None]
    for i, lab in enumerate(labels):
        ext += [lab, blank]
        label_of += [i, None]
    if last_label_entries:
        ext, label_of = ext[:-1], label_of[:-1]
    num_states = len(ext)
    alpha = [NEG_INF] * num_states
    alpha[0] = x[0][blank]
    if num_states > 1 and may_enter(0, 0):
        alpha[1] = x[0][ext[1]]
    entries = [alpha[-1]] if last_label_entries else None
    for t in range(1, len(x)):
        new = [NEG_INF] * num_states
        for s in range(num_states):
            terms = [alpha[s]]
            into = []
            if s >= 1:
                into.append(alpha[s - 1])
            if s >= 2 and ext[s] != blank and ext[s] != ext[s - 2]:
                into.append(alpha[s - 2])
            if label_of[s] is not None and not may_enter(label_of[s], t):
                into = []
            if last_label_entries and s == num_states - 1:
                entries.append(logsumexp(into) + x[t][ext[s]])
            new[s] = logsumexp(terms + into) + x[t][ext[s]]
        alpha = new
    return alpha, entries


def ctc_full_logprob(x: list[list[float]], seq: list[int], blank: int, windows=None) -> float:
    """log P_ctc(output == seq) for frame log-probs ``x[t][v]``."""
    alpha, _ = _ctc_forward(x, seq, blank, windows, last_label_entries=False)
    return logsumexp(alpha[-2:]) if len(alpha) > 1 else alpha[0]


def ctc_prefix_logprob(x: list[list[float]], prefix: list[int], blank: int, windows=None) -> float:
    """log P_ctc(output starts with prefix): the probability of first entering the last label
    of ``prefix`` at some frame, summed over frames."""
    if not prefix:
        return 0.0
    _, entries = _ctc_forward(x, prefix, blank, windows, last_label_entries=True)
    return logsumexp(entries)


@dataclass
class RefHyp:
    tokens: list[int]
    score: float
    raw_score: float
    token_scores: list[float]
    attention_score: float
    ctc_score: float
    lm_score: float
    coverage: list[float] = field(default_factory=list)
    windows: list[tuple[int, int]] | None = None
    states: tuple = ()
    scorer_scores: list[float] = field(default_factory=list)


def _final(raw: float, length: int, coverage: list[float], config) -> float:
    score = raw
    if config.length_norm:
        score = raw / length
    elif config.gnmt_alpha > 0:
        score = raw / ((5.0 + length) / 6.0) ** config.gnmt_alpha
    if config.coverage_penalty > 0:
        score += config.coverage_penalty * sum(
            math.log(min(max(c, 1e-10), 1.0)) for c in coverage
        )
    return score


def completes_repeat(tokens: list[int], config) -> bool:
    """Whether ``tokens`` end with a span of 1..repeat_span tokens repeated more than
    max_repeats times in a row (written out copy by copy)."""
    if config.max_repeats is None:
        return False
    copies = config.max_repeats + 1
    for p in range(1, config.repeat_span + 1):
        if len(tokens) < copies * p:
            break
        span = tokens[len(tokens) - p:]
        if all(tokens[len(tokens) - (k + 1) * p: len(tokens) - k * p] == span
               for k in range(copies)):
            return True
    return False


def _top(scores: list[float], k: int) -> list[int]:
    """Indices of the k largest finite scores (descending)."""
    order = sorted(range(len(scores)), key=lambda i: -scores[i])
    return [i for i in order[:k] if scores[i] > NEG_INF]


#: The kinds of the reference scorers ``reference_beam_search`` takes: "full" (scores every
#: token), "lm" (a full scorer that is an LM: ``lm_fusion`` applies, ``lm_score`` sums it),
#: "ctc" (a partial CTC prefix scorer: scores the pre-selected candidates, ``ctc_score`` sums
#: it).
SCORER_KINDS = ("full", "lm", "ctc")


def reference_beam_search(decoder, memory, memory_lens, config, ctc_log_probs=None, lm=None,
                          scorers=(), ctc_weight=0.0, lm_scale=0.0):
    """Per-hypothesis beam search; the result layout of ``beam_search`` (a list per
    utterance of ``RefHyp``, best first). Joint CTC/attention decoding with its own CTC
    prefix probabilities of ``ctc_log_probs`` weighted ``ctc_weight``, shallow fusion with
    ``lm`` (its ``step`` on whole prefixes) weighted ``lm_scale``, and ``scorers``:
    ``[(reference scorer, weight, kind)]`` (tests/reference/scorers.py; ``kind`` one of
    :data:`SCORER_KINDS`); ``eos`` gets their final scores. The decoder is weighted
    ``1 - `` the CTC weights (``ctc_weight`` and the "ctc" scorers')."""
    results = []
    vocab, sos, eos = decoder.vocab_size, decoder.sos_id, decoder.eos_id
    beam = config.beam_size
    use_ctc = ctc_weight > 0 and ctc_log_probs is not None
    use_lm = lm_scale > 0 and lm is not None
    kinds = [kind for _, _, kind in scorers]
    assert set(kinds) <= set(SCORER_KINDS), kinds
    total_ctc = (ctc_weight if use_ctc else 0.0) + sum(w for _, w, k in scorers if k == "ctc")
    pruned_kind = "lm" if config.lm_fusion == "pruned" else None
    with torch.no_grad():
        for n in range(memory.size(0)):
            num_frames = int(memory_lens[n])
            mem = memory[n : n + 1, :num_frames]
            mask = torch.zeros(1, num_frames, dtype=torch.bool, device=memory.device)
            x = ctc_log_probs[n, :num_frames].tolist() if use_ctc else None
            max_len = max(1, math.floor(num_frames * config.max_len_ratio))
            use_window = use_ctc and config.ctc_window is not None
            live = [RefHyp([], 0.0, 0.0, [], 0.0, 0.0, 0.0, [0.0] * num_frames,
                           [] if use_window else None, tuple(r.start(n) for r, _, _ in scorers),
                           [0.0] * len(scorers))]
            ended: list[RefHyp] = []
            u = -1
            while True:
                u += 1
                cands = []  # (total, hyp, token, token_score, att, ctc_delta, lm)
                for h in live:
                    prefix = torch.tensor([[sos] + h.tokens], device=memory.device)
                    lp, att, _ = decoder.step(prefix, mem, mask, None)
                    a = [float(v) / config.temperature for v in lp[0].tolist()]
                    if config.temperature != 1.0:
                        z = logsumexp(a)
                        a = [v - z for v in a]
                    else:
                        a = lp[0].tolist()
                    att_row = att[0].tolist() if att is not None else None
                    forced = u == max_len
                    eos_ok = u >= config.min_len
                    if config.eos_threshold > 0:
                        best_other = max(a[c] for c in range(vocab) if c != eos)
                        eos_ok = eos_ok and a[eos] >= math.log(config.eos_threshold) + best_other
                    eos_ok = eos_ok or forced
                    lm_lp = None
                    if use_lm:
                        lm_out, _ = lm.step(prefix, None)
                        lm_lp = lm_out[0].tolist()
                    extra = [[r.final(st) if c == eos else r.step(st, c)[0] for c in range(vocab)]
                             for (r, _, _), st in zip(scorers, h.states)]
                    s = []
                    for c in range(vocab):
                        allowed = (c == eos and eos_ok) or (c != eos and not forced)
                        if c == sos and sos != eos:
                            allowed = False
                        if total_ctc > 0 and c == config.ctc_blank_id:
                            allowed = False
                        if c != eos and completes_repeat(h.tokens + [c], config):
                            allowed = False
                        v = a[c] * (1.0 - total_ctc) if total_ctc > 0 else a[c]
                        if use_lm and config.lm_fusion == "full":
                            v += lm_scale * lm_lp[c]
                        for (_, w, kind), e in zip(scorers, extra):
                            v += 0.0 if kind in ("ctc", pruned_kind) else w * e[c]
                        s.append(v if allowed else NEG_INF)
                    delta = [0.0] * vocab
                    window = None
                    if use_window:
                        peak = max(range(num_frames), key=lambda j: (att_row[j], -j))
                        window = (peak - config.ctc_window, peak + config.ctc_window)
                    if use_ctc or "ctc" in kinds:
                        # the CTC (joint and given as scorers) scores the same candidates
                        pre_beam = vocab if total_ctc == 1.0 else config.pre_beam
                        keep = set(_top(s, min(pre_beam, vocab)))
                        if config.ctc_always_score_eos and s[eos] > NEG_INF:
                            keep.add(eos)  # ending always competes (ESPnet's rule)
                        blank = config.ctc_blank_id
                        psi_g = ctc_prefix_logprob(x, h.tokens, blank, h.windows) if use_ctc \
                            else 0.0
                        for c in range(vocab):
                            if c not in keep:
                                s[c] = NEG_INF
                                continue
                            for (_, w, kind), e in zip(scorers, extra):
                                s[c] += w * e[c] if kind == "ctc" else 0.0
                            if not use_ctc:
                                continue
                            if c == eos:
                                psi = ctc_full_logprob(x, h.tokens, blank, h.windows)
                            else:
                                wins = h.windows + [window] if use_window else None
                                psi = ctc_prefix_logprob(x, h.tokens + [c], blank, wins)
                            delta[c] = psi - psi_g if psi > NEG_INF else NEG_INF
                            s[c] += ctc_weight * delta[c]
                    if config.lm_fusion == "pruned" and (use_lm or "lm" in kinds):
                        keep = set(_top(s, min(beam, vocab)))
                        for c in range(vocab):
                            if c not in keep:
                                s[c] = NEG_INF
                                continue
                            for (_, w, kind), e in zip(scorers, extra):
                                s[c] += w * e[c] if kind == "lm" else 0.0
                            s[c] += lm_scale * lm_lp[c] if use_lm else 0.0
                    for c in range(vocab):
                        if s[c] == NEG_INF:
                            continue
                        ts = s[c] + config.length_bonus
                        ctc_c = delta[c] + sum(e[c] for k, e in zip(kinds, extra) if k == "ctc")
                        lm_c = (lm_lp[c] if use_lm else 0.0) + sum(
                            e[c] for k, e in zip(kinds, extra) if k == "lm")
                        cands.append(
                            (h.raw_score + ts, h, c, ts, a[c], ctc_c, lm_c, att_row, window,
                             [e[c] for e in extra])
                        )
                cands.sort(key=lambda z: -z[0])
                new_live = []
                for total, h, c, ts, ac, dc, lc, att_row, window, ec in cands[:beam]:
                    coverage = h.coverage
                    if att_row is not None and config.coverage_penalty > 0:
                        coverage = [ci + ai for ci, ai in zip(h.coverage, att_row)]
                    nh = RefHyp(
                        tokens=h.tokens if c == eos else h.tokens + [c],
                        score=total,
                        raw_score=total,
                        token_scores=h.token_scores + [ts],
                        attention_score=h.attention_score + ac,
                        ctc_score=h.ctc_score + dc,
                        lm_score=h.lm_score + lc,
                        coverage=coverage,
                        windows=h.windows + [window] if use_window else None,
                        states=h.states if c == eos else tuple(
                            r.step(st, c)[1] for (r, _, _), st in zip(scorers, h.states)),
                        scorer_scores=[a_ + b_ for a_, b_ in zip(h.scorer_scores, ec)],
                    )
                    if c == eos:
                        nh.score = _final(total, u + 1, coverage, config)
                        ended.append(nh)
                    else:
                        new_live.append(nh)
                live = new_live
                if not live or u >= max_len:
                    break
                if config.max_ended is not None and len(ended) >= config.max_ended:
                    break
                if config.end_detect and u + 1 >= config.end_detect_window and ended:
                    best = max(e.score for e in ended)
                    count = 0
                    for m in range(config.end_detect_window):
                        same = [e.score for e in ended if len(e.tokens) == u - m]
                        if same and max(same) < best - config.end_detect_margin:
                            count += 1
                    if count == config.end_detect_window:
                        break
            ended.sort(key=lambda e: -e.score)
            results.append(ended[: config.num_hyps])
    return results


def greedy_search(decoder, memory, memory_lens, max_len_ratio: float = 1.0):
    """Argmax decoding per utterance: a list of token lists."""
    out = []
    with torch.no_grad():
        for n in range(memory.size(0)):
            num_frames = int(memory_lens[n])
            mem = memory[n : n + 1, :num_frames]
            mask = torch.zeros(1, num_frames, dtype=torch.bool, device=memory.device)
            max_len = max(1, math.floor(num_frames * max_len_ratio))
            tokens: list[int] = []
            while len(tokens) < max_len:
                prefix = torch.tensor([[decoder.sos_id] + tokens], device=memory.device)
                lp, _, _ = decoder.step(prefix, mem, mask, None)
                c = int(lp[0].argmax())
                if c == decoder.eos_id:
                    break
                tokens.append(c)
            out.append(tokens)
    return out
