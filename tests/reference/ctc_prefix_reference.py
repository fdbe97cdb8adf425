"""Per-utterance CTC prefix beam search with Python dicts and floats (icefall's
``_step_worker``), with reference scorers (tests/reference/scorers.py)."""

from __future__ import annotations

import math

from tests.reference.scorers import weighted_final, weighted_step

NEG_INF = float("-inf")


def _lae(a: float, b: float) -> float:
    if a == NEG_INF:
        return b
    if b == NEG_INF:
        return a
    m = max(a, b)
    return m + math.log(math.exp(a - m) + math.exp(b - m))


def ctc_prefix_beam_search_reference(x, beam: int, blank: int = 0, scorers=(), utt: int = 0):
    """``x[t][v]``: one utterance's frame log-probs. Returns ``{tokens: (score, ctc_score,
    timestamps)}`` of the final hypotheses (score with the scorers' final scores)."""
    start = tuple(r.start(utt) for r, _ in scorers)
    # tokens -> [pb, pnb, lm, states, times]
    hyps = {(): [0.0, NEG_INF, 0.0, start, []]}
    for t, row in enumerate(x):
        top = sorted(range(len(row)), key=lambda v: -row[v])[: min(beam, len(row))]
        new: dict = {}

        def add(tokens, pb, pnb, lm, states, times, new=new):
            if tokens in new:
                h = new[tokens]
                h[0], h[1] = _lae(h[0], pb), _lae(h[1], pnb)
            else:
                new[tokens] = [pb, pnb, lm, states, times]

        for tokens, (pb, pnb, lm, states, times) in hyps.items():
            total = _lae(pb, pnb)
            for c in top:
                lp = row[c]
                if c == blank:
                    add(tokens, total + lp, NEG_INF, lm, states, times)
                    continue
                extra, new_states = weighted_step(scorers, states, c) if scorers else (0.0, ())
                if tokens and tokens[-1] == c:
                    add(tokens, NEG_INF, pnb + lp, lm, states, times)
                    add(tokens + (c,), NEG_INF, pb + lp, lm + extra, new_states, times + [t])
                else:
                    add(tokens + (c,), NEG_INF, total + lp, lm + extra, new_states, times + [t])
        ranked = sorted(new.items(), key=lambda kv: -(_lae(kv[1][0], kv[1][1]) + kv[1][2]))
        hyps = dict(ranked[:beam])
    out = {}
    for tokens, (pb, pnb, lm, states, times) in hyps.items():
        ctc = _lae(pb, pnb)
        out[tokens] = (ctc + lm + weighted_final(scorers, states), ctc, times)
    return out
